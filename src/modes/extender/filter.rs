//! `POST /filter`: which of the requested nodes may run the pod.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;

use crate::framework::{Code, CycleState, NODE_NOT_FOUND};
use crate::protocol::{ExtenderArgs, ExtenderFilterResult, NodeList};

use super::body::{RawBody, decode_and_run};
use super::error::ApiError;
use super::request::{self, Shape};
use super::retry::NODE_CACHE;
use super::{ExtenderState, answer};

/// The handler.
pub async fn filter(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let result = decode_and_run(&state, body, evaluate).await?;
    let domain_error = !result.error.is_empty();
    Ok(answer(result, domain_error))
}

/// Filters the request's nodes with the pod's profile.
pub fn evaluate(
    state: &ExtenderState,
    args: ExtenderArgs,
) -> Result<ExtenderFilterResult, ApiError> {
    if !state.cache.is_synced() {
        return Ok(ExtenderFilterResult {
            error: request::NOT_SYNCED.to_string(),
            ..Default::default()
        });
    }
    let policy = state.policy.load();
    let cluster = state.cache.read();
    // Read under the lock: changes reported later are newer than this view.
    let seen_seq = state.cache.changes().seq();
    let req = request::decode(args, &cluster)?;
    state.metrics.observe_nodes("filter", req.nodes.len());
    let framework = match request::profile_for(&policy, &req.pod) {
        Ok(f) => f,
        Err(message) => {
            return Ok(ExtenderFilterResult {
                error: message,
                ..Default::default()
            });
        }
    };
    let known = req.known_nodes();
    let mut cycle = CycleState::new();
    let pre = framework.pre_filter(&mut cycle, &req.pod, &cluster);
    let verdicts = framework.filter_nodes(&cycle, &pre, &req.pod, &known, &cluster);
    drop(cluster);

    let mut failed = BTreeMap::new();
    let mut unresolvable = BTreeMap::new();
    let mut verdicts = verdicts.into_iter();
    let mut passed_names = Vec::new();
    let mut passed_raw = Vec::new();
    let mut rejecting: Vec<&'static str> = Vec::new();
    let requested = req.nodes.len();
    for r in req.nodes {
        let verdict = match r.node {
            None => Some((Code::Unschedulable, NODE_CACHE, NODE_NOT_FOUND.to_string())),
            Some(_) => verdicts.next().flatten().map(|s| {
                // An error is shown alone, so it names its plugin.
                let message = if s.code() == Code::Error {
                    s.attributed_message()
                } else {
                    s.message()
                };
                (s.code(), s.plugin(), message)
            }),
        };
        let Some((code, plugin, message)) = verdict else {
            passed_names.push(r.name);
            passed_raw.extend(r.raw);
            continue;
        };
        if !rejecting.contains(&plugin) {
            rejecting.push(plugin);
        }
        match code {
            Code::Error => {
                return Ok(ExtenderFilterResult {
                    error: message,
                    ..Default::default()
                });
            }
            Code::UnschedulableAndUnresolvable => {
                unresolvable.insert(r.name, message);
            }
            _ => {
                failed.insert(r.name, message);
            }
        }
    }
    if let Some(retry) = &state.retry {
        // Both shapes list every passing node's name.
        if passed_names.is_empty() {
            retry.park(&state.cache, req.pod, rejecting, requested, seen_seq);
        } else {
            retry.unpark(&req.pod.uid);
        }
    }
    let (nodes, node_names) = match req.shape {
        Shape::Names => (None, Some(passed_names)),
        Shape::Full { metadata } => (
            Some(NodeList {
                metadata,
                items: passed_raw,
            }),
            None,
        ),
    };
    Ok(ExtenderFilterResult {
        nodes,
        node_names,
        failed_nodes: Some(failed),
        failed_and_unresolvable_nodes: Some(unresolvable),
        error: String::new(),
    })
}
