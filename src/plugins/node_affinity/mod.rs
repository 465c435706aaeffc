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
//! - `addedAffinity` (the plugin's args, `args.rs`): every node must also
//!   match the added required terms, or Filter fails with
//!   `ERR_REASON_ENFORCED` before the pod's own requirements are read; the
//!   added preferred terms' weights are added to every pod's score. A pod
//!   without requirements of its own still runs PreFilter and Filter when
//!   there are added required terms, and PreScore when there are added
//!   preferred ones.
//!
//! Queueing hints (Node Add|UpdateNodeLabel): a node added that matches,
//! or one whose labels changed from not matching to matching. A node that
//! does not match the added required terms is skipped; whether it matched
//! them before is not asked (kube-scheduler asks it only of the pod's own).
//!
//! PreFilter narrows to the nodes every required term names by `matchFields`
//! `metadata.name In` (`pre_filter_nodes`); the runner
//! reports the others as "node(s) didn't satisfy plugin(s) [NodeAffinity]",
//! as kube-scheduler does. Not supported: the resize-deferred PreFilter `Skip`.

mod args;

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelector;

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::scoring::default_normalize_score;
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, NodeScore, PreFilterPlugin,
    PreScorePlugin, ScorePlugin, Status, queue_if,
};
use crate::k8s::node_affinity::{PreferredTerms, RequiredNodeAffinity, required_selector};
use crate::k8s::validation::OBJECT_NAME_FIELD;
use crate::objects::{NodeInfo, PodInfo};

pub use args::NodeAffinityArgs;

/// Plugin name in the policy.
pub const NAME: &str = "NodeAffinity";

/// Filter reason (kube-scheduler `ErrReasonPod`).
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

/// Filter reason when the node does not match the profile's
/// `addedAffinity` required terms (kube-scheduler `errReasonEnforced`).
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";

/// PreFilter reason when every required term names (`metadata.name In`) a set
/// of nodes and those sets are all empty (kube-scheduler `errReasonConflict`).
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The plugin, with its profile's `addedAffinity` (shared with the
/// queueing hint).
#[derive(Debug, Default)]
pub struct NodeAffinity {
    added_required: Option<Arc<RequiredNodeAffinity>>,
    added_preferred: Option<PreferredTerms>,
}

impl NodeAffinity {
    /// Builds the plugin.
    pub fn new(args: &NodeAffinityArgs) -> Self {
        NodeAffinity {
            added_required: args.added.required.clone().map(Arc::new),
            added_preferred: args.added.preferred.clone(),
        }
    }

    /// A node's raw score: the weights of the preferred terms it matches, the
    /// profile's added ones and the pod's own.
    fn preferred_score(
        &self,
        PreScoreState(own): &PreScoreState,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> NodeScore {
        let added = self.added_preferred.as_ref().map_or(0, |t| t.score(node));
        NodeScore::value(added + own.as_ref().map_or(0, |t| t.score(node)))
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

/// The pod's parsed requirements, written in PreFilter.
struct PreFilterState(RequiredNodeAffinity);

/// The pod's parsed preferred terms, written in PreScore (`None`: the pod
/// has none, only the added ones count).
struct PreScoreState(Option<PreferredTerms>);

crate::plugin!(
    NodeAffinity,
    NAME,
    [pre_filter, filter, pre_score, score, enqueue_extensions]
);

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let required = required_selector(pod);
        if required.is_none() && self.added_required.is_none() && pod.spec.node_selector.is_empty()
        {
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
        if self
            .added_required
            .as_ref()
            .is_some_and(|a| !a.matches(node))
        {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
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
        let added = self.added_required.clone();
        vec![EventHint::when(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            move |pod, change| node_change_may_help(added.as_deref(), pod, change),
        )]
    }
}

/// A node added that matches `pod`'s requirements, or updated from not
/// matching to matching, and that matches the `added` required terms. An
/// update that leaves every label the pod reads as it was is skipped before
/// the pod's terms are parsed.
fn node_change_may_help(
    added: Option<&RequiredNodeAffinity>,
    pod: &PodInfo,
    change: &Change,
) -> QueueingHint {
    let Some((old, Some(new))) = change.nodes() else {
        return QueueingHint::Queue;
    };
    if added.is_some_and(|a| !a.matches(new)) {
        return QueueingHint::Skip;
    }
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
        let preferred = pod
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        let own = match preferred.map(|p| PreferredTerms::new(p)).transpose() {
            Ok(own) => own,
            Err(e) => return Status::error(e),
        };
        if own.is_none() && self.added_preferred.is_none() {
            return Status::skip("pod has no preferred node affinity");
        }
        state.write(PreScoreState(own));
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    crate::score_from_pre_score!(PreScoreState, preferred_score);

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(scores, false);
        Status::success()
    }
}

#[cfg(test)]
mod added_tests;
#[cfg(test)]
mod tests;
