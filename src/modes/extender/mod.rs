//! Extender mode: the HTTP verbs kube-scheduler calls, plus `/explain`.
//!
//! Handlers only translate HTTP to framework calls: decode the body
//! ([`body`], [`request`]), run the profile, encode the answer. Limits and
//! the deadline are layers around them.

pub mod bind;
pub mod body;
pub mod error;
pub mod explain;
pub mod filter;
pub mod preempt;
pub mod prioritize;
pub mod request;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::cache::Cache;
use crate::policy::CompiledPolicy;

pub use bind::Binder;
pub use error::ApiError;

/// Limits and switches of the HTTP service.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest accepted request body (413 above).
    pub max_body_bytes: usize,
    /// Server-side deadline per request; keep it below kube-scheduler's `httpTimeout`.
    pub request_timeout: Duration,
    /// False in standalone mode: the verbs answer 404.
    pub verbs_enabled: bool,
    /// Prefix the verbs are mounted under ("" = at the root).
    pub path_prefix: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_body_bytes: 64 << 20,
            request_timeout: Duration::from_millis(4500),
            verbs_enabled: true,
            path_prefix: String::new(),
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The policy in force; replaced atomically on reload.
    pub policy: Arc<ArcSwap<CompiledPolicy>>,
    /// The cluster cache.
    pub cache: Arc<Cache>,
    /// Creates Bindings; `None` without an API server.
    pub binder: Option<Arc<Binder>>,
    /// Limits and switches.
    pub settings: Arc<Settings>,
}

/// The verb routes (`/filter`, `/prioritize`, `/bind`, `/preempt`) and
/// `/explain`, under the configured prefix, with the deadline applied.
pub fn routes(state: AppState) -> Router<AppState> {
    let prefix = state.settings.path_prefix.trim_end_matches('/').to_string();
    let verbs = ["filter", "prioritize", "bind", "preempt"];
    let mut router = Router::new();
    if state.settings.verbs_enabled {
        router = router
            .route(&format!("{prefix}/filter"), post(filter::filter))
            .route(
                &format!("{prefix}/prioritize"),
                post(prioritize::prioritize),
            )
            .route(&format!("{prefix}/bind"), post(bind::bind))
            .route(&format!("{prefix}/preempt"), post(preempt::preempt));
    } else {
        for verb in verbs {
            router = router.route(&format!("{prefix}/{verb}"), post(disabled));
        }
    }
    router
        .route(&format!("{prefix}/explain"), post(explain::explain))
        .layer(middleware::from_fn_with_state(state, deadline))
}

async fn disabled() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        message: "the extender verbs are disabled in standalone mode (--mode standalone); use --mode extender or both".into(),
    }
}

async fn deadline(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limit = state.settings.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!("placer did not answer within {limit:?} (--request-timeout)"),
        }
        .into_response(),
    }
}
