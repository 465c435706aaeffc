//! NodeResourcesFit: does the node have room for the pod's requests, and how
//! full would it be (design §5.2). kube-scheduler's plugin of the same name
//! (`pkg/scheduler/framework/plugins/noderesources/fit.go`), with its reason
//! strings, so `kubectl describe pod` reads the same.
//!
//! **Filter.** The pod's effective request ([`crate::objects::pod::PodSpecInfo::requests`]:
//! containers, init containers, sidecars, overhead) plus what the node's pods
//! already request must fit the node's allocatable, resource by resource:
//! "Too many pods", "Insufficient cpu", "Insufficient memory",
//! "Insufficient ephemeral-storage", "Insufficient \<resource\>", in that order
//! (extended resources sorted by name; kube-scheduler walks a Go map, so its
//! order among them is random). Every failing resource is listed. A resource
//! the pod does not request is not checked. The status is `Unschedulable`
//! (evicting pods could help) unless the pod asks for more of a resource than
//! the node has in total, which makes it `UnschedulableAndUnresolvable`, as
//! kube-scheduler does since kubernetes/kubernetes#131345.
//! `ignoredResources` and `ignoredResourceGroups` (the part before `/`) skip
//! extended resources only, never `cpu`, `memory` or `hugepages-*`.
//! An extended resource a DeviceClass serves (DRAExtendedResource) is left
//! to DynamicResources on a node whose allocatable has none of it: the
//! devices come from the class there, not from a device plugin.
//!
//! **Score.** `scoringStrategy.type` `LeastAllocated` (the default: prefer
//! the emptiest node), `MostAllocated` (bin packing) or
//! `RequestedToCapacityRatio` (a piecewise-linear `shape` from utilization
//! 0..=100 to score 0..=10) over `scoringStrategy.resources` (default `cpu`
//! and `memory`, weight 1): per resource `(allocatable - requested) × 100 /
//! allocatable`, `requested × 100 / allocatable`, or the shape at the
//! utilization, then the weighted mean (integer divisions, as kube-scheduler;
//! `RequestedToCapacityRatio` rounds, and leaves resources scoring 0 out of
//! the mean). A resource the node has none of is left out, and so is an
//! extended resource the pod does not request. For `cpu` and `memory` each
//! container's missing request counts as 100m and 200Mi, on the pod and on
//! the node's pods (kube-scheduler's `NonZeroRequested`), so best-effort pods
//! still spread.

#[path = "fit_args.rs"]
mod args;
#[path = "fit_hints.rs"]
mod hints;

use std::collections::HashSet;

use crate::cache::{ClusterState, NodeUsage};
use crate::framework::{
    Code, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeScore, PreFilterPlugin, PreScorePlugin,
    Reason, ScorePlugin, Status,
};
use crate::objects::{NodeInfo, PodInfo, Resources};

use super::strategy::{
    DraScoring, ScoredResource, is_scalar_resource_name, least_requested_score,
    most_requested_score, scaled_share,
};
use crate::framework::scoring::{MAX_CUSTOM_PRIORITY_SCORE, broken_linear};
use crate::k8s::resource_names::is_extended_resource_name;
pub use args::{
    NodeResourcesFitArgs, RequestedToCapacityRatioParam, ResourceSpec, ScoringStrategy,
    ScoringStrategyType, UtilizationShapePoint,
};

/// Plugin name in the policy.
pub const NAME: &str = "NodeResourcesFit";

/// The plugin.
#[derive(Clone)]
pub struct NodeResourcesFit {
    ignored_resources: HashSet<String>,
    ignored_groups: HashSet<String>,
    strategy: ScoringStrategyType,
    /// `RequestedToCapacityRatio`'s shape, scores scaled to 0..=100.
    shape: Vec<(i64, i64)>,
    resources: Vec<(ScoredResource, i64)>,
}

impl NodeResourcesFit {
    /// Builds the plugin from its arguments.
    pub fn new(args: &NodeResourcesFitArgs) -> Self {
        NodeResourcesFit {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_groups: args.ignored_resource_groups.iter().cloned().collect(),
            strategy: args.scoring_strategy.kind,
            shape: args
                .scoring_strategy
                .requested_to_capacity_ratio
                .iter()
                .flat_map(|p| &p.shape)
                .map(|p| {
                    let scale = MAX_NODE_SCORE / i64::from(MAX_CUSTOM_PRIORITY_SCORE);
                    (i64::from(p.utilization), i64::from(p.score) * scale)
                })
                .collect(),
            resources: args
                .scoring_strategy
                .resources
                .iter()
                .map(|r| (ScoredResource::from_name(&r.name), r.weight))
                .collect(),
        }
    }

    fn is_ignored(&self, name: &str) -> bool {
        is_extended_resource_name(name)
            && (self.ignored_resources.contains(name)
                || (!self.ignored_groups.is_empty()
                    && self
                        .ignored_groups
                        .contains(name.split('/').next().unwrap_or(name))))
    }

    /// kube-scheduler's resource allocation score of `node` for a pod whose
    /// per-resource requests are `pod_requests`.
    fn score_node(
        &self,
        pod_requests: &[i64],
        node: &NodeInfo,
        usage: Option<&NodeUsage>,
        dra: impl Fn(usize) -> Option<(i64, i64)>,
    ) -> i64 {
        let (mut node_score, mut weight_sum) = (0i64, 0i64);
        for (i, ((resource, weight), &pod_request)) in
            self.resources.iter().zip(pod_requests).enumerate()
        {
            let (allocatable, requested) =
                resource.allocatable_and_requested(node, usage, pod_request, || dra(i));
            if allocatable == 0 {
                continue;
            }
            let score = match self.strategy {
                ScoringStrategyType::LeastAllocated => {
                    least_requested_score(requested, allocatable)
                }
                ScoringStrategyType::MostAllocated => most_requested_score(requested, allocatable),
                ScoringStrategyType::RequestedToCapacityRatio => {
                    let utilization = if requested > allocatable {
                        100
                    } else {
                        scaled_share(requested, 100, allocatable)
                    };
                    let score = broken_linear(&self.shape, utilization);
                    // Resources scoring 0 do not count in the mean.
                    if score <= 0 {
                        continue;
                    }
                    score
                }
            };
            node_score += score * weight;
            weight_sum += weight;
        }
        match (weight_sum, self.strategy) {
            (0, _) => 0,
            // kube-scheduler rounds here (math.Round: halves away from zero).
            (w, ScoringStrategyType::RequestedToCapacityRatio) => (node_score + w / 2) / w,
            (w, _) => node_score / w,
        }
    }
}

/// One extended resource the pod requests and the filter checks.
struct ScalarRequest {
    name: String,
    quantity: i64,
    reason: String,
    /// A DeviceClass serves it: nodes without it in their allocatable
    /// leave it to DynamicResources (kube-scheduler's `shouldDelegateResourceToDRA`).
    backed_by_dra: bool,
}

/// The pod's request as the filter checks it (written in PreFilter).
struct FitRequest {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    /// Non-zero, not ignored, in name order.
    scalar: Vec<ScalarRequest>,
}

/// The pod's request per scored resource, in `resources` order, and what the scores read of
/// DRA when a DeviceClass serves some of them (written in PreScore).
struct ScoreRequests(Vec<i64>, Option<DraScoring>);

crate::plugin!(
    NodeResourcesFit,
    NAME,
    [pre_filter, filter, pre_score, score, enqueue_extensions]
);

impl PreFilterPlugin for NodeResourcesFit {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let r = &pod.spec.requests;
        let dra = cluster.dra();
        let scalar = r
            .scalar
            .iter()
            .filter(|&(name, &q)| q != 0 && is_scalar_resource_name(name) && !self.is_ignored(name))
            .map(|(name, &quantity)| ScalarRequest {
                name: name.clone(),
                quantity,
                reason: format!("Insufficient {name}"),
                backed_by_dra: dra.class_for_extended_resource(name).is_some(),
            })
            .collect();
        state.write(FitRequest {
            milli_cpu: r.milli_cpu,
            memory: r.memory,
            ephemeral_storage: r.ephemeral_storage,
            scalar,
        });
        Status::success()
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let want = match state.from_pre_filter::<FitRequest>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        let usage = cluster.usage_of(node);
        let alloc = &node.allocatable;
        let used = |f: fn(&Resources) -> i64| usage.map_or(0, |u| f(&u.requested));

        // Allocates only when the node fails; the fixed reasons are static.
        let mut reasons: Vec<Reason> = Vec::new();
        if usage.map_or(0, |u| u.pods) + 1 > alloc.pods {
            reasons.push("Too many pods".into());
        }
        let mut unresolvable = false;
        let mut short = |want: i64, allocatable: i64, used: i64| {
            let short = want > 0 && want > allocatable - used;
            unresolvable |= short && want > allocatable;
            short
        };
        if short(want.milli_cpu, alloc.milli_cpu, used(|r| r.milli_cpu)) {
            reasons.push("Insufficient cpu".into());
        }
        if short(want.memory, alloc.memory, used(|r| r.memory)) {
            reasons.push("Insufficient memory".into());
        }
        if short(
            want.ephemeral_storage,
            alloc.ephemeral_storage,
            used(|r| r.ephemeral_storage),
        ) {
            reasons.push("Insufficient ephemeral-storage".into());
        }
        for s in &want.scalar {
            let allocatable = alloc.scalar.get(&s.name).copied().unwrap_or(0);
            if s.backed_by_dra && allocatable == 0 {
                continue;
            }
            let in_use = usage
                .and_then(|u| u.requested.scalar.get(&s.name).copied())
                .unwrap_or(0);
            if short(s.quantity, allocatable, in_use) {
                reasons.push(s.reason.clone().into());
            }
        }
        if reasons.is_empty() {
            return Status::success();
        }
        let code = if unresolvable {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Status::from_reasons(code, reasons)
    }
}

impl PreScorePlugin for NodeResourcesFit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status {
        let requests = self
            .resources
            .iter()
            .map(|(r, _)| r.pod_request(&pod.spec))
            .collect();
        let dra = DraScoring::new(self.resources.iter().map(|(r, _)| r), cluster);
        state.write(ScoreRequests(requests, dra));
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesFit {
    crate::score_from_pre_score!(ScoreRequests, score_with);
}

impl NodeResourcesFit {
    /// [`NodeResourcesFit::score_node`] with what PreScore wrote.
    // Inlined into the batch loop, the score is built in its slot rather
    // than returned through memory (measured: 10 % of the default
    // profile's attempt).
    #[inline(always)]
    fn score_with(
        &self,
        requests: &ScoreRequests,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> NodeScore {
        let ScoreRequests(requests, dra) = requests;
        let dra = |i| dra.as_ref().and_then(|d| d.totals(i, node, cluster));
        NodeScore::value(self.score_node(requests, node, cluster.usage_of(node), dra))
    }
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;
