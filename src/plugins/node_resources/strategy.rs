//! The scoring strategies: which resources are scored and how one resource's
//! request and capacity become a score.

use crate::cache::{ClusterState, NodeUsage};
use crate::dra::{AllocatedDevices, ClassDevices};
use crate::framework::MAX_NODE_SCORE;
use crate::k8s::resource_names::{is_dra_extended_resource_name, is_extended_resource_name};
use crate::objects::pod::PodSpecInfo;
use crate::objects::{NodeInfo, Resources};

/// `schedutil.IsScalarResourceName`: the resources kube-scheduler tracks
/// besides cpu, memory, ephemeral storage and pods.
pub(super) fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// A scored resource, resolved once when the plugin is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScoredResource {
    Cpu,
    Memory,
    EphemeralStorage,
    Scalar(String),
    /// A name kube-scheduler does not track (e.g. `pods`): never scored.
    Untracked,
}

impl ScoredResource {
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "cpu" => ScoredResource::Cpu,
            "memory" => ScoredResource::Memory,
            "ephemeral-storage" => ScoredResource::EphemeralStorage,
            n if is_scalar_resource_name(n) => ScoredResource::Scalar(n.to_string()),
            _ => ScoredResource::Untracked,
        }
    }

    /// The pod's request for this resource as NodeResourcesBalancedAllocation
    /// reads it (`useRequested`: no defaults for missing cpu or memory).
    pub(crate) fn pod_requested(&self, spec: &PodSpecInfo) -> i64 {
        let requests = &spec.counted;
        match self {
            ScoredResource::Cpu => requests.milli_cpu,
            ScoredResource::Memory => requests.memory,
            ScoredResource::EphemeralStorage => requests.ephemeral_storage,
            ScoredResource::Scalar(name) => requests.scalar.get(name).copied().unwrap_or(0),
            ScoredResource::Untracked => 0,
        }
    }

    /// The pod's request for this resource (non-zero for cpu and memory).
    pub(super) fn pod_request(&self, spec: &PodSpecInfo) -> i64 {
        let requests = &spec.scoring_requests;
        match self {
            ScoredResource::Cpu => requests.milli_cpu,
            ScoredResource::Memory => requests.memory,
            ScoredResource::EphemeralStorage => requests.ephemeral_storage,
            ScoredResource::Scalar(name) => requests.scalar.get(name).copied().unwrap_or(0),
            ScoredResource::Untracked => 0,
        }
    }

    /// `(allocatable, requested including the pod)` on `node`, or `(0, 0)`
    /// when the resource does not take part (kube-scheduler's
    /// `calculateNodeAllocatableRequest` with `NonZeroRequested` for cpu
    /// and memory, as NodeResourcesFit scores).
    pub(super) fn allocatable_and_requested(
        &self,
        node: &NodeInfo,
        usage: Option<&NodeUsage>,
        pod_request: i64,
        dra: impl FnOnce() -> Option<(i64, i64)>,
    ) -> (i64, i64) {
        match self.allocatable_and_allocated(node, usage, pod_request, NodeRequests::NonZero, dra) {
            Some((allocatable, allocated)) => (allocatable, allocated + pod_request),
            None => (0, 0),
        }
    }

    /// `(allocatable, what the node's pods request)` on `node`, or `None`
    /// when the resource does not take part: an extended resource the pod
    /// does not request, one the node has none of, or one kube-scheduler
    /// does not track (`calculateResourceAllocatableRequest`). For an
    /// extended resource the node's allocatable lacks, `dra` gives the
    /// devices of the class that serves it, if any ([`DraScoring`]).
    pub(crate) fn allocatable_and_allocated(
        &self,
        node: &NodeInfo,
        usage: Option<&NodeUsage>,
        pod_request: i64,
        counting: NodeRequests,
        dra: impl FnOnce() -> Option<(i64, i64)>,
    ) -> Option<(i64, i64)> {
        let alloc = &node.allocatable;
        let used = |f: fn(&Resources) -> i64| usage.map_or(0, |u| f(&u.requested));
        let cpu_or_memory = |f: fn(&Resources) -> i64| match counting {
            NodeRequests::NonZero => usage.map_or(0, |u| f(&u.non_zero_requested)),
            NodeRequests::Requested => used(f),
        };
        let (allocatable, allocated) = match self {
            ScoredResource::Cpu => (alloc.milli_cpu, cpu_or_memory(|r| r.milli_cpu)),
            ScoredResource::Memory => (alloc.memory, cpu_or_memory(|r| r.memory)),
            ScoredResource::EphemeralStorage => {
                (alloc.ephemeral_storage, used(|r| r.ephemeral_storage))
            }
            ScoredResource::Scalar(_) if pod_request == 0 => return None,
            ScoredResource::Scalar(name) => {
                let allocatable = alloc.scalar.get(name).copied();
                if allocatable.unwrap_or(0) == 0
                    && let Some(devices) = dra().filter(|&(total, _)| total > 0)
                {
                    return Some(devices);
                }
                let u = usage.and_then(|u| u.requested.scalar.get(name).copied());
                (allocatable?, u.unwrap_or(0))
            }
            ScoredResource::Untracked => return None,
        };
        (allocatable != 0).then_some((allocatable, allocated))
    }
}

/// What the resource scores read of Dynamic Resource Allocation (kube-scheduler's
/// `draPreScoreState`), built in PreScore only when a scored resource is an extended resource a
/// DeviceClass serves: per scored resource, the class's compiled selectors, and the devices
/// claims hold. The scheduler's own allocations in flight are DynamicResources' and not counted
/// (kube-scheduler's shared DRA manager counts them): a node's score may lag for the moments
/// between a pod's Reserve and the watch showing its claim.
#[derive(Debug)]
pub(crate) struct DraScoring {
    classes: Vec<Option<ClassDevices>>,
    allocated: AllocatedDevices,
}

impl DraScoring {
    /// `None` unless some of `resources` is served by a DeviceClass. A class whose selectors do
    /// not compile scores its resource as the node's allocatable alone, as kube-scheduler
    /// omits a resource whose totals fail.
    pub(crate) fn new<'r>(
        resources: impl Iterator<Item = &'r ScoredResource>,
        cluster: &ClusterState,
    ) -> Option<DraScoring> {
        let dra = cluster.dra();
        let classes: Vec<Option<ClassDevices>> = resources
            .map(|r| match r {
                ScoredResource::Scalar(name) if is_dra_extended_resource_name(name) => dra
                    .class_for_extended_resource(name)
                    .and_then(|class| ClassDevices::new(class).ok()),
                _ => None,
            })
            .collect();
        classes.iter().any(Option::is_some).then(|| DraScoring {
            classes,
            allocated: AllocatedDevices::in_cache(dra),
        })
    }

    /// `(devices, allocated devices)` on `node` of the class serving scored resource `index`.
    pub(crate) fn totals(
        &self,
        index: usize,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Option<(i64, i64)> {
        let class = self.classes.get(index)?.as_ref()?;
        let (own, shared) = cluster.dra().slices_for(&node.name);
        class.totals(node, own, shared, &self.allocated).ok()
    }
}

/// Which sum of a node's pods cpu and memory scores read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeRequests {
    /// `NonZeroRequested`: missing requests at 100m/200Mi (NodeResourcesFit).
    NonZero,
    /// `Requested` (BalancedAllocation's `useRequested`).
    Requested,
}

/// `leastRequestedScore`: the free share of the node, 0..=100.
pub(super) fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    scaled_share(capacity - requested, MAX_NODE_SCORE, capacity)
}

/// `part × scale / whole`, truncated, without overflow: in 64 bits when the
/// product fits, as it does for every real node (128-bit division was 1.6 %
/// of an every-node attempt), in 128 bits otherwise. `whole` is not 0.
pub(super) fn scaled_share(part: i64, scale: i64, whole: i64) -> i64 {
    match part.checked_mul(scale) {
        Some(product) => product / whole,
        None => ((i128::from(part) * i128::from(scale)) / i128::from(whole)) as i64,
    }
}

/// `mostRequestedScore`: the used share of the node, 0..=100.
pub(super) fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    let requested = requested.min(capacity);
    scaled_share(requested, MAX_NODE_SCORE, capacity)
}
