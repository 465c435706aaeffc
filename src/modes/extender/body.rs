//! Reading request bodies: size limit with a JSON 413, and running the
//! decode-and-evaluate work off the async workers when the body is large.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};

use super::ExtenderState;
use super::error::ApiError;
use crate::protocol::ExtenderArgsRef;

/// Bodies above this are decoded and evaluated on the blocking pool, so a
/// 50 MB full-node request does not stall other requests (~1 ms of work).
const BLOCKING_THRESHOLD: usize = 256 * 1024;

/// The raw request body, read up to the configured limit.
pub struct RawBody(pub Bytes);

impl FromRequest<ExtenderState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ExtenderState) -> Result<Self, ApiError> {
        let limit = state.settings.max_body_bytes;
        let body: Body = req.into_body();
        match axum::body::to_bytes(body, limit).await {
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(e) => {
                let too_large = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
                if too_large {
                    Err(ApiError::TooLarge { limit })
                } else {
                    Err(ApiError::bad_request(format!(
                        "could not read request body: {e}"
                    )))
                }
            }
        }
    }
}

/// Decodes a verb's JSON body; a bad body is a 400 naming field and position.
pub fn decode<'b, T: serde::Deserialize<'b>>(bytes: &'b [u8]) -> Result<T, ApiError> {
    crate::protocol::from_slice(bytes).map_err(ApiError::bad_json)
}

/// Decodes the body as `A` and evaluates it, on the blocking pool when large.
pub async fn decode_and_run<A, T>(
    state: &ExtenderState,
    body: Bytes,
    evaluate: fn(&ExtenderState, A) -> Result<T, ApiError>,
) -> Result<T, ApiError>
where
    A: serde::de::DeserializeOwned + 'static,
    T: Send + 'static,
{
    run(state, body, move |s, b| {
        evaluate(s, decode(b)?).map_err(|e| e.relocate(b))
    })
    .await
}

/// Decodes the body as borrowed [`ExtenderArgsRef`] and evaluates it, on the
/// blocking pool when large: the verbs on every scheduling cycle.
pub async fn decode_args_and_run<T>(
    state: &ExtenderState,
    body: Bytes,
    evaluate: for<'b> fn(&ExtenderState, ExtenderArgsRef<'b>) -> Result<T, ApiError>,
) -> Result<T, ApiError>
where
    T: Send + 'static,
{
    run(state, body, move |s, b| {
        evaluate(s, decode(b)?).map_err(|e| e.relocate(b))
    })
    .await
}

/// Runs `work` on the body, on the blocking pool when the body is large.
pub async fn run<T, F>(state: &ExtenderState, body: Bytes, work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&ExtenderState, &[u8]) -> Result<T, ApiError> + Send + 'static,
{
    if body.len() < BLOCKING_THRESHOLD {
        return work(state, &body);
    }
    let state = state.clone();
    tokio::task::spawn_blocking(move || work(&state, &body))
        .await
        .map_err(|e| ApiError::internal(format!("evaluation task failed: {e}")))?
}
