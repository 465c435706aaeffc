//! The allocator's public vocabulary: device identities, the set of devices
//! in use, and its errors.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::resource::v1::{Device, DeviceRequestAllocationResult, ResourceSlice};

use super::budget::GaveUp;
use super::capacity::{Amount, Consumed};
use crate::cache::dra::DraState;

/// A device's identity: driver, pool, device name (`structured.DeviceID`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// `spec.driver` of the device's slice.
    pub driver: String,
    /// `spec.pool.name` of the device's slice.
    pub pool: String,
    /// The device's `name`.
    pub device: String,
}

impl DeviceId {
    /// The identity of `device` in `pool` of `driver`.
    pub fn new(
        driver: impl Into<String>,
        pool: impl Into<String>,
        device: impl Into<String>,
    ) -> Self {
        DeviceId {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
        }
    }
}

impl std::fmt::Display for DeviceId {
    /// `driver/pool/device`, as Go's `DeviceID.String()` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// One device an allocation result holds: the whole device, or one share
/// of a device that allows multiple allocations, with the capacity the
/// share consumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldDevice {
    /// Taken whole: no one else may have it.
    Whole(DeviceId),
    /// A share (the result has a `shareID`) consuming capacity name →
    /// nano-units.
    Share(DeviceId, Consumed),
}

impl HeldDevice {
    /// What `result` holds; `None` for admin access, which holds nothing.
    /// A consumed amount that does not parse (a stored object no API server
    /// would accept) counts as all of the device's capacity, so that the
    /// device is never given out past what it has.
    pub fn of_result(result: &DeviceRequestAllocationResult) -> Option<HeldDevice> {
        if result.admin_access == Some(true) {
            return None;
        }
        let id = DeviceId::new(&result.driver, &result.pool, &result.device);
        if result.share_id.is_none() {
            return Some(HeldDevice::Whole(id));
        }
        let consumed = result
            .consumed_capacity
            .iter()
            .flatten()
            .map(|(name, q)| {
                let nano = Amount::parse(&q.0).map_or(i128::MAX / 4, |a| a.nano);
                (name.clone(), nano)
            })
            .collect();
        Some(HeldDevice::Share(id, consumed))
    }
}

/// Devices already in use: allocated in some claim's `status.allocation`, or
/// in flight in this scheduler (assumed but not yet written).
///
/// Kept as driver → pool → devices so that the search can ask about a
/// device by the `&str`s of its slice without building a [`DeviceId`] (two
/// `String` clones per candidate device otherwise). Shares of devices that
/// allow multiple allocations are kept apart, with what they consume in
/// total per device: such a device is never "in use", only full.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocatedDevices {
    by_driver: HashMap<String, HashMap<String, HashSet<String>>>,
    len: usize,
    shares: HashMap<DeviceId, Consumed>,
}

impl AllocatedDevices {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `id`; false when it was there already.
    pub fn insert(&mut self, id: DeviceId) -> bool {
        let added = self
            .by_driver
            .entry(id.driver)
            .or_default()
            .entry(id.pool)
            .or_default()
            .insert(id.device);
        self.len += usize::from(added);
        added
    }

    /// Removes `id`; false when it was not there.
    pub fn remove(&mut self, id: &DeviceId) -> bool {
        let removed = self
            .by_driver
            .get_mut(&id.driver)
            .and_then(|pools| pools.get_mut(&id.pool))
            .is_some_and(|devices| devices.remove(&id.device));
        self.len -= usize::from(removed);
        removed
    }

    /// True when `id` is in use.
    pub fn contains(&self, id: &DeviceId) -> bool {
        self.contains_parts(&id.driver, &id.pool, &id.device)
    }

    /// True when device `device` of `pool` of `driver` is in use.
    pub fn contains_parts(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.by_driver
            .get(driver)
            .and_then(|pools| pools.get(pool))
            .is_some_and(|devices| devices.contains(device))
    }

    /// The devices claims' allocations hold, whole or shared, as the cache
    /// shows them (the scheduler's own allocations in flight not included).
    pub fn in_cache(dra: &DraState) -> Self {
        let whole = dra
            .allocated()
            .map(|(d, p, n)| HeldDevice::Whole(DeviceId::new(d, p, n)));
        whole
            .chain(dra.shares().filter_map(HeldDevice::of_result))
            .collect()
    }

    /// Adds what `held` holds: a whole device, or a share's consumption.
    pub fn hold(&mut self, held: HeldDevice) {
        match held {
            HeldDevice::Whole(id) => {
                self.insert(id);
            }
            HeldDevice::Share(id, consumed) => {
                let total = self.shares.entry(id).or_default();
                for (name, nano) in consumed {
                    *total.entry(name).or_default() += nano;
                }
            }
        }
    }

    /// What the allocated shares of device `device` of `pool` of `driver`
    /// consume; `None` when it has no share.
    pub(super) fn shares_of(&self, driver: &str, pool: &str, device: &str) -> Option<&Consumed> {
        if self.shares.is_empty() {
            return None;
        }
        self.shares.get(&DeviceId::new(driver, pool, device))
    }

    /// Go's `IsDeviceAllocated`: taken whole or shared at least once (either
    /// way its shared counters are consumed).
    pub fn is_allocated_parts(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.contains_parts(driver, pool, device) || self.shares_of(driver, pool, device).is_some()
    }

    /// Number of whole devices in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True without devices and shares.
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.shares.is_empty()
    }
}

impl FromIterator<DeviceId> for AllocatedDevices {
    fn from_iter<I: IntoIterator<Item = DeviceId>>(iter: I) -> Self {
        let mut set = AllocatedDevices::new();
        for id in iter {
            set.insert(id);
        }
        set
    }
}

impl Extend<DeviceId> for AllocatedDevices {
    fn extend<I: IntoIterator<Item = DeviceId>>(&mut self, iter: I) {
        for id in iter {
            self.insert(id);
        }
    }
}

impl FromIterator<HeldDevice> for AllocatedDevices {
    fn from_iter<I: IntoIterator<Item = HeldDevice>>(iter: I) -> Self {
        let mut set = AllocatedDevices::new();
        for held in iter {
            set.hold(held);
        }
        set
    }
}

/// Why claims could not be allocated, worded as kube-scheduler words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocatorError {
    /// A problem of the claims, their classes or their CEL expressions
    /// (a missing class, a compile or runtime error, an unsupported field):
    /// kube-scheduler aborts the attempt with it rather than trying other
    /// nodes (Filter's `statusError`).
    #[error("{0}")]
    Fatal(String),
    /// A problem that affects only this node (`ErrFailedAllocationOnNode`,
    /// e.g. "invalid resource pools were encountered"): Filter reports the
    /// node unschedulable with this text and goes on with other nodes.
    #[error("{0}")]
    OnNode(String),
    /// The search ran out of the attempt's time or steps
    /// ([`super::SearchLimits`]) before it found an answer.
    #[error("{0}")]
    GaveUp(GaveUp),
}

impl AllocatorError {
    pub(crate) fn fatal(message: impl Into<String>) -> Self {
        AllocatorError::Fatal(message.into())
    }
}

/// A candidate device and where it sits: what the search tries and the
/// checks judge.
#[derive(Clone, Copy)]
pub(super) struct Candidate<'a> {
    pub pool: usize,
    pub slice: &'a ResourceSlice,
    pub device: &'a Device,
}
