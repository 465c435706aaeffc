//! DynamicResources' state for one pod's scheduling cycle: what PreFilter
//! found, what Filter chose per node, and what Reserve and PreBind wrote.
//! PreFilter and Filter (`filter.rs`) fill it; Reserve, PreBind and
//! Unreserve (`bind.rs`) read it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use parking_lot::Mutex;

use super::extended::{ExtendedChoice, ExtendedCycle};
use crate::dra::{AllocatedDevices, Allocator, HeldDevice, SearchLimits};
use crate::k8s::node_affinity::RequiredNodeAffinity;

/// PreFilter's state for one pod.
pub(super) struct DraCycle {
    /// The pod's claims, in spec order (an allocation in flight already
    /// written by PreBind reads as the written claim).
    pub(super) claims: Vec<Arc<ResourceClaim>>,
    /// Per claim: the node selector of its allocation (`None`: allocated
    /// for every node, or not allocated).
    pub(super) available_on: Vec<Option<RequiredNodeAffinity>>,
    /// Indexes into `claims` of the claims to allocate, in order.
    pub(super) to_allocate: Vec<usize>,
    /// Indexes of allocated claims whose devices failed to bind or took
    /// too long ([`super::binding_conditions::stuck`]): no node can use them.
    pub(super) stuck: Vec<usize>,
    pub(super) allocator: Option<Allocator>,
    /// The pod's extended resources a DeviceClass serves, if it requests any.
    pub(super) extended: Option<ExtendedCycle>,
    /// Devices in use: allocated in the cache and in flight.
    pub(super) allocated: AllocatedDevices,
    /// `filterTimeout` and the step budget, from PreFilter on, shared by
    /// the searches on every node.
    pub(super) limits: SearchLimits,
    /// What the allocator chose on each node that fits.
    pub(super) by_node: Mutex<HashMap<String, Arc<NodeChoice>>>,
    /// Indexes of allocated claims that some node rejected for their
    /// allocation's node selector: PostFilter may deallocate one.
    pub(super) unavailable: Mutex<BTreeSet<usize>>,
    /// The claims as PreBind wrote them, by index (Unreserve takes the
    /// pod out of their `reservedFor`).
    pub(super) written: Mutex<HashMap<usize, Arc<ResourceClaim>>>,
    /// The claim PreBind created for the pod's extended resources
    /// (Unreserve deletes it).
    pub(super) created: Mutex<Option<Arc<ResourceClaim>>>,
}

/// What Filter chose on one node.
pub(super) struct NodeChoice {
    /// One allocation per claim of `to_allocate`, in order.
    pub(super) results: Vec<AllocationResult>,
    /// The claim for the extended resources the node leaves to DRA.
    pub(super) extended: Option<ExtendedChoice>,
}

#[cfg(test)]
impl DraCycle {
    /// A cycle whose Filter chose `results` on `node` for the claims at
    /// `to_allocate` (Reserve and PreBind tests).
    pub(super) fn chosen(
        claims: Vec<Arc<ResourceClaim>>,
        to_allocate: Vec<usize>,
        node: &str,
        results: Vec<AllocationResult>,
    ) -> Self {
        DraCycle {
            available_on: vec![None; claims.len()],
            stuck: Vec::new(),
            claims,
            to_allocate,
            allocator: None,
            extended: None,
            allocated: AllocatedDevices::default(),
            limits: SearchLimits::unlimited(),
            by_node: Mutex::new(HashMap::from([(
                node.to_owned(),
                Arc::new(NodeChoice {
                    results,
                    extended: None,
                }),
            )])),
            unavailable: Mutex::default(),
            written: Mutex::default(),
            created: Mutex::default(),
        }
    }
}

/// The devices, whole or shared, an allocation takes (admin access does
/// not take a device).
pub(super) fn devices_of(allocation: &AllocationResult) -> Vec<HeldDevice> {
    allocation
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .filter_map(HeldDevice::of_result)
        .collect()
}
