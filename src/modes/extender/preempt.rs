//! `POST /preempt`: which preemption candidates placer accepts.
//!
//! Evicting pods cannot make a node pass a placer filter that rejected it as
//! unresolvable (labels, annotations), so such candidates are dropped; every
//! other candidate is kept with its victims unchanged. The answer is always
//! `NodeNameToMetaVictims`, never with `null` values.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;

use crate::framework::{Code, CycleState};
use crate::protocol::{
    self, ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaPod, MetaVictims,
};

use super::ExtenderState;
use super::body::{RawBody, decode_and_run};
use super::error::ApiError;
use super::request;

/// The handler.
pub async fn preempt(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Json<ExtenderPreemptionResult>, ApiError> {
    decode_and_run(&state, body, evaluate).await.map(Json)
}

/// Filters the candidates.
pub fn evaluate(
    state: &ExtenderState,
    args: ExtenderPreemptionArgs,
) -> Result<ExtenderPreemptionResult, ApiError> {
    let pod = request::decode_pod(args.pod.as_deref())?;
    let candidates = match (args.node_name_to_meta_victims, args.node_name_to_victims) {
        (Some(meta), _) => meta,
        (None, Some(full)) => to_meta(full)?,
        (None, None) => {
            return Err(ApiError::bad_request(
                "request has neither NodeNameToMetaVictims nor NodeNameToVictims",
            ));
        }
    };
    if !state.cache.is_synced() {
        return Err(ApiError::NotSynced);
    }
    let policy = state.policy.load();
    let framework = request::profile_for(&policy, &pod).map_err(ApiError::internal)?;
    let snapshot = state.cache.snapshot();
    let cluster = snapshot.state();
    let mut cycle = CycleState::new();
    let pre = framework.pre_filter(&mut cycle, &pod, cluster);
    let kept = candidates
        .into_iter()
        .filter(|(name, _)| {
            let Some(node) = cluster.node(name) else {
                return true;
            };
            let verdict = framework.filter_node(&cycle, &pre, &pod, node, cluster);
            !matches!(verdict, Some(s) if s.code() == Code::UnschedulableAndUnresolvable)
        })
        .collect();
    Ok(ExtenderPreemptionResult {
        node_name_to_meta_victims: kept,
    })
}

fn to_meta(
    full: BTreeMap<String, protocol::Victims>,
) -> Result<BTreeMap<String, MetaVictims>, ApiError> {
    #[derive(Deserialize)]
    struct Uid {
        metadata: Option<Meta>,
    }
    #[derive(Deserialize)]
    struct Meta {
        uid: Option<String>,
    }
    full.into_iter()
        .map(|(node, victims)| {
            let pods = victims
                .pods
                .iter()
                .enumerate()
                .map(|(i, raw)| {
                    let u: Uid =
                        protocol::from_raw(raw, &format!("NodeNameToVictims.{node}.Pods[{i}]"))
                            .map_err(ApiError::bad_json)?;
                    Ok(MetaPod {
                        uid: u.metadata.and_then(|m| m.uid).unwrap_or_default(),
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            Ok((
                node,
                MetaVictims {
                    pods,
                    num_pdb_violations: victims.num_pdb_violations,
                },
            ))
        })
        .collect()
}
