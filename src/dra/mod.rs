//! The `dra` floor (design §1): the structured-parameters device allocator
//! of Dynamic Resource Allocation, below the plugins. The DynamicResources
//! plugin (`plugins/dynamic_resources/`) drives it through its cycle, and
//! the resource scores read a class's devices ([`ClassDevices`]). The DRA
//! objects it reads are the cache's: `cache/dra.rs` keeps the claims,
//! slices (indexed per node), classes and the devices in use, and
//! `cache/dra_taints.rs` the DeviceTaintRules, compact per pool.
//!
//! The allocator: given a pod's unallocated ResourceClaims, the DeviceClasses
//! they name and the ResourceSlices a node can use, find devices for every
//! request of every claim, or say that the node cannot have them.
//!
//! It follows the "incubating" variant of Go's allocator
//! (`k8s.io/dynamic-resource-allocation/structured`), the one kube-scheduler
//! v1.37 picks with its default feature gates: admin access, prioritized
//! lists (`firstAvailable`), partitionable devices (shared counters,
//! per-device node selection), device taints (the slices' own and those
//! DeviceTaintRules add), binding conditions, and consumable capacity
//! (devices shared by several allocations, each consuming part of their
//! capacity).
//!
//! Use: [`Allocator::new`] once per pod (PreFilter) compiles the CEL
//! selectors and checks the requests; [`Allocator::allocate`] per node
//! (Filter) runs the search.
//!
//! - [`plan`]: the claims' requests as the search needs them, checked once;
//! - [`cel`]: CEL selectors, compiled once, evaluated per device;
//!   (the views of the device, the Kubernetes libraries, the cost bound);
//! - [`pools`]: the pools of the slices that apply to a node;
//! - [`search`]: the backtracking search;
//! - [`budget`]: its bounds, `filterTimeout` and a step budget;
//! - [`checks`]: constraints, shared counters, shares and taints while it runs;
//! - [`capacity`]: what a request consumes of a device's capacity, and whether it fits;
//! - [`result`]: the `AllocationResult` of each claim;
//! - [`share_id`]: the `shareID` of each share of a device;
//! - [`census`]: for `/explain`, the requests no node can satisfy;
//! - [`class_devices`]: for the resource scores, a class's devices on a node.

mod budget;
mod capacity;
mod cel;
#[cfg(test)]
mod cel_tests;
mod census;
mod checks;
mod class_devices;
#[cfg(test)]
mod feature_tests;
mod plan;
#[cfg(test)]
mod pool_tests;
mod pools;
mod result;
mod search;
mod share_id;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod taint_rule_tests;
#[cfg(test)]
mod tests;
mod types;

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};

use crate::cache::dra_taints::TaintRules;
use crate::objects::NodeInfo;
pub use budget::{GaveUp, STEP_BUDGET, SearchLimits};
pub use census::{ChoiceCensus, Unsatisfiable};
pub use class_devices::ClassDevices;
pub use plan::ALLOCATION_RESULTS_MAX_SIZE;
use plan::ClaimPlan;
pub use types::{AllocatedDevices, AllocatorError, DeviceId, HeldDevice};

/// Allocates a fixed list of claims on any node. Built once per pod;
/// `allocate` may run for many nodes at once (it is `Send + Sync` and keeps
/// no state between calls).
pub struct Allocator {
    claims: Vec<ClaimPlan>,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field(
                "claims",
                &self.claims.iter().map(|c| &c.key).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Allocator {
    /// Prepares the allocation of `claims` (the pod's claims that still need
    /// one), looking classes up with `class_of`. Compiles every CEL selector
    /// of the requests and their classes once.
    ///
    /// Errors: a missing class, a CEL compile error, a request this
    /// allocator cannot handle; each worded as kube-scheduler words it.
    pub fn new(
        claims: Vec<ResourceClaim>,
        class_of: &dyn Fn(&str) -> Option<Arc<DeviceClass>>,
    ) -> Result<Allocator, AllocatorError> {
        let claims = claims
            .into_iter()
            .map(|c| plan::plan_claim(c, class_of))
            .collect::<Result<_, _>>()?;
        Ok(Allocator { claims })
    }

    /// True when there is nothing to allocate.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// Tries to allocate every claim on `node`.
    ///
    /// `slices` are the slices that may apply to the node (its own
    /// `spec.nodeName` ones, and the `allNodes`, `nodeSelector` and
    /// per-device node selection ones; node selection is checked here).
    /// `all_slices` is every slice of the cluster: it is read only for pools
    /// that look incomplete from the node's view, to tell a pool being
    /// updated from one whose other slices apply to other nodes. `allocated`
    /// are the devices in use by other claims. `taint_rules` add taints to
    /// devices, which count as the slices' own do.
    ///
    /// `Ok(Some(results))`: one `AllocationResult` per claim, in order.
    /// `Ok(None)`: the claims do not fit on the node. `Err`: see
    /// [`AllocatorError`].
    ///
    /// The search has no bound on time or steps: Filter calls
    /// [`Allocator::allocate_within`].
    pub fn allocate(
        &self,
        node: &NodeInfo,
        slices: &[Arc<ResourceSlice>],
        all_slices: &[Arc<ResourceSlice>],
        allocated: &AllocatedDevices,
        taint_rules: &TaintRules,
    ) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
        let unlimited = SearchLimits::unlimited();
        self.allocate_within(node, slices, all_slices, allocated, taint_rules, &unlimited)
    }

    /// [`Allocator::allocate`] within the attempt's `limits`: a search that
    /// runs out of them ends with [`AllocatorError::GaveUp`].
    pub fn allocate_within(
        &self,
        node: &NodeInfo,
        slices: &[Arc<ResourceSlice>],
        all_slices: &[Arc<ResourceSlice>],
        allocated: &AllocatedDevices,
        taint_rules: &TaintRules,
        limits: &SearchLimits,
    ) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
        let pools = pools::gather(node, slices, all_slices, taint_rules)?;
        let mut search = search::Search::new(&self.claims, &pools, node, allocated, limits)?;
        if !search.run()? {
            if pools.iter().any(|p| p.invalid) {
                // Only this node's data is at fault: other nodes may do.
                return Err(AllocatorError::OnNode(
                    "invalid resource pools were encountered".to_owned(),
                ));
            }
            return Ok(None);
        }
        self.claims
            .iter()
            .zip(&search.picked)
            .zip(&search.chosen)
            .map(|((claim, picked), chosen)| {
                result::build(claim, picked, chosen, &pools, &node.name)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
