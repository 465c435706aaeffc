//! Extender mode: the HTTP verbs kube-scheduler calls, plus `/explain`.
//!
//! Handlers only translate HTTP to framework calls: decode the body
//! ([`body`], [`request`]), run the profile, encode the answer. Limits and
//! the deadline are layers around them.

pub mod bind;
pub mod bind_check;
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

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::time::Instant;

use crate::cache::Cache;
use crate::explain::PendingPods;
use crate::metrics::{Metrics, Outcome};
use crate::ops::access::{Access, Group};
use crate::ops::panic::catch_panic;
use crate::ops::rate_limit::LogLimiter;
use crate::state::{AppState, LivePolicy};

pub use crate::modes::binder::Binder;
pub use error::ApiError;

/// Limits and switches of the extender's routes.
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
    /// The mode's name (`standalone`, `both`) when placer schedules the pods
    /// of its profiles itself: `/bind` refuses those pods.
    pub own_scheduling: Option<&'static str>,
    /// `--bind-any-scheduler`: without the policy's `extender.schedulerNames`,
    /// `/bind` binds pods of any scheduler; false refuses every `/bind` then.
    pub bind_any_scheduler: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_body_bytes: 64 << 20,
            request_timeout: Duration::from_millis(4500),
            verbs_enabled: true,
            path_prefix: String::new(),
            own_scheduling: None,
            bind_any_scheduler: false,
        }
    }
}

/// What the verbs read: the service state ([`AppState`]) and the extender's
/// own parts.
#[derive(Clone)]
pub struct ExtenderState {
    /// The policy in force.
    pub policy: LivePolicy,
    /// The cluster cache.
    pub cache: Arc<Cache>,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Creates Bindings; `None` without an API server.
    pub binder: Option<Arc<Binder>>,
    /// Limits and switches.
    pub settings: Arc<Settings>,
    /// Parked pods and retry prompts; `None` without an API server or when
    /// disabled (`--no-retry-prompts`).
    pub retry: Option<Arc<retry::Retry>>,
    /// Unscheduled pods, when a watch feeds them (`--explain-pods`): `/bind`
    /// finds its pod there before asking the API server.
    pub pending: Option<Arc<PendingPods>>,
    /// At most one "bind refused" log line per 10 s: anyone who can reach
    /// the verbs can cause them.
    pub bind_log: Arc<LogLimiter>,
    /// The pod the verbs decoded last (a cycle's verbs send the same pod).
    pub last_pod: Arc<request::LastPod>,
}

/// A JSON answer, labelled [`Outcome::Error`] when it carries a domain error.
pub fn answer<T: serde::Serialize>(body: T, domain_error: bool) -> Response {
    let mut response = axum::Json(body).into_response();
    if domain_error {
        response.extensions_mut().insert(Outcome::Error);
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

impl ExtenderState {
    /// The verbs' state over the service's; `binder` is `None` without an API server.
    pub fn new(state: &AppState, binder: Option<Arc<Binder>>, settings: Settings) -> Self {
        ExtenderState {
            policy: state.policy.clone(),
            cache: state.cache.clone(),
            metrics: state.metrics.clone(),
            binder,
            settings: Arc::new(settings),
            retry: None,
            pending: None,
            bind_log: Arc::new(LogLimiter::new(Duration::from_secs(10))),
            last_pod: Arc::default(),
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

/// The verb routes (`/filter`, `/prioritize`, `/bind`, `/preempt`), behind
/// `access`'s check of the verbs, and `/explain`, behind its check of the
/// reads; under the configured prefix, with the deadline applied; a router
/// over `state` that the server joins to the other routes.
pub fn routes<S: Clone + Send + Sync + 'static>(
    state: ExtenderState,
    access: &Arc<Access>,
) -> Router<S> {
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
    let explain = Router::new().route(&format!("{prefix}/explain"), post(explain::explain));
    // The check is outside the verb layers: a refusal is counted as one,
    // not as the verb's outcome.
    access
        .guard(with_verb_layers(router, &state), Group::Verbs)
        .merge(access.guard(with_verb_layers(explain, &state), Group::Reads))
        .with_state(state)
}

/// The layers of every verb route, innermost first: a panic becomes a 500
/// inside the deadline and the metrics, so it is counted as an `internal`
/// outcome of its verb.
fn with_verb_layers(router: Router<ExtenderState>, state: &ExtenderState) -> Router<ExtenderState> {
    router
        .layer(catch_panic(state.metrics.clone()))
        .layer(middleware::from_fn_with_state(
            state.settings.request_timeout,
            deadline,
        ))
        .layer(middleware::from_fn_with_state(
            state.metrics.clone(),
            observe,
        ))
}

/// The verb of a route, as a metric label.
fn verb_of(path: &str) -> &'static str {
    ["filter", "prioritize", "bind", "preempt", "explain"]
        .into_iter()
        .find(|v| path.ends_with(v))
        .unwrap_or("other")
}

/// Records count and latency of every verb call by outcome.
async fn observe(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let verb = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("other", |p| verb_of(p.as_str()));
    let start = Instant::now();
    let response = next.run(req).await;
    // Errors ([`ApiError`], domain errors) carry their label; what is left
    // is a verb's plain result, axum's rejection of a query string, or the
    // panic layer's 500.
    let outcome =
        response
            .extensions()
            .get::<Outcome>()
            .copied()
            .unwrap_or(match response.status() {
                StatusCode::OK => Outcome::Success,
                StatusCode::BAD_REQUEST => Outcome::BadRequest,
                _ => Outcome::Internal,
            });
    metrics.observe_request(verb, outcome, start.elapsed().as_secs_f64());
    response
}

async fn disabled() -> ApiError {
    ApiError::Disabled
}

async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout { limit }.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::RequestLabels;
    use crate::ops::panic::tests::{boom, call};
    use crate::state::tests::state;

    #[tokio::test]
    async fn a_panicking_verb_is_counted_as_an_internal_outcome() {
        let state = ExtenderState::new(&state(), None, Settings::default());
        let metrics = state.metrics.clone();
        let router = Router::new().route("/filter", post(boom));
        let app = with_verb_layers(router, &state).with_state(state);
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
