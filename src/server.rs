//! The HTTP service: every route of SPEC §3 on one listener.

use axum::Router;
use axum::routing::get;

use crate::modes::extender::{self, AppState};
use crate::ops::{debug, health, metrics};

/// The full router: verbs (or their 404 stand-ins), `/explain`, health,
/// readiness, `/metrics`, `/policy` and `/debug/zones`.
pub fn router(state: AppState) -> Router {
    extender::routes(state.clone())
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/policy", get(debug::policy))
        .route("/debug/zones", get(debug::zones))
        .route("/metrics", get(metrics::metrics))
        .with_state(state)
}
