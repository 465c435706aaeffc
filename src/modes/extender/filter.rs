//! `POST /filter`: which of the requested nodes may run the pod.

use axum::extract::State;
use axum::response::Response;

use crate::framework::{Code, CycleState, NODE_NOT_FOUND, Reason, Status};
use crate::protocol::encode::{self, FilteredNode, Listing, Placement};
use crate::protocol::{ExtenderArgsRef, ExtenderFilterResult};

use super::body::{RawBody, decode_args_and_run};
use super::error::{ApiError, NOT_SYNCED};
use super::request::{self, Requested, Shape};
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

/// A requested node with its verdict (`None`: it fits).
struct Filtered<'r, 'a> {
    node: &'r Requested<'a>,
    verdict: Option<Verdict>,
}

/// Why a node does not fit.
enum Verdict {
    /// Not in the cache.
    NotFound,
    /// A plugin rejected it.
    Rejected(Status),
}

impl FilteredNode for Filtered<'_, '_> {
    fn name(&self) -> &str {
        &self.node.name
    }
    fn push_name(&self, out: &mut Vec<u8>) {
        encode::push_request_str(out, &self.node.name);
    }
    fn placement(&self) -> Placement {
        match &self.verdict {
            None => Placement::Passed,
            Some(Verdict::Rejected(s)) if s.code() == Code::UnschedulableAndUnresolvable => {
                Placement::Unresolvable
            }
            Some(_) => Placement::Failed,
        }
    }
    fn raw(&self) -> Option<&str> {
        self.node.raw.map(|r| r.get())
    }
    fn push_message(&self, out: &mut Vec<u8>) {
        match &self.verdict {
            Some(Verdict::Rejected(s)) => {
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
    let cluster = state.cache.read();
    // Read under the lock: changes reported later are newer than this view.
    let seen_seq = state.cache.changes().seq();
    let req = request::decode(args, &cluster)?;
    state.metrics.observe_nodes("filter", req.nodes.len());
    let framework = match request::profile_for(&policy, &req.pod) {
        Ok(f) => f,
        Err(message) => return Ok(Answer::error(message)),
    };
    let known = req.known_nodes();
    let mut cycle = CycleState::new();
    let pre = framework.pre_filter(&mut cycle, &req.pod, &cluster);
    let verdicts = framework.filter_nodes(&cycle, &pre, &req.pod, &known, &cluster);
    drop(cluster);

    let mut verdicts = verdicts.into_iter();
    let mut rejecting: Vec<&'static str> = Vec::new();
    let mut filtered = Vec::with_capacity(req.nodes.len());
    for r in &req.nodes {
        let verdict = match r.node {
            None => Some((NODE_CACHE, Verdict::NotFound)),
            Some(_) => verdicts
                .next()
                .flatten()
                .map(|s| (s.plugin(), Verdict::Rejected(s))),
        };
        if let Some((plugin, verdict)) = &verdict {
            if !rejecting.contains(plugin) {
                rejecting.push(plugin);
            }
            if let Verdict::Rejected(s) = verdict
                && s.code() == Code::Error
            {
                // An error is shown alone, so it names its plugin.
                return Ok(Answer::error(s.attributed_message()));
            }
        }
        filtered.push(Filtered {
            node: r,
            verdict: verdict.map(|(_, v)| v),
        });
    }
    let any_passed = filtered.iter().any(|f| f.verdict.is_none());
    let mut out = Vec::with_capacity(64 + filtered.len() * 64);
    let listing = match req.shape {
        Shape::Names => Listing::Names,
        Shape::Full { metadata } => Listing::Full {
            metadata: metadata.map(|m| m.get()),
        },
    };
    encode::filter_result(&mut out, &filtered, listing);
    drop(filtered);
    if let Some(retry) = &state.retry {
        // Both shapes list every passing node's name.
        if any_passed {
            retry.unpark(&req.pod.uid);
        } else {
            retry.park(&state.cache, req.pod, rejecting, req.nodes.len(), seen_seq);
        }
    }
    Ok(Answer::Encoded(out))
}
