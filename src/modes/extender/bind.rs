//! `POST /bind`: placer creates the pod's Binding itself (see
//! [`crate::modes::binder`]), idempotently, as kube-scheduler needs when a
//! reply is lost and it retries, and only for a pod and node that pass
//! [`bind_check`].

use axum::extract::State;
use axum::response::Response;

use crate::protocol::{ExtenderBindingArgs, ExtenderBindingResult};

use super::bind_check::{self, MISSING_UID, Verdict};
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
    // kube-scheduler always names the pod's UID. Without it a caller could
    // bind whatever pod holds that name, so it is refused like a wrong UID,
    // and counted with the other refusals, before anything is looked up.
    if args.pod_uid.is_empty() {
        let error = "PodUID: missing: /bind binds only the pod kube-scheduler names by its UID";
        state.metrics.bind_refused(MISSING_UID);
        if let Some(suppressed) = state.bind_log.admit(std::time::Instant::now()) {
            tracing::warn!(pod = %format!("{}/{}", args.pod_namespace, args.pod_name), node = %args.node, reason = MISSING_UID, error, suppressed, "bind refused");
        }
        return Err(ApiError::bad_request(error));
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
    let pod = format!("{}/{}", args.pod_namespace, args.pod_name);
    let error = match bind_check::check(&state, binder, &args).await {
        Err(refusal) => {
            state.metrics.bind_refused(refusal.reason());
            if let Some(suppressed) = state.bind_log.admit(std::time::Instant::now()) {
                tracing::warn!(%pod, node = %args.node, reason = refusal.reason(), error = %refusal, suppressed, "bind refused");
            }
            refusal.to_string()
        }
        Ok(Verdict::AlreadyDone) => {
            tracing::info!(%pod, node = %args.node, "pod already bound to this node");
            String::new()
        }
        Ok(Verdict::Bind) => match binder.bind(&args).await {
            Ok(()) => {
                tracing::info!(%pod, node = %args.node, "bound pod");
                String::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "bind failed");
                e.to_string()
            }
        },
    };
    let domain_error = !error.is_empty();
    Ok(answer(ExtenderBindingResult { error }, domain_error))
}
