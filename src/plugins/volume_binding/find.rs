//! What a pod's claims need on one node (kube-scheduler's `FindPodVolumes`):
//! bound claims' volumes must reach it; each unbound `WaitForFirstConsumer`
//! claim gets the smallest matching static volume that reaches it, or is
//! provisioned there if its class can (provisioner, allowed topologies,
//! CSIStorageCapacity).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::TopologySelectorTerm;

use super::{
    ClaimsState, ERR_BIND_CONFLICT, ERR_NODE_CONFLICT, ERR_NOT_ENOUGH_SPACE, ERR_PV_NOT_EXIST,
};
use crate::cache::ClusterState;
use crate::framework::Status;
use crate::k8s::label_selector;
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::NodeInfo;
use crate::objects::csi::{CsiDriverInfo, StorageCapacityInfo};
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};

/// The provisioner of classes that cannot provision (local volumes).
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// What binding the pod's claims on one node takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumes {
    /// Unbound claims and the static volumes chosen for them.
    pub static_bindings: Vec<(ClaimInfo, VolumeInfo)>,
    /// Unbound claims to provision on the node, with the capacity object
    /// that showed room for them (when the driver publishes capacity).
    pub provisions: Vec<(ClaimInfo, Option<StorageCapacityInfo>)>,
}

impl PodVolumes {
    /// True when nothing is left to bind.
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.provisions.is_empty()
    }
}

/// The pod's volumes on `node`, or the reasons it cannot go there.
pub(super) fn find_pod_volumes(
    claims: &ClaimsState,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<PodVolumes, Status> {
    let mut out = PodVolumes::default();
    let mut node_conflict = false;
    let mut pv_missing = false;
    // kube-scheduler's checkBoundClaims stops at the first volume that fails.
    for volume in &claims.bound {
        match volume {
            None => {
                pv_missing = true;
                break;
            }
            Some(affinity) if !affinity.matches(node) => {
                node_conflict = true;
                break;
            }
            Some(_) => {}
        }
    }
    let mut unbound_ok = true;
    let mut enough_space = true;
    let mut to_provision = Vec::new();
    let mut to_match = Vec::new();
    for claim in &claims.to_bind {
        match claim.selected_node.as_deref() {
            Some(selected) if selected != node.name => {
                unbound_ok = false;
                to_provision.clear();
                to_match.clear();
                break;
            }
            Some(_) => to_provision.push(claim),
            None => to_match.push(claim),
        }
    }
    if !to_match.is_empty() {
        let (found, bindings, left) = find_matching(&to_match, node, claims);
        unbound_ok = found;
        out.static_bindings = bindings;
        to_provision.extend(left);
    }
    if !to_provision.is_empty() {
        let (satisfied, sufficient, provisions) = check_provisions(&to_provision, node, cluster)?;
        unbound_ok = satisfied;
        enough_space = sufficient;
        out.provisions = provisions;
    }
    let mut reasons = Vec::new();
    if node_conflict {
        reasons.push(ERR_NODE_CONFLICT.into());
    }
    if !unbound_ok {
        reasons.push(ERR_BIND_CONFLICT.into());
    }
    if !enough_space {
        reasons.push(ERR_NOT_ENOUGH_SPACE.into());
    }
    if pv_missing {
        reasons.push(ERR_PV_NOT_EXIST.into());
    }
    if reasons.is_empty() {
        Ok(out)
    } else {
        Err(Status::from_reasons(
            crate::framework::Code::UnschedulableAndUnresolvable,
            reasons,
        ))
    }
}

/// `findMatchingVolumes`: claims smallest first, each taking the smallest
/// free volume that fits (no volume twice). Returns whether all matched,
/// the bindings, and the claims left without a volume.
fn find_matching<'c>(
    to_match: &[&'c ClaimInfo],
    node: &NodeInfo,
    claims: &ClaimsState,
) -> (bool, Vec<(ClaimInfo, VolumeInfo)>, Vec<&'c ClaimInfo>) {
    let mut to_match = to_match.to_vec();
    to_match.sort_by_key(|c| c.request.unwrap_or(0));
    let mut chosen = HashSet::new();
    let mut bindings = Vec::new();
    let mut left = Vec::new();
    for claim in to_match {
        let candidates = claims
            .candidates
            .get(&claim.storage_class)
            .into_iter()
            .flatten()
            .filter(|v| !chosen.contains(&v.name));
        let taken = |v: &VolumeInfo, c: &ClaimInfo| claims.taken(v, c);
        match find_matching_volume(claim, candidates, node, &taken) {
            Some(v) => {
                chosen.insert(v.name.clone());
                bindings.push((claim.clone(), v.clone()));
            }
            None => left.push(claim),
        }
    }
    (left.is_empty(), bindings, left)
}

/// component-helpers' `FindMatchingVolume` on the scheduler's path (a
/// node given, binding delayed).
pub(super) fn find_matching_volume<'v>(
    claim: &ClaimInfo,
    volumes: impl Iterator<Item = &'v VolumeInfo>,
    node: &NodeInfo,
    taken: &dyn Fn(&VolumeInfo, &ClaimInfo) -> bool,
) -> Option<&'v VolumeInfo> {
    let requested = claim.request.unwrap_or(0);
    let mut smallest: Option<&VolumeInfo> = None;
    for v in volumes {
        let bound_here = v.is_bound_to(claim);
        if (v.claim_ref.is_some() && !bound_here) || taken(v, claim) {
            continue;
        }
        if v.capacity < requested
            || v.block != claim.block
            || v.attributes_class != claim.attributes_class
            || v.deleting
        {
            continue;
        }
        let reaches = v
            .node_affinity
            .as_ref()
            .is_none_or(|s| RequiredNodeAffinity::from_selector(s).matches(node));
        if bound_here {
            // A volume pre-bound to the claim is the only candidate.
            return reaches.then_some(v);
        }
        if !v.available
            || claim
                .selector
                .as_ref()
                .is_some_and(|s| !label_selector::matches(Some(s), &v.labels))
            || !reaches
            || !claim
                .access_modes
                .iter()
                .all(|m| v.access_modes.contains(m))
        {
            continue;
        }
        if smallest.is_none_or(|s| s.capacity > v.capacity) {
            smallest = Some(v);
        }
    }
    smallest
}

/// `checkVolumeProvisions`: (provisioning possible, enough space, provisions).
#[allow(clippy::type_complexity)]
fn check_provisions(
    claims: &[&ClaimInfo],
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<(bool, bool, Vec<(ClaimInfo, Option<StorageCapacityInfo>)>), Status> {
    let mut out = Vec::new();
    for claim in claims {
        if claim.storage_class.is_empty() {
            return Err(Status::error(format!(
                "no class for claim {:?}",
                format!("{}/{}", claim.namespace, claim.name)
            )));
        }
        let Some(class) = cluster
            .objects::<StorageClassInfo>()
            .get(&claim.storage_class)
        else {
            return Err(Status::error(format!(
                "failed to find storage class {:?}",
                claim.storage_class
            )));
        };
        if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
            return Ok((false, true, Vec::new()));
        }
        if !matches_topology(&class.allowed_topologies, node) {
            return Ok((false, true, Vec::new()));
        }
        match capacity_for(claim, class, node, cluster) {
            Some(capacity) => out.push(((*claim).clone(), capacity)),
            None => return Ok((true, false, Vec::new())),
        }
    }
    Ok((true, true, out))
}

/// `hasEnoughCapacity`: `None` when the driver publishes capacity and no
/// object for the class reaching the node has room; `Some(None)` when no
/// check applies.
fn capacity_for(
    claim: &ClaimInfo,
    class: &StorageClassInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Option<Option<StorageCapacityInfo>> {
    let Some(size) = claim.request else {
        return Some(None);
    };
    let tracked = cluster
        .objects::<CsiDriverInfo>()
        .get(&class.provisioner)
        .is_some_and(|d| d.storage_capacity);
    if !tracked {
        return Some(None);
    }
    let labels: BTreeMap<String, String> = node
        .labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut capacities: Vec<&StorageCapacityInfo> = cluster
        .objects::<StorageCapacityInfo>()
        .iter()
        .filter(|c| c.storage_class == class.name)
        .collect();
    capacities.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    capacities
        .into_iter()
        .find(|c| {
            c.maximum_volume_size
                .or(c.capacity)
                .is_some_and(|l| l >= size)
                && c.node_topology.is_some()
                && label_selector::matches(c.node_topology.as_ref(), &labels)
        })
        .map(|c| Some(c.clone()))
}

/// `MatchTopologySelectorTerms`: no terms match everything; otherwise one
/// term's every expression must hold.
fn matches_topology(terms: &[TopologySelectorTerm], node: &NodeInfo) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_label_expressions.iter().flatten().all(|e| {
                node.labels
                    .get(&e.key)
                    .is_some_and(|v| e.values.iter().any(|x| x == v))
            })
        })
}
