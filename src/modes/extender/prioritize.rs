//! `POST /prioritize`: a 0..=10 score for every requested node (design §6).

use axum::Json;
use axum::extract::State;

use crate::framework::CycleState;
use crate::protocol::{ExtenderArgs, HostPriority, HostPriorityList};

use super::ExtenderState;
use super::body::{RawBody, decode_and_run};
use super::error::ApiError;
use super::request;

/// The handler.
pub async fn prioritize(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Json<HostPriorityList>, ApiError> {
    decode_and_run(&state, body, evaluate).await.map(Json)
}

/// Scores the request's nodes. Names placer does not know score 0. A
/// scoring error answers 500: kube-scheduler then ignores this extender's
/// scores for the pod, which is the safe outcome.
pub fn evaluate(state: &ExtenderState, args: ExtenderArgs) -> Result<HostPriorityList, ApiError> {
    if !state.cache.is_synced() {
        return Err(ApiError::NotSynced);
    }
    let policy = state.policy.load();
    let cluster = state.cache.read();
    let req = request::decode(args, &cluster)?;
    state.metrics.observe_nodes("prioritize", req.nodes.len());
    let framework = request::profile_for(&policy, &req.pod).map_err(ApiError::internal)?;
    let known = req.known_nodes();
    let table = framework
        .score(&mut CycleState::new(), &req.pod, &known, &cluster)
        .map_err(|s| ApiError::internal(s.attributed_message()))?;
    drop(cluster);
    let mut k = 0;
    Ok(req
        .nodes
        .into_iter()
        .map(|r| {
            let score = if r.node.is_some() {
                k += 1;
                table.extender_score(k - 1)
            } else {
                0
            };
            HostPriority {
                host: r.name,
                score,
            }
        })
        .collect())
}
