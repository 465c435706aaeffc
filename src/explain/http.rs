//! `GET /explain/pods/{namespace}/{name}`: JSON, or `?format=table`.
//!
//! 400 for a name the API server would refuse (naming the part), 404 for a
//! pod placer has not seen (or when the feature is off), 503 before the
//! caches have synced. Errors are `{"Error": "..."}`, like every other
//! route. The route shares the listener, so TLS and client certificates
//! apply to it as to the verbs.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::{Answer, Attempt, Explainer, LiveExplanation, names};

/// The route, relative to the root (not under `--path-prefix`, which is for
/// kube-scheduler's verbs).
pub const ROUTE: &str = "/explain/pods/{namespace}/{name}";

/// `?format=json|table`.
#[derive(Debug, Deserialize, Default)]
pub struct Format {
    format: Option<String>,
}

/// An error answer.
#[derive(Debug)]
pub struct Error(StatusCode, String);

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "Error": self.1 }))).into_response()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    #[serde(flatten)]
    explanation: &'a LiveExplanation,
    /// True when nothing changed since the last explanation, which is returned as it was.
    reused: bool,
    /// Standalone mode's last attempt for this pod.
    last_attempt: Option<&'a Attempt>,
}

/// The handler's state: the explainer `placer serve` builds, `None` where
/// the feature is off.
pub type ExplainState = Option<Arc<Explainer>>;

/// The handler.
pub async fn explain_pod(
    State(explainer): State<ExplainState>,
    Path((namespace, name)): Path<(String, String)>,
    Query(q): Query<Format>,
) -> Result<Response, Error> {
    let table = match q.format.as_deref() {
        None | Some("json") => false,
        Some("table") => true,
        Some(other) => {
            return Err(Error(
                StatusCode::BAD_REQUEST,
                format!("format: unsupported {other:?} (expected json or table)"),
            ));
        }
    };
    names::validate_namespace(&namespace).map_err(|e| Error(StatusCode::BAD_REQUEST, e))?;
    names::validate_pod_name(&name).map_err(|e| Error(StatusCode::BAD_REQUEST, e))?;
    let Some(explainer) = explainer else {
        return Err(Error(
            StatusCode::NOT_FOUND,
            "explaining live pods is off in this placer".into(),
        ));
    };
    if !explainer.cache.is_synced() || !explainer.pending.is_synced() {
        return Err(Error(
            StatusCode::SERVICE_UNAVAILABLE,
            "placer's caches have not synced yet; try again shortly".into(),
        ));
    }
    let Some(pod) = explainer.find(&namespace, &name) else {
        return Err(Error(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{name} not found in placer's cache"),
        ));
    };
    // Evaluating every node is CPU work: off the async workers.
    let answer = tokio::task::spawn_blocking(move || explainer.explain(pod))
        .await
        .map_err(|_| {
            Error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the explanation failed (internal error; see placer's log)".into(),
            )
        })?
        .map_err(|e| Error(StatusCode::NOT_FOUND, e))?;
    Ok(render(&answer, table))
}

/// The answer as JSON or as the table.
pub fn render(answer: &Answer, table: bool) -> Response {
    if table {
        text(answer).into_response()
    } else {
        Json(Body {
            explanation: &answer.explanation,
            reused: answer.reused,
            last_attempt: answer.last_attempt.as_ref(),
        })
        .into_response()
    }
}

/// The JSON form of the answer.
pub fn json(answer: &Answer) -> serde_json::Value {
    serde_json::to_value(Body {
        explanation: &answer.explanation,
        reused: answer.reused,
        last_attempt: answer.last_attempt.as_ref(),
    })
    .unwrap_or_else(|e| serde_json::json!({ "Error": format!("encoding the explanation: {e}") }))
}

/// The table with the last attempt underneath.
pub fn text(answer: &Answer) -> String {
    let mut out = answer.explanation.to_table();
    if let Some(a) = &answer.last_attempt {
        out.push_str(&format!("last attempt: {}\n", a.message));
    }
    if answer.reused {
        out.push_str("(nothing changed since the last explanation: reused)\n");
    }
    out
}
