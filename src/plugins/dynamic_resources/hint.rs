//! `/explain`'s hint for a pod with claims: the requests of its unallocated
//! claims that no node can satisfy, with what the cluster has for them
//! ([`crate::dra::Unsatisfiable`]). kube-scheduler's message only says
//! "cannot allocate all claims" per node; this names the request.

use super::{pod_claims, watched};
use crate::cache::ClusterState;
use crate::dra::{AllocatedDevices, Allocator};
use crate::objects::PodInfo;

/// One line per request of `pod`'s unallocated claims that no node can
/// satisfy; empty when the DRA objects are not watched, when the pod's
/// claims are not all there (PreEnqueue's reason says so) or when the
/// requests cannot be planned (Filter's error says so).
pub fn unsatisfiable_requests(pod: &PodInfo, cluster: &ClusterState) -> Vec<String> {
    if pod.spec.resource_claims.is_empty() || !watched(cluster) {
        return Vec::new();
    }
    let Ok(claims) = pod_claims(pod, cluster) else {
        return Vec::new();
    };
    let unallocated: Vec<_> = claims
        .iter()
        .filter(|c| c.status.as_ref().is_none_or(|s| s.allocation.is_none()))
        .map(|c| (**c).clone())
        .collect();
    if unallocated.is_empty() {
        return Vec::new();
    }
    let dra = cluster.dra();
    let Ok(allocator) = Allocator::new(unallocated, &|name: &str| dra.class(name)) else {
        return Vec::new();
    };
    let allocated = AllocatedDevices::in_cache(dra);
    allocator
        .unsatisfiable(dra.all_slices(), &allocated, dra.taint_rules())
        .iter()
        .map(ToString::to_string)
        .collect()
}
