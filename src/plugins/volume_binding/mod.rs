//! VolumeBinding: a pod's PersistentVolumeClaims must exist and be bound, and
//! the node must be one their volumes can be attached to (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/volumebinding` for claims that are
//! already bound, with its messages:
//!
//! - PreFilter: every claim must exist (`persistentvolumeclaim "x" not
//!   found`), not be lost or being deleted, and belong to the pod if it is a
//!   generic ephemeral volume's; a claim that is not bound yet and whose
//!   StorageClass binds immediately rejects the pod ("pod has unbound
//!   immediate PersistentVolumeClaims") until the PV controller binds it.
//! - Filter: each bound claim's PersistentVolume must exist and its
//!   `nodeAffinity` must select the node ("node(s) didn't match
//!   PersistentVolume's node affinity").
//!
//! Not done here: claims of a `WaitForFirstConsumer` class that are still
//! unbound. kube-scheduler picks a matching volume or provisions one for the
//! chosen node and binds it before the pod (PreBind); placer cannot yet, so it
//! rejects such pods in PreFilter, naming the claim, rather than place them
//! where their volume may never follow. Storage capacity is not checked.

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{CycleState, FilterPlugin, PreFilterPlugin, Status};
use crate::objects::Keyed;
use crate::objects::pod::VolumeClaim;
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::node_affinity::RequiredNodeAffinity;

/// Plugin name in the policy.
pub const NAME: &str = "VolumeBinding";

/// PreFilter reason for claims the PV controller has not bound yet.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// Filter reason: a bound volume cannot reach the node.
pub const ERR_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason: a claim is bound to a volume that does not exist.
pub const ERR_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// Start of placer's own reason for `WaitForFirstConsumer` claims still unbound.
pub const REASON_PREFIX: &str =
    "placer cannot bind WaitForFirstConsumer volumes yet (the claim must be bound first)";

/// VolumeBinding takes no arguments yet (any key is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeBindingArgs {}

impl crate::plugins::CacheNeeds for VolumeBindingArgs {}

/// The plugin.
pub struct VolumeBinding;

impl VolumeBinding {
    /// Builds the plugin.
    pub fn new(_: &VolumeBindingArgs) -> Self {
        VolumeBinding
    }
}

crate::plugin!(VolumeBinding, NAME, [pre_filter, filter]);

/// What Filter checks: each bound claim's volume, `None` when it does not exist.
struct BoundVolumes(Vec<Option<RequiredNodeAffinity>>);

/// kube-scheduler's `podHasPVCs` check of one claim.
fn check_claim<'a>(
    pod: &PodInfo,
    want: &VolumeClaim,
    cluster: &'a ClusterState,
) -> Result<&'a ClaimInfo, String> {
    let key = format!("{}/{}", pod.namespace, want.name);
    let Some(claim) = cluster.objects::<ClaimInfo>().get(&key) else {
        return Err(if want.ephemeral {
            format!(
                "waiting for ephemeral volume controller to create the persistentvolumeclaim {:?}",
                want.name
            )
        } else {
            format!("persistentvolumeclaim {:?} not found", want.name)
        });
    };
    if claim.lost {
        return Err(format!(
            "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
            claim.name,
            claim.volume_name.as_deref().unwrap_or("")
        ));
    }
    if claim.deleting {
        return Err(format!(
            "persistentvolumeclaim {:?} is being deleted",
            claim.name
        ));
    }
    if want.ephemeral && claim.controller_uid.as_deref() != Some(pod.uid.as_str()) {
        return Err(format!(
            "PVC {} was not created for pod {}/{} (pod is not owner)",
            claim.key(),
            pod.namespace,
            pod.name
        ));
    }
    Ok(claim)
}

/// Whether an unbound claim waits for its first consumer (`IsDelayBindingMode`).
fn delays_binding(claim: &ClaimInfo, cluster: &ClusterState) -> Result<bool, String> {
    if claim.storage_class.is_empty() {
        return Ok(false);
    }
    match cluster
        .objects::<StorageClassInfo>()
        .get(&claim.storage_class)
    {
        None => Ok(false),
        Some(c) => c.wait_for_first_consumer.ok_or_else(|| {
            format!(
                "VolumeBindingMode not set for StorageClass {:?}",
                claim.storage_class
            )
        }),
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        if pod.spec.pvc_claims.is_empty() {
            return Status::skip("pod has no PersistentVolumeClaims");
        }
        let mut claims = Vec::new();
        for want in &pod.spec.pvc_claims {
            match check_claim(pod, want, cluster) {
                Ok(c) => claims.push(c),
                Err(e) => return Status::unresolvable(e),
            }
        }
        let mut bound = Vec::new();
        let mut waiting = Vec::new();
        let mut immediate = false;
        for claim in claims {
            if claim.fully_bound {
                let volume = claim
                    .volume_name
                    .as_deref()
                    .and_then(|v| cluster.objects::<VolumeInfo>().get(v));
                bound.push(volume.map(|v| match &v.node_affinity {
                    Some(selector) => RequiredNodeAffinity::from_selector(selector),
                    None => RequiredNodeAffinity::anywhere(),
                }));
                continue;
            }
            match delays_binding(claim, cluster) {
                Err(e) => return Status::error(e),
                // A claim pre-bound to a volume counts as immediate.
                Ok(true) if claim.volume_name.is_none() => waiting.push(claim.name.as_str()),
                Ok(_) => immediate = true,
            }
        }
        if immediate {
            return Status::unresolvable(ERR_UNBOUND_IMMEDIATE);
        }
        match waiting.as_slice() {
            [] => {}
            [one] => return Status::unresolvable(format!("{REASON_PREFIX}: claim {one}")),
            many => {
                return Status::unresolvable(format!(
                    "{REASON_PREFIX}: claims {}",
                    many.join(", ")
                ));
            }
        }
        state.write(BoundVolumes(bound));
        Status::success()
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let BoundVolumes(volumes) = match state.from_pre_filter::<BoundVolumes>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        // kube-scheduler stops at the first volume that does not fit.
        for v in volumes {
            match v {
                None => return Status::unresolvable(ERR_PV_NOT_EXIST),
                Some(affinity) if !affinity.matches(node) => {
                    return Status::unresolvable(ERR_NODE_CONFLICT);
                }
                Some(_) => {}
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
