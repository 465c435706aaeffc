//! Errors of the HTTP verbs and how they render: always `{"Error": "..."}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::protocol::ErrorBody;

/// A request that cannot be answered with the verb's normal result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (400 bad body, 404 disabled, 413 too large, 500 internal, 503 deadline).
    pub status: StatusCode,
    /// What went wrong and where.
    pub message: String,
}

impl ApiError {
    /// 400: the body is not what the verb expects.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// 500: something failed inside placer.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
        }
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
