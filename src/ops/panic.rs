//! Handler panics answered with a logged, counted 500 and a JSON `Error`, so
//! the client gets an answer instead of a dropped connection.
//!
//! Both the whole router (`server`) and the verb routes (extender mode, so a
//! panic inside a verb is counted as its `internal` outcome) wrap themselves
//! in this layer; it sits here, below both.

use std::any::Any;
use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tracing::error;

use crate::metrics::Metrics;
use crate::protocol::ErrorBody;

/// What the client reads; the panic message itself goes to the log only.
const ANSWER: &str =
    "placer failed while answering this request (internal error; see placer's log)";

/// Turns a panic inside the wrapped handlers into a logged, counted 500.
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
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(ErrorBody { error: ANSWER }),
        )
            .into_response()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::Request;
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// A handler that always panics.
    pub(crate) async fn boom() -> &'static str {
        panic!("boom")
    }

    /// Sends a bodiless `method path` to `app`: status and body.
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
        let metrics = Arc::new(Metrics::new());
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
}
