//! Errors of the HTTP verbs and how they render: always `{"Error": "..."}`.
//!
//! Each case carries its status code and the outcome label it is counted
//! under in `placer_requests_total`; the answer carries the label to the
//! verb layer that counts it.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::metrics::Outcome;
use crate::protocol::{DecodeError, ErrorBody};

/// Answer while the initial node and pod lists are not in yet: every name
/// would look unknown, so say why instead of rejecting every node.
pub const NOT_SYNCED: &str =
    "placer's cache has not synced with the API server yet; the pod will be retried";

/// A request that cannot be answered with the verb's normal result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 400: the body is not what the verb expects.
    #[error("{0}")]
    BadRequest(String),
    /// 400: the body (or a value embedded in it) does not decode; kept whole
    /// to restate its position ([`ApiError::relocate`]).
    #[error("{0}")]
    BadJson(DecodeError),
    /// 404: the verbs are disabled.
    #[error(
        "the extender verbs are disabled in standalone mode (--mode standalone); use --mode extender or both"
    )]
    Disabled,
    /// 413: the body is over `--max-body-bytes`.
    #[error("request body exceeds the limit of {limit} bytes (--max-body-bytes)")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// 500: something failed inside placer.
    #[error("{0}")]
    Internal(String),
    /// 503: the caches have not synced, so no answer can be trusted yet.
    #[error("{}", NOT_SYNCED)]
    NotSynced,
    /// 503: no answer within the server-side deadline.
    #[error("placer did not answer within {limit:?} (--request-timeout-ms)")]
    Timeout {
        /// The deadline (`--request-timeout-ms`).
        limit: Duration,
    },
}

impl ApiError {
    /// 400: the body is not what the verb expects.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }

    /// 500: something failed inside placer.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::Internal(message.into())
    }

    /// 400 for a body (or a value embedded in it) that does not decode.
    pub fn bad_json(e: DecodeError) -> Self {
        ApiError::BadJson(e)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::BadJson(_) => StatusCode::BAD_REQUEST,
            ApiError::Disabled => StatusCode::NOT_FOUND,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::NotSynced | ApiError::Timeout { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The outcome label the request is counted under.
    pub fn outcome(&self) -> Outcome {
        match self {
            ApiError::BadRequest(_) | ApiError::BadJson(_) => Outcome::BadRequest,
            ApiError::Disabled => Outcome::Disabled,
            ApiError::TooLarge { .. } => Outcome::TooLarge,
            ApiError::Internal(_) => Outcome::Internal,
            // Counted with the deadline, as it always was: both are 503s
            // that kube-scheduler answers by trying again later.
            ApiError::NotSynced | ApiError::Timeout { .. } => Outcome::Timeout,
        }
    }

    /// Restates a decode error's position relative to the whole `body`.
    #[must_use]
    pub fn relocate(self, body: &[u8]) -> Self {
        match self {
            ApiError::BadJson(e) => ApiError::BadJson(e.relocate(body)),
            other => other,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = self.to_string();
        let mut response = (
            self.status(),
            Json(ErrorBody {
                error: message.as_str(),
            }),
        )
            .into_response();
        response.extensions_mut().insert(self.outcome());
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_case_keeps_the_status_and_label_it_had_as_a_status_code() {
        for (error, status, label) in [
            (ApiError::bad_request("x"), 400, "bad_request"),
            (ApiError::Disabled, 404, "disabled"),
            (ApiError::TooLarge { limit: 1 }, 413, "too_large"),
            (ApiError::internal("x"), 500, "internal"),
            (ApiError::NotSynced, 503, "timeout"),
            (
                ApiError::Timeout {
                    limit: Duration::from_secs(1),
                },
                503,
                "timeout",
            ),
        ] {
            assert_eq!(error.status().as_u16(), status, "{error:?}");
            assert_eq!(error.outcome().as_str(), label, "{error:?}");
            let response = error.into_response();
            assert_eq!(
                response.extensions().get::<Outcome>().map(|o| o.as_str()),
                Some(label)
            );
        }
    }
}
