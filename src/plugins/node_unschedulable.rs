//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) only takes pods
//! that tolerate the `node.kubernetes.io/unschedulable:NoSchedule` taint
//! (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`.
//! Not replicated: the PreFilter `Skip` for pods whose in-place resize is
//! deferred (`InPlacePodVerticalScalingSchedulerPreemption`).
//!
//! Queueing hints: a node added schedulable or uncordoned (Node
//! Add|UpdateNodeTaint), and the pod itself gaining the toleration
//! (TargetPod UpdatePodToleration).

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, EventResource, QueueingHint};
use crate::framework::{CycleState, EnqueueExtensions, EventHint, FilterPlugin, Status, queue_if};
use crate::k8s::taints::tolerations_tolerate;
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NodeUnschedulable";

/// Filter reason (kube-scheduler `ErrReasonUnschedulable`).
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// The taint a pod must tolerate to run on a cordoned node (`v1.TaintNodeUnschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// NodeUnschedulable takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeUnschedulableArgs {}

impl crate::framework::CacheNeeds for NodeUnschedulableArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct NodeUnschedulable;

impl NodeUnschedulable {
    /// Builds the plugin.
    pub fn new(_: &NodeUnschedulableArgs) -> Self {
        NodeUnschedulable
    }
}

crate::plugin!(NodeUnschedulable, NAME, [filter, enqueue_extensions]);

/// Whether `pod` may run on a cordoned node: it tolerates the
/// `node.kubernetes.io/unschedulable:NoSchedule` taint.
fn tolerates_cordon(pod: &PodInfo) -> bool {
    tolerations_tolerate(
        &pod.spec.tolerations,
        TAINT_NODE_UNSCHEDULABLE,
        "",
        "NoSchedule",
    )
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        if node.unschedulable && !tolerates_cordon(pod) {
            return Status::unresolvable(ERR_REASON_UNSCHEDULABLE);
        }
        Status::success()
    }
}

impl EnqueueExtensions for NodeUnschedulable {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                |_, change| {
                    let Some((old, Some(new))) = change.nodes() else {
                        return QueueingHint::Queue;
                    };
                    queue_if(!new.unschedulable && old.is_none_or(|o| o.unschedulable))
                },
            ),
            // Tolerations can only be added, so a pod this plugin rejected
            // lacked the toleration before.
            EventHint::when(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_TOLERATION,
                |pod, _| queue_if(tolerates_cordon(pod)),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{
        hint, node_added, node_updated, pod_with_spec, target_pod_updated,
    };
    use serde_json::json;

    fn pod(tolerations: serde_json::Value) -> PodInfo {
        pod_with_spec(json!({ "tolerations": tolerations }))
    }

    fn filter(pod: &PodInfo, unschedulable: bool) -> Status {
        let node = NodeInfo {
            name: "n".into(),
            unschedulable,
            ..Default::default()
        };
        NodeUnschedulable.filter(&CycleState::new(), pod, &node, &ClusterState::default())
    }

    #[test]
    fn cordoned_node_rejects_pods_without_the_toleration() {
        let s = filter(&pod(json!([])), true);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "node(s) were unschedulable");
        assert!(filter(&pod(json!([])), false).is_success());
    }

    #[test]
    fn tolerations_follow_tolerates_taint() {
        for ok in [
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}),
            json!({"operator": "Exists"}),
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Equal", "value": ""}),
        ] {
            assert!(filter(&pod(json!([ok])), true).is_success(), "{ok}");
        }
        for bad in [
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/unschedulable", "value": "true"}),
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists"}),
            json!({"operator": "Exists", "effect": "PreferNoSchedule"}),
        ] {
            let s = filter(&pod(json!([bad])), true);
            assert_eq!(s.message(), "node(s) were unschedulable", "{bad}");
        }
    }

    fn node(unschedulable: bool, taints: &[&str]) -> NodeInfo {
        NodeInfo {
            name: "n".into(),
            unschedulable,
            taints: taints
                .iter()
                .map(|key| k8s_openapi::api::core::v1::Taint {
                    key: key.to_string(),
                    effect: "NoExecute".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Cases of kube-scheduler's `TestIsSchedulableAfterNodeChange`
    /// (`node_unschedulable_test.go`).
    #[test]
    fn hints_queue_the_pod_when_a_node_becomes_or_arrives_schedulable() {
        let pod = pod(json!([]));
        let hint = |event| hint(&NodeUnschedulable, &pod, event);
        assert_eq!(hint(node_added(node(true, &[]))), QueueingHint::Skip);
        assert_eq!(hint(node_added(node(false, &[]))), QueueingHint::Queue);
        let not_ready = "node.kubernetes.io/not-ready";
        assert_eq!(
            hint(node_updated(node(true, &[]), node(true, &[not_ready]))),
            QueueingHint::Skip,
            "unrelated change of a cordoned node"
        );
        assert_eq!(
            hint(node_updated(node(false, &[]), node(false, &[not_ready]))),
            QueueingHint::Skip,
            "unrelated change of a schedulable node"
        );
        assert_eq!(
            hint(node_updated(node(true, &[]), node(false, &[]))),
            QueueingHint::Queue,
            "uncordoned"
        );
        assert_eq!(
            hint(node_updated(node(false, &[]), node(true, &[]))),
            QueueingHint::Skip,
            "cordoning is no event this plugin registers"
        );
    }

    /// Cases of `TestIsSchedulableAfterPodTolerationChange`.
    #[test]
    fn hints_queue_the_pod_when_it_gains_the_cordon_toleration() {
        let before = pod(json!([]));
        let tolerates = pod(json!([{"key": TAINT_NODE_UNSCHEDULABLE, "operator": "Exists"}]));
        let unrelated = pod(json!([{"key": "unrelated-key", "operator": "Exists"}]));
        let changed = |after: &PodInfo| {
            hint(
                &NodeUnschedulable,
                after,
                target_pod_updated(before.clone(), after.clone()),
            )
        };
        assert_eq!(changed(&tolerates), QueueingHint::Queue);
        assert_eq!(changed(&unrelated), QueueingHint::Skip);
    }

    #[test]
    fn args_are_strict_and_empty() {
        assert!(serde_yaml_ng::from_str::<NodeUnschedulableArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<NodeUnschedulableArgs>("{x: 1}").is_err());
    }
}
