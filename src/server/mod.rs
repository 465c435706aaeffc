//! The HTTP service: every route on one listener ([`router`]), and the
//! listener that serves it ([`listener`]: connection limit, header-read and
//! idle timeouts, graceful drain, plain or TLS).

pub mod conn;
pub mod listener;

use std::any::Any;
use std::sync::Arc;

use axum::Router;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::catch_panic::CatchPanicLayer;
use tracing::error;

use crate::modes::extender::{self, ApiError, AppState};
use crate::ops::metrics::Metrics;
use crate::ops::{debug, health, metrics};

/// The full router: verbs (or their 404 stand-ins), `/explain`, health,
/// readiness, `/metrics`, `/policy` and `/debug/zones`; JSON errors for
/// unknown paths and methods; handler panics answered with 500.
pub fn router(state: AppState) -> Router {
    let metrics = state.metrics.clone();
    extender::routes(state.clone())
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/policy", get(debug::policy))
        .route("/debug/zones", get(debug::zones))
        .route(
            crate::explain::http::ROUTE,
            get(crate::explain::http::explain_pod),
        )
        .route("/metrics", get(metrics::metrics))
        .fallback(not_found)
        // Applies to the routes above, so it must come after them.
        .method_not_allowed_fallback(method_not_allowed)
        .layer(catch_panic(metrics))
        .with_state(state)
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{method} is not allowed on {} (see the Allow header)",
            uri.path()
        ),
    )
}

/// Turns a panic inside the wrapped handlers into a logged, counted 500 with
/// a JSON `Error`, so the client gets an answer instead of a dropped
/// connection. The panic message goes to the log, not to the client.
pub fn catch_panic(metrics: Arc<Metrics>) -> CatchPanicLayer<PanicAnswer> {
    CatchPanicLayer::custom(PanicAnswer(metrics))
}

/// The answer [`catch_panic`] gives.
#[derive(Clone)]
pub struct PanicAnswer(Arc<Metrics>);

impl tower_http::catch_panic::ResponseForPanic for PanicAnswer {
    type ResponseBody = axum::body::Body;

    fn response_for_panic(&mut self, err: Box<dyn Any + Send + 'static>) -> Response {
        self.0.http_panics.inc();
        let message = err
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| err.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        error!(panic = %message, "a handler panicked; answered 500");
        ApiError::internal(
            "placer failed while answering this request (internal error; see placer's log)",
        )
        .into_response()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache::Cache;
    use crate::modes::extender::Settings;
    use crate::policy::{self, CompiledPolicy};
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// A handler that always panics.
    pub(crate) async fn boom() -> &'static str {
        panic!("boom")
    }

    pub(crate) fn state() -> AppState {
        let policy = policy::parse(include_str!("../../policy.yaml"), "policy.yaml").unwrap();
        AppState::new(
            CompiledPolicy::new(policy),
            Arc::new(Cache::new()),
            None,
            Settings::default(),
        )
    }

    pub(crate) async fn call(app: Router, method: &str, path: &str) -> (StatusCode, String) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(req).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_a_counted_json_500() {
        let state = state();
        let metrics = state.metrics.clone();
        let app = Router::new()
            .route("/boom", get(boom))
            .layer(catch_panic(metrics.clone()));
        let (status, body) = call(app.clone(), "GET", "/boom").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(json["Error"].as_str().unwrap().contains("internal error"));
        assert!(!body.contains("boom"), "the panic message stays in the log");
        assert_eq!(metrics.http_panics.get(), 1);
        // The router still serves after the panic.
        assert_eq!(
            call(app, "GET", "/boom").await.0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(metrics.http_panics.get(), 2);
    }

    #[tokio::test]
    async fn unknown_paths_and_methods_answer_json_errors() {
        let app = router(state());
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
