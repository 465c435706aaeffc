//! `POST /filter`: which of the requested nodes may run the pod.

use axum::extract::State;
use axum::response::Response;

use crate::framework::{Code, CycleState, NODE_NOT_FOUND, Reason, Status};
use crate::protocol::encode::{self, FilteredNode, Listing};
use crate::protocol::{ExtenderArgsRef, ExtenderFilterResult};

use super::body::{RawBody, decode_args_and_run};
use super::error::{ApiError, NOT_SYNCED};
use super::request::{self, Requested, Resolved, Shape};
use super::retry::NODE_CACHE;
use super::{ExtenderState, answer, json_bytes};

/// The handler.
pub async fn filter(
    State(state): State<ExtenderState>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    Ok(match decode_args_and_run(&state, body, respond).await? {
        Answer::Encoded(bytes) => json_bytes(bytes),
        Answer::DomainError(result) => answer(result, true),
    })
}

/// A `/filter` answer.
#[derive(Debug)]
pub enum Answer {
    /// The encoded `ExtenderFilterResult` of a request that could be filtered.
    Encoded(Vec<u8>),
    /// A domain error: 200 with only `Error` set.
    DomainError(ExtenderFilterResult),
}

impl Answer {
    fn error(message: impl Into<String>) -> Self {
        Answer::DomainError(ExtenderFilterResult {
            error: message.into(),
            ..Default::default()
        })
    }
}

/// A requested node with its place in the answer.
struct Filtered<'r, 'q> {
    node: &'r Requested<'q>,
    why: Why<'r>,
}

/// Whether a node fits, and if not, why.
#[derive(Clone, Copy)]
enum Why<'r> {
    /// It fits.
    Passed,
    /// Not in the cache.
    NotFound,
    /// A plugin rejected it.
    Rejected(&'r Status),
}

impl FilteredNode for Filtered<'_, '_> {
    fn name(&self) -> &str {
        self.node.name
    }
    fn push_name(&self, out: &mut Vec<u8>) {
        encode::push_request_str(out, self.node.name);
    }
    fn raw(&self) -> Option<&str> {
        self.node.raw.map(|r| r.get())
    }
    fn push_message(&self, out: &mut Vec<u8>) {
        match self.why {
            Why::Rejected(s) => {
                encode::push_joined(out, s.reasons().iter().map(Reason::as_str), ", ")
            }
            _ => encode::push_str(out, NODE_NOT_FOUND),
        }
    }
}

/// Filters the request's nodes with the pod's profile and encodes the answer.
pub fn respond(state: &ExtenderState, args: ExtenderArgsRef<'_>) -> Result<Answer, ApiError> {
    if !state.cache.is_synced() {
        return Ok(Answer::error(NOT_SYNCED));
    }
    let policy = state.policy.load();
    let req = request::decode(args, &state.last_pod)?;
    // After the policy: a reload's new dimensions are written before it
    // stores the policy, so this view has them.
    let snapshot = state.cache.snapshot();
    let cluster = snapshot.state();
    // Taken with the view: changes reported later are newer than it.
    let seen_seq = snapshot.changes_seq();
    let Resolved { nodes, known } = req.resolve(cluster);
    state.metrics.observe_nodes("filter", nodes.len());
    let framework = match request::profile_for(&policy, &req.pod) {
        Ok(f) => f,
        Err(message) => return Ok(Answer::error(message)),
    };
    let mut cycle = CycleState::new();
    let pre = framework.pre_filter(&mut cycle, &req.pod, cluster);
    let mut rejections: Vec<(usize, Status)> = Vec::new();
    framework.filter_nodes_each(&cycle, &pre, &req.pod, &known, cluster, |i, s| {
        rejections.push((i, s))
    });
    drop(known);
    drop(snapshot);
    // They come plugin by plugin; the answer walks the nodes in order.
    rejections.sort_unstable_by_key(|&(i, _)| i);
    if let Some((_, s)) = rejections.iter().find(|(_, s)| s.code() == Code::Error) {
        // An error is shown alone, so it names its plugin.
        return Ok(Answer::error(s.attributed_message()));
    }

    let mut rejecting: Vec<&'static str> = Vec::new();
    let mut passed = Vec::with_capacity(nodes.len().saturating_sub(rejections.len()));
    let (mut failed, mut unresolvable) = (Vec::new(), Vec::new());
    let mut rejected = rejections.iter().peekable();
    for (node, at) in request::with_positions(&nodes) {
        let why = match at {
            None => Why::NotFound,
            Some(k) => match rejected.next_if(|(i, _)| *i == k) {
                Some((_, s)) => Why::Rejected(s),
                None => {
                    passed.push(Filtered {
                        node,
                        why: Why::Passed,
                    });
                    continue;
                }
            },
        };
        let plugin = match why {
            Why::Rejected(s) => s.plugin(),
            _ => NODE_CACHE,
        };
        if !rejecting.contains(&plugin) {
            rejecting.push(plugin);
        }
        let entry = Filtered { node, why };
        match why {
            Why::Rejected(s) if s.code() == Code::UnschedulableAndUnresolvable => {
                unresolvable.push(entry)
            }
            _ => failed.push(entry),
        }
    }
    let any_passed = !passed.is_empty();
    let mut out = Vec::with_capacity(64 + nodes.len() * 64);
    let listing = match req.shape {
        Shape::Names => Listing::Names,
        Shape::Full { metadata } => Listing::Full {
            metadata: metadata.map(|m| m.get()),
        },
    };
    encode::filter_result(&mut out, &passed, &failed, &unresolvable, listing);
    let count = nodes.len();
    if let Some(retry) = &state.retry {
        // Both shapes list every passing node's name.
        if any_passed {
            retry.unpark(&req.pod.uid);
        } else {
            retry.park(&state.cache, req.pod, rejecting, count, seen_seq);
        }
    }
    Ok(Answer::Encoded(out))
}
