//! NodeAffinity: `spec.nodeSelector` and required node affinity filter nodes;
//! preferred node affinity scores them (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`, with the
//! matching rules of `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`
//! and `k8s.io/apimachinery/pkg/labels` (`NewRequirement`, `Requirement.Matches`):
//!
//! - `nodeSelector`: every pair must be a node label (exact, case-sensitive).
//! - required affinity: `nodeSelectorTerms` are ORed; within a term,
//!   `matchExpressions` (on labels) and `matchFields` (on `metadata.name`) are
//!   ANDed. A term with neither matches nothing; no term at all matches no node.
//!   `NotIn` and `DoesNotExist` match a node without the label; `Gt`/`Lt`
//!   compare integers and never match a missing or non-integer label.
//! - A requirement that does not parse (unknown operator, bad key or value,
//!   wrong number of values, non-integer `Gt`/`Lt` value) makes its whole term
//!   match nothing; for required terms that is silent (kube-scheduler ignores
//!   those errors "for backwards compatibility"), for preferred terms PreScore
//!   fails with the parse errors, as kube-scheduler's does.
//! - Score: the sum of the weights of the matching preferred terms (weight 0
//!   and empty terms are ignored), normalized with `DefaultNormalizeScore`.
//!
//! Queueing hints (Node Add|UpdateNodeLabel): a node added that matches,
//! or one whose labels changed from not matching to matching.
//!
//! Not supported: the `addedAffinity` plugin argument (scheduler-enforced
//! affinity; rejected as an unknown field rather than silently ignored), the
//! PreFilter narrowing to the nodes named by `matchFields` `metadata.name In`
//! (placer's runner evaluates every node; the verdicts are the same, but
//! kube-scheduler reports the nodes it skipped as
//! "node(s) didn't satisfy plugin(s) [NodeAffinity]"), and the resize-deferred
//! PreFilter `Skip`.

mod terms;

use std::collections::HashSet;

use k8s_openapi::api::core::v1::NodeSelector;
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, NodeScore, PreFilterPlugin,
    PreScorePlugin, ScorePlugin, Status, queue_if,
};
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::helper::default_normalize_score;
use crate::plugins::validation::OBJECT_NAME_FIELD;

pub(crate) use terms::term_errors;
pub use terms::{PreferredTerms, RequiredNodeAffinity, TermMatcher};

/// Plugin name in the policy.
pub const NAME: &str = "NodeAffinity";

/// Filter reason (kube-scheduler `ErrReasonPod`).
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

/// PreFilter reason when every required term names (`metadata.name In`) a set
/// of nodes and those sets are all empty (kube-scheduler `errReasonConflict`).
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// Arguments of NodeAffinity.
///
/// kube-scheduler's `NodeAffinityArgs.addedAffinity` is not supported yet: it
/// is rejected as an unknown field, so a policy that relies on it fails to
/// load instead of silently scheduling without it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAffinityArgs {}

impl crate::plugins::CacheNeeds for NodeAffinityArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct NodeAffinity;

impl NodeAffinity {
    /// Builds the plugin.
    pub fn new(_: &NodeAffinityArgs) -> Self {
        NodeAffinity
    }
}

/// The nodes the required terms allow by name, when every term restricts
/// `metadata.name` with `In` (the union over terms of the intersection within
/// each); `None` when some term allows any name (kube-scheduler's PreFilter).
fn required_node_names(selector: &NodeSelector) -> Option<HashSet<String>> {
    let terms = &selector.node_selector_terms;
    if terms.is_empty() {
        return None;
    }
    let mut union: HashSet<String> = HashSet::new();
    for t in terms {
        let mut names: Option<HashSet<&str>> = None;
        for r in t.match_fields.iter().flatten() {
            if r.key == OBJECT_NAME_FIELD && r.operator == "In" {
                let set: HashSet<&str> = r.values.iter().flatten().map(String::as_str).collect();
                names = Some(match names {
                    None => set,
                    Some(prev) => prev.intersection(&set).copied().collect(),
                });
            }
        }
        // A term without a name restriction allows every node.
        union.extend(names?.into_iter().map(str::to_string));
    }
    Some(union)
}

fn required_selector(pod: &PodInfo) -> Option<&NodeSelector> {
    pod.spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// The pod's parsed requirements, written in PreFilter.
struct PreFilterState(RequiredNodeAffinity);

/// The pod's parsed preferred terms, written in PreScore.
struct PreScoreState(PreferredTerms);

crate::plugin!(
    NodeAffinity,
    NAME,
    [pre_filter, filter, pre_score, score, enqueue_extensions]
);

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let required = required_selector(pod);
        if required.is_none() && pod.spec.node_selector.is_empty() {
            return Status::skip("pod has no node selector or required node affinity");
        }
        let affinity = RequiredNodeAffinity::new(pod).with_label_ids(cluster.label_slots());
        state.write(PreFilterState(affinity));
        if required
            .and_then(required_node_names)
            .is_some_and(|n| n.is_empty())
        {
            return Status::unresolvable(ERR_REASON_CONFLICT);
        }
        Status::success()
    }

    fn pre_filter_nodes(&self, pod: &PodInfo) -> Option<HashSet<String>> {
        required_selector(pod).and_then(required_node_names)
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let PreFilterState(required) = match state.from_pre_filter::<PreFilterState>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        if required.matches(node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl EnqueueExtensions for NodeAffinity {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![EventHint::when(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            node_change_may_help,
        )]
    }
}

/// A node added that matches `pod`'s requirements, or updated from not
/// matching to matching. An update that leaves every label the pod reads
/// as it was is skipped before the pod's terms are parsed.
fn node_change_may_help(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((old, Some(new))) = change.nodes() else {
        return QueueingHint::Queue;
    };
    if let Some(old) = old
        && RequiredNodeAffinity::label_keys(pod).all(|k| old.label(k) == new.label(k))
    {
        return QueueingHint::Skip;
    }
    let required = RequiredNodeAffinity::new(pod);
    queue_if(required.matches(new) && old.is_none_or(|o| !required.matches(o)))
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        _: &ClusterState,
    ) -> Status {
        let Some(preferred) = pod
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
        else {
            return Status::skip("pod has no preferred node affinity");
        };
        match PreferredTerms::new(preferred) {
            Ok(terms) => {
                state.write(PreScoreState(terms));
                Status::success()
            }
            Err(e) => Status::error(e),
        }
    }
}

impl ScorePlugin for NodeAffinity {
    /// The sum of the weights of the preferred terms the node matches.
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<NodeScore, Status> {
        let PreScoreState(terms) = state.from_pre_score::<PreScoreState>()?;
        Ok(NodeScore::value(terms.score(node)))
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(scores, false);
        Status::success()
    }
}

#[cfg(test)]
mod tests;
