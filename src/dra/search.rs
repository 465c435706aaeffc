//! The backtracking search of one `allocate` call (Go's `allocateOne`):
//! claims in order, their requests in order, each request's devices one at a
//! time; each candidate that is free, selected, untainted, within the shared
//! counters and the claim's constraints is taken, and the search goes on
//! with the next device; when that fails, the candidate is given back and
//! the next one is tried. The first full solution wins.
//!
//! Within one request devices are only tried in increasing position, so the
//! search visits combinations, not permutations, of a request's devices.
//! Even so a claim can ask for astronomically many: every recursion and
//! every candidate is a step of a [`Meter`], which ends the search when the
//! attempt's `filterTimeout` or step budget runs out ([`super::budget`]).

use std::collections::HashMap;

use super::budget::{Meter, SearchLimits};
use super::capacity::{self, Amount};
use super::checks::{
    ConstraintState, CounterState, DeviceKey, ShareState, selectors_match, taint_prevents,
};
use super::plan::{ALLOCATION_RESULTS_MAX_SIZE, Choice, ClaimPlan, Mode};
use super::pools::Pool;
use super::types::{AllocatedDevices, AllocatorError, Candidate};
use crate::objects::NodeInfo;

/// A device picked for a request.
pub(super) struct Picked<'a> {
    pub request: usize,
    pub choice: usize,
    pub candidate: Candidate<'a>,
    /// For a share of a device that allows multiple allocations: what it
    /// consumes of each of the device's capacities.
    pub share: Option<Vec<(String, Amount)>>,
}

/// Why the search stops early.
enum Stop {
    /// The claim would exceed `AllocationResultsMaxSize` on this path:
    /// backtrack further (a subrequest that needs fewer devices may fit).
    MaxSize,
    /// A real error: ends the `allocate` call.
    Fatal(AllocatorError),
}

impl From<AllocatorError> for Stop {
    fn from(e: AllocatorError) -> Self {
        Stop::Fatal(e)
    }
}

/// Position of the device the search is looking for.
#[derive(Clone, Copy, Default)]
struct At {
    claim: usize,
    request: usize,
    choice: usize,
    device: usize,
}

/// Where to resume scanning devices within one request.
#[derive(Clone, Copy, Default)]
struct Resume {
    pool: usize,
    slice: usize,
    device: usize,
}

/// What a taken candidate changed, to undo it on backtrack.
struct Taken {
    counters: bool,
    constraints: usize,
    /// Marked in `allocating` (a device taken whole).
    marked: bool,
}

/// The state of one `allocate` call.
pub(super) struct Search<'s, 'a> {
    claims: &'s [ClaimPlan],
    pools: &'s [Pool<'a>],
    node: &'s NodeInfo,
    allocated: &'s AllocatedDevices,
    /// For "All" requests, per (claim, request, choice): the devices.
    all: HashMap<(usize, usize, usize), Vec<Candidate<'a>>>,
    /// Devices picked whole by this search, with the claims they were
    /// picked for.
    allocating: HashMap<DeviceKey<'a>, Vec<usize>>,
    constraints: Vec<Vec<ConstraintState<'s>>>,
    counters: CounterState<'a>,
    shares: ShareState<'a>,
    /// Whether a device passes a choice's selectors, by the device's address
    /// (stable for the call) and the choice: CEL runs once per pair.
    selectable: HashMap<(usize, usize, usize, usize), bool>,
    /// Per claim: the devices picked so far.
    pub picked: Vec<Vec<Picked<'a>>>,
    /// Per claim and request: the choice (subrequest) that was taken.
    pub chosen: Vec<Vec<usize>>,
    /// Counts the steps against the attempt's limits.
    meter: Meter<'s>,
}

impl<'s, 'a> Search<'s, 'a> {
    /// Prepares the search: resolves "All" requests to their devices and
    /// checks each claim against the result size limit, as Go does before
    /// searching. An attempt whose `limits` already ran out gives up here.
    pub fn new(
        claims: &'s [ClaimPlan],
        pools: &'s [Pool<'a>],
        node: &'s NodeInfo,
        allocated: &'s AllocatedDevices,
        limits: &'s SearchLimits,
    ) -> Result<Self, AllocatorError> {
        let meter = limits.meter().map_err(AllocatorError::GaveUp)?;
        let mut search = Search {
            claims,
            pools,
            node,
            allocated,
            all: HashMap::new(),
            allocating: HashMap::new(),
            constraints: claims
                .iter()
                .map(|c| c.constraints.iter().map(ConstraintState::new).collect())
                .collect(),
            counters: CounterState::default(),
            shares: ShareState::default(),
            selectable: HashMap::new(),
            picked: claims.iter().map(|_| Vec::new()).collect(),
            chosen: claims.iter().map(|c| vec![0; c.requests.len()]).collect(),
            meter,
        };
        for (ci, claim) in claims.iter().enumerate() {
            let mut min_total = 0usize;
            for (ri, request) in claim.requests.iter().enumerate() {
                let mut min_request = usize::MAX;
                for (si, choice) in request.choices.iter().enumerate() {
                    let n = match choice.mode {
                        Mode::Exact(n) => n,
                        Mode::All => {
                            let devices = search.all_devices(ci, ri, si, choice)?;
                            let n = devices.len();
                            search.all.insert((ci, ri, si), devices);
                            n
                        }
                    };
                    min_request = min_request.min(n);
                }
                if min_request > ALLOCATION_RESULTS_MAX_SIZE - min_total {
                    return Err(AllocatorError::fatal(format!(
                        "claim {}, request {}: adding {min_request} devices exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_total} already accounted for",
                        claim.key, request.name
                    )));
                }
                min_total += min_request;
            }
        }
        Ok(search)
    }

    /// Every device on the node an "All" choice selects; an error when a
    /// pool is incomplete or invalid, since "all" cannot be known then.
    fn all_devices(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        choice: &Choice,
    ) -> Result<Vec<Candidate<'a>>, AllocatorError> {
        let claim = &self.claims[ci];
        let name = choice.sub_name.as_deref().unwrap_or(&choice.full_name);
        let mut devices = Vec::new();
        for (pi, pool) in self.pools.iter().enumerate() {
            let state = if pool.incomplete {
                "being updated"
            } else if pool.invalid {
                "invalid"
            } else {
                ""
            };
            if !state.is_empty() {
                return Err(AllocatorError::fatal(format!(
                    "claim {}, request {name}: asks for all devices, but resource pool {} is currently {state}",
                    claim.key,
                    pool.id()
                )));
            }
            for (slice, device) in pool.devices() {
                let candidate = Candidate {
                    pool: pi,
                    slice,
                    device,
                };
                if !self.is_selectable((ci, ri, si), choice, candidate)? {
                    continue;
                }
                // The device's capacity alone, not what is left of it: a
                // device too full for the request stays in "all", so that
                // the request fails rather than getting fewer devices.
                let fits =
                    capacity::device_fits(&choice.capacity, device, None, None).map_err(|e| {
                        AllocatorError::fatal(format!(
                            "claim {}, request {name}: checking capacity for device {}: {e}",
                            claim.key, device.name
                        ))
                    })?;
                if fits {
                    devices.push(candidate);
                }
            }
        }
        Ok(devices)
    }

    /// Runs the search: true when every claim got all its devices.
    pub fn run(&mut self) -> Result<bool, AllocatorError> {
        match self.allocate_one(At::default(), false, Resume::default()) {
            Ok(done) => Ok(done),
            Err(Stop::MaxSize) => Ok(false),
            Err(Stop::Fatal(e)) => Err(e),
        }
    }

    fn allocate_one(&mut self, at: At, in_sub: bool, from: Resume) -> Result<bool, Stop> {
        self.meter.step().map_err(AllocatorError::GaveUp)?;
        let claims = self.claims;
        let Some(claim) = claims.get(at.claim) else {
            return Ok(true);
        };
        let Some(request) = claim.requests.get(at.request) else {
            let next = At {
                claim: at.claim + 1,
                ..At::default()
            };
            return match self.allocate_one(next, false, Resume::default()) {
                // Only this claim's path exceeded the limit; an earlier
                // claim picking differently cannot change that, but a
                // different subrequest of this claim could: not fatal.
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        };

        if !in_sub && request.has_subrequests {
            let mut all_exceeded = true;
            for choice in 0..request.choices.len() {
                match self.allocate_one(At { choice, ..at }, true, Resume::default()) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.chosen[at.claim][at.request] = choice;
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded {
                Err(Stop::MaxSize)
            } else {
                Ok(false)
            };
        }

        let Some(choice) = request.choices.get(at.choice) else {
            return Ok(false);
        };
        // For "All" the devices are known up front.
        let all = match choice.mode {
            Mode::All => self
                .all
                .get(&(at.claim, at.request, at.choice))
                .map(|devices| (devices.len(), devices.get(at.device).copied())),
            Mode::Exact(_) => None,
        };
        let wanted = match (choice.mode, all) {
            (Mode::Exact(n), _) => n,
            (Mode::All, Some((n, _))) if n > 0 => n,
            // At least one device is required for "All".
            (Mode::All, _) => return Ok(false),
        };
        if at.device >= wanted {
            let next = At {
                claim: at.claim,
                request: at.request + 1,
                ..At::default()
            };
            return self.allocate_one(next, false, Resume::default());
        }
        let remaining = wanted - at.device;
        let room = ALLOCATION_RESULTS_MAX_SIZE.saturating_sub(self.picked[at.claim].len());
        if remaining > room {
            return Err(Stop::MaxSize);
        }
        let next_device = At {
            device: at.device + 1,
            ..at
        };

        if let Some((_, next)) = all {
            // Take the next of the known devices or fail: the order of
            // "all" devices does not matter.
            let Some(candidate) = next else {
                return Ok(false);
            };
            let Some(taken) = self.take(at, candidate, true)? else {
                return Ok(false);
            };
            return match self.allocate_one(next_device, in_sub, Resume::default()) {
                Ok(true) => Ok(true),
                other => {
                    self.give_back(at, candidate, taken)?;
                    other
                }
            };
        }

        let pools = self.pools;
        for (pi, pool) in pools.iter().enumerate().skip(from.pool) {
            // Devices of incomplete or invalid pools are never allocated,
            // but other pools may still satisfy the request.
            if pool.incomplete || pool.invalid {
                continue;
            }
            let slice_start = if pi == from.pool { from.slice } else { 0 };
            for (sli, slice) in pool.slices.iter().enumerate().skip(slice_start) {
                let device_start = if pi == from.pool && sli == from.slice {
                    from.device
                } else {
                    0
                };
                let devices = slice.spec.devices.as_deref().unwrap_or_default();
                for (di, device) in devices.iter().enumerate().skip(device_start) {
                    self.meter.step().map_err(AllocatorError::GaveUp)?;
                    let candidate = Candidate {
                        pool: pi,
                        slice,
                        device,
                    };
                    // "In use" is cheap, so it goes first.
                    if !self.free_for(at.claim, choice.admin_access, candidate) {
                        continue;
                    }
                    if !self.is_selectable((at.claim, at.request, at.choice), choice, candidate)? {
                        continue;
                    }
                    if !self.capacity_fits(at, candidate, "checking")? {
                        continue;
                    }
                    let Some(taken) = self.take(at, candidate, false)? else {
                        continue;
                    };
                    let resume = Resume {
                        pool: pi,
                        slice: sli,
                        device: di + 1,
                    };
                    match self.allocate_one(next_device, in_sub, resume) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.give_back(at, candidate, taken)?,
                        Err(e) => {
                            self.give_back(at, candidate, taken)?;
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    fn key(&self, c: Candidate<'a>) -> DeviceKey<'a> {
        let pool = &self.pools[c.pool];
        (pool.driver, pool.name, c.device.name.as_str())
    }

    /// A device may be picked for claim `claim`: with admin access, unless
    /// this search already picked it for the same claim (admin access may
    /// use devices in use); otherwise, unless anyone uses it.
    fn free_for(&self, claim: usize, admin_access: bool, c: Candidate<'a>) -> bool {
        let key = self.key(c);
        let picked_for = self.allocating.get(&key);
        if admin_access {
            return !picked_for.is_some_and(|claims| claims.contains(&claim));
        }
        picked_for.is_none_or(Vec::is_empty) && !self.allocated.contains_parts(key.0, key.1, key.2)
    }

    /// The class's and the request's selectors and per-device node
    /// selection, evaluated once per device and choice.
    fn is_selectable(
        &mut self,
        (ci, ri, si): (usize, usize, usize),
        choice: &Choice,
        c: Candidate<'a>,
    ) -> Result<bool, AllocatorError> {
        let memo_key = (std::ptr::from_ref(c.device) as usize, ci, ri, si);
        if let Some(&known) = self.selectable.get(&memo_key) {
            return Ok(known);
        }
        let pool = &self.pools[c.pool];
        let known = selectors_match(choice, &self.claims[ci].key, pool, self.node, c)?;
        self.selectable.insert(memo_key, known);
        Ok(known)
    }

    /// Whether the request at `at` fits what is left of `c`'s capacity;
    /// `doing` words the error (`checking` while scanning, `rechecking`
    /// when taking), as Go words it.
    fn capacity_fits(&self, at: At, c: Candidate<'a>, doing: &str) -> Result<bool, AllocatorError> {
        let choice = &self.claims[at.claim].requests[at.request].choices[at.choice];
        self.shares
            .fits(self.key(c), &choice.capacity, c.device, self.allocated)
            .map_err(|e| self.capacity_error(at, c, &format!("{doing} capacity"), &e))
    }

    /// A capacity error of the request at `at` on `c`, worded as Go's:
    /// "claim X, request Y: `what` for device D: `e`".
    fn capacity_error(&self, at: At, c: Candidate<'a>, what: &str, e: &str) -> AllocatorError {
        let claim = &self.claims[at.claim];
        let request = &claim.requests[at.request];
        let name = (request.choices[at.choice].sub_name.as_deref()).unwrap_or(&request.name);
        let (driver, pool, device) = self.key(c);
        AllocatorError::fatal(format!(
            "claim {}, request {name}: {what} for device {driver}/{pool}/{device}: {e}",
            claim.key
        ))
    }

    /// Takes `c` for the device at `at` if it is free, untainted, within the
    /// pool's counters, the claim's constraints and the device's capacity
    /// (Go's `allocateDevice`). A device that allows multiple allocations is
    /// taken as one more share: never marked in use, its counters consumed
    /// by its first share only. `must`: the caller needs exactly this
    /// device, so a constraint that rejects it is an error of the claim.
    fn take(
        &mut self,
        at: At,
        c: Candidate<'a>,
        must: bool,
    ) -> Result<Option<Taken>, AllocatorError> {
        let claims = self.claims;
        let claim = &claims[at.claim];
        let request = &claim.requests[at.request];
        let choice = &request.choices[at.choice];
        if !self.free_for(at.claim, choice.admin_access, c) {
            return Ok(None);
        }
        let key = self.key(c);
        let shared = c.device.allow_multiple_allocations == Some(true);
        let mut taken = Taken {
            counters: false,
            constraints: 0,
            marked: false,
        };
        let counters_paid = shared && self.shares.in_use(key, self.allocated);
        if !counters_paid
            && c.device
                .consumes_counters
                .as_ref()
                .is_some_and(|c| !c.is_empty())
        {
            if !self
                .counters
                .reserve(self.pools, c.pool, c.device, self.allocated)?
            {
                return Ok(None);
            }
            taken.counters = true;
        }
        let rule_taints = self.pools[c.pool].rule_taints.of(&c.device.name);
        let taints = c.device.taints.iter().flatten().chain(rule_taints);
        if taint_prevents(taints, &choice.tolerations) {
            self.undo(at, c, &taken)?;
            return Ok(None);
        }
        let driver = self.pools[c.pool].driver;
        for ki in 0..self.constraints[at.claim].len() {
            if !self.constraints[at.claim][ki].add(
                &request.name,
                &choice.full_name,
                c.device,
                driver,
            ) {
                self.undo(at, c, &taken)?;
                if must {
                    let name = choice.sub_name.as_deref().unwrap_or(&request.name);
                    let pool = self.pools[c.pool].name;
                    return Err(AllocatorError::fatal(format!(
                        "claim {}, request {name}: cannot add device {driver}/{pool}/{} because a claim constraint would not be satisfied",
                        claim.key, c.device.name
                    )));
                }
                return Ok(None);
            }
            taken.constraints += 1;
        }
        match self.capacity_fits(at, c, "rechecking") {
            Ok(true) => {}
            Ok(false) => {
                self.undo(at, c, &taken)?;
                return Ok(None);
            }
            Err(e) => {
                self.undo(at, c, &taken)?;
                return Err(e);
            }
        }
        let share = if shared {
            let consumed = match capacity::consumption(&choice.capacity, c.device.capacity.as_ref())
            {
                Ok(consumed) => consumed,
                Err(e) => {
                    self.undo(at, c, &taken)?;
                    return Err(self.capacity_error(at, c, "computing consumed capacity", &e));
                }
            };
            self.shares.take(key, &consumed);
            Some(consumed)
        } else {
            self.allocating.entry(key).or_default().push(at.claim);
            taken.marked = true;
            None
        };
        self.picked[at.claim].push(Picked {
            request: at.request,
            choice: at.choice,
            candidate: c,
            share,
        });
        Ok(Some(taken))
    }

    /// Gives back a device [`Search::take`] took.
    fn give_back(&mut self, at: At, c: Candidate<'a>, taken: Taken) -> Result<(), AllocatorError> {
        let key = self.key(c);
        if let Some(share) = self.picked[at.claim].pop().and_then(|p| p.share) {
            self.shares.give_back(key, &share);
        }
        if taken.marked
            && let Some(claims) = self.allocating.get_mut(&key)
            && let Some(i) = claims.iter().rposition(|&ci| ci == at.claim)
        {
            claims.swap_remove(i);
        }
        self.undo(at, c, &taken)
    }

    /// Undoes the constraint and counter changes recorded in `taken`.
    fn undo(&mut self, at: At, c: Candidate<'a>, taken: &Taken) -> Result<(), AllocatorError> {
        let claims = self.claims;
        let request = &claims[at.claim].requests[at.request];
        let choice = &request.choices[at.choice];
        for ki in (0..taken.constraints).rev() {
            self.constraints[at.claim][ki].remove(&request.name, &choice.full_name);
        }
        if taken.counters {
            self.counters.release(c.pool, c.device)?;
        }
        Ok(())
    }
}
