//! For the resource scores of NodeResourcesFit and NodeResourcesBalancedAllocation: an extended
//! resource a DeviceClass serves (DRAExtendedResource) counts, on a node without it in its
//! allocatable, the class's devices the node can use as its allocatable and those of them
//! allocated as its use (kube-scheduler's `calculateDRAResourceTotals`). Every slice that applies
//! to the node counts, whatever its pool's state, as in kube-scheduler.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device, DeviceClass, ResourceSlice};

use super::AllocatedDevices;
use super::cel::Selector;
use super::pools::node_matches;
use crate::objects::NodeInfo;

/// A DeviceClass's selectors, compiled once per pod.
pub struct ClassDevices {
    selectors: Vec<Selector>,
}

impl std::fmt::Debug for ClassDevices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassDevices").finish_non_exhaustive()
    }
}

impl ClassDevices {
    /// Compiles `class`'s CEL selectors; an error names the one that does not compile.
    pub fn new(class: &DeviceClass) -> Result<Self, String> {
        let mut selectors = Vec::new();
        for (i, s) in class
            .spec
            .iter()
            .flat_map(|s| s.selectors.iter().flatten())
            .enumerate()
        {
            let expression = s.cel.as_ref().map_or("", |c| c.expression.as_str());
            selectors
                .push(Selector::compile(expression).map_err(|e| format!("selector #{i}: {e}"))?);
        }
        Ok(ClassDevices { selectors })
    }

    /// `(devices of the class node can use, how many of them are allocated)`, from the node's
    /// own slices `own` and the slices that may apply to any node, `shared`.
    pub fn totals(
        &self,
        node: &NodeInfo,
        own: &[Arc<ResourceSlice>],
        shared: &[Arc<ResourceSlice>],
        allocated: &AllocatedDevices,
    ) -> Result<(i64, i64), String> {
        let (mut total, mut in_use) = (0, 0);
        for slice in own.iter().chain(shared) {
            let spec = &slice.spec;
            let per_device = spec.per_device_node_selection == Some(true);
            let slice_applies = per_device
                || node_matches(
                    node,
                    spec.node_name.as_deref(),
                    spec.all_nodes == Some(true),
                    spec.node_selector.as_ref(),
                )?;
            if !slice_applies {
                continue;
            }
            for device in spec.devices.iter().flatten() {
                if per_device && !device_applies(node, device)? {
                    continue;
                }
                if !self.matches(&spec.driver, device)? {
                    continue;
                }
                total += 1;
                if allocated.is_allocated_parts(&spec.driver, &spec.pool.name, &device.name) {
                    in_use += 1;
                }
            }
        }
        Ok((total, in_use))
    }

    fn matches(&self, driver: &str, device: &Device) -> Result<bool, String> {
        for s in &self.selectors {
            if !s.matches(driver, device)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Per-device node selection: the device's own node name, all nodes, or node selector.
fn device_applies(node: &NodeInfo, device: &Device) -> Result<bool, String> {
    node_matches(
        node,
        device.node_name.as_deref(),
        device.all_nodes == Some(true),
        device.node_selector.as_ref(),
    )
}
