//! NodeVolumeLimits: a node takes no more volumes of a CSI driver than its
//! CSINode allows (design §5.2). kube-scheduler v1.37's `nodevolumelimits`
//! (`CSILimits`):
//!
//! - each volume is counted once by `driver/handle`: a bound claim by its
//!   volume's CSI source (or the driver an in-tree EBS, GCE PD, Azure Disk,
//!   Cinder or Portworx volume migrated to, when the node has a CSINode); an
//!   unbound claim by its class's provisioner, as a volume of its own; an
//!   in-line EBS, GCE PD, Azure Disk or Portworx disk by its migrated driver;
//! - on a node, the pod's new volumes of a driver plus the ones its pods and
//!   its VolumeAttachments (of CSI volumes) already hold must not exceed the
//!   driver's `allocatable.count` ([`ERR_REASON`], unschedulable);
//! - with `VolumeLimitScaling` (on by default in v1.37): a driver whose
//!   CSIDriver sets `preventPodSchedulingIfMissing` must be on the node's
//!   CSINode ("\<driver\> CSI driver is not installed on the node").
//!
//! A claim of the pod that does not exist rejects with kube-scheduler's
//! `looking up PVC ns/x: ...` (unresolvable). Pods without claims or
//! counted in-line disks skip the plugin.
//!
//! Queueing hints: CSINode Add and Update (placer's events carry the key,
//! so an update queues without comparing limits), an assigned pod with
//! volumes deleted, a claim of the pod added, a VolumeAttachment deleted
//! when the pod has claims or counted in-line disks.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::cache::events::kinds;
use crate::framework::queueing::claim_of_pod;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, Status, queue_if,
};
use crate::objects::csi::{AttachmentInfo, CsiDriverInfo, CsiNodeInfo, migrated_driver};
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NodeVolumeLimits";

/// kube-scheduler's `ErrReasonMaxVolumeCountExceeded`.
pub const ERR_REASON: &str = "node(s) exceed max volume count";

/// Stands in for kube-scheduler's random prefix of an unbound claim's
/// handle: unique per claim, never equal to a real handle.
const UNBOUND_PREFIX: &str = "placer-unbound-claim";

/// NodeVolumeLimits takes no arguments (any key is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeVolumeLimitsArgs {}

impl crate::framework::CacheNeeds for NodeVolumeLimitsArgs {}

/// The plugin.
pub struct NodeVolumeLimits;

impl NodeVolumeLimits {
    /// Builds the plugin.
    pub fn new(_: &NodeVolumeLimitsArgs) -> Self {
        NodeVolumeLimits
    }
}

crate::plugin!(
    NodeVolumeLimits,
    NAME,
    [pre_filter, filter, enqueue_extensions]
);

/// PreFilter's state: the CSI volumes attached per node (the VolumeAttachment
/// index kube-scheduler keeps), `driver/handle` to driver.
struct Attached(HashMap<String, Vec<(String, String)>>);

/// Volumes by `driver/handle`, to the driver.
type Volumes = BTreeMap<String, String>;

/// Whether kube-scheduler's `PreFilter` keeps the pod.
fn has_counted_volumes(pod: &PodInfo) -> bool {
    !pod.spec.pvc_claims.is_empty()
        || pod
            .spec
            .inline_disks
            .iter()
            .any(|d| d.attach_source().is_some())
}

/// kube-scheduler's `filterAttachableVolumes`: adds `pod`'s volumes to
/// `out`. A missing claim is an error for the pod being placed only.
fn attachable(
    pod: &PodInfo,
    csi_node: Option<&CsiNodeInfo>,
    new_pod: bool,
    cluster: &ClusterState,
    out: &mut Volumes,
) -> Result<(), Status> {
    for want in &pod.spec.pvc_claims {
        let key = format!("{}/{}", pod.namespace, want.name);
        let Some(claim) = cluster.objects::<ClaimInfo>().get(&key) else {
            if new_pod {
                return Err(Status::unresolvable(format!(
                    "looking up PVC {key}: persistentvolumeclaim {:?} not found",
                    want.name
                )));
            }
            continue;
        };
        if want.ephemeral && claim.controller_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(Status::error(format!(
                "PVC {key} was not created for pod {}/{} (pod is not owner)",
                pod.namespace, pod.name
            )));
        }
        if let Some((driver, handle)) = claim_driver(claim, csi_node, cluster) {
            out.insert(format!("{driver}/{handle}"), driver);
        }
    }
    if csi_node.is_some() {
        for source in pod
            .spec
            .inline_disks
            .iter()
            .filter_map(|d| d.attach_source())
        {
            out.insert(
                format!("{}/{}", source.driver, source.handle),
                source.driver,
            );
        }
    }
    Ok(())
}

/// `getCSIDriverInfo`: the driver and handle of a claim's volume, or of the
/// volume its class would provision.
fn claim_driver(
    claim: &ClaimInfo,
    csi_node: Option<&CsiNodeInfo>,
    cluster: &ClusterState,
) -> Option<(String, String)> {
    let volume = claim
        .volume_name
        .as_deref()
        .and_then(|v| cluster.objects::<VolumeInfo>().get(v));
    let Some(volume) = volume else {
        return class_driver(claim, csi_node, cluster);
    };
    let source = volume.attach.as_ref()?;
    // An in-tree volume counts under its CSI driver where CSINode exists.
    if source.in_tree.is_some() && csi_node.is_none() {
        return None;
    }
    Some((source.driver.clone(), source.handle.clone()))
}

/// `getCSIDriverInfoFromSC`.
fn class_driver(
    claim: &ClaimInfo,
    csi_node: Option<&CsiNodeInfo>,
    cluster: &ClusterState,
) -> Option<(String, String)> {
    if claim.storage_class.is_empty() {
        return None;
    }
    let class = cluster
        .objects::<StorageClassInfo>()
        .get(&claim.storage_class)?;
    let handle = format!("{UNBOUND_PREFIX}-{}/{}", claim.namespace, claim.name);
    match migrated_driver(&class.provisioner) {
        Some(driver) => csi_node.map(|_| (driver.to_string(), handle)),
        None => Some((class.provisioner.clone(), handle)),
    }
}

/// `checkCSIDriverOnNode`.
fn driver_installed(driver: &str, csi_node: Option<&CsiNodeInfo>, cluster: &ClusterState) -> bool {
    let required = cluster
        .objects::<CsiDriverInfo>()
        .get(driver)
        .is_some_and(|d| d.prevent_scheduling_if_missing);
    !required || csi_node.is_some_and(|n| n.drivers.contains_key(driver))
}

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        if !has_counted_volumes(pod) {
            return Status::skip("no claim and no counted in-line disk");
        }
        let mut by_node: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for a in cluster.objects::<AttachmentInfo>().iter() {
            if a.attacher.is_empty() {
                continue;
            }
            let volume = a
                .volume
                .as_deref()
                .and_then(|v| cluster.objects::<VolumeInfo>().get(v));
            // Only CSI volumes count: kube-scheduler skips a PV without `spec.csi`.
            let Some(handle) = volume
                .and_then(|v| v.attach.as_ref())
                .filter(|s| s.in_tree.is_none())
                .map(|s| &s.handle)
            else {
                continue;
            };
            by_node
                .entry(a.node.clone())
                .or_default()
                .push((format!("{}/{handle}", a.attacher), a.attacher.clone()));
        }
        state.write(Attached(by_node));
        Status::success()
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let Attached(attachments) = match state.from_pre_filter::<Attached>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        let csi_node = cluster.objects::<CsiNodeInfo>().get(&node.name);
        let mut new = Volumes::new();
        if let Err(s) = attachable(pod, csi_node, true, cluster, &mut new) {
            return s;
        }
        if new.is_empty() {
            return Status::success();
        }
        if let Some(driver) = new
            .values()
            .find(|d| !driver_installed(d, csi_node, cluster))
        {
            return Status::unschedulable(format!(
                "{driver} CSI driver is not installed on the node"
            ));
        }
        let limits: HashMap<&str, i32> = csi_node.map(|n| n.limits().collect()).unwrap_or_default();
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = Volumes::new();
        for other in cluster.pods_on(&node.name) {
            if let Err(s) = attachable(other, csi_node, false, cluster, &mut attached) {
                return s;
            }
        }
        let mut counts: HashMap<&str, i64> = HashMap::new();
        for (unique, driver) in &attached {
            new.remove(unique);
            *counts.entry(driver).or_default() += 1;
        }
        for (unique, driver) in attachments.get(&node.name).into_iter().flatten() {
            if !attached.contains_key(unique) {
                *counts.entry(driver).or_default() += 1;
            }
        }
        let mut wanted: HashMap<&str, i64> = HashMap::new();
        for driver in new.values() {
            *wanted.entry(driver).or_default() += 1;
        }
        for (driver, count) in wanted {
            if let Some(limit) = limits.get(driver)
                && counts.get(driver).copied().unwrap_or(0) + count > i64::from(*limit)
            {
                return Status::unschedulable(ERR_REASON);
            }
        }
        Status::success()
    }
}

impl EnqueueExtensions for NodeVolumeLimits {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::always(EventResource::Kind(kinds::CSI_NODE), ActionType::ADD),
            EventHint::when(
                EventResource::Kind(kinds::CSI_NODE),
                ActionType::UPDATE,
                limit_grew,
            ),
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::DELETE,
                deleted_pod_may_help,
            ),
            EventHint::when(
                EventResource::Kind(kinds::PERSISTENT_VOLUME_CLAIM),
                ActionType::ADD,
                |pod, change| claim_of_pod(pod, change, true),
            ),
            EventHint::when(
                EventResource::Kind(kinds::VOLUME_ATTACHMENT),
                ActionType::DELETE,
                |pod, _| queue_if(has_counted_volumes(pod)),
            ),
        ]
    }
}

/// `isSchedulableAfterCSINodeUpdated`: a driver's limit grew (no limit
/// counts as 0, as kube-scheduler compares them).
fn limit_grew(_: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(old), Some(new))) = change.objects::<CsiNodeInfo>() else {
        return QueueingHint::Queue;
    };
    let limit = |node: &CsiNodeInfo, driver: &str| node.drivers.get(driver).copied().flatten();
    queue_if(
        new.drivers
            .keys()
            .any(|d| limit(new, d).unwrap_or(0) > limit(old, d).unwrap_or(0)),
    )
}

/// `isSchedulableAfterAssignedPodDeleted`: the deleted pod was placed and
/// had a volume that counts.
fn deleted_pod_may_help(_: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(deleted), _)) = change.pods() else {
        return QueueingHint::Queue;
    };
    let placed = deleted.node_name.is_some() || deleted.preemption.nominated_node.is_some();
    queue_if(placed && has_counted_volumes(deleted))
}

#[cfg(test)]
mod tests;
