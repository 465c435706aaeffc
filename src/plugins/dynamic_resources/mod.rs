//! DynamicResources: a pod's ResourceClaims (`resource.k8s.io/v1`) must
//! exist, and their devices must be allocatable on the node; the scheduler
//! allocates them. kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/dynamicresources`, with its messages:
//!
//! - PreEnqueue: every claim exists (a template's claim is named in the
//!   pod's `status.resourceClaimStatuses` once the resourceclaim controller
//!   created it), is not being deleted, and a template's claim is the pod's.
//! - PreFilter ([`filter`]): the same checks; an allocated claim only fits
//!   where its allocation's node selector matches; the unallocated ones get
//!   an [`crate::dra::Allocator`] with the devices in use (claims'
//!   allocations and this scheduler's own in flight). A pod without claims
//!   is skipped.
//! - Filter: allocated claims' node selectors ("resourceclaim not available
//!   on the node"), then the allocator on the node's slices, looked up by
//!   node in the cache's index ("cannot allocate all claims"), with the
//!   taints DeviceTaintRules add to their devices (GA in v1.37; the cache
//!   keeps the rules indexed, `cache::dra_taints`, and reports a rule change
//!   as updates of the slices it retaints, as kube-scheduler's tracker does).
//! - Bounds on Filter's search ([`crate::dra::SearchLimits`]): the args'
//!   `filterTimeout` (default 10 s, `0` turns it off), as kube-scheduler's
//!   DRASchedulerFilterTimeout, and placer's own step budget
//!   ([`crate::dra::STEP_BUDGET`] steps), which bounds the CPU a claim built
//!   to explode the backtracking search costs even with the timeout off. A
//!   search that runs out is an `Error`, which ends the attempt and retries
//!   the pod with backoff: "node N: timed out trying to allocate devices",
//!   kube-scheduler's text (the attempt's message is then `running
//!   "DynamicResources" filter plugin: node N: ...`), or placer's "node N:
//!   gave up trying to allocate devices: the search exceeded 50000000
//!   steps". As in kube-scheduler, the first search that gives up stops
//!   the others of the attempt ("asked by caller to stop allocating
//!   devices: some other Filter operation failed", for their nodes only).
//!   kube-scheduler's timeout is per node's Filter call; placer's clock
//!   (started in PreFilter) and budget are the attempt's, shared by every
//!   node: no node's search gets longer than in kube-scheduler, and the
//!   pod's searches over all nodes together end within `filterTimeout`.
//!   Why: the loop schedules one pod at a time and filters nodes on the
//!   machine's few cores (kube-scheduler on 16 goroutines), so with a bound
//!   per node only, 5,000 nodes each stopping just short of 10 s would
//!   hold every other pod for hours. An ordinary claim takes a few dozen
//!   steps per node and milliseconds in all: neither bound changes its
//!   verdict.
//! - Score: claims with `firstAvailable` requests score the alternatives
//!   they got (earlier is better), normalized as kube-scheduler does.
//! - PostFilter ([`filter`]): an allocated claim some node rejected for its
//!   node selector, held by no other pod, is deallocated (a write the
//!   scheduling loop sends), so the next attempt may allocate it elsewhere.
//! - Reserve / Unreserve / PreBind ([`bind`]): the chosen devices are in
//!   flight from Reserve until the watch shows PreBind's write, so no other
//!   pod gets them; PreBind writes `status.allocation` and adds the pod to
//!   `status.reservedFor` (a shared claim already allocated: only the
//!   latter); Unreserve after a failed bind takes the pod out again.
//! - Binding conditions ([`binding_conditions`]): PreBind waits until the
//!   devices' drivers report them ready; a claim whose devices failed to
//!   bind, or took longer than `bindingTimeout`, is unusable on every node
//!   and PostFilter deallocates it.
//! - Extended resources backed by DRA ([`extended`]): a container's
//!   `example.com/gpu: 1` on a node without it in its allocatable becomes a
//!   device request of a claim the scheduler creates for the pod in PreBind
//!   (NodeResourcesFit leaves such resources to this plugin there).

mod bind;
mod binding_conditions;
mod claim_writes;
mod cycle;
mod extended;
mod filter;
mod hint;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::cache::events::kinds;
use crate::dra::HeldDevice;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{EnqueueExtensions, EventHint, PreEnqueuePlugin, Status};
use crate::k8s::fields::GoDuration;
use crate::objects::PodInfo;
use crate::objects::pod::ClaimRef;
pub use extended::{ERR_CANNOT_FIT, ERR_STALE};
pub use hint::unsatisfiable_requests;

/// Plugin name in the policy.
pub const NAME: &str = "DynamicResources";

/// Filter reason: an allocated claim's node selector does not match.
pub const ERR_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// Filter reason: the allocator found no devices on the node.
pub const ERR_CANNOT_ALLOCATE: &str = "cannot allocate all claims";

/// DynamicResources' args, kube-scheduler's: `filterTimeout` (zero or
/// positive, default 10 s, `0` turns it off) bounds the device search of a
/// pod's Filter calls ([`crate::dra::SearchLimits`]); `bindingTimeout` (at
/// least a second, default 10 minutes) bounds PreBind's wait for devices'
/// binding conditions ([`bind`]).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicResourcesArgs {
    /// How long the device search of one node's Filter call, and of the
    /// pod's whole Filter pass, may take.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "zero_or_positive"
    )]
    pub filter_timeout: Option<GoDuration>,
    /// How long PreBind waits for binding conditions.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "at_least_a_second"
    )]
    pub binding_timeout: Option<GoDuration>,
}

/// kube-scheduler's `DynamicResourcesFilterTimeoutDefault`.
const FILTER_TIMEOUT_DEFAULT: GoDuration = GoDuration::from_secs(10);

/// kube-scheduler's `DynamicResourcesBindingTimeoutDefault`.
const BINDING_TIMEOUT_DEFAULT: GoDuration = GoDuration::from_secs(600);

/// `filterTimeout` as `ValidateDynamicResourcesArgs` takes it: Go's
/// durations may be negative, and a negative one is refused with
/// kube-scheduler's words, `Invalid value: "-1s": must be zero or
/// positive` (a negative zero is zero).
fn zero_or_positive<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<GoDuration>, D::Error> {
    let text = String::deserialize(d)?;
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let timeout = crate::framework::parse_go_duration(magnitude).map_err(|_| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration such as 15s, 1m30s or 500ms"
        ))
    })?;
    // The policy's error names the field before this.
    if negative && !timeout.is_zero() {
        return Err(serde::de::Error::custom(format!(
            "Invalid value: {text:?}: must be zero or positive"
        )));
    }
    Ok(Some(GoDuration::new(timeout)))
}

/// `bindingTimeout` as `ValidateDynamicResourcesArgs` takes it.
fn at_least_a_second<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<GoDuration>, D::Error> {
    let timeout = GoDuration::deserialize(d)?;
    if timeout.get() < std::time::Duration::from_secs(1) {
        return Err(serde::de::Error::custom(
            "bindingTimeout: must be at least 1 second",
        ));
    }
    Ok(Some(timeout))
}

impl crate::framework::CacheNeeds for DynamicResourcesArgs {
    fn dra(&self) -> bool {
        true
    }
}

/// One claim this scheduler allocated (Reserve) that the cache does not
/// show allocated yet (kube-scheduler's in-flight allocations and assume
/// cache together).
#[derive(Debug, Clone)]
struct InFlight {
    /// The claim's uid, so a claim deleted and created again is not confused.
    uid: String,
    /// The devices taken.
    devices: Vec<HeldDevice>,
    /// What PreBind wrote, once it did; until the watch shows the write,
    /// later pods read the claim as this.
    written: Option<Arc<ResourceClaim>>,
    /// The claim is one this scheduler creates (extended resources): not
    /// in the cache means not created or not seen yet, never deleted.
    created: bool,
}

/// Allocations in flight, by claim key `namespace/name`.
type InFlightTable = Arc<Mutex<HashMap<String, InFlight>>>;

/// The plugin.
pub struct DynamicResources {
    in_flight: InFlightTable,
    /// `filterTimeout`; `None`: off.
    filter_timeout: Option<std::time::Duration>,
    /// The step budget of one attempt's device searches.
    step_budget: u64,
    /// How long PreBind waits for devices' binding conditions.
    binding_timeout: std::time::Duration,
}

impl Default for DynamicResources {
    fn default() -> Self {
        DynamicResources::new(&DynamicResourcesArgs::default())
    }
}

impl DynamicResources {
    /// Builds the plugin.
    pub fn new(args: &DynamicResourcesArgs) -> Self {
        let filter_timeout = args.filter_timeout.unwrap_or(FILTER_TIMEOUT_DEFAULT).get();
        DynamicResources {
            in_flight: InFlightTable::default(),
            filter_timeout: (!filter_timeout.is_zero()).then_some(filter_timeout),
            step_budget: crate::dra::STEP_BUDGET,
            binding_timeout: args
                .binding_timeout
                .unwrap_or(BINDING_TIMEOUT_DEFAULT)
                .get(),
        }
    }

    /// The plugin with another step budget than [`crate::dra::STEP_BUDGET`]
    /// (tests: a small one runs out quickly).
    pub fn with_step_budget(mut self, steps: u64) -> Self {
        self.step_budget = steps;
        self
    }
}

crate::plugin!(
    DynamicResources,
    NAME,
    [
        pre_enqueue,
        pre_filter,
        filter,
        post_filter,
        score,
        reserve,
        pre_bind,
        enqueue_extensions
    ]
);

/// The pod's claims as kube-scheduler's `foreachPodResourceClaim` finds
/// them: each existing claim in spec order (a template's claim that was not
/// needed is left out), or the reason the pod cannot be scheduled yet.
fn pod_claims(pod: &PodInfo, cluster: &ClusterState) -> Result<Vec<Arc<ResourceClaim>>, String> {
    let dra = cluster.dra();
    let mut claims = Vec::with_capacity(pod.spec.resource_claims.len());
    for entry in &pod.spec.resource_claims {
        let (name, generated) = match &entry.claim {
            ClaimRef::Named(n) => (n, false),
            ClaimRef::Generated(n) => (n, true),
            ClaimRef::NotNeeded => continue,
            ClaimRef::Pending => {
                return Err(format!(
                    "pod \"{}/{}\": ResourceClaim not created yet",
                    pod.namespace, pod.name
                ));
            }
            ClaimRef::Unsupported => {
                return Err(format!(
                    "pod \"{}/{}\", spec.resourceClaim {:?}: none of the supported fields are set",
                    pod.namespace, pod.name, entry.name
                ));
            }
        };
        let Some(claim) = dra.claim(&pod.namespace, name) else {
            return Err(format!(
                "could not find ResourceClaim \"{}/{}\"",
                pod.namespace, name
            ));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim {name:?} is being deleted"));
        }
        if generated && !owned_by(claim, pod) {
            return Err(format!(
                "ResourceClaim {}/{} was not created for Pod {}/{} (Pod is not owner)",
                pod.namespace, name, pod.namespace, pod.name
            ));
        }
        claims.push(claim.clone());
    }
    Ok(claims)
}

/// `metav1.IsControlledBy(claim, pod)`.
fn owned_by(claim: &ResourceClaim, pod: &PodInfo) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == pod.uid)
}

/// `namespace/name` of a claim, as `klog.KObj` prints it.
fn kobj(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    )
}

/// Whether the DRA objects are watched at all: not in extender mode (nor
/// from a snapshot file), where kube-scheduler allocates claims itself and
/// placer answers for such pods as for any other.
fn watched(cluster: &ClusterState) -> bool {
    cluster.dra().is_watched()
}

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &PodInfo, cluster: &ClusterState) -> Status {
        if pod.spec.resource_claims.is_empty() || !watched(cluster) {
            return Status::success();
        }
        match pod_claims(pod, cluster) {
            Ok(_) => Status::success(),
            Err(e) => Status::unresolvable(e),
        }
    }
}

/// Whether the claim event `change` is about one of `pod`'s claims.
fn claim_of_pod(pod: &PodInfo, change: &Change) -> bool {
    let Some((namespace, name)) = change.object_key().and_then(|k| k.split_once('/')) else {
        return true;
    };
    namespace == pod.namespace
        && pod.spec.resource_claims.iter().any(|c| match &c.claim {
            ClaimRef::Named(n) | ClaimRef::Generated(n) => n == name,
            _ => false,
        })
}

/// kube-scheduler's `isSchedulableAfterClaimChange`: a claim deleted with
/// an allocation, or deallocated, may free devices for anyone; otherwise
/// only a change of one of the pod's own claims matters: its creation, or
/// a change of its status. (kube-scheduler also skips a pod whose claims
/// cannot all be found; the hint has no cluster to look in, so such a pod
/// is queued, and PreEnqueue holds it back again.)
fn claim_change_hint(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((old, new)) = change.objects::<Arc<ResourceClaim>>() else {
        return QueueingHint::Queue;
    };
    let allocated = |c: &ResourceClaim| c.status.as_ref().is_some_and(|s| s.allocation.is_some());
    let Some(new) = new else {
        // Deleted: unknown before (never seen), or allocated, may free devices.
        return match old {
            Some(old) if !allocated(old) => QueueingHint::Skip,
            _ => QueueingHint::Queue,
        };
    };
    if old.is_some_and(|o| allocated(o)) && !allocated(new) {
        return QueueingHint::Queue;
    }
    if !claim_of_pod(pod, change) {
        return QueueingHint::Skip;
    }
    match old {
        Some(old) if old.status == new.status => QueueingHint::Skip,
        _ => QueueingHint::Queue,
    }
}

impl EnqueueExtensions for DynamicResources {
    /// kube-scheduler's registrations and hints.
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::always(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_ALLOCATABLE,
            ),
            EventHint::when(
                EventResource::Kind(kinds::RESOURCE_CLAIM),
                ActionType::ADD | ActionType::UPDATE | ActionType::DELETE,
                claim_change_hint,
            ),
            // The resourceclaim controller names the created claim in the
            // pod's status.
            EventHint::always(EventResource::TargetPod, ActionType::UPDATE_OTHER),
            EventHint::always(
                EventResource::Kind(kinds::DEVICE_CLASS),
                ActionType::ADD | ActionType::UPDATE,
            ),
            // DeviceTaintRules have no registration of their own (nor in
            // kube-scheduler v1.37): the DRA watch reports a rule change as
            // an update of each slice whose devices it taints or untaints,
            // as kube-scheduler's slice tracker does, so this covers them.
            EventHint::always(
                EventResource::Kind(kinds::RESOURCE_SLICE),
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
    }
}
