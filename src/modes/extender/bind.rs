//! `POST /bind`: placer creates the pod's Binding itself (see
//! [`crate::modes::binder`]), idempotently, as kube-scheduler needs when a
//! reply is lost and it retries.

use axum::extract::State;
use axum::response::Response;

use crate::protocol::{ExtenderBindingArgs, ExtenderBindingResult};

use super::body::{RawBody, decode};
use super::error::ApiError;
use super::{ExtenderState, answer};

/// The handler.
pub async fn bind(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let args: ExtenderBindingArgs = decode(&body)?;
    for (field, value) in [
        ("PodName", &args.pod_name),
        ("PodNamespace", &args.pod_namespace),
        ("Node", &args.node),
    ] {
        if value.is_empty() {
            return Err(ApiError::bad_request(format!("{field}: missing")));
        }
    }
    let Some(binder) = &state.binder else {
        let error = "placer cannot bind: it runs from a snapshot file, without an API server";
        return Ok(answer(
            ExtenderBindingResult {
                error: error.into(),
            },
            true,
        ));
    };
    let error = match binder.bind(&args).await {
        Ok(()) => {
            tracing::info!(pod = %format!("{}/{}", args.pod_namespace, args.pod_name), node = %args.node, "bound pod");
            String::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "bind failed");
            e.to_string()
        }
    };
    let domain_error = !error.is_empty();
    Ok(answer(ExtenderBindingResult { error }, domain_error))
}
