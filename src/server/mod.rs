//! The HTTP service: every route on one listener ([`router`]), and the
//! listener that serves it ([`listener`]: connection limit, header-read and
//! idle timeouts, graceful drain, plain or TLS).

pub mod conn;
pub mod listener;

use std::sync::Arc;

use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::explain::{self, http::ExplainState};
use crate::metrics;
use crate::modes::extender::{self, ExtenderState};
use crate::ops::access::{Access, Group};
use crate::ops::panic::catch_panic;
use crate::ops::{debug, health};
use crate::protocol::ErrorBody;
use crate::state::AppState;

/// The full router with no access checks (no client CA, no delegated
/// authentication): what `placer serve` runs on a trusted network.
pub fn router(state: AppState, verbs: ExtenderState, explainer: ExplainState) -> Router {
    let access = Access::open(state.metrics.clone());
    secured_router(state, verbs, explainer, &access)
}

/// The full router: verbs (or their 404 stand-ins) and `/explain` over the
/// extender's state; `/explain/pods/...` over the explainer; health
/// (`/healthz`, `/livez`), readiness, `/metrics`, `/policy`,
/// `/debug/zones` and `/debug/snapshot` over the service state; each group
/// behind its check in `access` (design §3.4); JSON errors for unknown paths
/// and methods; handler panics answered with 500.
pub fn secured_router(
    state: AppState,
    verbs: ExtenderState,
    explainer: ExplainState,
    access: &Arc<Access>,
) -> Router {
    let metrics = state.metrics.clone();
    let explain_pods = Router::new()
        .route(explain::http::ROUTE, get(explain::http::explain_pod))
        .with_state(explainer);
    let reads = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/policy", get(debug::policy))
        .route("/debug/zones", get(debug::zones))
        .route("/debug/snapshot", get(debug::snapshot))
        .route("/metrics", get(metrics::metrics));
    extender::routes(verbs, access)
        .merge(access.guard(explain_pods, Group::PodExplanations))
        .merge(access.guard(reads, Group::Reads))
        .fallback(not_found)
        // Applies to the routes above, so it must come after them.
        .method_not_allowed_fallback(method_not_allowed)
        .layer(catch_panic(metrics))
        .with_state(state)
}

/// A request no route answers; rendered like the verbs' errors.
#[derive(Debug, thiserror::Error)]
enum RouteError {
    /// 404: no route has the path.
    #[error("no route for {method} {path}")]
    NoRoute { method: Method, path: String },
    /// 405: a route has the path, not the method.
    #[error("{method} is not allowed on {path} (see the Allow header)")]
    MethodNotAllowed { method: Method, path: String },
}

impl IntoResponse for RouteError {
    fn into_response(self) -> Response {
        let status = match self {
            RouteError::NoRoute { .. } => StatusCode::NOT_FOUND,
            RouteError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
        };
        let message = self.to_string();
        (
            status,
            Json(ErrorBody {
                error: message.as_str(),
            }),
        )
            .into_response()
    }
}

async fn not_found(method: Method, uri: Uri) -> RouteError {
    RouteError::NoRoute {
        method,
        path: uri.path().to_string(),
    }
}

async fn method_not_allowed(method: Method, uri: Uri) -> RouteError {
    RouteError::MethodNotAllowed {
        method,
        path: uri.path().to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::modes::extender::Settings;
    use crate::ops::panic::tests::call;
    use crate::state::tests::state;

    #[tokio::test]
    async fn unknown_paths_and_methods_answer_json_errors() {
        let state = state();
        let verbs = ExtenderState::new(&state, None, Settings::default());
        let app = router(state, verbs, None);
        let (status, body) = call(app.clone(), "GET", "/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, r#"{"Error":"no route for GET /nope"}"#);
        let (status, body) = call(app, "DELETE", "/healthz").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            body,
            r#"{"Error":"DELETE is not allowed on /healthz (see the Allow header)"}"#
        );
    }
}
