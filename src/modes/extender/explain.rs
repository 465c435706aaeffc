//! `POST /explain`: how every requested node filters and scores, as JSON or
//! (`?format=table`) as a text table.

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::framework::{Explanation, explain as explain_pod};
use crate::protocol::ExtenderArgsRef;

use super::ExtenderState;
use super::body::{RawBody, decode_args_and_run};
use super::error::ApiError;
use super::request;

/// `?format=json|table`.
#[derive(Debug, Deserialize, Default)]
pub struct Format {
    format: Option<String>,
}

/// The handler.
pub async fn explain(
    State(state): State<ExtenderState>,
    Query(q): Query<Format>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let table = match q.format.as_deref() {
        None | Some("json") => false,
        Some("table") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "format: unsupported {other:?} (expected json or table)"
            )));
        }
    };
    let e = decode_args_and_run(&state, body, evaluate).await?;
    Ok(if table {
        e.to_table().into_response()
    } else {
        Json(e).into_response()
    })
}

/// Explains the request.
pub fn evaluate(state: &ExtenderState, args: ExtenderArgsRef<'_>) -> Result<Explanation, ApiError> {
    let policy = state.policy.load();
    let req = request::decode(args, &state.last_pod)?;
    let snapshot = state.cache.snapshot();
    let cluster = snapshot.state();
    let resolved = req.resolve(cluster);
    let framework = request::profile_for(&policy, &req.pod).map_err(ApiError::bad_request)?;
    let nodes: Vec<_> = request::with_positions(&resolved.nodes)
        .map(|(r, at)| (r.name.to_string(), at.map(|k| resolved.known[k])))
        .collect();
    Ok(explain_pod(&framework, &req.pod, &nodes, cluster))
}
