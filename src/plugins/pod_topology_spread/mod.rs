//! PodTopologySpread: spread a pod's group evenly over topology domains
//! (zones, hosts, ...), as kube-scheduler does (SPEC §5.2).
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/podtopologyspread`
//! (`common.go`, `filtering.go`, `scoring.go`, `plugin.go`):
//!
//! - hard constraints (`whenUnsatisfiable: DoNotSchedule`) in PreFilter/Filter
//!   (`filter.rs`): `matching pods in the node's domain + (1 if the pod matches
//!   its own selector) - global minimum <= maxSkew`, where the global minimum
//!   is 0 while fewer than `minDomains` domains exist;
//! - soft constraints (`ScheduleAnyway`) in PreScore/Score/NormalizeScore
//!   (`score.rs`): fewer matching pods in the domain scores higher;
//! - counted pods: assigned, not terminal, not being deleted, in the incoming pod's namespace,
//!   selected by `labelSelector` merged with the pod's values for
//!   `matchLabelKeys`, on nodes that carry every topology key of the
//!   constraints and pass `nodeAffinityPolicy` (default `Honor`: the pod's
//!   nodeSelector and required node affinity, as NodeAffinity's
//!   [`RequiredNodeAffinity`]) and `nodeTaintsPolicy` (default `Ignore`;
//!   `Honor`: the pod tolerates the node's NoSchedule/NoExecute taints, as
//!   TaintToleration's [`tolerates_taint`]).
//!
//! Differences from kube-scheduler, all because of what placer caches:
//!
//! - No system default constraints. kube-scheduler applies its defaults
//!   (`defaultingType: System`) or a configured list only to pods without
//!   constraints, with a selector built from the Services, ReplicaSets,
//!   ReplicationControllers and StatefulSets that select the pod. placer does
//!   not watch those, so the only accepted configuration is
//!   `defaultingType: List` with empty `defaultConstraints`, and a pod without
//!   constraints is skipped.

mod filter;
mod score;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{NodeInfo, PodInfo};
use crate::plugins::helper::tolerates_taint;
use crate::plugins::label_selector;
use crate::plugins::node_affinity::RequiredNodeAffinity;

/// Plugin name in the policy.
pub const NAME: &str = "PodTopologySpread";

/// Filter reason when the skew would exceed `maxSkew` (kube-scheduler
/// `podtopologyspread.ErrReasonConstraintsNotMatch`, code `Unschedulable`).
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";

/// Filter reason when the node lacks a constraint's topology key
/// (`ErrReasonNodeLabelNotMatch`, code `UnschedulableAndUnresolvable`).
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// `v1.LabelHostname`: soft constraints on this key count per node.
const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";

/// How constraints are defaulted for pods that have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum DefaultingType {
    /// kube-scheduler's built-in defaults; not supported by placer (rejected
    /// when the policy is loaded).
    System,
    /// The `defaultConstraints` list (which must be empty in placer).
    #[default]
    List,
}

/// Arguments of PodTopologySpread (kube-scheduler's `PodTopologySpreadArgs`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct PodTopologySpreadArgs {
    /// Always `List`: see the module documentation.
    pub defaulting_type: DefaultingType,
    /// Always empty: see the module documentation.
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    #[serde(default)]
    defaulting_type: DefaultingType,
    #[serde(default)]
    default_constraints: Vec<TopologySpreadConstraint>,
}

impl TryFrom<RawArgs> for PodTopologySpreadArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        if r.defaulting_type == DefaultingType::System {
            return Err(
                "defaultingType: System is not supported: kube-scheduler's system \
                        defaults select pods through their Services and controllers, which \
                        placer does not cache; use List"
                    .into(),
            );
        }
        if !r.default_constraints.is_empty() {
            return Err(
                "defaultConstraints: must be empty: default constraints select pods \
                        through their Services and controllers, which placer does not cache"
                    .into(),
            );
        }
        Ok(PodTopologySpreadArgs {
            defaulting_type: r.defaulting_type,
            default_constraints: r.default_constraints,
        })
    }
}

/// The plugin.
#[derive(Debug, Default)]
pub struct PodTopologySpread;

impl PodTopologySpread {
    /// Builds the plugin from its arguments.
    pub fn new(_: &PodTopologySpreadArgs) -> Self {
        PodTopologySpread
    }
}

crate::plugin!(
    PodTopologySpread,
    NAME,
    [pre_filter, filter, pre_score, score]
);

/// `whenUnsatisfiable` of hard constraints.
const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
/// `whenUnsatisfiable` of soft constraints.
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

/// One constraint of the incoming pod with its selector resolved
/// (kube-scheduler's internal `topologySpreadConstraint`).
#[derive(Debug)]
struct Constraint {
    max_skew: i64,
    topology_key: String,
    /// `labelSelector`; `None` selects nothing (unless `match_labels` is set).
    selector: Option<LabelSelector>,
    /// The incoming pod's labels for `matchLabelKeys` (ANDed with `selector`).
    match_labels: Vec<(String, String)>,
    min_domains: usize,
    honor_node_affinity: bool,
    honor_node_taints: bool,
}

impl Constraint {
    /// True when a pod with `labels` is counted by this constraint.
    fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && label_selector::matches(self.selector.as_ref(), labels)
    }

    /// `matchNodeInclusionPolicies`: whether pods on `node` count at all;
    /// `required` is the incoming pod's required node affinity.
    fn includes(&self, pod: &PodInfo, required: &RequiredNodeAffinity, node: &NodeInfo) -> bool {
        (!self.honor_node_affinity || required.matches(node))
            && (!self.honor_node_taints
                || node
                    .taints
                    .iter()
                    .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
                    .all(|t| tolerates_taint(&pod.spec.tolerations, t)))
    }
}

/// The pod's constraints with `whenUnsatisfiable == action`
/// (`filterTopologySpreadConstraints`).
fn constraints(pod: &PodInfo, action: &str) -> Result<Vec<Constraint>, String> {
    pod.spec
        .topology_spread_constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c| constraint(pod, c))
        .collect()
}

fn constraint(pod: &PodInfo, c: &TopologySpreadConstraint) -> Result<Constraint, String> {
    let mut selector = c.label_selector.clone();
    if let Some(s) = &selector {
        label_selector::validate(s)?;
    }
    let match_labels: Vec<(String, String)> = c
        .match_label_keys
        .iter()
        .flatten()
        .filter_map(|k| pod.labels.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    if !match_labels.is_empty() && selector.is_none() {
        // mergeLabelSetWithSelector: a nil selector has no requirements to
        // add, so the merged selector is the label set alone.
        selector = Some(LabelSelector::default());
    }
    let policy = |p: &Option<String>, default_honor: bool| match p.as_deref() {
        Some("Honor") => true,
        Some("Ignore") => false,
        _ => default_honor,
    };
    Ok(Constraint {
        max_skew: i64::from(c.max_skew),
        topology_key: c.topology_key.clone(),
        selector,
        match_labels,
        min_domains: c
            .min_domains
            .and_then(|m| usize::try_from(m).ok())
            .unwrap_or(1),
        honor_node_affinity: policy(&c.node_affinity_policy, true),
        honor_node_taints: policy(&c.node_taints_policy, false),
    })
}

/// `nodeLabelsMatchSpreadConstraints`: the node carries every topology key.
fn has_all_keys(node: &NodeInfo, constraints: &[Constraint]) -> bool {
    constraints
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

/// Calls `f(row, i)` for every assigned pod in `pod`'s namespace on a node
/// of `rows` (node name → row), once per constraint `i` that selects it. One
/// pass over the cluster's pods.
fn for_each_selected(
    cluster: &ClusterState,
    pod: &PodInfo,
    constraints: &[Constraint],
    rows: &HashMap<&str, usize>,
    mut f: impl FnMut(usize, usize),
) {
    for p in cluster.pods() {
        // kube-scheduler does not count pods on their way out.
        if p.namespace != pod.namespace || p.deleting {
            continue;
        }
        let Some(&row) = p.node_name.as_deref().and_then(|n| rows.get(n)) else {
            continue;
        };
        for (i, c) in constraints.iter().enumerate() {
            if c.selects(&p.labels) {
                f(row, i);
            }
        }
    }
}

#[cfg(test)]
mod tests;
