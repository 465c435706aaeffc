//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) only takes pods
//! that tolerate the `node.kubernetes.io/unschedulable:NoSchedule` taint
//! (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`.
//! Not replicated: the PreFilter `Skip` for pods whose in-place resize is
//! deferred (`InPlacePodVerticalScalingSchedulerPreemption`).

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{CycleState, FilterPlugin, Status};
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::helper::tolerations_tolerate;

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

impl crate::plugins::CacheNeeds for NodeUnschedulableArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct NodeUnschedulable;

impl NodeUnschedulable {
    /// Builds the plugin.
    pub fn new(_: &NodeUnschedulableArgs) -> Self {
        NodeUnschedulable
    }
}

crate::plugin!(NodeUnschedulable, NAME, [filter]);

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        if node.unschedulable
            && !tolerations_tolerate(
                &pod.spec.tolerations,
                TAINT_NODE_UNSCHEDULABLE,
                "",
                "NoSchedule",
            )
        {
            return Status::unresolvable(ERR_REASON_UNSCHEDULABLE);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::pod_with_spec;
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

    #[test]
    fn args_are_strict_and_empty() {
        assert!(serde_yaml_ng::from_str::<NodeUnschedulableArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<NodeUnschedulableArgs>("{x: 1}").is_err());
    }
}
