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
pub mod retry;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::time::Instant;

use crate::cache::Cache;
use crate::ops::metrics::Metrics;
use crate::policy::CompiledPolicy;

pub use crate::modes::binder::Binder;
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
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Parked pods and retry prompts; `None` without an API server or when
    /// disabled (`--no-retry-prompts`).
    pub retry: Option<Arc<retry::Retry>>,
}

/// Marks a 200 answer that carries a domain `Error` (for the outcome label).
#[derive(Debug, Clone, Copy)]
pub struct DomainError;

/// A JSON answer, marked when it carries a domain error.
pub fn answer<T: serde::Serialize>(body: T, domain_error: bool) -> Response {
    let mut response = axum::Json(body).into_response();
    if domain_error {
        response.extensions_mut().insert(DomainError);
    }
    response
}

/// An encoded JSON answer (the verbs' hand-written encoders).
pub fn json_bytes(body: Vec<u8>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

impl AppState {
    /// State for `policy` over `cache`; `binder` is `None` without an API server.
    pub fn new(
        policy: CompiledPolicy,
        cache: Arc<Cache>,
        binder: Option<Arc<Binder>>,
        settings: Settings,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        let policy = CompiledPolicy::observed(policy.policy().clone(), metrics.clone());
        AppState {
            policy: Arc::new(ArcSwap::from_pointee(policy)),
            cache,
            binder,
            settings: Arc::new(settings),
            metrics,
            retry: None,
        }
    }

    /// Turns on retry prompts (needs `pods` `patch`): `/filter` parks the
    /// pods it leaves with no feasible node, and cache changes that would
    /// free one prompt kube-scheduler to retry it.
    pub fn enable_retry_prompts(&mut self, client: kube::Client) {
        let retry = Arc::new(retry::Retry::new(self.metrics.clone()));
        retry.spawn(client, self.cache.clone(), self.policy.clone());
        self.retry = Some(retry);
    }
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
    let router = router.route(&format!("{prefix}/explain"), post(explain::explain));
    with_verb_layers(router, state)
}

/// The layers of every verb route, innermost first: a panic becomes a 500
/// inside the deadline and the metrics, so it is counted as an `internal`
/// outcome of its verb.
fn with_verb_layers(router: Router<AppState>, state: AppState) -> Router<AppState> {
    router
        .layer(crate::server::catch_panic(state.metrics.clone()))
        .layer(middleware::from_fn_with_state(state.clone(), deadline))
        .layer(middleware::from_fn_with_state(state, observe))
}

/// The verb of a route, as a metric label.
fn verb_of(path: &str) -> &'static str {
    ["filter", "prioritize", "bind", "preempt", "explain"]
        .into_iter()
        .find(|v| path.ends_with(v))
        .unwrap_or("other")
}

/// Records count and latency of every verb call by outcome.
async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let verb = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("other", |p| verb_of(p.as_str()));
    let start = Instant::now();
    let response = next.run(req).await;
    let outcome = match response.status() {
        StatusCode::OK if response.extensions().get::<DomainError>().is_some() => "error",
        StatusCode::OK => "success",
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "disabled",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::SERVICE_UNAVAILABLE => "timeout",
        _ => "internal",
    };
    state
        .metrics
        .observe_request(verb, outcome, start.elapsed().as_secs_f64());
    response
}

async fn disabled() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "the extender verbs are disabled in standalone mode (--mode standalone); use --mode extender or both",
    )
}

async fn deadline(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limit = state.settings.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("placer did not answer within {limit:?} (--request-timeout-ms)"),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::RequestLabels;
    use crate::server::tests::{boom, call, state};

    #[tokio::test]
    async fn a_panicking_verb_is_counted_as_an_internal_outcome() {
        let state = state();
        let metrics = state.metrics.clone();
        let router = Router::new().route("/filter", post(boom));
        let app = with_verb_layers(router, state.clone()).with_state(state);
        let (status, body) = call(app, "POST", "/filter").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert_eq!(metrics.http_panics.get(), 1);
        let labels = RequestLabels {
            verb: "filter",
            outcome: "internal",
        };
        assert_eq!(metrics.requests.get_or_create(&labels).get(), 1);
    }
}
