//! `/healthz` (the process is alive) and `/readyz` (policy loaded and caches
//! synced: only then can answers be trusted).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;

use crate::modes::extender::AppState;

/// Liveness: answering at all is the signal.
pub async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: 200 once the initial node and pod lists are in.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    if state.cache.is_synced() {
        (StatusCode::OK, Json(json!({"status": "ready"})))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "not ready", "Error": "caches have not synced with the API server yet"}),
            ),
        )
    }
}
