//! SchedulingGates: a pod with `spec.schedulingGates` is not attempted until
//! every gate is removed (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go`.
//! Its queueing hint (TargetPod UpdatePodSchedulingGatesEliminated, always
//! `Queue`) is registered for fidelity: a gated pod waits outside the
//! queue's pools and is let in by PreEnqueue on its update, so no failed
//! attempt ever names this plugin.

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, EventResource};
use crate::framework::{EnqueueExtensions, EventHint, PreEnqueuePlugin, Status};
use crate::objects::PodInfo;

/// Plugin name in the policy.
pub const NAME: &str = "SchedulingGates";

/// SchedulingGates takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulingGatesArgs {}

impl crate::framework::CacheNeeds for SchedulingGatesArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct SchedulingGates;

impl SchedulingGates {
    /// Builds the plugin.
    pub fn new(_: &SchedulingGatesArgs) -> Self {
        SchedulingGates
    }
}

crate::plugin!(SchedulingGates, NAME, [pre_enqueue, enqueue_extensions]);

impl EnqueueExtensions for SchedulingGates {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![EventHint::always(
            EventResource::TargetPod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        )]
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    /// Go's `fmt.Sprintf("waiting for scheduling gates: %v", gates)` prints
    /// the names space-separated in brackets, in spec order.
    fn pre_enqueue(&self, pod: &PodInfo, _: &ClusterState) -> Status {
        let gates = &pod.spec.scheduling_gates;
        if gates.is_empty() {
            return Status::success();
        }
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            gates.join(" ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Code, QueueingHint};
    use crate::plugins::test_support::{hint, target_pod_updated};
    use serde_json::json;

    fn pre_enqueue(spec: serde_json::Value) -> Status {
        let pod: PodInfo = serde_json::from_value(json!({ "spec": spec })).unwrap();
        SchedulingGates.pre_enqueue(&pod, &ClusterState::default())
    }

    #[test]
    fn gated_pods_wait_with_every_gate_named() {
        let s = pre_enqueue(json!({"schedulingGates": [{"name": "a"}, {"name": "example.com/b"}]}));
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.message(),
            "waiting for scheduling gates: [a example.com/b]"
        );
        let s = pre_enqueue(json!({"schedulingGates": [{"name": "only"}]}));
        assert_eq!(s.message(), "waiting for scheduling gates: [only]");
    }

    #[test]
    fn ungated_pods_pass() {
        assert!(pre_enqueue(json!({})).is_success());
        assert!(pre_enqueue(json!({"schedulingGates": []})).is_success());
        assert!(pre_enqueue(json!({"schedulingGates": null})).is_success());
    }

    /// kube-scheduler's `TestIsSchedulableAfterUpdateTargetPodSchedulingGatesEliminated`;
    /// any other change of the pod is no event of this plugin.
    #[test]
    fn removing_the_last_gate_queues_the_pod() {
        let gated: PodInfo =
            serde_json::from_value(json!({"spec": {"schedulingGates": [{"name": "a"}]}})).unwrap();
        let ungated = PodInfo::default();
        let event = target_pod_updated(gated.clone(), ungated.clone());
        assert_eq!(hint(&SchedulingGates, &ungated, event), QueueingHint::Queue);
        let mut relabelled = gated.clone();
        std::sync::Arc::make_mut(&mut relabelled.labels).insert("k".into(), "v".into());
        let event = target_pod_updated(gated, relabelled.clone());
        assert_eq!(
            hint(&SchedulingGates, &relabelled, event),
            QueueingHint::Skip
        );
    }

    #[test]
    fn args_are_strict_and_empty() {
        assert!(serde_yaml_ng::from_str::<SchedulingGatesArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<SchedulingGatesArgs>("{gates: []}").is_err());
    }
}
