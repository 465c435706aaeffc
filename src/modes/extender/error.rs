//! Errors of the HTTP verbs and how they render: always `{"Error": "..."}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::protocol::{DecodeError, ErrorBody};

/// A request that cannot be answered with the verb's normal result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (400 bad body, 404 disabled, 413 too large, 500 internal, 503 deadline).
    pub status: StatusCode,
    /// What went wrong and where.
    pub message: String,
    /// The decode failure behind a 400, kept to fix up its position.
    decode: Option<DecodeError>,
}

impl ApiError {
    /// 400: the body is not what the verb expects.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 500: something failed inside placer.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            decode: None,
        }
    }

    /// 400 for a body (or a value embedded in it) that does not decode.
    pub fn bad_json(e: DecodeError) -> Self {
        ApiError {
            message: e.to_string(),
            decode: Some(e),
            status: StatusCode::BAD_REQUEST,
        }
    }

    /// Restates a decode error's position relative to the whole `body`.
    #[must_use]
    pub fn relocate(mut self, body: &[u8]) -> Self {
        if let Some(e) = self.decode.take() {
            let e = e.relocate(body);
            self.message = e.to_string();
        }
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: &self.message,
            }),
        )
            .into_response()
    }
}
