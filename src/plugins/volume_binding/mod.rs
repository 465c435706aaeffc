//! VolumeBinding: a pod's PersistentVolumeClaims must exist and be bound,
//! or be bindable on the node (design §5.2). kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/volumebinding`, with its messages:
//!
//! - PreFilter: every claim must exist (`persistentvolumeclaim "x" not
//!   found`), not be lost or being deleted, and belong to the pod if it is a
//!   generic ephemeral volume's; an unbound claim whose class binds at once
//!   (or that is pre-bound by name) rejects the pod ("pod has unbound
//!   immediate PersistentVolumeClaims") until the PV controller binds it.
//! - Filter ([`find`]): bound claims' volumes must reach the node; each
//!   unbound `WaitForFirstConsumer` claim takes the smallest free static
//!   volume that fits and reaches the node, or is provisioned there when its
//!   class can (a provisioner, allowed topologies, and, when the CSI driver
//!   publishes CSIStorageCapacity, an object with room on the node). A claim
//!   already given a `volume.kubernetes.io/selected-node` only fits there.
//!   Reasons are kube-scheduler's, all of them at once, unresolvable.
//! - Score: with static bindings, how full the chosen volumes are per class
//!   (requested over capacity), else how full the provisioning capacities
//!   are, through the `shape` arg (default: emptier scores higher, as
//!   `StorageCapacityScoring` is on by default in v1.37), averaged over classes.
//! - Reserve ([`bind`]): the chosen static volumes are assumed taken, so the
//!   next pod's Filter does not pick them, and the claims to provision are
//!   assumed to carry the chosen node as `selected-node` (kube-scheduler's
//!   PVC assume cache), so a second pod sharing such a claim fits that node
//!   only, as it will once PreBind's write shows; Unreserve gives both back.
//! - PreBind: writes each static volume's `claimRef` and each provisioned
//!   claim's selected node, then waits (polling once a second) until the PV
//!   controller has bound every claim, at most `bindTimeoutSeconds`.

mod bind;
mod find;
mod hints;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::scoring::{
    MAX_CUSTOM_PRIORITY_SCORE, UtilizationShapePoint, broken_linear, validate_shape,
};
use crate::framework::{
    CycleState, FilterPlugin, NodeScore, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status,
};
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::Keyed;
use crate::objects::pod::VolumeClaim;
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::{NodeInfo, PodInfo};
pub use find::PodVolumes;

/// Plugin name in the policy.
pub const NAME: &str = "VolumeBinding";

/// PreFilter reason for claims the PV controller has not bound yet.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// Filter reason: a bound volume cannot reach the node.
pub const ERR_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason: no static volume and no provisioning for an unbound claim.
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// Filter reason: the driver's published capacity has no room on the node.
pub const ERR_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Filter reason: a claim is bound to a volume that does not exist.
pub const ERR_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// Highest node score.
const MAX_NODE_SCORE: i64 = 100;

/// VolumeBinding's args (kube-scheduler's `VolumeBindingArgs`), strictly parsed.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, try_from = "RawArgs")]
pub struct VolumeBindingArgs {
    /// How long PreBind waits for the PV controller (seconds; 0: no wait).
    pub bind_timeout_seconds: i64,
    /// The score of a utilization, points sorted by utilization.
    pub shape: Vec<UtilizationShapePoint>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    bind_timeout_seconds: Option<i64>,
    shape: Option<Vec<UtilizationShapePoint>>,
}

impl TryFrom<RawArgs> for VolumeBindingArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        let bind_timeout_seconds = r.bind_timeout_seconds.unwrap_or(600);
        if bind_timeout_seconds < 0 {
            return Err(format!(
                "bindTimeoutSeconds: Invalid value: {bind_timeout_seconds}: invalid BindTimeoutSeconds, should not be a negative value"
            ));
        }
        // kube-scheduler's defaulting with StorageCapacityScoring on: an
        // empty shape prefers the emptiest node.
        let shape = match r.shape {
            Some(s) if !s.is_empty() => s,
            _ => default_shape(),
        };
        validate_shape("shape", &shape)?;
        Ok(VolumeBindingArgs {
            bind_timeout_seconds,
            shape,
        })
    }
}

fn default_shape() -> Vec<UtilizationShapePoint> {
    vec![
        UtilizationShapePoint {
            utilization: 0,
            score: MAX_CUSTOM_PRIORITY_SCORE,
        },
        UtilizationShapePoint {
            utilization: 100,
            score: 0,
        },
    ]
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        VolumeBindingArgs {
            bind_timeout_seconds: 600,
            shape: default_shape(),
        }
    }
}

impl crate::framework::CacheNeeds for VolumeBindingArgs {}

/// What Reserve assumed and PreBind has not seen through yet (kube-scheduler's
/// PV and PVC assume caches, for the two fields its Reserve changes).
#[derive(Debug, Clone, Default)]
struct AssumedTable {
    /// Static volumes taken for claims: volume name to the claim's key.
    volumes: HashMap<String, String>,
    /// Claims to be provisioned: the claim's key to the node it is selected
    /// for.
    selected: HashMap<String, String>,
}

type Assumed = Arc<Mutex<AssumedTable>>;

/// The plugin.
pub struct VolumeBinding {
    bind_timeout: std::time::Duration,
    /// The shape as `(utilization, score 0..=100)`.
    shape: Vec<(i64, i64)>,
    assumed: Assumed,
}

impl VolumeBinding {
    /// Builds the plugin.
    pub fn new(args: &VolumeBindingArgs) -> Self {
        let scale = MAX_NODE_SCORE / i64::from(MAX_CUSTOM_PRIORITY_SCORE);
        VolumeBinding {
            bind_timeout: std::time::Duration::from_secs(
                u64::try_from(args.bind_timeout_seconds).unwrap_or(0),
            ),
            shape: args
                .shape
                .iter()
                .map(|p| (i64::from(p.utilization), i64::from(p.score) * scale))
                .collect(),
            assumed: Assumed::default(),
        }
    }
}

impl Default for VolumeBinding {
    fn default() -> Self {
        VolumeBinding::new(&VolumeBindingArgs::default())
    }
}

crate::plugin!(
    VolumeBinding,
    NAME,
    [
        pre_filter,
        filter,
        pre_score,
        score,
        reserve,
        pre_bind,
        enqueue_extensions
    ]
);

/// PreFilter's state: the claims sorted out, and Filter's findings per node.
pub(super) struct ClaimsState {
    /// Bound claims' volumes (`None`: the volume does not exist).
    bound: Vec<Option<RequiredNodeAffinity>>,
    /// Unbound `WaitForFirstConsumer` claims, with the node Reserve assumed
    /// for a claim another pod is having provisioned.
    to_bind: Vec<ClaimInfo>,
    /// The volumes of those claims' classes, by class, by name (listed once
    /// per cycle, as kube-scheduler's PreFilter lists them).
    candidates: HashMap<String, Vec<VolumeInfo>>,
    /// The volumes Reserve assumed for claims, as at PreFilter: volume to
    /// the claim's key.
    assumed: HashMap<String, String>,
    /// What Filter found on each node that fits (Score, Reserve, PreBind).
    by_node: Mutex<HashMap<String, Arc<PodVolumes>>>,
    /// Set by Reserve: nothing to bind on the chosen node.
    all_bound: Mutex<bool>,
}

impl ClaimsState {
    /// Whether `volume` was assumed for a claim other than `claim`.
    fn taken(&self, volume: &VolumeInfo, claim: &ClaimInfo) -> bool {
        self.assumed
            .get(&volume.name)
            .is_some_and(|owner| *owner != claim.key())
    }

    /// What Filter found on `node`.
    pub(super) fn on(&self, node: &str) -> Option<Arc<PodVolumes>> {
        self.by_node.lock().get(node).cloned()
    }
}

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
        let mut to_bind = Vec::new();
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
                Ok(true) if claim.volume_name.is_none() => to_bind.push(claim.clone()),
                Ok(_) => immediate = true,
            }
        }
        if immediate {
            return Status::unresolvable(ERR_UNBOUND_IMMEDIATE);
        }
        let mut candidates: HashMap<String, Vec<VolumeInfo>> = HashMap::new();
        for claim in &to_bind {
            candidates.entry(claim.storage_class.clone()).or_default();
        }
        for v in cluster.objects::<VolumeInfo>().iter() {
            if let Some(list) = candidates.get_mut(&v.storage_class) {
                list.push(v.clone());
            }
        }
        for list in candidates.values_mut() {
            // kube-scheduler walks its cache in no set order; by name is one order.
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
        let AssumedTable {
            volumes: assumed,
            selected,
        } = if to_bind.is_empty() {
            AssumedTable::default()
        } else {
            self.assumed.lock().clone()
        };
        for claim in &mut to_bind {
            if claim.selected_node.is_none() {
                claim.selected_node = selected.get(&claim.key()).cloned();
            }
        }
        state.write(ClaimsState {
            bound,
            to_bind,
            candidates,
            assumed,
            by_node: Mutex::default(),
            all_bound: Mutex::new(false),
        });
        Status::success()
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let claims = match state.from_pre_filter::<ClaimsState>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        match find::find_pod_volumes(claims, node, cluster) {
            Ok(volumes) => {
                claims
                    .by_node
                    .lock()
                    .insert(node.name.clone(), Arc::new(volumes));
                Status::success()
            }
            Err(status) => status,
        }
    }
}

impl PreScorePlugin for VolumeBinding {
    fn pre_score(
        &self,
        _: &mut CycleState,
        _: &PodInfo,
        _: &[&NodeInfo],
        _: &ClusterState,
    ) -> Status {
        // kube-scheduler v1.37 skips only when it has no scorer; with
        // StorageCapacityScoring on (its default) every pod is scored, a pod
        // without claims to bind 0 on every node, and /explain lists that 0
        // as kube-scheduler's scores do.
        Status::success()
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<NodeScore, Status> {
        Ok(self.claims_score(state.read(), node))
    }

    /// A pod without claims (the most common) scores 0 on every node
    /// without a call per node.
    fn score_batch(
        &self,
        state: &CycleState,
        _: &PodInfo,
        nodes: &[&NodeInfo],
        _: &ClusterState,
        scores: &mut [NodeScore],
    ) -> Result<(), Status> {
        match state.read::<ClaimsState>() {
            None => scores.fill(NodeScore::value(0)),
            Some(claims) => {
                for (slot, node) in scores.iter_mut().zip(nodes) {
                    *slot = self.claims_score(Some(claims), node);
                }
            }
        }
        Ok(())
    }
}

impl VolumeBinding {
    /// A node's score: how full binding the pod's claims there leaves the
    /// volumes, with the plan as its note; 0 without claims (`None`:
    /// PreFilter skipped a pod without claims).
    fn claims_score(&self, claims: Option<&ClaimsState>, node: &NodeInfo) -> NodeScore {
        let Some(volumes) = claims.and_then(|c| c.on(&node.name)) else {
            return NodeScore::value(0);
        };
        let score = NodeScore::value(self.utilization_score(&volumes));
        match plan(&volumes) {
            Some(note) => score.with_note(note.into()),
            None => score,
        }
    }
}

/// What binding the pod's claims on a node would do, for `/explain`:
/// `ns/claim -> volume` per static binding, `ns/claim provisioned here`.
fn plan(volumes: &PodVolumes) -> Option<String> {
    let parts: Vec<String> = volumes
        .static_bindings
        .iter()
        .map(|(c, v)| format!("{} -> {}", c.key(), v.name))
        .chain(
            volumes
                .provisions
                .iter()
                .map(|(c, _)| format!("{} provisioned here", c.key())),
        )
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

impl VolumeBinding {
    /// kube-scheduler's volume capacity scorer: per class, requested over
    /// capacity through the shape; the average over classes, rounded.
    fn utilization_score(&self, volumes: &PodVolumes) -> i64 {
        // class -> (requested, capacity)
        let mut classes: HashMap<&str, (i64, i64)> = HashMap::new();
        if !volumes.static_bindings.is_empty() {
            for (claim, volume) in &volumes.static_bindings {
                let e = classes.entry(volume.storage_class.as_str()).or_default();
                e.0 += claim.request.unwrap_or(0);
                e.1 += volume.capacity;
            }
        } else {
            for (claim, capacity) in &volumes.provisions {
                let Some(capacity) = capacity else { continue };
                let e = classes.entry(claim.storage_class.as_str()).or_default();
                e.1 = capacity.capacity.unwrap_or(0);
                e.0 += claim.request.unwrap_or(0);
            }
        }
        if classes.is_empty() {
            return 0;
        }
        let total: i64 = classes
            .values()
            .map(|&(requested, capacity)| {
                let utilization = if capacity == 0 || requested > capacity {
                    100
                } else {
                    requested * 100 / capacity
                };
                broken_linear(&self.shape, utilization)
            })
            .sum();
        (total as f64 / classes.len() as f64).round() as i64
    }
}

#[cfg(test)]
mod tests;
