//! The per-candidate checks of the search: selectors, and those that carry
//! state while it runs: claim constraints (`matchAttribute`,
//! `distinctAttribute`), the shared counters of partitionable devices, the
//! capacity of shared devices, and device taints.

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceTaint, DeviceToleration};

use super::capacity::{self, CapacityRequests, Consumed};
use super::cel::Quantity;
use super::plan::{Choice, ConstraintKind, ConstraintSpec};
use super::pools::{Pool, node_matches};
use super::types::{AllocatedDevices, AllocatorError, Candidate};
use crate::objects::NodeInfo;

/// Whether device `c` of `pool` passes `choice`'s class and request
/// selectors (of the claim `claim_key`) and, for per-device node selection,
/// applies to `node`. A CEL runtime error is an error of the claim.
pub(super) fn selectors_match(
    choice: &Choice,
    claim_key: &str,
    pool: &Pool<'_>,
    node: &NodeInfo,
    c: Candidate<'_>,
) -> Result<bool, AllocatorError> {
    let (driver, pool) = (pool.driver, pool.name);
    let device_id = || format!("{driver}/{pool}/{}", c.device.name);
    let class_name = choice.class.metadata.name.as_deref().unwrap_or_default();
    for (i, s) in choice.class_selectors.iter().enumerate() {
        let matched = s.matches(driver, c.device).map_err(|e| {
            AllocatorError::fatal(format!(
                "class {class_name}: selector #{i} on device {}: CEL runtime error: {e}",
                device_id()
            ))
        })?;
        if !matched {
            return Ok(false);
        }
    }
    for (i, s) in choice.selectors.iter().enumerate() {
        let matched = s.matches(driver, c.device).map_err(|e| {
            AllocatorError::fatal(format!(
                "claim {claim_key}: selector #{i} on device {}: CEL runtime error: {e}",
                device_id()
            ))
        })?;
        if !matched {
            return Ok(false);
        }
    }
    if c.slice.spec.per_device_node_selection == Some(true) {
        let d = c.device;
        return node_matches(
            node,
            d.node_name.as_deref(),
            d.all_nodes == Some(true),
            d.node_selector.as_ref(),
        )
        .map_err(AllocatorError::fatal);
    }
    Ok(true)
}

/// The attribute `name` (`domain/id`) of `device` of `driver`: stored fully
/// qualified, or without the domain when the domain is the driver's
/// (`lookupAttribute`).
pub(super) fn lookup_attribute<'a>(
    device: &'a Device,
    driver: &str,
    name: &str,
) -> Option<&'a DeviceAttribute> {
    let attributes = device.attributes.as_ref()?;
    if let Some(a) = attributes.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attributes.get(id)
}

/// Equality of two scalar attribute values of the same type. List values
/// (DRAListTypeAttributes, off by default) never match, as in Go's
/// incubating allocator.
fn same_value(a: &DeviceAttribute, b: &DeviceAttribute) -> bool {
    if let Some(s) = &a.string {
        return b.string.as_ref() == Some(s);
    }
    if let Some(i) = a.int {
        return b.int == Some(i);
    }
    if let Some(v) = a.bool {
        return b.bool == Some(v);
    }
    // semver 2.0.0 versions are in their minimal form, so string equality
    // is version equality (as Go compares them).
    if let Some(v) = &a.version {
        return b.version.as_ref() == Some(v);
    }
    false
}

fn is_scalar(a: &DeviceAttribute) -> bool {
    a.string.is_some() || a.int.is_some() || a.bool.is_some() || a.version.is_some()
}

/// One constraint of a claim while the search runs: the attribute values of
/// the devices picked so far that it covers (a stack, popped on backtrack).
pub(super) struct ConstraintState<'a> {
    spec: &'a ConstraintSpec,
    values: Vec<&'a DeviceAttribute>,
}

impl<'a> ConstraintState<'a> {
    pub fn new(spec: &'a ConstraintSpec) -> Self {
        ConstraintState {
            spec,
            values: Vec::new(),
        }
    }

    /// Tries to add a device picked for `request` (`full_name` for a
    /// subrequest); false when the constraint rejects it. On true the
    /// caller must [`ConstraintState::remove`] it when backtracking.
    pub fn add(
        &mut self,
        request: &str,
        full_name: &str,
        device: &'a Device,
        driver: &str,
    ) -> bool {
        if !self.spec.covers(request, full_name) {
            return true;
        }
        let Some(value) = lookup_attribute(device, driver, &self.spec.attribute) else {
            return false;
        };
        let fits = match self.spec.kind {
            ConstraintKind::Match => self
                .values
                .first()
                .is_none_or(|first| is_scalar(value) && same_value(value, first)),
            ConstraintKind::Distinct => self.values.iter().all(|v| !same_value(value, v)),
        };
        if fits {
            self.values.push(value);
        }
        fits
    }

    /// Undoes a successful [`ConstraintState::add`] with the same arguments.
    pub fn remove(&mut self, request: &str, full_name: &str) {
        if self.spec.covers(request, full_name) {
            self.values.pop();
        }
    }
}

/// Go's `taintPreventsAllocation`: among a device's `taints` (its slice's
/// and the DeviceTaintRules'), a `NoSchedule` or `NoExecute` one that no
/// toleration of the request tolerates (`None` and unknown effects are
/// ignored).
pub(super) fn taint_prevents<'t>(
    mut taints: impl Iterator<Item = &'t DeviceTaint>,
    tolerations: &[DeviceToleration],
) -> bool {
    taints.any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// `resourceclaim.ToleratesTaint`.
fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if toleration
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if toleration
        .key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        "Exists" => true,
        _ => false,
    }
}

/// Counter amounts: exact, as Go's `resource.Quantity` arithmetic (nano-units,
/// an `i128` in the common case).
type Amount = Quantity;

fn amount(q: &str) -> Result<Amount, AllocatorError> {
    Quantity::parse(q).map_err(|e| AllocatorError::fatal(format!("counter value {q:?}: {e}")))
}

/// `total += q` (or `-=` when `subtract`).
fn accumulate(total: &mut Amount, q: &str, subtract: bool) -> Result<(), AllocatorError> {
    let q = amount(q)?;
    let sum = if subtract {
        total.checked_sub(&q)
    } else {
        total.checked_add(&q)
    };
    *total = sum.map_err(|e| AllocatorError::fatal(format!("counter value: {e}")))?;
    Ok(())
}

/// Counter set name → counter name → amount.
type Counters<'a> = HashMap<&'a str, HashMap<&'a str, Amount>>;

/// The shared counters of partitionable devices (DRAPartitionableDevices,
/// beta and on by default in v1.37) while the search runs.
#[derive(Default)]
pub(super) struct CounterState<'a> {
    /// Per pool index: what the pool offers minus what devices allocated
    /// before this search consume. Computed when first needed.
    available: HashMap<usize, Counters<'a>>,
    /// Per pool index: what the devices picked by this search consume.
    consumed: HashMap<usize, Counters<'a>>,
}

impl<'a> CounterState<'a> {
    /// Reserves the counters `device` of pool `pool_index` consumes; false
    /// (and nothing reserved) when some counter of the pool would go below
    /// zero.
    pub fn reserve(
        &mut self,
        pools: &[Pool<'a>],
        pool_index: usize,
        device: &'a Device,
        allocated: &AllocatedDevices,
    ) -> Result<bool, AllocatorError> {
        let Some(pool) = pools.get(pool_index) else {
            return Ok(false);
        };
        if let std::collections::hash_map::Entry::Vacant(e) = self.available.entry(pool_index) {
            e.insert(available_counters(pool, allocated)?);
        }
        let consumed = self.consumed.entry(pool_index).or_default();
        for c in device.consumes_counters.iter().flatten() {
            let set = consumed.entry(c.counter_set.as_str()).or_default();
            for (name, counter) in &c.counters {
                let used = set.entry(name.as_str()).or_insert(Quantity::from_units(0));
                accumulate(used, &counter.value.0, false)?;
            }
        }
        let fits = self.available.get(&pool_index).is_some_and(|available| {
            available.iter().all(|(set, counters)| {
                counters.iter().all(|(name, left)| {
                    consumed
                        .get(set)
                        .and_then(|c| c.get(name))
                        .is_none_or(|used| used <= left)
                })
            })
        });
        if !fits {
            self.release(pool_index, device)?;
        }
        Ok(fits)
    }

    /// Undoes a successful [`CounterState::reserve`].
    pub fn release(&mut self, pool_index: usize, device: &'a Device) -> Result<(), AllocatorError> {
        let Some(consumed) = self.consumed.get_mut(&pool_index) else {
            return Ok(());
        };
        for c in device.consumes_counters.iter().flatten() {
            if let Some(set) = consumed.get_mut(c.counter_set.as_str()) {
                for (name, counter) in &c.counters {
                    if let Some(used) = set.get_mut(name.as_str()) {
                        accumulate(used, &counter.value.0, true)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// What `pool`'s counter sets offer minus what its allocated devices (on
/// this node or not) consume. May go negative: then nothing is left.
fn available_counters<'a>(
    pool: &Pool<'a>,
    allocated: &AllocatedDevices,
) -> Result<Counters<'a>, AllocatorError> {
    let mut available: Counters<'a> = HashMap::new();
    for (name, set) in &pool.counter_sets {
        let counters = available.entry(name).or_default();
        for (counter, value) in &set.counters {
            counters.insert(counter.as_str(), amount(&value.value.0)?);
        }
    }
    for slice in pool.slices.iter().chain(&pool.other_slices) {
        for device in slice.spec.devices.iter().flatten() {
            if !allocated.is_allocated_parts(pool.driver, pool.name, &device.name) {
                continue;
            }
            for c in device.consumes_counters.iter().flatten() {
                let Some(set) = available.get_mut(c.counter_set.as_str()) else {
                    continue;
                };
                for (name, counter) in &c.counters {
                    if let Some(left) = set.get_mut(name.as_str()) {
                        accumulate(left, &counter.value.0, true)?;
                    }
                }
            }
        }
    }
    Ok(available)
}

/// A device's identity within one search: driver, pool, device name.
pub(super) type DeviceKey<'a> = (&'a str, &'a str, &'a str);

/// The shares of devices that allow multiple allocations which the search
/// has taken so far (Go's `allocatingCapacity`): per device, how many and
/// what they consume together.
#[derive(Default)]
pub(super) struct ShareState<'a> {
    taking: HashMap<DeviceKey<'a>, (usize, Consumed)>,
}

impl<'a> ShareState<'a> {
    /// Whether `key` is shared already, by an allocated claim or by this
    /// search (Go's `deviceCapacityInUse`): its counters are consumed then.
    pub fn in_use(&self, key: DeviceKey<'a>, allocated: &AllocatedDevices) -> bool {
        self.taking.contains_key(&key) || allocated.shares_of(key.0, key.1, key.2).is_some()
    }

    /// Whether `requests` fit the remaining capacity of `device` (Go's
    /// `CmpRequestOverCapacity` with the allocated and in-search amounts).
    pub fn fits(
        &self,
        key: DeviceKey<'a>,
        requests: &CapacityRequests,
        device: &Device,
        allocated: &AllocatedDevices,
    ) -> Result<bool, String> {
        let held = allocated.shares_of(key.0, key.1, key.2);
        let taking = self.taking.get(&key).map(|(_, c)| c);
        capacity::device_fits(requests, device, held, taking)
    }

    /// Records a share of `key` consuming `consumed`.
    pub fn take(&mut self, key: DeviceKey<'a>, consumed: &[(String, capacity::Amount)]) {
        let (count, total) = self.taking.entry(key).or_default();
        *count += 1;
        capacity::add_to(total, consumed);
    }

    /// Undoes [`ShareState::take`].
    pub fn give_back(&mut self, key: DeviceKey<'a>, consumed: &[(String, capacity::Amount)]) {
        if let Some((count, total)) = self.taking.get_mut(&key) {
            *count -= 1;
            capacity::subtract_from(total, consumed);
            if *count == 0 {
                self.taking.remove(&key);
            }
        }
    }
}
