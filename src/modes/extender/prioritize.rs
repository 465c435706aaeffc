//! `POST /prioritize`: a 0..=10 score for every requested node (design §6).

use axum::extract::State;
use axum::response::Response;

use crate::framework::CycleState;
use crate::protocol::ExtenderArgsRef;
use crate::protocol::encode;

use super::body::{RawBody, decode_args_and_run};
use super::error::ApiError;
use super::request::{self, Resolved};
use super::{ExtenderState, json_bytes};

/// The handler.
pub async fn prioritize(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    decode_args_and_run(&state, body, respond)
        .await
        .map(json_bytes)
}

/// Scores the request's nodes and encodes the `HostPriorityList`. Names
/// placer does not know score 0. A scoring error answers 500: kube-scheduler
/// then ignores this extender's scores for the pod, which is the safe outcome.
pub fn respond(state: &ExtenderState, args: ExtenderArgsRef<'_>) -> Result<Vec<u8>, ApiError> {
    if !state.cache.is_synced() {
        return Err(ApiError::NotSynced);
    }
    let policy = state.policy.load();
    let req = request::decode(args, &state.last_pod)?;
    let snapshot = state.cache.snapshot();
    let cluster = snapshot.state();
    let Resolved { nodes, known } = req.resolve(cluster);
    state.metrics.observe_nodes("prioritize", nodes.len());
    let framework = request::profile_for(&policy, &req.pod).map_err(ApiError::internal)?;
    let table = framework
        .score_totals(&mut CycleState::new(), &req.pod, &known, cluster)
        .map_err(|s| ApiError::internal(s.attributed_message()))?;
    drop(known);
    drop(snapshot);
    let mut out = Vec::with_capacity(2 + nodes.len() * 64);
    encode::priorities(
        &mut out,
        request::with_positions(&nodes)
            .map(|(r, at)| (r.name, at.map_or(0, |k| table.extender_score(k)))),
    );
    Ok(out)
}
