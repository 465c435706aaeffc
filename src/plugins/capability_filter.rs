//! CapabilityFilter: a pod annotation asks for a capability; only nodes with
//! the matching label may run the pod (design §5.1).
//!
//! Business meaning is kept out of node labels: the pod says "I need hardware
//! encryption" (`myorg.io/require-hw-encrypt: "true"`) and the policy maps that
//! to the node label that provides it.
//!
//! Queueing hints: its rejections are undone by a node that now carries
//! every label value the pod needs and did not before (Node
//! Add|UpdateNodeLabel), or by the pod itself dropping an annotation that
//! asked for a capability (TargetPod, any update: annotations are no
//! specific kind of pod change).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, EventResource, QueueingHint};
use crate::framework::{
    self, CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, Status, queue_if,
};
use crate::k8s::fields::NonEmpty;
use crate::objects::inputs::WantedLabel;
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "CapabilityFilter";

/// Arguments of CapabilityFilter.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapabilityFilterArgs {
    /// The rules; a pod must satisfy every rule whose annotation it carries.
    #[serde(default)]
    pub rules: Vec<CapabilityRule>,
}

/// One annotation → label requirement.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", from = "RawRule")]
pub struct CapabilityRule {
    /// Pod annotation that asks for the capability.
    pub pod_annotation: NonEmpty,
    /// Annotation value that activates the rule (exact match).
    pub pod_value: String,
    /// Node label that provides the capability.
    pub node_label: NonEmpty,
    /// Required label value (exact match).
    pub node_value: String,
    /// Message for nodes that lack the capability (shared: every rejected
    /// node's status carries it).
    #[serde(serialize_with = "serialize_shared")]
    pub reason: Arc<str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRule {
    pod_annotation: NonEmpty,
    #[serde(default = "default_true")]
    pod_value: String,
    node_label: NonEmpty,
    #[serde(default = "default_true")]
    node_value: String,
    #[serde(default)]
    reason: Option<String>,
}

/// `Arc<str>` as a plain string, without serde's `rc` feature.
fn serialize_shared<S: serde::Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s)
}

fn default_true() -> String {
    "true".to_string()
}

impl From<RawRule> for CapabilityRule {
    fn from(r: RawRule) -> Self {
        let reason = r.reason.filter(|s| !s.is_empty()).unwrap_or_else(|| {
            format!(
                "node(s) didn't have label {}={} required by annotation {}",
                r.node_label, r.node_value, r.pod_annotation
            )
        });
        CapabilityRule {
            pod_annotation: r.pod_annotation,
            pod_value: r.pod_value,
            node_label: r.node_label,
            node_value: r.node_value,
            reason: reason.into(),
        }
    }
}

/// Every rule's node label is read on every node of a request.
impl crate::framework::CacheNeeds for CapabilityFilterArgs {
    fn node_label_keys(&self) -> Vec<String> {
        self.rules
            .iter()
            .map(|r| r.node_label.to_string())
            .collect()
    }
}

/// The plugin.
pub struct CapabilityFilter {
    rules: Arc<[CapabilityRule]>,
}

/// The rules the current pod activates (written in PreFilter): index, and
/// the rule's label and value as the cache's inline tables answer them,
/// when the cache interns that label.
struct ActiveRules(Vec<(usize, Option<WantedLabel>)>);

impl CapabilityFilter {
    /// Builds the plugin from its arguments.
    pub fn new(args: &CapabilityFilterArgs) -> Self {
        CapabilityFilter {
            rules: args.rules.clone().into(),
        }
    }
}

crate::plugin!(
    CapabilityFilter,
    NAME,
    [pre_filter, filter, enqueue_extensions]
);

impl CapabilityRule {
    /// The pod carries the rule's annotation with its value.
    fn asked_by(&self, pod: &PodInfo) -> bool {
        pod.annotations.get(self.pod_annotation.as_str()) == Some(&self.pod_value)
    }
}

impl CapabilityFilter {
    /// Whether `node` has the rule's label value: by interned id when the
    /// node's inline table knows the label, else by string.
    fn satisfies(rule: &CapabilityRule, wanted: Option<WantedLabel>, node: &NodeInfo) -> bool {
        wanted
            .and_then(|w| w.carried_by(&node.inputs))
            .unwrap_or_else(|| node.label(&rule.node_label) == Some(rule.node_value.as_str()))
    }
}

impl PreFilterPlugin for CapabilityFilter {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let slots = cluster.label_slots();
        let active: Vec<_> = self
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.asked_by(pod))
            .map(|(i, r)| (i, slots.wanted(&r.node_label, &r.node_value)))
            .collect();
        if active.is_empty() {
            return Status::skip("pod requests no capability");
        }
        state.write(ActiveRules(active));
        Status::success()
    }
}

impl CapabilityFilter {
    /// Why `node` fails the pod's `active` rules, or `None` when it fits.
    fn rejection(&self, active: &ActiveRules, node: &NodeInfo) -> Option<Status> {
        let mut missing = active
            .0
            .iter()
            .filter(|&&(i, wanted)| !Self::satisfies(&self.rules[i], wanted, node))
            .map(|&(i, _)| &self.rules[i]);
        let mut status = Status::unresolvable(&missing.next()?.reason);
        for r in missing {
            status = status.with_reason(&r.reason);
        }
        Some(status)
    }
}

impl EnqueueExtensions for CapabilityFilter {
    fn events_to_register(&self) -> Vec<EventHint> {
        let (for_nodes, for_pod) = (self.rules.clone(), self.rules.clone());
        vec![
            EventHint::when(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                move |pod, change| {
                    let Some((old, Some(new))) = change.nodes() else {
                        return QueueingHint::Queue;
                    };
                    let provides_all = |node: &NodeInfo| {
                        for_nodes
                            .iter()
                            .filter(|r| r.asked_by(pod))
                            .all(|r| Self::satisfies(r, None, node))
                    };
                    queue_if(provides_all(new) && old.is_none_or(|o| !provides_all(o)))
                },
            ),
            EventHint::when(
                EventResource::TargetPod,
                ActionType::UPDATE,
                move |_, change| {
                    let Some((Some(old), Some(new))) = change.pods() else {
                        return QueueingHint::Queue;
                    };
                    queue_if(for_pod.iter().any(|r| r.asked_by(old) && !r.asked_by(new)))
                },
            ),
        ]
    }
}

impl FilterPlugin for CapabilityFilter {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        match state.from_pre_filter::<ActiveRules>() {
            Ok(active) => self.rejection(active, node).unwrap_or_else(Status::success),
            Err(missing) => missing,
        }
    }

    /// The rules are read from the cycle state once for all the nodes.
    fn filter_batch(
        &self,
        state: &CycleState,
        _: &PodInfo,
        nodes: &[&NodeInfo],
        candidates: &[bool],
        _: &ClusterState,
        reject: &mut dyn FnMut(usize, Status),
    ) {
        let active = state.from_pre_filter::<ActiveRules>();
        for (i, node) in framework::candidates(nodes, candidates) {
            let status = match &active {
                Ok(active) => self.rejection(active, node),
                Err(missing) => Some(missing.clone()),
            };
            if let Some(status) = status {
                reject(i, status);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{
        hint, labels, node_added, node_deleted, node_updated, target_pod_updated,
    };

    fn plugin(yaml: &str) -> CapabilityFilter {
        CapabilityFilter::new(&serde_yaml_ng::from_str(yaml).unwrap())
    }

    fn pod(annotations: &[(&str, &str)]) -> PodInfo {
        PodInfo {
            annotations: labels(annotations),
            ..Default::default()
        }
    }

    fn run(p: &CapabilityFilter, pod: &PodInfo, node: &NodeInfo) -> Status {
        let cluster = ClusterState::default();
        let mut state = CycleState::new();
        let pre = p.pre_filter(&mut state, pod, &cluster);
        if pre.code() == Code::Skip {
            return pre;
        }
        p.filter(&state, pod, node, &cluster)
    }

    const HW: &str = "rules: [{podAnnotation: myorg.io/require-hw-encrypt, nodeLabel: node.kubernetes.io/hw-encrypt, reason: node(s) lack hardware encryption}]";

    #[test]
    fn annotated_pod_needs_the_exact_label() {
        let p = plugin(HW);
        let pod = pod(&[("myorg.io/require-hw-encrypt", "true")]);
        let good = NodeInfo::new("a", [("node.kubernetes.io/hw-encrypt", "true")]);
        assert_eq!(run(&p, &pod, &good).code(), Code::Success);
        for labels in [
            vec![],
            vec![("node.kubernetes.io/hw-encrypt", "True")],
            vec![("node.kubernetes.io/hw-encrypt", "false")],
        ] {
            let s = run(&p, &pod, &NodeInfo::new("b", labels));
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
            assert_eq!(s.message(), "node(s) lack hardware encryption");
        }
    }

    #[test]
    fn other_annotation_values_do_not_activate_the_rule() {
        let p = plugin(HW);
        let bare = NodeInfo::new("b", Vec::<(String, String)>::new());
        for value in ["false", "TRUE", "yes", ""] {
            let s = run(&p, &pod(&[("myorg.io/require-hw-encrypt", value)]), &bare);
            assert_eq!(s.code(), Code::Skip, "value {value:?}");
        }
        assert_eq!(run(&p, &pod(&[]), &bare).code(), Code::Skip);
    }

    #[test]
    fn defaults_fill_values_and_reason() {
        let args: CapabilityFilterArgs =
            serde_yaml_ng::from_str("rules: [{podAnnotation: a/b, nodeLabel: c/d}]").unwrap();
        let r = &args.rules[0];
        assert_eq!(
            (r.pod_value.as_str(), r.node_value.as_str()),
            ("true", "true")
        );
        assert_eq!(
            &*r.reason,
            "node(s) didn't have label c/d=true required by annotation a/b"
        );
    }

    #[test]
    fn every_failing_rule_is_reported() {
        let p = plugin(
            "rules: [{podAnnotation: a, nodeLabel: x, reason: no x}, {podAnnotation: b, podValue: on, nodeLabel: y, nodeValue: fast, reason: no fast y}]",
        );
        let pod = pod(&[("a", "true"), ("b", "on")]);
        let s = run(
            &p,
            &pod,
            &NodeInfo::new("n", [("x", "true"), ("y", "slow")]),
        );
        assert_eq!(s.message(), "no fast y");
        let s = run(&p, &pod, &NodeInfo::new("n", [("y", "slow")]));
        assert_eq!(s.reasons(), ["no x", "no fast y"]);
    }

    #[test]
    fn a_batch_gives_each_candidate_the_status_filter_gives_it() {
        let p = plugin(HW);
        let pod = pod(&[("myorg.io/require-hw-encrypt", "true")]);
        let nodes = [
            NodeInfo::new("a", [("node.kubernetes.io/hw-encrypt", "true")]),
            NodeInfo::new("b", Vec::<(String, String)>::new()),
            NodeInfo::new("c", [("node.kubernetes.io/hw-encrypt", "false")]),
            NodeInfo::new("d", Vec::<(String, String)>::new()),
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let candidates = [true, true, true, false];
        let cluster = ClusterState::default();
        let mut prepared = CycleState::new();
        assert_eq!(
            p.pre_filter(&mut prepared, &pod, &cluster).code(),
            Code::Success
        );
        for state in [prepared, CycleState::new()] {
            let mut batch = Vec::new();
            p.filter_batch(&state, &pod, &refs, &candidates, &cluster, &mut |i, s| {
                batch.push((i, s))
            });
            let single: Vec<(usize, Status)> = (0..3)
                .map(|i| (i, p.filter(&state, &pod, &nodes[i], &cluster)))
                .filter(|(_, s)| !s.is_success())
                .collect();
            assert_eq!(batch, single);
            assert!(!batch.is_empty() && batch.iter().all(|(i, _)| *i != 3));
        }
    }

    #[test]
    fn a_node_gaining_the_needed_label_value_queues_the_pod() {
        let p = plugin(HW);
        let pod = pod(&[("myorg.io/require-hw-encrypt", "true")]);
        let label = "node.kubernetes.io/hw-encrypt";
        let node = |value: Option<&str>| {
            NodeInfo::new(
                "n",
                value.map(|v| (label, v)).into_iter().chain([("zone", "a")]),
            )
        };
        let on = |event| hint(&p, &pod, event);
        assert_eq!(on(node_added(node(None))), QueueingHint::Skip);
        assert_eq!(on(node_added(node(Some("false")))), QueueingHint::Skip);
        assert_eq!(on(node_added(node(Some("true")))), QueueingHint::Queue);
        assert_eq!(
            on(node_updated(node(None), node(Some("false")))),
            QueueingHint::Skip
        );
        assert_eq!(
            on(node_updated(node(None), node(Some("true")))),
            QueueingHint::Queue
        );
        let mut moved = node(Some("true"));
        moved.labels = NodeInfo::new("n", [(label, "true"), ("zone", "b")]).labels;
        assert_eq!(
            on(node_updated(node(Some("true")), moved)),
            QueueingHint::Skip,
            "carried the value before"
        );
        assert_eq!(
            on(node_deleted(node(Some("true")))),
            QueueingHint::Skip,
            "a node going is no event of this plugin"
        );
    }

    #[test]
    fn a_node_with_only_some_needed_labels_leaves_the_pod_waiting() {
        let p =
            plugin("rules: [{podAnnotation: a, nodeLabel: x}, {podAnnotation: b, nodeLabel: y}]");
        let pod = pod(&[("a", "true"), ("b", "true")]);
        let x = NodeInfo::new("n", [("x", "true")]);
        let bare = NodeInfo::new("n", Vec::<(String, String)>::new());
        assert_eq!(
            hint(&p, &pod, node_updated(bare, x.clone())),
            QueueingHint::Skip
        );
        let xy = NodeInfo::new("n", [("x", "true"), ("y", "true")]);
        assert_eq!(hint(&p, &pod, node_updated(x, xy)), QueueingHint::Queue);
    }

    #[test]
    fn the_pod_dropping_its_request_queues_it() {
        let p = plugin(HW);
        let asking = pod(&[("myorg.io/require-hw-encrypt", "true")]);
        let dropped = pod(&[("myorg.io/require-hw-encrypt", "false")]);
        let event = target_pod_updated(asking.clone(), dropped.clone());
        assert_eq!(hint(&p, &dropped, event), QueueingHint::Queue);
        let mut relabelled = asking.clone();
        std::sync::Arc::make_mut(&mut relabelled.labels).insert("k".into(), "v".into());
        let event = target_pod_updated(asking.clone(), relabelled.clone());
        assert_eq!(hint(&p, &relabelled, event), QueueingHint::Skip);
        let mut noted = asking.clone();
        noted.annotations.insert("note".into(), "x".into());
        let event = target_pod_updated(asking, noted.clone());
        assert_eq!(hint(&p, &noted, event), QueueingHint::Skip);
    }

    #[test]
    fn bad_args_are_rejected() {
        assert!(
            serde_yaml_ng::from_str::<CapabilityFilterArgs>("rules: [{nodeLabel: x}]").is_err()
        );
        assert!(
            serde_yaml_ng::from_str::<CapabilityFilterArgs>(
                "rules: [{podAnnotation: a, nodeLabel: x, extra: 1}]"
            )
            .is_err()
        );
        assert!(
            serde_yaml_ng::from_str::<CapabilityFilterArgs>(
                "rules: [{podAnnotation: '', nodeLabel: x}]"
            )
            .is_err()
        );
    }
}
