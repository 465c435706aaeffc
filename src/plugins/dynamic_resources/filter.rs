//! DynamicResources' PreFilter, Filter and Score.
//!
//! PreFilter sorts the pod's claims into allocated ones (a node selector to
//! match) and ones to allocate (an [`Allocator`] built once per pod, with
//! the devices in use gathered once). Filter does no I/O: it looks the
//! node's slices up in the cache's per-node index and keeps what the
//! allocator chose per node for Score, Reserve and PreBind.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceRequest, ResourceClaim, ResourceSlice,
};
use parking_lot::Mutex;

use super::binding_conditions;
use super::claim_writes::{deallocate, delete_claim};
use super::cycle::{DraCycle, NodeChoice};
use super::extended::{ExtendedChoice, ExtendedCycle};
use super::{
    DynamicResources, ERR_CANNOT_ALLOCATE, ERR_NOT_AVAILABLE, InFlight, kobj, pod_claims, watched,
};
use crate::cache::ClusterState;
use crate::dra::{AllocatedDevices, Allocator, AllocatorError, GaveUp, HeldDevice, SearchLimits};
use crate::framework::scoring::default_normalize_score;
use crate::framework::{
    Code, CycleState, Diagnosis, FilterPlugin, Framework, NodeScore, Nominating, PostFilterPlugin,
    PostFilterResult, PreFilterPlugin, ScorePlugin, Status,
};
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::{NodeInfo, PodInfo};

/// kube-scheduler's `FirstAvailableDeviceRequestMaxSize`: the first
/// alternative of a `firstAvailable` request scores this much.
const FIRST_AVAILABLE_MAX: i64 = 8;

/// Copies of the claims at `to_allocate`: what an allocator is built from.
fn unallocated(claims: &[Arc<ResourceClaim>], to_allocate: &[usize]) -> Vec<ResourceClaim> {
    to_allocate.iter().map(|&i| (*claims[i]).clone()).collect()
}

impl DynamicResources {
    /// Drops in-flight allocations the cache now shows (or whose claim is
    /// gone), returns the claim as this scheduler last wrote it when the
    /// cache is behind, and the devices still in flight.
    fn settle_in_flight(
        &self,
        cluster: &ClusterState,
    ) -> (HashMap<String, Arc<ResourceClaim>>, Vec<HeldDevice>) {
        let dra = cluster.dra();
        let mut table = self.in_flight.lock();
        table.retain(|key, f: &mut InFlight| {
            let Some((ns, name)) = key.split_once('/') else {
                return false;
            };
            match dra.claim(ns, name) {
                // Not written yet, or a claim this scheduler created that
                // the watch has not shown yet.
                None => f.written.is_none() || f.created,
                Some(c) if c.metadata.uid.as_deref() != Some(f.uid.as_str()) => false,
                // The watch shows the allocation: the cache counts it now.
                Some(c) => c.status.as_ref().is_none_or(|s| s.allocation.is_none()),
            }
        });
        let written = table
            .iter()
            .filter_map(|(k, f)| f.written.clone().map(|w| (k.clone(), w)))
            .collect();
        let devices = table.values().flat_map(|f| f.devices.clone()).collect();
        (written, devices)
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        if !watched(cluster) {
            return Status::skip("pod has no ResourceClaims");
        }
        // Before anything else, as kube-scheduler writes its (empty) state
        // first: PostFilter tells from it whether PreFilter ran at all.
        state.write(PreFilterRan);
        let extended = ExtendedCycle::new(pod, cluster);
        if pod.spec.resource_claims.is_empty() && extended.is_none() {
            return Status::skip("pod has no ResourceClaims");
        }
        let mut claims = match pod_claims(pod, cluster) {
            Ok(c) => c,
            Err(e) => return Status::unresolvable(e),
        };
        if claims.is_empty() && extended.is_none() {
            return Status::skip("no ResourceClaim was generated for the pod");
        }
        let (written, in_flight) = self.settle_in_flight(cluster);
        let mut available_on = Vec::with_capacity(claims.len());
        let mut to_allocate = Vec::new();
        let mut stuck = Vec::new();
        for (i, claim) in claims.iter_mut().enumerate() {
            let key = kobj(claim);
            if let Some(w) = written.get(&key)
                && w.metadata.uid == claim.metadata.uid
            {
                *claim = w.clone();
            }
            match claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
                Some(allocation) => {
                    let selector = match &allocation.node_selector {
                        None => None,
                        Some(s) => match RequiredNodeAffinity::strict(s, "nodeSelector") {
                            Ok(m) => Some(m),
                            Err(e) => return Status::error(e.join("; ")),
                        },
                    };
                    available_on.push(selector);
                    if binding_conditions::stuck(claim, self.binding_timeout) {
                        stuck.push(i);
                    }
                }
                None => {
                    if self.in_flight.lock().contains_key(&key) {
                        return Status::unresolvable(format!(
                            "resource claim {key} is in the process of being allocated"
                        ));
                    }
                    if let Err(e) = check_classes(claim, cluster) {
                        return Status::unresolvable(e);
                    }
                    available_on.push(None);
                    to_allocate.push(i);
                }
            }
        }
        let allocator = if to_allocate.is_empty() {
            None
        } else {
            let dra = cluster.dra();
            let class_of = |name: &str| dra.class(name);
            match Allocator::new(unallocated(&claims, &to_allocate), &class_of) {
                Ok(a) => Some(a),
                Err(AllocatorError::OnNode(e)) => return Status::unresolvable(e),
                Err(e) => return Status::error(e.to_string()),
            }
        };
        let mut allocated = AllocatedDevices::default();
        if allocator.is_some() || extended.is_some() {
            allocated = AllocatedDevices::in_cache(cluster.dra());
            for held in in_flight {
                allocated.hold(held);
            }
        }
        state.write(DraCycle {
            claims,
            available_on,
            to_allocate,
            stuck,
            allocator,
            extended,
            allocated,
            limits: SearchLimits::new(self.filter_timeout, self.step_budget),
            by_node: Mutex::default(),
            unavailable: Mutex::default(),
            written: Mutex::default(),
            created: Mutex::default(),
        });
        Status::success()
    }
}

/// Written by PreFilter whenever the plugin runs with the DRA watches.
#[derive(Debug, Clone, Copy)]
struct PreFilterRan;

/// kube-scheduler's PostFilter: deallocate an allocated claim of the pod
/// that some node rejected for its allocation's node selector, provided no
/// other pod has it reserved, so the next attempt may allocate it anywhere
/// (before DefaultPreemption evicts anyone: the plugin comes first).
/// kube-scheduler picks one such claim at random; placer the first in spec
/// order. The scheduling loop sends the write ([`crate::framework::ApiWrite`]).
///
/// It reads the plugin's PreFilter state first. When an earlier PreFilter
/// plugin rejected the pod, this plugin's PreFilter never ran, the read
/// fails and kube-scheduler ends PostFilter there with the cycle state's
/// error, "not found", which its FailedScheduling text then carries instead
/// of DefaultPreemption's part. placer gives the same text. `/explain`
/// keeps no cycle state and never writes: there the plugin has nothing to do.
impl PostFilterPlugin for DynamicResources {
    fn post_filter(
        &self,
        _: &Framework,
        pod: &PodInfo,
        diagnosis: &Diagnosis<'_>,
        cluster: &mut ClusterState,
    ) -> PostFilterResult {
        let answer = |status, writes| PostFilterResult {
            status,
            nominating: Nominating::Unchanged,
            writes,
        };
        let nothing = || {
            answer(
                Status::from_reasons(Code::Unschedulable, Vec::new()),
                Vec::new(),
            )
        };
        let Some(state) = diagnosis.state.filter(|_| watched(cluster)) else {
            return nothing();
        };
        if state.read::<PreFilterRan>().is_none() {
            return answer(Status::error("not found"), Vec::new());
        }
        let Some(cycle) = state.read::<DraCycle>() else {
            return nothing();
        };
        let unavailable = cycle.unavailable.lock();
        let blocking = unavailable.iter().map(|&i| &cycle.claims[i]).find(|claim| {
            let reserved = claim
                .status
                .as_ref()
                .and_then(|s| s.reserved_for.as_deref());
            match reserved.unwrap_or_default() {
                [] => true,
                [only] => only.uid == pod.uid,
                _ => false,
            }
        });
        if let Some(claim) = blocking {
            return answer(
                Status::unschedulable("deallocation of ResourceClaim completed"),
                vec![deallocate(claim)],
            );
        }
        // A claim an earlier attempt created for the pod's extended
        // resources goes, so that the next attempt allocates anew.
        match cycle.extended.as_ref().and_then(|x| x.stale.as_ref()) {
            Some(stale) => answer(
                Status::unschedulable("deletion of ResourceClaim completed"),
                vec![delete_claim(stale)],
            ),
            None => nothing(),
        }
    }
}

/// The requests of `claim`'s spec.
fn requests_of(claim: &ResourceClaim) -> impl Iterator<Item = &DeviceRequest> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
}

/// kube-scheduler's PreFilter check that every request's class exists.
fn check_classes(claim: &ResourceClaim, cluster: &ClusterState) -> Result<(), String> {
    let dra = cluster.dra();
    let missing = |request: &str, class: &str| {
        format!("request {request}: device class {class} does not exist")
    };
    for request in requests_of(claim) {
        if let Some(exactly) = &request.exactly {
            if dra.class(&exactly.device_class_name).is_none() {
                return Err(missing(&request.name, &exactly.device_class_name));
            }
        } else if let Some(subs) = request.first_available.as_ref().filter(|s| !s.is_empty()) {
            for sub in subs {
                if dra.class(&sub.device_class_name).is_none() {
                    return Err(missing(
                        &format!("{}/{}", request.name, sub.name),
                        &sub.device_class_name,
                    ));
                }
            }
        } else {
            return Err(format!(
                "resource claim {}, request {}: unknown request type",
                kobj(claim),
                request.name
            ));
        }
    }
    Ok(())
}

impl FilterPlugin for DynamicResources {
    fn filter(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let cycle = match state.from_pre_filter::<DraCycle>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        // The extended resources first, as kube-scheduler checks them.
        let variant = match &cycle.extended {
            None => None,
            // A variant's allocator allocates the pod's own claims too.
            Some(x) => match x.on_node(
                node,
                || unallocated(&cycle.claims, &cycle.to_allocate),
                cluster,
            ) {
                Ok(v) => v,
                Err(status) => return status,
            },
        };
        // kube-scheduler notes the allocated claims the node cannot use,
        // still runs the allocator for the others (its verdict comes first),
        // and only then rejects the node for the former.
        let unavailable: Vec<usize> = cycle
            .available_on
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                s.as_ref().is_some_and(|s| !s.matches(node)) || cycle.stuck.contains(i)
            })
            .map(|(i, _)| i)
            .collect();
        let own = cycle.to_allocate.len();
        let allocated = match (&variant, &cycle.allocator) {
            (Some(v), _) => match allocate_on(&v.allocator, own + 1, cycle, node, cluster) {
                Ok(mut results) => {
                    let extended = results.pop().map(|allocation| ExtendedChoice {
                        claim: v.claim.clone(),
                        allocation,
                        mappings: v.mappings.clone(),
                    });
                    Some(NodeChoice { results, extended })
                }
                Err(status) => return status,
            },
            (None, Some(allocator)) => match allocate_on(allocator, own, cycle, node, cluster) {
                Ok(results) => Some(NodeChoice {
                    results,
                    extended: None,
                }),
                Err(status) => return status,
            },
            (None, None) => None,
        };
        if !unavailable.is_empty() {
            cycle.unavailable.lock().extend(unavailable);
            return Status::unresolvable(ERR_NOT_AVAILABLE);
        }
        if let Some(results) = allocated {
            cycle
                .by_node
                .lock()
                .insert(node.name.clone(), Arc::new(results));
        }
        Status::success()
    }
}

/// Runs `allocator` on `node`: `expected` results (one per claim it
/// allocates), or the node's rejection.
fn allocate_on(
    allocator: &Allocator,
    expected: usize,
    cycle: &DraCycle,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Result<Vec<AllocationResult>, Status> {
    let dra = cluster.dra();
    let (own, shared) = dra.slices_for(&node.name);
    let joined: Vec<Arc<ResourceSlice>>;
    let slices = if shared.is_empty() {
        own
    } else {
        joined = own.iter().chain(shared).cloned().collect();
        &joined
    };
    match allocator.allocate_within(
        node,
        slices,
        dra.all_slices(),
        &cycle.allocated,
        dra.taint_rules(),
        &cycle.limits,
    ) {
        Ok(Some(results)) if results.len() == expected => Ok(results),
        Ok(_) => Err(Status::unresolvable(ERR_CANNOT_ALLOCATE)),
        Err(AllocatorError::OnNode(e)) => Err(Status::unresolvable(e)),
        Err(AllocatorError::GaveUp(why)) => Err(gave_up(why, node)),
        Err(e) => Err(Status::error(e.to_string())),
    }
}

/// kube-scheduler's verdict on a search that ran out of time: an `Error`
/// ("timeouts are potentially transient"), which ends the attempt and
/// retries the pod with backoff rather than waiting for a cluster event;
/// placer's step budget ends it the same way. A search stopped because
/// another node's gave up is that node's business: this one is only
/// unschedulable, as kube-scheduler reports a Filter call it cancelled.
fn gave_up(why: GaveUp, node: &NodeInfo) -> Status {
    match why {
        GaveUp::Stopped => Status::unresolvable(why.to_string()),
        GaveUp::TimedOut | GaveUp::OutOfSteps(_) => {
            Status::error(format!("node {}: {why}", node.name))
        }
    }
}

impl ScorePlugin for DynamicResources {
    /// A batch of one node.
    fn score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<NodeScore, Status> {
        let mut one = [NodeScore::default()];
        self.score_batch(state, pod, &[node], cluster, &mut one)?;
        let [score] = one;
        Ok(score)
    }

    /// A pod without claims (the most common) scores 0 on every node
    /// without a call per node; otherwise the allocations are looked up
    /// under one lock per batch.
    fn score_batch(
        &self,
        state: &CycleState,
        _: &PodInfo,
        nodes: &[&NodeInfo],
        _: &ClusterState,
        scores: &mut [NodeScore],
    ) -> Result<(), Status> {
        let Some(cycle) = state.read::<DraCycle>() else {
            scores.fill(NodeScore::value(0));
            return Ok(());
        };
        let by_node = cycle.by_node.lock();
        for (slot, node) in scores.iter_mut().zip(nodes) {
            let results = by_node.get(&node.name).map(|c| &c.results);
            *slot = NodeScore::value(compute_score(cycle, results));
        }
        Ok(())
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(scores, false);
        Status::success()
    }
}

/// kube-scheduler's `computeScore`: each allocated `firstAvailable`
/// alternative scores 8 minus its position.
fn compute_score(cycle: &DraCycle, results: Option<&Vec<AllocationResult>>) -> i64 {
    let mut score = 0;
    let mut next = 0;
    for claim in &cycle.claims {
        let allocation = match claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
            Some(a) => a,
            None => {
                let Some(a) = results.and_then(|r| r.get(next)) else {
                    return 0;
                };
                next += 1;
                a
            }
        };
        let picked: HashSet<&str> = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| r.request.as_str())
            .filter(|r| r.contains('/'))
            .collect();
        for request in requests_of(claim) {
            for (i, sub) in request.first_available.iter().flatten().enumerate() {
                if picked.contains(format!("{}/{}", request.name, sub.name).as_str()) {
                    score += FIRST_AVAILABLE_MAX - i as i64;
                }
            }
        }
    }
    score
}
