//! NodeDeclaredFeatures: a pod that needs a node feature only fits nodes
//! that declare it in `status.declaredFeatures`. kube-scheduler's plugin of
//! the same name (`pkg/scheduler/framework/plugins/nodedeclaredfeatures/`,
//! default and locked on in v1.37), with its reason string.
//!
//! **PreFilter.** The features the pod needs, inferred from its spec as
//! `k8s.io/component-helpers/nodedeclaredfeatures` does
//! ([`crate::objects::features`]: `RestartAllContainersOnContainerExits` for
//! a `RestartAllContainers` restart rule, `UserNamespacesHostNetworkSupport`
//! for `hostNetwork` with `hostUsers: false`, `VolumeBindMountOptions` for a
//! mount with `bindMountOptions`). A pod that needs none skips the plugin.
//!
//! **Filter.** Every needed feature must be among the node's known declared
//! features, else `UnschedulableAndUnresolvable` "node(s) didn't match Pod's
//! required features".
//!
//! **Queueing hints.** Node Add|UpdateNodeDeclaredFeature (an added node, or
//! one whose declared list changed), TargetPod Update (the pod's inferred
//! needs changed). Not replicated: the `Skip` for pods whose in-place resize
//! is deferred (`InPlacePodVerticalScalingSchedulerPreemption`, off in v1.37).

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, EventResource, QueueingHint};
use crate::framework::{
    Code, CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, Status, queue_if,
};
use crate::objects::features::FeatureSet;
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NodeDeclaredFeatures";

/// Filter reason (kube-scheduler `errReasonUnsatisfiedRequirements`).
pub const ERR_REASON: &str = "node(s) didn't match Pod's required features";

/// NodeDeclaredFeatures takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDeclaredFeaturesArgs {}

impl crate::framework::CacheNeeds for NodeDeclaredFeaturesArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct NodeDeclaredFeatures;

impl NodeDeclaredFeatures {
    /// Builds the plugin.
    pub fn new(_: &NodeDeclaredFeaturesArgs) -> Self {
        NodeDeclaredFeatures
    }
}

/// The pod's needs (written in PreFilter).
struct Required(FeatureSet);

crate::plugin!(
    NodeDeclaredFeatures,
    NAME,
    [pre_filter, filter, enqueue_extensions]
);

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &ClusterState) -> Status {
        let required = pod.spec.required_features;
        if required.is_empty() {
            return Status::skip("the pod needs no declared node feature");
        }
        state.write(Required(required));
        Status::success()
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let Required(required) = match state.from_pre_filter::<Required>() {
            Ok(r) => r,
            Err(missing) => return missing,
        };
        if required.is_subset(node.features) {
            Status::success()
        } else {
            Status::new(Code::UnschedulableAndUnresolvable, ERR_REASON)
        }
    }
}

impl EnqueueExtensions for NodeDeclaredFeatures {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_DECLARED_FEATURE,
                |_, change| {
                    let Some((old, Some(new))) = change.nodes() else {
                        return QueueingHint::Queue;
                    };
                    queue_if(old.is_none_or(|o| o.declared_features != new.declared_features))
                },
            ),
            EventHint::when(EventResource::TargetPod, ActionType::UPDATE, |_, change| {
                let Some((Some(old), Some(new))) = change.pods() else {
                    return QueueingHint::Queue;
                };
                queue_if(old.spec.required_features != new.spec.required_features)
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::plugins::test_support::{
        hint, node_added, node_updated, pod_with_spec, target_pod_updated,
    };

    fn node(declared: &[&str]) -> NodeInfo {
        serde_json::from_value(json!({"metadata": {"name": "n"},
            "status": {"declaredFeatures": declared}}))
        .unwrap()
    }

    /// Needs RestartAllContainersOnContainerExits (and, with `user_ns`,
    /// UserNamespacesHostNetworkSupport).
    fn pod(user_ns: bool) -> PodInfo {
        pod_with_spec(json!({
            "hostNetwork": user_ns, "hostUsers": !user_ns,
            "containers": [{"name": "c", "image": "i",
                "restartPolicyRules": [{"action": "RestartAllContainers",
                    "exitCodes": {"operator": "In", "values": [42]}}]}]
        }))
    }

    fn run(pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut state = CycleState::new();
        let pre = NodeDeclaredFeatures.pre_filter(&mut state, pod, &ClusterState::default());
        if pre.code() == Code::Skip {
            return pre;
        }
        NodeDeclaredFeatures.filter(&state, pod, node, &ClusterState::default())
    }

    const RESTART: &str = "RestartAllContainersOnContainerExits";
    const USER_NS: &str = "UserNamespacesHostNetworkSupport";

    /// The cases of kube-scheduler's `TestPreFilter` and `TestFilter`
    /// (`nodedeclaredfeatures_test.go`), with real features for its mocks.
    #[test]
    fn filter_matches_kube_schedulers_table() {
        let plain = pod_with_spec(json!({"containers": [{"name": "c", "image": "i"}]}));
        assert_eq!(
            run(&plain, &node(&[])).code(),
            Code::Skip,
            "no requirements"
        );
        assert!(
            run(&pod(false), &node(&[RESTART, USER_NS])).is_success(),
            "match"
        );
        let s = run(&pod(false), &node(&[USER_NS]));
        assert_eq!(
            (s.code(), s.message()),
            (Code::UnschedulableAndUnresolvable, ERR_REASON.to_string()),
            "does not match"
        );
        assert!(
            run(
                &pod(false),
                &node(&["ExtendWebSocketsToKubelet", RESTART, USER_NS])
            )
            .is_success(),
            "subset of many"
        );
        assert_eq!(
            run(&pod(true), &node(&[])).message(),
            ERR_REASON,
            "none declared"
        );
        assert_eq!(
            run(&pod(true), &node(&[RESTART])).message(),
            ERR_REASON,
            "some but not all"
        );
        assert!(run(&pod(true), &node(&[RESTART, USER_NS])).is_success());
        let s = NodeDeclaredFeatures.filter(
            &CycleState::new(),
            &pod(false),
            &node(&[]),
            &ClusterState::default(),
        );
        assert_eq!(s.code(), Code::Error, "no PreFilter state");
    }

    #[test]
    fn bind_mount_options_and_user_namespaces_are_inferred_from_both_decoders() {
        let spec = json!({
            "hostNetwork": true, "hostUsers": false,
            "containers": [{"name": "c", "image": "i"}],
            "ephemeralContainers": [{"name": "e", "image": "i",
                "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}]}]
        });
        let wire = pod_with_spec(spec.clone());
        let api: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(json!({ "spec": spec })).unwrap();
        assert_eq!(
            wire.spec.required_features,
            PodInfo::from(&api).spec.required_features
        );
        assert_eq!(
            wire.spec.required_features.names().collect::<Vec<_>>(),
            [USER_NS, "VolumeBindMountOptions"]
        );
        let empty_options = pod_with_spec(json!({"containers": [{"name": "c", "image": "i",
            "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": []}]}]}));
        assert!(empty_options.spec.required_features.is_empty());
    }

    /// `TestEnqueueExtensionsNodeUpdate` and `TestIsSchedulableAfterTargetPodUpdate`.
    #[test]
    fn hints_follow_declared_features_and_the_pods_needs() {
        let p = pod(false);
        let h = |event| hint(&NodeDeclaredFeatures, &p, event);
        assert_eq!(h(node_added(node(&[RESTART]))), QueueingHint::Queue);
        assert_eq!(
            h(node_updated(node(&[]), node(&[RESTART]))),
            QueueingHint::Queue
        );
        let mut relabelled = node(&[RESTART]);
        relabelled.labels = [("a", "b")].into_iter().collect();
        assert_eq!(
            h(node_updated(node(&[RESTART]), relabelled)),
            QueueingHint::Skip,
            "features unchanged"
        );
        let with = |rules: Value| {
            pod_with_spec(json!({"containers": [{"name": "c", "image": "i",
                "restartPolicyRules": rules}]}))
        };
        let restart = json!([{"action": "RestartAllContainers"}]);
        let changed = |old: PodInfo, new: PodInfo| {
            hint(
                &NodeDeclaredFeatures,
                &new,
                target_pod_updated(old, new.clone()),
            )
        };
        assert_eq!(
            changed(with(json!([])), with(restart.clone())),
            QueueingHint::Queue,
            "adds"
        );
        assert_eq!(
            changed(with(restart.clone()), with(json!([]))),
            QueueingHint::Queue,
            "removes"
        );
        let mut relabelled = with(restart.clone());
        std::sync::Arc::make_mut(&mut relabelled.labels).insert("a".into(), "b".into());
        assert_eq!(
            changed(with(restart), relabelled),
            QueueingHint::Skip,
            "no change"
        );
    }
}
