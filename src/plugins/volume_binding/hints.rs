//! VolumeBinding's queueing hints, as kube-scheduler v1.37's `EventsToRegister` and its
//! `isSchedulableAfter…` functions (`volume_binding.go`): a class added or its allowed
//! topologies changed; one of the pod's claims added or updated; any volume added or updated; a
//! node added or relabelled; a CSINode added or its migrated plugins changed; a CSIDriver of one
//! of the pod's in-line CSI volumes no longer publishing capacity; a CSIStorageCapacity added or
//! grown. A change of another type than the kind's record (a wildcard) always queues.

use super::VolumeBinding;
use crate::cache::events::kinds;
use crate::framework::queueing::claim_of_pod;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint, queue_if};
use crate::framework::{EnqueueExtensions, EventHint};
use crate::objects::PodInfo;
use crate::objects::csi::{CsiDriverInfo, CsiNodeInfo, StorageCapacityInfo};
use crate::objects::volume::StorageClassInfo;

impl EnqueueExtensions for VolumeBinding {
    fn events_to_register(&self) -> Vec<EventHint> {
        let any_change = ActionType::ADD | ActionType::UPDATE;
        vec![
            EventHint::when(
                EventResource::Kind(kinds::STORAGE_CLASS),
                any_change,
                class_may_help,
            ),
            EventHint::when(
                EventResource::Kind(kinds::PERSISTENT_VOLUME_CLAIM),
                any_change,
                |pod, change| claim_of_pod(pod, change, true),
            ),
            EventHint::always(EventResource::Kind(kinds::PERSISTENT_VOLUME), any_change),
            EventHint::always(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            EventHint::when(
                EventResource::Kind(kinds::CSI_NODE),
                any_change,
                csi_node_may_help,
            ),
            EventHint::when(
                EventResource::Kind(kinds::CSI_DRIVER),
                ActionType::UPDATE,
                csi_driver_may_help,
            ),
            EventHint::when(
                EventResource::Kind(kinds::CSI_STORAGE_CAPACITY),
                any_change,
                capacity_may_help,
            ),
        ]
    }
}

/// `isSchedulableAfterStorageClassChange`: a new class, or its allowed topologies changed.
fn class_may_help(_: &PodInfo, change: &Change) -> QueueingHint {
    match change.objects::<StorageClassInfo>() {
        Some((Some(old), Some(new))) => queue_if(old.allowed_topologies != new.allowed_topologies),
        _ => QueueingHint::Queue,
    }
}

/// `isSchedulableAfterCSINodeChange`: a new CSINode, or its migrated plugins changed.
fn csi_node_may_help(_: &PodInfo, change: &Change) -> QueueingHint {
    match change.objects::<CsiNodeInfo>() {
        Some((Some(old), Some(new))) => queue_if(old.migrated_plugins != new.migrated_plugins),
        _ => QueueingHint::Queue,
    }
}

/// `isSchedulableAfterCSIDriverChange`: the driver of one of the pod's in-line CSI volumes
/// stopped publishing storage capacity.
fn csi_driver_may_help(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(old), Some(new))) = change.objects::<CsiDriverInfo>() else {
        return QueueingHint::Queue;
    };
    queue_if(
        old.storage_capacity
            && !new.storage_capacity
            && pod.spec.inline_csi_drivers.contains(&new.name),
    )
}

/// `isSchedulableAfterCSIStorageCapacityChange`: a new capacity object, or its limit
/// (`maximumVolumeSize`, else `capacity`) appeared or grew.
fn capacity_may_help(_: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(old), Some(new))) = change.objects::<StorageCapacityInfo>() else {
        return QueueingHint::Queue;
    };
    let limit = |c: &StorageCapacityInfo| c.maximum_volume_size.or(c.capacity);
    queue_if(match (limit(old), limit(new)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(old), Some(new)) => new > old,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::TopologySelectorTerm;

    use super::*;
    use crate::framework::queueing::Observed;
    use crate::objects::NodeInfo;
    use crate::objects::pod::{PodSpecInfo, VolumeClaim};
    use crate::objects::volume::ClaimInfo;
    use crate::plugins::test_support::{PodBuilder, hint, node_added, node_updated, object_event};

    fn pod() -> PodInfo {
        PodBuilder::new("p")
            .namespace("ns")
            .claims(&[VolumeClaim::named("data")])
            .build()
    }

    /// Whether the event moves [`pod`] (or `p`) when VolumeBinding rejected it.
    fn moves(event: Observed) -> bool {
        moves_pod(&pod(), event)
    }

    fn moves_pod(p: &PodInfo, event: Observed) -> bool {
        hint(&VolumeBinding::default(), p, event) == QueueingHint::Queue
    }

    #[test]
    fn classes_move_the_pod_when_added_or_their_topologies_change() {
        let class = StorageClassInfo {
            name: "fast".into(),
            ..Default::default()
        };
        let zoned = StorageClassInfo {
            allowed_topologies: vec![
                serde_json::from_value::<TopologySelectorTerm>(serde_json::json!(
                    {"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}))
                .unwrap(),
            ],
            ..class.clone()
        };
        let other_provisioner = StorageClassInfo {
            provisioner: "other".into(),
            ..class.clone()
        };
        let sc = kinds::STORAGE_CLASS;
        assert!(moves(object_event(sc, None, Some(class.clone()))));
        assert!(moves(object_event(sc, Some(class.clone()), Some(zoned))));
        assert!(
            !moves(object_event(sc, Some(class), Some(other_provisioner))),
            "the same allowed topologies cannot help"
        );
    }

    #[test]
    fn claims_move_their_pods_only() {
        let claim = |namespace: &str, name: &str| ClaimInfo {
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        };
        let pvc = kinds::PERSISTENT_VOLUME_CLAIM;
        assert!(moves(object_event(pvc, None, Some(claim("ns", "data")))));
        assert!(moves(object_event(
            pvc,
            Some(claim("ns", "data")),
            Some(claim("ns", "data"))
        )));
        assert!(!moves(object_event(pvc, None, Some(claim("ns", "other")))));
        assert!(!moves(object_event(
            pvc,
            None,
            Some(claim("elsewhere", "data"))
        )));
    }

    #[test]
    fn nodes_move_the_pod_when_added_or_relabelled_not_when_tainted() {
        let node = NodeInfo::new("n", [("zone", "a")]);
        assert!(moves(node_added(node.clone())));
        assert!(moves(node_updated(
            node.clone(),
            NodeInfo::new("n", [("zone", "b")])
        )));
        let mut cordoned = node.clone();
        cordoned.unschedulable = true;
        assert!(
            !moves(node_updated(cordoned, node)),
            "kube-scheduler registers no taint event"
        );
    }

    #[test]
    fn csi_nodes_move_the_pod_when_added_or_their_migrated_plugins_change() {
        let plain = CsiNodeInfo {
            name: "n".into(),
            ..Default::default()
        };
        let migrated = CsiNodeInfo {
            migrated_plugins: Some("kubernetes.io/aws-ebs".into()),
            ..plain.clone()
        };
        let limited = CsiNodeInfo {
            drivers: [("ebs.csi.aws.com".to_string(), Some(3))].into(),
            ..plain.clone()
        };
        let csi_node = kinds::CSI_NODE;
        assert!(moves(object_event(csi_node, None, Some(plain.clone()))));
        assert!(moves(object_event(
            csi_node,
            Some(plain.clone()),
            Some(migrated)
        )));
        assert!(
            !moves(object_event(csi_node, Some(plain), Some(limited))),
            "limits are NodeVolumeLimits' business"
        );
    }

    #[test]
    fn csi_drivers_move_pods_with_their_inline_volumes_when_capacity_is_no_longer_published() {
        let publishing = CsiDriverInfo {
            name: "csi.example.com".into(),
            storage_capacity: true,
            ..Default::default()
        };
        let quiet = CsiDriverInfo {
            storage_capacity: false,
            ..publishing.clone()
        };
        let mut inline = pod();
        inline.spec = std::sync::Arc::new(PodSpecInfo {
            inline_csi_drivers: vec!["csi.example.com".into()],
            ..(*inline.spec).clone()
        });
        let driver = kinds::CSI_DRIVER;
        let stopped = || object_event(driver, Some(publishing.clone()), Some(quiet.clone()));
        assert!(moves_pod(&inline, stopped()));
        assert!(!moves(stopped()), "no in-line volume of the driver");
        assert!(!moves_pod(
            &inline,
            object_event(driver, Some(quiet.clone()), Some(publishing))
        ));
        assert!(
            !moves_pod(&inline, object_event(driver, None, Some(quiet))),
            "adds are not registered"
        );
    }

    #[test]
    fn capacities_move_the_pod_when_added_or_grown() {
        let cap = |capacity: Option<i64>, maximum: Option<i64>| StorageCapacityInfo {
            namespace: "kube-system".into(),
            name: "c".into(),
            capacity,
            maximum_volume_size: maximum,
            ..Default::default()
        };
        let grew = |old, new| {
            moves(object_event(
                kinds::CSI_STORAGE_CAPACITY,
                Some(old),
                Some(new),
            ))
        };
        assert!(moves(object_event(
            kinds::CSI_STORAGE_CAPACITY,
            None,
            Some(cap(None, None))
        )));
        assert!(grew(cap(Some(1), None), cap(Some(2), None)));
        assert!(grew(cap(None, None), cap(Some(1), None)));
        assert!(!grew(cap(Some(2), None), cap(Some(1), None)));
        assert!(
            !grew(cap(Some(1), Some(5)), cap(Some(9), Some(5))),
            "the maximum volume size is the limit when set"
        );
        assert!(!grew(cap(Some(1), None), cap(None, None)));
    }
}
