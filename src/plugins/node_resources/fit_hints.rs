//! NodeResourcesFit's queueing hints (kube-scheduler's `EventsToRegister`
//! and `isSchedulableAfter*` in `fit.go`): what can free room for a pod the
//! filter rejected.
//!
//! - AssignedPod Delete: a placed pod (bound or nominated) going frees its
//!   requests;
//! - Node Add|UpdateNodeAllocatable: a node added that an empty node of its
//!   size would fit, or one whose allocatable grew in a resource the pod
//!   requests (or in pods) and that would fit it empty;
//! - AssignedPod UpdatePodScaleDown: a placed pod's request going down in a
//!   resource the pod requests;
//! - TargetPod UpdatePodScaleDown: the pod's own request going down;
//! - DeviceClass Add|Update: a class may now serve an extended resource the
//!   pod requests (kube-scheduler compares the class's
//!   `extendedResourceName` before and after; placer's class events carry
//!   the name only, so every pod that requests such a resource is moved).
//!
//! Not registered: the scale-up events and the node checks of pods whose
//! in-place resize is deferred (placer does not keep that status).

use std::sync::{Arc, LazyLock};

use super::NodeResourcesFit;
use crate::cache::ClusterState;
use crate::cache::events::kinds;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, queue_if,
};
use crate::k8s::resource_names::is_dra_extended_resource_name;
use crate::objects::{NodeInfo, PodInfo, Resources};

/// A cluster without pods: a node's own size, as kube-scheduler's `isFit`
/// builds an empty `NodeInfo` around the node.
static NOTHING_PLACED: LazyLock<ClusterState> = LazyLock::new(ClusterState::default);

impl EnqueueExtensions for NodeResourcesFit {
    fn events_to_register(&self) -> Vec<EventHint> {
        let fit = Arc::new(self.clone());
        vec![
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::DELETE,
                |_, change| {
                    let Some((Some(deleted), _)) = change.pods() else {
                        return QueueingHint::Queue;
                    };
                    queue_if(is_placed(deleted))
                },
            ),
            EventHint::when(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE,
                move |pod, change| fit.node_change_may_help(pod, change),
            ),
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::UPDATE_POD_SCALE_DOWN,
                scale_down_may_help,
            ),
            EventHint::always(EventResource::TargetPod, ActionType::UPDATE_POD_SCALE_DOWN),
            EventHint::when(
                EventResource::Kind(kinds::DEVICE_CLASS),
                ActionType::ADD | ActionType::UPDATE,
                |pod, _| {
                    queue_if(
                        pod.spec
                            .requests
                            .scalar
                            .iter()
                            .any(|(name, &q)| q > 0 && is_dra_extended_resource_name(name)),
                    )
                },
            ),
        ]
    }
}

impl NodeResourcesFit {
    /// kube-scheduler's `isSchedulableAfterNodeChange`: an added node must
    /// fit the pod when empty; an updated one must also have grown in a
    /// resource the pod requests, which is checked first (it allocates
    /// nothing).
    fn node_change_may_help(&self, pod: &PodInfo, change: &Change) -> QueueingHint {
        let Some((old, Some(new))) = change.nodes() else {
            return QueueingHint::Queue;
        };
        if old.is_some_and(|old| !grew_for(&pod.spec.requests, &old.allocatable, &new.allocatable))
        {
            return QueueingHint::Skip;
        }
        queue_if(self.fits_empty(pod, new))
    }

    /// Whether `pod` fits `node` with nothing placed on it, by this
    /// plugin's own PreFilter and Filter (ignored resources included).
    fn fits_empty(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        let mut state = CycleState::new();
        self.pre_filter(&mut state, pod, &NOTHING_PLACED)
            .is_success()
            && self.filter(&state, pod, node, &NOTHING_PLACED).is_success()
    }
}

/// Bound to a node or nominated to one: its requests counted somewhere.
fn is_placed(pod: &PodInfo) -> bool {
    pod.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || pod.preemption.nominated_node.is_some()
}

/// kube-scheduler's `haveAnyRequestedResourcesIncreased`: the node takes
/// more pods, or has more of a resource the pod requests.
fn grew_for(requests: &Resources, before: &Resources, after: &Resources) -> bool {
    after.pods > before.pods || any_requested(requests, after, before)
}

/// kube-scheduler's `haveEnoughRelevantResourcesDecreased`: a placed pod
/// requests less of a resource the waiting pod requests.
fn scale_down_may_help(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(before), Some(after))) = change.pods() else {
        return QueueingHint::Queue;
    };
    if after.node_name.as_deref().is_none_or(str::is_empty) {
        return QueueingHint::Skip;
    }
    queue_if(any_requested(
        &pod.spec.requests,
        &before.spec.counted,
        &after.spec.counted,
    ))
}

/// True when `more` exceeds `less` in a resource `requests` asks for.
fn any_requested(requests: &Resources, more: &Resources, less: &Resources) -> bool {
    let basic = [
        (requests.milli_cpu, more.milli_cpu, less.milli_cpu),
        (requests.memory, more.memory, less.memory),
        (
            requests.ephemeral_storage,
            more.ephemeral_storage,
            less.ephemeral_storage,
        ),
    ];
    basic.iter().any(|&(r, m, l)| r > 0 && m > l)
        || requests.scalar.iter().any(|(name, &r)| {
            let amount = |of: &Resources| of.scalar.get(name).copied().unwrap_or(0);
            r > 0 && amount(more) > amount(less)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::NodeResourcesFitArgs;
    use crate::plugins::test_support::{
        PodBuilder, hint, node_added, node_updated, pod_event, res, target_pod_updated,
    };

    const GPU: &str = "example.com/gpu";

    fn plugin() -> NodeResourcesFit {
        NodeResourcesFit::new(&NodeResourcesFitArgs::default())
    }

    fn pod(node: Option<&str>, requests: &[(&str, &str)]) -> PodInfo {
        PodBuilder::new("p").on(node).requests(requests).build()
    }

    /// A node with room for 32 pods and `allocatable`.
    fn node(allocatable: &[(&str, &str)]) -> NodeInfo {
        let mut list = vec![("pods", "32")];
        list.extend_from_slice(allocatable);
        NodeInfo {
            allocatable: res(&list),
            ..NodeInfo::new("n", Vec::<(String, String)>::new())
        }
    }

    /// Cases of kube-scheduler's `Test_isSchedulableAfterNodeChange` (`fit_test.go`).
    #[test]
    fn a_node_that_would_fit_the_pod_empty_and_grew_for_it_queues_it() {
        let fit = plugin();
        let waiting = pod(None, &[("memory", "2"), (GPU, "1")]);
        let hint = |event| hint(&fit, &waiting, event);
        assert_eq!(
            hint(node_added(node(&[("memory", "1"), (GPU, "1")]))),
            QueueingHint::Skip,
            "too small"
        );
        assert_eq!(
            hint(node_added(node(&[
                ("memory", "4"),
                ("example.com/other", "1")
            ]))),
            QueueingHint::Skip,
            "without the resource"
        );
        assert_eq!(
            hint(node_added(node(&[("memory", "4"), (GPU, "2")]))),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(node_updated(
                node(&[("memory", "2"), (GPU, "2")]),
                node(&[("memory", "2"), (GPU, "1"), ("example.com/other", "2")])
            )),
            QueueingHint::Skip,
            "unrelated change"
        );
        assert_eq!(
            hint(node_updated(
                node(&[("memory", "2"), (GPU, "1")]),
                node(&[("memory", "2"), (GPU, "2")])
            )),
            QueueingHint::Queue,
            "a requested resource grew"
        );
        assert_eq!(
            hint(node_updated(
                node(&[("memory", "4"), (GPU, "2")]),
                node(&[("memory", "1"), (GPU, "2")])
            )),
            QueueingHint::Skip,
            "from suitable to unsuitable"
        );
        assert_eq!(
            hint(node_updated(
                node(&[("memory", "1"), (GPU, "2")]),
                node(&[("memory", "4"), (GPU, "2")])
            )),
            QueueingHint::Queue,
            "from unsuitable to suitable"
        );
    }

    #[test]
    fn ignored_resources_do_not_keep_a_fitting_node_from_queueing_the_pod() {
        let args: NodeResourcesFitArgs =
            serde_yaml_ng::from_str("ignoredResources: [example.com/gpu]").unwrap();
        let fit = NodeResourcesFit::new(&args);
        let waiting = pod(None, &[("memory", "2"), (GPU, "1")]);
        let event = node_added(node(&[("memory", "4")]));
        assert_eq!(hint(&fit, &waiting, event), QueueingHint::Queue);
    }

    /// Cases of `Test_isSchedulableAfterAssignedPodDelete`.
    #[test]
    fn a_placed_pod_deleted_queues_the_pod() {
        let waiting = pod(None, &[("cpu", "1")]);
        let deleted = |p: PodInfo| {
            hint(
                &plugin(),
                &waiting,
                pod_event(EventResource::AssignedPod, Some(p), None),
            )
        };
        assert_eq!(
            deleted(pod(Some("n"), &[("cpu", "1")])),
            QueueingHint::Queue
        );
        assert_eq!(deleted(pod(None, &[("cpu", "1")])), QueueingHint::Skip);
        let mut nominated = pod(None, &[("cpu", "2")]);
        nominated.preemption.nominated_node = Some("n".into());
        assert_eq!(deleted(nominated), QueueingHint::Queue);
    }

    /// Cases of `Test_isSchedulableAfterAssignedPodScaleDown` and
    /// `Test_isSchedulableAfterTargetPodScaleDown`.
    #[test]
    fn a_scale_down_of_a_requested_resource_queues_the_pod() {
        let waiting = pod(None, &[("cpu", "1")]);
        let scaled = |before: PodInfo, after: PodInfo| {
            hint(
                &plugin(),
                &waiting,
                pod_event(EventResource::AssignedPod, Some(before), Some(after)),
            )
        };
        assert_eq!(
            scaled(pod(None, &[("cpu", "2")]), pod(None, &[("cpu", "1")])),
            QueueingHint::Skip,
            "another unscheduled pod"
        );
        assert_eq!(
            scaled(
                pod(Some("n"), &[("memory", "2")]),
                pod(Some("n"), &[("memory", "1")])
            ),
            QueueingHint::Skip,
            "a resource the pod does not request"
        );
        assert_eq!(
            scaled(
                pod(Some("n"), &[("cpu", "2")]),
                pod(Some("n"), &[("cpu", "1")])
            ),
            QueueingHint::Queue
        );
        let smaller = pod(None, &[("cpu", "500m")]);
        let event = target_pod_updated(waiting.clone(), smaller.clone());
        assert_eq!(hint(&plugin(), &smaller, event), QueueingHint::Queue);
    }
}
