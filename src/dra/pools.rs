//! The resource pools a node can draw devices from (Go's `GatherPools`):
//! the slices that apply to the node, grouped by driver and pool, only the
//! newest generation of each pool, with pools that are still being updated
//! marked incomplete and pools with inconsistent data marked invalid.

use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{CounterSet, Device, ResourceSlice};

use super::types::AllocatorError;
use crate::cache::dra_taints::{PoolTaints, TaintRules};
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::NodeInfo;

/// One pool as the allocator sees it on one node.
pub(super) struct Pool<'a> {
    pub driver: &'a str,
    pub name: &'a str,
    /// Not all slices of the newest generation are there yet: no device of
    /// the pool may be allocated, and "All" requests fail.
    pub incomplete: bool,
    /// Duplicate device names or dangling counter references.
    pub invalid: bool,
    /// Slices with devices that apply to the node, sorted by name.
    pub slices: Vec<&'a ResourceSlice>,
    /// Slices with devices of the pool that do not apply to the node: their
    /// allocated devices still consume the pool's shared counters.
    pub other_slices: Vec<&'a ResourceSlice>,
    /// The pool's shared counter sets by name.
    pub counter_sets: HashMap<&'a str, &'a CounterSet, RandomState>,
    /// The taints DeviceTaintRules add to the pool's devices, on top of
    /// those in its slices.
    pub rule_taints: PoolTaints<'a>,
}

impl<'a> Pool<'a> {
    fn marked(driver: &'a str, name: &'a str, incomplete: bool) -> Self {
        Pool {
            driver,
            name,
            incomplete,
            invalid: !incomplete,
            slices: Vec::new(),
            other_slices: Vec::new(),
            counter_sets: HashMap::default(),
            rule_taints: PoolTaints::default(),
        }
    }

    /// `driver/pool`, as Go's `PoolID.String()`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }

    /// The devices of the pool that apply to the node, in search order.
    pub fn devices(&self) -> impl Iterator<Item = (&'a ResourceSlice, &'a Device)> {
        self.slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten().map(move |d| (*s, d)))
    }
}

/// Go's `NodeMatches`: a node name, all nodes, or a node selector.
pub(super) fn node_matches(
    node: &NodeInfo,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&NodeSelector>,
) -> Result<bool, String> {
    match (node_name.filter(|n| !n.is_empty()), all_nodes, selector) {
        (Some(name), _, _) => Ok(node.name == name),
        (None, true, _) => Ok(true),
        (None, false, Some(selector)) => RequiredNodeAffinity::strict(selector, "")
            .map(|s| s.matches(node))
            .map_err(|errs| format!("failed to parse node selector: {}", errs.join(", "))),
        (None, false, None) => Ok(false),
    }
}

/// Compatibility groups (DRADeviceCompatibilityGroups) are alpha and off
/// by default: Go ignores slices that use them, which leaves their pool
/// incomplete.
fn uses_compatibility_groups(slice: &ResourceSlice) -> bool {
    slice
        .spec
        .devices
        .iter()
        .flatten()
        .flat_map(|d| d.consumes_counters.iter().flatten())
        .any(|c| {
            c.compatibility_groups
                .as_ref()
                .is_some_and(|g| !g.is_empty())
        })
}

fn has_shared_counters(slice: &ResourceSlice) -> bool {
    slice
        .spec
        .shared_counters
        .as_ref()
        .is_some_and(|c| !c.is_empty())
}

fn has_binding_conditions(pool: &Pool<'_>) -> bool {
    pool.devices().any(|(_, d)| d.binding_conditions.is_some())
}

/// The pools of the slices in `for_node` that apply to `node`; `all` holds
/// every slice of the cluster and is read only for pools that look
/// incomplete from the node's view (some of their slices may apply to other
/// nodes only). Sorted by driver and pool, pools with binding conditions
/// last, as Go sorts them: those devices are the least preferred. Each pool
/// carries the taints `rules` add to its devices.
pub(super) fn gather<'a>(
    node: &NodeInfo,
    for_node: &'a [std::sync::Arc<ResourceSlice>],
    all: &'a [std::sync::Arc<ResourceSlice>],
    rules: &'a TaintRules,
) -> Result<Vec<Pool<'a>>, AllocatorError> {
    // Runs per node and attempt: foldhash, not SipHash, for these small maps.
    let mut grouped: HashMap<(&'a str, &'a str), Vec<&'a ResourceSlice>, RandomState> =
        HashMap::default();
    for slice in for_node {
        let slice: &'a ResourceSlice = slice;
        if uses_compatibility_groups(slice) || !slice_applies(node, slice)? {
            continue;
        }
        let spec = &slice.spec;
        let group = grouped
            .entry((spec.driver.as_str(), spec.pool.name.as_str()))
            .or_default();
        match group.first().map(|s| s.spec.pool.generation) {
            Some(g) if spec.pool.generation < g => {}
            Some(g) if spec.pool.generation > g => *group = vec![slice],
            _ => group.push(slice),
        }
    }

    let mut pools = Vec::with_capacity(grouped.len());
    for ((driver, name), slices) in grouped {
        let Some(first) = slices.first() else {
            continue;
        };
        let want = first.spec.pool.resource_slice_count;
        let generation = first.spec.pool.generation;
        if i64::try_from(slices.len()).is_ok_and(|n| n == want) {
            pools.push(build(driver, name, slices, &[]));
            continue;
        }
        // Some slices may apply to other nodes only: look at the pool as a
        // whole. A newer generation elsewhere makes this one obsolete.
        let mut whole = Vec::new();
        let mut obsolete = false;
        for s in all.iter().map(|s| &**s) {
            if s.spec.driver != driver || s.spec.pool.name != name {
                continue;
            }
            if s.spec.pool.generation > generation {
                obsolete = true;
                break;
            }
            if s.spec.pool.generation == generation && !uses_compatibility_groups(s) {
                whole.push(s);
            }
        }
        if obsolete {
            continue;
        }
        if i64::try_from(whole.len()).is_ok_and(|n| n == want) {
            pools.push(build(driver, name, slices, &whole));
        } else {
            pools.push(Pool::marked(driver, name, true));
        }
    }
    pools.sort_by(|a, b| {
        has_binding_conditions(a)
            .cmp(&has_binding_conditions(b))
            .then_with(|| (a.driver, a.name).cmp(&(b.driver, b.name)))
    });
    if !rules.is_empty() {
        for pool in &mut pools {
            pool.rule_taints = rules.for_pool(pool.driver, pool.name);
        }
    }
    Ok(pools)
}

/// Whether `slice` has anything for `node`: the slice's own node
/// selection, or with per-device node selection, some device's.
fn slice_applies(node: &NodeInfo, slice: &ResourceSlice) -> Result<bool, AllocatorError> {
    let spec = &slice.spec;
    let slice_name = slice.metadata.name.as_deref().unwrap_or_default();
    let node_name = spec.node_name.as_deref().filter(|n| !n.is_empty());
    let all_nodes = spec.all_nodes == Some(true);
    if node_name.is_some() || all_nodes || spec.node_selector.is_some() {
        return node_matches(node, node_name, all_nodes, spec.node_selector.as_ref()).map_err(
            |e| {
                AllocatorError::fatal(format!(
                    "gather pool information: failed to perform node selection for slice {slice_name}: {e}"
                ))
            },
        );
    }
    if spec.per_device_node_selection != Some(true) {
        return Ok(false);
    }
    for device in spec.devices.iter().flatten() {
        let matched = node_matches(
            node,
            device.node_name.as_deref(),
            device.all_nodes == Some(true),
            device.node_selector.as_ref(),
        )
        .map_err(|e| {
            AllocatorError::fatal(format!(
                "gather pool information: failed to perform node selection for device {} in slice {slice_name}: {e}",
                device.name
            ))
        })?;
        if matched {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Go's `buildPool`: splits counter-set slices from device slices and
/// checks that device names are unique and counter references resolve.
fn build<'a>(
    driver: &'a str,
    name: &'a str,
    mut slices: Vec<&'a ResourceSlice>,
    whole: &[&'a ResourceSlice],
) -> Pool<'a> {
    slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut pool = Pool::marked(driver, name, false);
    pool.invalid = false;
    let mut counter_slices = Vec::new();
    for s in slices {
        if has_shared_counters(s) {
            counter_slices.push(s);
        } else {
            pool.slices.push(s);
        }
    }
    let targeting: HashSet<&str, RandomState> = if whole.is_empty() {
        HashSet::default()
    } else {
        pool.slices
            .iter()
            .chain(&counter_slices)
            .filter_map(|s| s.metadata.name.as_deref())
            .collect()
    };
    for s in whole {
        if targeting.contains(s.metadata.name.as_deref().unwrap_or_default()) {
            continue;
        }
        if has_shared_counters(s) {
            counter_slices.push(s);
        } else {
            pool.other_slices.push(s);
        }
    }

    let mut names: HashSet<&str, RandomState> = HashSet::default();
    let duplicate = pool.devices().any(|(_, d)| !names.insert(d.name.as_str()));
    for set in counter_slices
        .iter()
        .flat_map(|s| s.spec.shared_counters.iter().flatten())
    {
        if pool.counter_sets.insert(set.name.as_str(), set).is_some() {
            pool.invalid = true;
        }
    }
    let dangling = pool
        .slices
        .iter()
        .chain(&pool.other_slices)
        .flat_map(|s| s.spec.devices.iter().flatten())
        .flat_map(|d| d.consumes_counters.iter().flatten())
        .any(|c| {
            pool.counter_sets
                .get(c.counter_set.as_str())
                .is_none_or(|set| c.counters.keys().any(|k| !set.counters.contains_key(k)))
        });
    if duplicate || dangling || pool.invalid {
        return Pool::marked(driver, name, false);
    }
    pool
}
