//! SchedulingGates: a pod with `spec.schedulingGates` is not attempted until
//! every gate is removed (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go`.

use serde::{Deserialize, Serialize};

use crate::framework::{PreEnqueuePlugin, Status};
use crate::objects::PodInfo;

/// Plugin name in the policy.
pub const NAME: &str = "SchedulingGates";

/// SchedulingGates takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulingGatesArgs {}

impl crate::plugins::CacheNeeds for SchedulingGatesArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct SchedulingGates;

impl SchedulingGates {
    /// Builds the plugin.
    pub fn new(_: &SchedulingGatesArgs) -> Self {
        SchedulingGates
    }
}

crate::plugin!(SchedulingGates, NAME, [pre_enqueue]);

impl PreEnqueuePlugin for SchedulingGates {
    /// Go's `fmt.Sprintf("waiting for scheduling gates: %v", gates)` prints
    /// the names space-separated in brackets, in spec order.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
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
    use crate::framework::Code;
    use serde_json::json;

    fn pre_enqueue(spec: serde_json::Value) -> Status {
        let pod: PodInfo = serde_json::from_value(json!({ "spec": spec })).unwrap();
        SchedulingGates.pre_enqueue(&pod)
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

    #[test]
    fn args_are_strict_and_empty() {
        assert!(serde_yaml_ng::from_str::<SchedulingGatesArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<SchedulingGatesArgs>("{gates: []}").is_err());
    }
}
