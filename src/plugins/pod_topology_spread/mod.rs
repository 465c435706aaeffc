//! PodTopologySpread: spread a pod's group evenly over topology domains
//! (zones, hosts, ...), as kube-scheduler does (design §5.2).
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
//!   TaintToleration's [`has_untolerated_taint`] says).
//!
//! Pods without constraints of their own get the default constraints
//! (`defaultingType: System`, kube-scheduler's default: hostname with maxSkew 3
//! and zone with maxSkew 5, both `ScheduleAnyway`; or `List`: the configured
//! `defaultConstraints`), counting the pods selected by the Services that
//! select the pod and by its controlling ReplicationController, ReplicaSet or
//! StatefulSet (`helper.DefaultSelector`); none of those, no constraints.
//! placer watches Services and controllers in standalone mode only; in
//! extender mode the stores stay empty and a pod without constraints is
//! skipped. With system defaults, nodes missing a topology key still score
//! (kube-scheduler's `requireAllTopologies`).

mod filter;
mod hints;
mod score;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::k8s::label_selector;
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::k8s::taints::has_untolerated_taint;
use crate::objects::workload::{
    ReplicaSetSelector, ReplicationControllerSelector, ServiceSelector, StatefulSetSelector,
};
use crate::objects::{NodeInfo, PodInfo};

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
    /// kube-scheduler's built-in defaults ([`system_default_constraints`]).
    #[default]
    System,
    /// The `defaultConstraints` list.
    List,
}

/// kube-scheduler's `systemDefaultConstraints`.
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), ("topology.kubernetes.io/zone", 5)]
        .into_iter()
        .map(|(key, skew)| TopologySpreadConstraint {
            max_skew: skew,
            topology_key: key.to_string(),
            when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
            ..Default::default()
        })
        .collect()
}

/// Arguments of PodTopologySpread (kube-scheduler's `PodTopologySpreadArgs`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct PodTopologySpreadArgs {
    /// Where the constraints of pods without any come from.
    pub defaulting_type: DefaultingType,
    /// With `List`: the constraints (no selectors: each pod gets its own).
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

impl crate::framework::CacheNeeds for PodTopologySpreadArgs {}

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
    /// kube-scheduler's `ValidatePodTopologySpreadArgs`.
    fn try_from(r: RawArgs) -> Result<Self, String> {
        if r.defaulting_type == DefaultingType::System && !r.default_constraints.is_empty() {
            return Err(
                "defaultingType: System requires empty defaultConstraints (the system \
                 defaults are built in); use List to configure them"
                    .into(),
            );
        }
        for (i, c) in r.default_constraints.iter().enumerate() {
            let at = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                return Err(format!(
                    "{at}.maxSkew: {} must be greater than zero",
                    c.max_skew
                ));
            }
            if c.topology_key.is_empty() {
                return Err(format!("{at}.topologyKey: required"));
            }
            if ![DO_NOT_SCHEDULE, SCHEDULE_ANYWAY].contains(&c.when_unsatisfiable.as_str()) {
                return Err(format!(
                    "{at}.whenUnsatisfiable: {:?} is not one of DoNotSchedule, ScheduleAnyway",
                    c.when_unsatisfiable
                ));
            }
            if c.label_selector.is_some() {
                return Err(format!(
                    "{at}.labelSelector: forbidden: constraint must not define a selector, as \
                     they deduced for each pod"
                ));
            }
            let repeated = r.default_constraints[..i].iter().any(|d| {
                d.topology_key == c.topology_key && d.when_unsatisfiable == c.when_unsatisfiable
            });
            if repeated {
                return Err(format!(
                    "{at}: duplicate {{{}, {}}} pair",
                    c.topology_key, c.when_unsatisfiable
                ));
            }
        }
        Ok(PodTopologySpreadArgs {
            defaulting_type: r.defaulting_type,
            default_constraints: r.default_constraints,
        })
    }
}

/// The plugin.
#[derive(Debug, Default, Clone)]
pub struct PodTopologySpread {
    /// The constraints of pods that have none (their selectors come from the cluster).
    defaults: Vec<TopologySpreadConstraint>,
    /// The defaults are kube-scheduler's system defaults.
    system_defaulted: bool,
}

impl PodTopologySpread {
    /// Builds the plugin from its arguments.
    pub fn new(args: &PodTopologySpreadArgs) -> Self {
        match args.defaulting_type {
            DefaultingType::System => PodTopologySpread {
                defaults: system_default_constraints(),
                system_defaulted: true,
            },
            DefaultingType::List => PodTopologySpread {
                defaults: args.default_constraints.clone(),
                system_defaulted: false,
            },
        }
    }

    /// The pod's constraints with `whenUnsatisfiable == action`: its own, or
    /// the defaults with [`default_selector`] (`buildDefaultConstraints`).
    fn constraints(
        &self,
        pod: &PodInfo,
        action: &str,
        cluster: &ClusterState,
    ) -> Result<Vec<Constraint>, String> {
        if !Self::defaulted(pod) {
            return constraints(pod, &pod.spec.topology_spread_constraints, action);
        }
        let mut defaults = constraints(pod, &self.defaults, action)?;
        if defaults.is_empty() {
            return Ok(defaults);
        }
        let Some(selector) = default_selector(pod, cluster) else {
            return Ok(Vec::new());
        };
        for c in &mut defaults {
            c.selector = Some(selector.clone());
            c.match_labels.clear();
        }
        Ok(defaults)
    }

    /// Whether the pod gets the default constraints (it has none of its own).
    fn defaulted(pod: &PodInfo) -> bool {
        pod.spec.topology_spread_constraints.is_empty()
    }

    /// The pod's constraints as written (its own, or the defaults without
    /// their selectors), unresolved.
    fn written<'a>(&'a self, pod: &'a PodInfo) -> &'a [TopologySpreadConstraint] {
        if Self::defaulted(pod) {
            &self.defaults
        } else {
            &pod.spec.topology_spread_constraints
        }
    }

    /// Whether scoring ignores nodes without every topology key
    /// (`requireAllTopologies`): not for system-defaulted constraints.
    fn requires_all_topologies(&self, pod: &PodInfo) -> bool {
        !Self::defaulted(pod) || !self.system_defaulted
    }
}

/// kube-scheduler's `helper.DefaultSelector`: the selectors of the Services
/// in the pod's namespace that select it, merged, plus the selector of its
/// controlling ReplicationController, ReplicaSet or StatefulSet. `None`
/// when that is empty (no default constraints then).
fn default_selector(pod: &PodInfo, cluster: &ClusterState) -> Option<LabelSelector> {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for svc in cluster.objects::<ServiceSelector>().iter() {
        let Some(sel) = svc
            .selector
            .as_ref()
            .filter(|_| svc.namespace == pod.namespace)
        else {
            // A Service without a selector selects nothing.
            continue;
        };
        if sel.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
            labels.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut expressions = Vec::new();
    if let Some(owner) = &pod.controller {
        let key = format!("{}/{}", pod.namespace, owner.name);
        let controller = match (owner.api_version.as_str(), owner.kind.as_str()) {
            ("v1", "ReplicationController") => cluster
                .objects::<ReplicationControllerSelector>()
                .get(&key)
                .map(|c| &c.0),
            ("apps/v1", "ReplicaSet") => cluster
                .objects::<ReplicaSetSelector>()
                .get(&key)
                .map(|c| &c.0),
            ("apps/v1", "StatefulSet") => cluster
                .objects::<StatefulSetSelector>()
                .get(&key)
                .map(|c| &c.0),
            _ => None,
        };
        // A nil or invalid selector adds nothing (`Requirements()` is not ok).
        if let Some(sel) = controller
            .and_then(|c| c.selector.as_ref())
            .filter(|s| label_selector::validate(s).is_ok())
        {
            labels.extend(
                sel.match_labels
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            expressions.extend(sel.match_expressions.iter().flatten().cloned());
        }
    }
    if labels.is_empty() && expressions.is_empty() {
        return None;
    }
    Some(LabelSelector {
        match_labels: Some(labels).filter(|l| !l.is_empty()),
        match_expressions: Some(expressions).filter(|e| !e.is_empty()),
    })
}

crate::plugin!(
    PodTopologySpread,
    NAME,
    [
        pre_filter,
        pre_filter_extensions,
        filter,
        pre_score,
        score,
        enqueue_extensions
    ]
);

/// `whenUnsatisfiable` of hard constraints.
const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
/// `whenUnsatisfiable` of soft constraints.
const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

/// One constraint of the incoming pod with its selector resolved
/// (kube-scheduler's internal `topologySpreadConstraint`).
#[derive(Debug, Clone, PartialEq)]
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
        merged_selects(
            self.selector.as_ref(),
            self.match_labels.iter().map(|(k, v)| (k, v)),
            labels,
        )
    }

    /// `matchNodeInclusionPolicies`: whether pods on `node` count at all;
    /// `required` is the incoming pod's required node affinity.
    fn includes(&self, pod: &PodInfo, required: &RequiredNodeAffinity, node: &NodeInfo) -> bool {
        (!self.honor_node_affinity || required.matches(node))
            && (!self.honor_node_taints
                || !has_untolerated_taint(&node.taints, &pod.spec.tolerations))
    }
}

/// Whether `selector` merged with the incoming pod's `matchLabelKeys`
/// pairs (`mergeLabelSetWithSelector`) selects `labels`: every pair holds,
/// and so does the selector; a missing selector selects nothing unless
/// pairs were merged into it.
fn merged_selects<K, V>(
    selector: Option<&LabelSelector>,
    pairs: impl IntoIterator<Item = (K, V)>,
    labels: &BTreeMap<String, String>,
) -> bool
where
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut merged = false;
    for (k, v) in pairs {
        if labels.get(k.as_ref()).map(String::as_str) != Some(v.as_ref()) {
            return false;
        }
        merged = true;
    }
    match selector {
        None => merged,
        some => label_selector::matches(some, labels),
    }
}

/// `nodeInclusionPolicy` as set, or its default.
fn honors(policy: Option<&str>, default_honor: bool) -> bool {
    match policy {
        Some("Honor") => true,
        Some("Ignore") => false,
        _ => default_honor,
    }
}

/// The constraints of `list` with `whenUnsatisfiable == action`, for `pod`
/// (`filterTopologySpreadConstraints`).
fn constraints(
    pod: &PodInfo,
    list: &[TopologySpreadConstraint],
    action: &str,
) -> Result<Vec<Constraint>, String> {
    list.iter()
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
    Ok(Constraint {
        max_skew: i64::from(c.max_skew),
        topology_key: c.topology_key.clone(),
        selector,
        match_labels,
        min_domains: c
            .min_domains
            .and_then(|m| usize::try_from(m).ok())
            .unwrap_or(1),
        honor_node_affinity: honors(c.node_affinity_policy.as_deref(), true),
        honor_node_taints: honors(c.node_taints_policy.as_deref(), false),
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
