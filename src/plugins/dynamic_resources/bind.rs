//! DynamicResources' Reserve, Unreserve and PreBind.
//!
//! Reserve records the devices the allocator chose on the node as in
//! flight (kube-scheduler's `SignalClaimPendingAllocation`): the next pod's
//! PreFilter counts them as taken, and waits for a claim whose allocation
//! is in flight. PreBind writes each claim's `status.allocation` (with the
//! delete-protection finalizer first) and adds the pod to
//! `status.reservedFor` through the status subresource, re-reading the
//! claim after a conflict as Go's `retry.RetryOnConflict` does. What it
//! wrote stands for the claim until the watch shows it (the assume cache).
//!
//! When an allocated device has binding conditions, PreBind then waits
//! for its driver ([`super::binding_conditions`]).
//!
//! The claim for a pod's extended resources ([`super::extended`]) is in
//! flight under a per-pod key from Reserve; PreBind creates it, moves it to
//! the created name, writes it as any other, and records the mapping in
//! the pod's status; Unreserve deletes it
//! ([`super::claim_writes::delete_claim`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    AllocationResult, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::binding_conditions::{has_binding_conditions, wait_until_ready};
use super::claim_writes::{FINALIZER, WRITE_ATTEMPTS, api_message, delete_claim, unreserve_claim};
use super::cycle::{DraCycle, devices_of};
use super::extended::{ExtendedChoice, IN_MEMORY_NAME};
use super::{DynamicResources, InFlight, kobj};
use crate::framework::{ApiWrite, CycleState, PodEventSink, PreBindPlugin, ReservePlugin, Status};
use crate::objects::PodInfo;

/// The in-flight key of the claim a pod's extended resources get, until
/// PreBind created it and it has a name.
fn pending_key(pod: &PodInfo) -> String {
    format!("{}/{}#{}", pod.namespace, IN_MEMORY_NAME, pod.uid)
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(cycle) = state.read::<DraCycle>() else {
            return Status::success();
        };
        let Some(choice) = cycle.by_node.lock().get(node).cloned() else {
            // Nothing to allocate, or only extended resources the node's
            // device plugin provides.
            if cycle.to_allocate.is_empty() {
                return Status::success();
            }
            return Status::error("claim allocation not found for node");
        };
        if choice.results.len() != cycle.to_allocate.len() {
            return Status::error(format!(
                "internal error, have {} allocations, {} claims to allocate, want {} claims",
                choice.results.len(),
                cycle.to_allocate.len(),
                cycle.to_allocate.len()
            ));
        }
        let mut table = self.in_flight.lock();
        for (&i, allocation) in cycle.to_allocate.iter().zip(choice.results.iter()) {
            let claim = &cycle.claims[i];
            table.insert(
                kobj(claim),
                InFlight {
                    uid: claim.metadata.uid.clone().unwrap_or_default(),
                    devices: devices_of(allocation),
                    written: None,
                    created: false,
                },
            );
        }
        if let Some(extended) = &choice.extended {
            table.insert(
                pending_key(pod),
                InFlight {
                    uid: String::new(),
                    devices: devices_of(&extended.allocation),
                    written: None,
                    created: true,
                },
            );
        }
        Status::success()
    }

    /// Gives back the devices of allocations not written yet. One PreBind
    /// already wrote stays in flight until the watch shows it: the API has
    /// it, so another pod must not be given its devices meanwhile. As
    /// kube-scheduler, takes the pod out of `reservedFor` of every
    /// allocated claim that lists it (as PreBind left it): the allocation
    /// stays, so a retry goes where it points, or PostFilter deallocates it.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, _: &str) -> Vec<ApiWrite> {
        let Some(cycle) = state.read::<DraCycle>() else {
            return Vec::new();
        };
        let mut writes = Vec::new();
        {
            let mut table = self.in_flight.lock();
            table.remove(&pending_key(pod));
            // The claim PreBind created for the extended resources goes
            // (kube-scheduler's `unreserveExtendedResourceClaim`).
            if let Some(created) = cycle.created.lock().take() {
                table.remove(&kobj(&created));
                writes.push(delete_claim(&created));
            }
            for &i in &cycle.to_allocate {
                let claim = &cycle.claims[i];
                let key = kobj(claim);
                if table.get(&key).is_some_and(|f| {
                    f.written.is_none() && Some(f.uid.as_str()) == claim.metadata.uid.as_deref()
                }) {
                    table.remove(&key);
                }
            }
        }
        let written = cycle.written.lock();
        let unreserved = cycle
            .claims
            .iter()
            .enumerate()
            .map(|(i, claim)| written.get(&i).unwrap_or(claim))
            .filter(|claim| {
                claim
                    .status
                    .as_ref()
                    .is_some_and(|s| s.allocation.is_some())
                    && reserved_for(claim, pod)
            })
            .map(|claim| unreserve_claim(claim, pod));
        unreserved.chain(writes).collect()
    }
}

/// Whether `claim` lists `pod` in `status.reservedFor`.
pub(super) fn reserved_for(claim: &ResourceClaim, pod: &PodInfo) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| r.iter().any(|c| c.uid == pod.uid))
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind_pre_flight(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(cycle) = state.read::<DraCycle>() else {
            return Status::skip("every claim is reserved for the pod");
        };
        let extended = || (cycle.by_node.lock().get(node)).is_some_and(|c| c.extended.is_some());
        if cycle.claims.iter().any(|c| !reserved_for(c, pod)) || extended() {
            Status::success()
        } else {
            Status::skip("every claim is reserved for the pod")
        }
    }

    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
        client: &'a Client,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let Some(cycle) = state.read::<DraCycle>() else {
                return Status::success();
            };
            let choice = cycle.by_node.lock().get(node).cloned();
            let results = choice.as_ref().map(|c| &c.results);
            for (i, claim) in cycle.claims.iter().enumerate() {
                if reserved_for(claim, pod) {
                    continue;
                }
                let allocation = match cycle.to_allocate.iter().position(|&j| j == i) {
                    None => None,
                    Some(j) => match results.as_ref().and_then(|r| r.get(j)) {
                        Some(a) => Some(a.clone()),
                        None => return Status::error("claim allocation not found for node"),
                    },
                };
                match bind_claim(client, claim, allocation.as_ref(), pod).await {
                    Ok(written) => {
                        let written = Arc::new(written);
                        if allocation.is_some()
                            && let Some(f) = self.in_flight.lock().get_mut(&kobj(claim))
                        {
                            f.written = Some(written.clone());
                        }
                        cycle.written.lock().insert(i, written);
                    }
                    Err(e) => return Status::error(e),
                }
            }
            if let Some(extended) = choice.as_ref().and_then(|c| c.extended.as_ref())
                && let Err(e) = self.bind_extended(client, cycle, extended, pod).await
            {
                return Status::error(e);
            }
            // The claims as they stand now: written here, or reserved before.
            let claims: Vec<Arc<ResourceClaim>> = {
                let written = cycle.written.lock();
                let own = cycle.claims.iter().enumerate();
                own.map(|(i, c)| written.get(&i).unwrap_or(c).clone())
                    .chain(cycle.created.lock().clone())
                    .collect()
            };
            if claims.iter().any(|c| has_binding_conditions(c)) {
                if let Some(PodEventSink(events)) = state.read::<PodEventSink>() {
                    let note = format!("waiting for binding conditions for device on node {node}");
                    (events.normal(pod, "BindingConditionsPending", "Scheduling", note)).await;
                }
                let names: Vec<String> = claims
                    .iter()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &pod.namespace);
                if let Err(e) = wait_until_ready(&api, &names, self.binding_timeout).await {
                    return Status::error(e);
                }
            }
            Status::success()
        })
    }
}

impl DynamicResources {
    /// kube-scheduler's `bindClaim` for the pod's extended resources:
    /// creates the claim, then allocates and reserves it like any other,
    /// then names it in the pod's `status.extendedResourceClaimStatus`.
    /// The devices stay in flight under the created claim's name.
    async fn bind_extended(
        &self,
        client: &Client,
        cycle: &DraCycle,
        extended: &ExtendedChoice,
        pod: &PodInfo,
    ) -> Result<(), String> {
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &pod.namespace);
        let mut claim = (*extended.claim).clone();
        claim.metadata.name = None;
        claim.metadata.uid = None;
        claim.status = None;
        let created = api
            .create(&PostParams::default(), &claim)
            .await
            .map_err(|e| {
                format!(
                    "create claim for extended resources {}/: {}",
                    pod.namespace,
                    api_message(&e)
                )
            })?;
        let key = kobj(&created);
        *cycle.created.lock() = Some(Arc::new(created.clone()));
        {
            let mut table = self.in_flight.lock();
            if let Some(mut entry) = table.remove(&pending_key(pod)) {
                entry.uid = created.metadata.uid.clone().unwrap_or_default();
                table.insert(key.clone(), entry);
            }
        }
        let written =
            Arc::new(bind_claim(client, &created, Some(&extended.allocation), pod).await?);
        if let Some(f) = self.in_flight.lock().get_mut(&key) {
            f.written = Some(written.clone());
        }
        *cycle.created.lock() = Some(written);
        let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
        let status = json!({"status": {"extendedResourceClaimStatus": {
            "requestMappings": &*extended.mappings,
            "resourceClaimName": created.metadata.name,
        }}});
        pods.patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map(drop)
            .map_err(|e| {
                format!(
                    "update pod {} ExtendedResourceClaimStatus: {}",
                    pod.key(),
                    api_message(&e)
                )
            })
    }
}

/// The change PreBind makes to one claim, on the claim as last read: the
/// allocation (if the scheduler allocated it) and the pod's reservation.
/// `Err` when the claim changed in a way that forbids it.
pub(super) fn with_reservation(
    mut claim: ResourceClaim,
    allocation: Option<&AllocationResult>,
    pod: &PodInfo,
) -> Result<ResourceClaim, String> {
    let key = kobj(&claim);
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(format!("claim {key} got deleted in the meantime"));
    }
    let status = claim
        .status
        .get_or_insert_with(ResourceClaimStatus::default);
    if let Some(allocation) = allocation {
        if status.allocation.is_some() {
            return Err(format!(
                "claim {key} got allocated elsewhere in the meantime"
            ));
        }
        status.allocation = Some(allocation.clone());
    }
    // v1.37's binding conditions (on by default) time a claim's binding
    // from the allocation's timestamp, which PreBind sets once.
    let Some(allocated) = status.allocation.as_mut() else {
        return Err(format!(
            "claim {key} got deallocated elsewhere in the meantime"
        ));
    };
    allocated
        .allocation_timestamp
        .get_or_insert_with(|| Time(Timestamp::now()));
    status
        .reserved_for
        .get_or_insert_with(Vec::new)
        .push(ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        });
    Ok(claim)
}

/// Writes one claim (kube-scheduler's `bindClaim`); returns it as written.
async fn bind_claim(
    client: &Client,
    claim: &ResourceClaim,
    allocation: Option<&AllocationResult>,
    pod: &PodInfo,
) -> Result<ResourceClaim, String> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &pod.namespace);
    let mut current = claim.clone();
    for attempt in 0..WRITE_ATTEMPTS {
        if attempt > 0 {
            current = api
                .get(&name)
                .await
                .map_err(|e| format!("get updated claim {} after conflict: {e}", kobj(claim)))?;
        }
        if allocation.is_some()
            && !current
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
            && current
                .status
                .as_ref()
                .is_none_or(|s| s.allocation.is_none())
        {
            current
                .metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(FINALIZER.to_owned());
            current = match api.replace(&name, &PostParams::default(), &current).await {
                Ok(c) => c,
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(format!("add finalizer to claim {}: {e}", kobj(claim))),
            };
        }
        let updated = with_reservation(current.clone(), allocation, pod)?;
        match api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(written) => return Ok(written),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) if allocation.is_some() => {
                return Err(format!(
                    "add allocation and reservation to claim {}: {e}",
                    kobj(claim)
                ));
            }
            Err(e) => return Err(format!("add reservation to claim {}: {e}", kobj(claim))),
        }
    }
    Err(format!(
        "add reservation to claim {}: conflicts after {WRITE_ATTEMPTS} attempts",
        kobj(claim)
    ))
}
