//! VolumeRestrictions: volumes two pods may not share (design §5.2).
//! kube-scheduler v1.37's `volumerestrictions` plugin:
//!
//! - in-line disks: a GCE PD (unless both mounts are read-only), an AWS EBS
//!   volume, an ISCSI IQN (unless both read-only) or an RBD image with a
//!   common monitor (unless both read-only) already used by a pod on the
//!   node rejects it ([`ERR_DISK_CONFLICT`], unschedulable: evicting the
//!   other pod helps);
//! - a `ReadWriteOncePod` claim already used by any assigned pod rejects
//!   every node ([`ERR_RWOP_CONFLICT`], unschedulable: preemption may evict
//!   the user, which the PreFilter extensions account for).
//!
//! PreFilter reads the pod's `persistentVolumeClaim` claims (a missing one
//! is `persistentvolumeclaim "x" not found`, unresolvable) and skips pods
//! with neither an in-line disk nor a claim in use.
//!
//! Queueing hints: an assigned pod deleted in the pod's namespace that held
//! a conflicting disk or one of its claims; Node Add; a claim of the pod
//! added.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::cache::events::kinds;
use crate::framework::queueing::claim_of_pod;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterExtensions, PreFilterPlugin,
    Status, queue_if,
};
use crate::objects::volume::ClaimInfo;
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "VolumeRestrictions";

/// kube-scheduler's `ErrReasonDiskConflict`.
pub const ERR_DISK_CONFLICT: &str = "node(s) had no available disk";
/// kube-scheduler's `ErrReasonReadWriteOncePodConflict`.
pub const ERR_RWOP_CONFLICT: &str = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// VolumeRestrictions takes no arguments (any key is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeRestrictionsArgs {}

impl crate::framework::CacheNeeds for VolumeRestrictionsArgs {}

/// The plugin.
pub struct VolumeRestrictions;

impl VolumeRestrictions {
    /// Builds the plugin.
    pub fn new(_: &VolumeRestrictionsArgs) -> Self {
        VolumeRestrictions
    }
}

crate::plugin!(
    VolumeRestrictions,
    NAME,
    [
        pre_filter,
        pre_filter_extensions,
        filter,
        enqueue_extensions
    ]
);

/// PreFilter's state (kube-scheduler's `preFilterState`).
#[derive(Debug, Clone, PartialEq)]
struct RwopState {
    /// The pod's `ReadWriteOncePod` claims, by name.
    claims: BTreeSet<String>,
    /// How many uses of them by other pods count (preemption's AddPod and
    /// RemovePod move it; any use rejects).
    in_use: i64,
}

impl RwopState {
    /// Uses of the claims by `other` (`conflictingPVCRefCountForPod`; by
    /// claim name, as kube-scheduler counts them).
    fn uses_by(&self, other: &PodInfo) -> i64 {
        other
            .spec
            .pvc_claims
            .iter()
            .filter(|c| !c.ephemeral && self.claims.contains(&c.name))
            .count() as i64
    }
}

/// Whether an assigned pod uses claim `namespace/name` (the snapshot's
/// `IsPVCUsedByPods`).
fn claim_in_use(cluster: &ClusterState, namespace: &str, name: &str) -> bool {
    cluster.pods().any(|p| {
        p.namespace == namespace
            && p.spec
                .pvc_claims
                .iter()
                .any(|c| !c.ephemeral && c.name == name)
    })
}

/// Whether `pod`'s in-line disks conflict with `other`'s (`satisfyVolumeConflicts`).
fn disks_conflict(pod: &PodInfo, other: &PodInfo) -> bool {
    pod.spec
        .inline_disks
        .iter()
        .filter(|d| d.needs_restrictions_check())
        .any(|d| other.spec.inline_disks.iter().any(|o| d.conflicts_with(o)))
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let needs_check = pod
            .spec
            .inline_disks
            .iter()
            .any(|d| d.needs_restrictions_check());
        let mut claims = BTreeSet::new();
        for want in pod.spec.pvc_claims.iter().filter(|c| !c.ephemeral) {
            let key = format!("{}/{}", pod.namespace, want.name);
            let Some(claim) = cluster.objects::<ClaimInfo>().get(&key) else {
                return Status::unresolvable(format!(
                    "persistentvolumeclaim {:?} not found",
                    want.name
                ));
            };
            if claim.read_write_once_pod() {
                claims.insert(claim.name.clone());
            }
        }
        let in_use = claims
            .iter()
            .filter(|c| claim_in_use(cluster, &pod.namespace, c))
            .count() as i64;
        if !needs_check && in_use == 0 {
            return Status::skip("no in-line disk and no ReadWriteOncePod claim in use");
        }
        state.write(RwopState { claims, in_use });
        Status::success()
    }
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        to_add: &PodInfo,
        _: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        adjust(state, to_add, 1)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        to_remove: &PodInfo,
        _: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        adjust(state, to_remove, -1)
    }
}

/// `updateWithPod`.
fn adjust(state: &mut CycleState, other: &PodInfo, sign: i64) -> Status {
    match state.modify::<RwopState>() {
        Some(s) => {
            s.in_use += sign * s.uses_by(other);
            Status::success()
        }
        None => Status::error(format!("cannot read \"PreFilter{NAME}\" from cycleState")),
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        if cluster
            .pods_on(&node.name)
            .any(|other| disks_conflict(pod, other))
        {
            return Status::unschedulable(ERR_DISK_CONFLICT);
        }
        match state.from_pre_filter::<RwopState>() {
            Err(missing) => missing,
            Ok(s) if s.in_use > 0 => Status::unschedulable(ERR_RWOP_CONFLICT),
            Ok(_) => Status::success(),
        }
    }
}

impl EnqueueExtensions for VolumeRestrictions {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::DELETE,
                deleted_pod_may_help,
            ),
            EventHint::always(EventResource::Node, ActionType::ADD),
            EventHint::when(
                EventResource::Kind(kinds::PERSISTENT_VOLUME_CLAIM),
                ActionType::ADD,
                |pod, change| claim_of_pod(pod, change, false),
            ),
        ]
    }
}

/// `isSchedulableAfterAssignedPodDeleted`: the deleted pod, in the pod's
/// namespace, held a conflicting disk or one of the pod's claims.
fn deleted_pod_may_help(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(deleted), _)) = change.pods() else {
        return QueueingHint::Queue;
    };
    if deleted.namespace != pod.namespace {
        return QueueingHint::Skip;
    }
    queue_if(
        disks_conflict(pod, deleted)
            || deleted.spec.pvc_claims.iter().any(|d| {
                !d.ephemeral
                    && pod
                        .spec
                        .pvc_claims
                        .iter()
                        .any(|c| !c.ephemeral && c.name == d.name)
            }),
    )
}

#[cfg(test)]
mod tests;
