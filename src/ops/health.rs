//! `/healthz` (the process is alive, and a leader keeps its Lease) and
//! `/readyz` (policy loaded and caches synced: only then can answers be
//! trusted; 503 again from the shutdown signal on, so the Service stops
//! sending new connections while requests are still answered, see
//! [`Lifecycle`]).
//!
//! A lost watch does not make placer unready. kube-scheduler keeps
//! scheduling from its own cache while the API server is away, and its view
//! is no fresher than placer's then (both watch the same server); taking
//! placer out of its Service would turn every extender call into an error
//! instead. `/readyz` stays 200 and names the disconnected kinds, the
//! `placer_watch_*` metrics carry the details, and the watches reconnect
//! within about two seconds of the API server's return.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;

use std::sync::Arc;

use crate::cache::Cache;
use crate::state::{LeaderHealth, Lifecycle};

/// Liveness: answering at all is the signal, unless this replica leads (or
/// led) and its Lease went unrenewed past the renew deadline plus a grace,
/// as kube-scheduler's leader-election watchdog checks.
pub async fn healthz(State(leader): State<Arc<LeaderHealth>>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match leader.check() {
        Ok(()) => "ok".into_response(),
        Err(reason) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "Error": reason })),
        )
            .into_response(),
    }
}

/// Readiness: 200 once the initial node and pod lists are in; while a watch
/// is disconnected the answer lists it with the outage's length in seconds.
/// 503 from the shutdown signal on.
pub async fn readyz(
    State(cache): State<Arc<Cache>>,
    State(lifecycle): State<Arc<Lifecycle>>,
) -> (StatusCode, Json<serde_json::Value>) {
    if lifecycle.is_terminating() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "shutting down", "Error": "placer is shutting down; requests are still answered until --shutdown-delay-seconds is over"}),
            ),
        );
    }
    if cache.is_synced() {
        let disconnected: serde_json::Map<String, serde_json::Value> = cache
            .watches()
            .all()
            .iter()
            .filter_map(|w| Some((w.kind().to_owned(), json!(w.down_for()?.as_secs_f64()))))
            .collect();
        let body = if disconnected.is_empty() {
            json!({"status": "ready"})
        } else {
            json!({"status": "ready", "disconnectedSeconds": disconnected})
        };
        (StatusCode::OK, Json(body))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "not ready", "Error": "caches have not synced with the API server yet"}),
            ),
        )
    }
}
