//! The `AllocationResult` of a claim once the search found its devices:
//! one result per device (a share of a device with its own `shareID` and
//! what it consumes), the class and claim configurations that apply, and
//! the node selector of where the devices are reachable.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::plan::ClaimPlan;
use super::pools::Pool;
use super::search::Picked;
use super::share_id;
use super::types::AllocatorError;

/// The allocation of `claim` from `picked` devices, `chosen` being the
/// choice taken per request, on node `node_name`.
pub(super) fn build(
    claim: &ClaimPlan,
    picked: &[Picked<'_>],
    chosen: &[usize],
    pools: &[Pool<'_>],
    node_name: &str,
) -> Result<AllocationResult, AllocatorError> {
    let results = picked
        .iter()
        .map(|p| {
            let choice = &claim.requests[p.request].choices[p.choice];
            let pool = &pools[p.candidate.pool];
            let device = p.candidate.device;
            DeviceRequestAllocationResult {
                request: choice.full_name.clone(),
                driver: pool.driver.to_owned(),
                pool: pool.name.to_owned(),
                device: device.name.clone(),
                admin_access: choice.admin_access.then_some(true),
                tolerations: (!choice.tolerations.is_empty()).then(|| choice.tolerations.clone()),
                binding_conditions: device.binding_conditions.clone(),
                binding_failure_conditions: device.binding_failure_conditions.clone(),
                share_id: p.share.as_ref().map(|_| share_id::next()),
                consumed_capacity: p.share.as_ref().filter(|c| !c.is_empty()).map(|c| {
                    c.iter()
                        .map(|(name, amount)| (name.clone(), Quantity(amount.canonical())))
                        .collect()
                }),
                ..Default::default()
            }
        })
        .collect();
    let config = configs(claim, chosen);
    let node_selector = node_selector(picked, node_name).map_err(|e| {
        AllocatorError::fatal(format!(
            "create NodeSelector for claim {}: {e}",
            claim.claim.metadata.name.as_deref().unwrap_or_default()
        ))
    })?;
    Ok(AllocationResult {
        devices: Some(DeviceAllocationResult {
            config: (!config.is_empty()).then_some(config),
            results: Some(results),
        }),
        node_selector,
        allocation_timestamp: None,
    })
}

/// The configurations of the classes of the chosen requests (each class's
/// once, naming every request that uses it), then the claim's own that name
/// an allocated request; a configuration that names every request is
/// written as applying to all (no `requests`), as Go writes it.
fn configs(claim: &ClaimPlan, chosen: &[usize]) -> Vec<DeviceAllocationConfiguration> {
    let chosen_names: Vec<(&str, &str)> = claim
        .requests
        .iter()
        .zip(chosen)
        .filter_map(|(r, &c)| {
            r.choices
                .get(c)
                .map(|ch| (r.name.as_str(), ch.full_name.as_str()))
        })
        .collect();
    let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
    let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::new();
    for (request, &c) in claim.requests.iter().zip(chosen) {
        let Some(choice) = request.choices.get(c) else {
            continue;
        };
        let class_name = choice.class.metadata.name.as_deref().unwrap_or_default();
        if let Some(&(start, end)) = class_ranges.get(class_name) {
            for config in &mut out[start..end] {
                config
                    .requests
                    .get_or_insert_with(Vec::new)
                    .push(choice.full_name.clone());
            }
            continue;
        }
        let start = out.len();
        for config in choice
            .class
            .spec
            .iter()
            .flat_map(|s| s.config.iter().flatten())
        {
            out.push(DeviceAllocationConfiguration {
                source: "FromClass".to_owned(),
                requests: Some(vec![choice.full_name.clone()]),
                opaque: config.opaque.clone(),
            });
        }
        class_ranges.insert(class_name, (start, out.len()));
    }
    let claim_configs = claim
        .claim
        .spec
        .iter()
        .flat_map(|s| s.devices.iter())
        .flat_map(|d| d.config.iter().flatten());
    for config in claim_configs {
        let requests = config.requests.as_deref().unwrap_or_default();
        let applies = requests.is_empty()
            || chosen_names
                .iter()
                .any(|(name, full)| requests.iter().any(|r| r == name || r == full));
        if applies {
            out.push(DeviceAllocationConfiguration {
                source: "FromClaim".to_owned(),
                requests: config.requests.clone(),
                opaque: config.opaque.clone(),
            });
        }
    }
    for config in &mut out {
        let Some(requests) = &config.requests else {
            continue;
        };
        if requests.is_empty() {
            continue;
        }
        let covers_all = chosen_names
            .iter()
            .all(|(name, full)| requests.iter().any(|r| r == name || r == full));
        if covers_all {
            config.requests = None;
        }
    }
    out
}

/// Go's `createNodeSelector`: a device local to one node (or one that binds
/// to the node) pins the claim to this node by name; otherwise the slices'
/// node selectors, merged into one term; nothing when the devices are
/// reachable from every node.
fn node_selector(picked: &[Picked<'_>], node_name: &str) -> Result<Option<NodeSelector>, String> {
    let mut term = NodeSelectorTerm::default();
    for p in picked {
        let (slice, device) = (p.candidate.slice, p.candidate.device);
        let (local, selector) = if slice.spec.per_device_node_selection == Some(true) {
            (device.node_name.as_deref(), device.node_selector.as_ref())
        } else {
            (
                slice.spec.node_name.as_deref(),
                slice.spec.node_selector.as_ref(),
            )
        };
        if local.is_some() || device.binds_to_node == Some(true) {
            return Ok(Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![node_name.to_owned()]),
                    }]),
                    match_expressions: None,
                }],
            }));
        }
        let Some(selector) = selector else { continue };
        match selector.node_selector_terms.as_slice() {
            [] => {}
            [only] => {
                merge(only.match_fields.as_ref(), &mut term.match_fields);
                merge(only.match_expressions.as_ref(), &mut term.match_expressions);
            }
            terms => {
                return Err(format!(
                    "unsupported ResourceSlice.NodeSelector with {} terms",
                    terms.len()
                ));
            }
        }
    }
    let empty = |r: &Option<Vec<NodeSelectorRequirement>>| r.as_ref().is_none_or(Vec::is_empty);
    if empty(&term.match_fields) && empty(&term.match_expressions) {
        return Ok(None);
    }
    Ok(Some(NodeSelector {
        node_selector_terms: vec![term],
    }))
}

/// Adds the requirements of `from` that `to` does not hold yet (same key,
/// operator and set of values).
fn merge(
    from: Option<&Vec<NodeSelectorRequirement>>,
    to: &mut Option<Vec<NodeSelectorRequirement>>,
) {
    for r in from.into_iter().flatten() {
        let same = |e: &NodeSelectorRequirement| {
            let set = |v: &Option<Vec<String>>| -> std::collections::BTreeSet<String> {
                v.iter().flatten().cloned().collect()
            };
            e.key == r.key && e.operator == r.operator && set(&e.values) == set(&r.values)
        };
        let target = to.get_or_insert_with(Vec::new);
        if !target.iter().any(same) {
            target.push(r.clone());
        }
    }
}
