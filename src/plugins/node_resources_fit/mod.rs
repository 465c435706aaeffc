//! NodeResourcesFit: does the node have room for the pod's requests, and how
//! full would it be (design §5.2). kube-scheduler's plugin of the same name
//! (`pkg/scheduler/framework/plugins/noderesources/fit.go`), with its reason
//! strings, so `kubectl describe pod` reads the same.
//!
//! **Filter.** The pod's effective request ([`PodSpecInfo::requests`]:
//! containers, init containers, sidecars, overhead) plus what the node's pods
//! already request must fit the node's allocatable, resource by resource:
//! "Too many pods", "Insufficient cpu", "Insufficient memory",
//! "Insufficient ephemeral-storage", "Insufficient <resource>", in that order
//! (extended resources sorted by name; kube-scheduler walks a Go map, so its
//! order among them is random). Every failing resource is listed. A resource
//! the pod does not request is not checked. The status is `Unschedulable`
//! (evicting pods could help) unless the pod asks for more of a resource than
//! the node has in total, which makes it `UnschedulableAndUnresolvable`, as
//! kube-scheduler does since kubernetes/kubernetes#131345.
//! `ignoredResources` and `ignoredResourceGroups` (the part before `/`) skip
//! extended resources only, never `cpu`, `memory` or `hugepages-*`.
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

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::{ClusterState, NodeUsage};
use crate::framework::{
    Code, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeScore, PreFilterPlugin, PreScorePlugin,
    ScorePlugin, Status,
};
use crate::objects::{NodeInfo, PodInfo, Resources};
use crate::plugins::fields::NonEmpty;
use crate::plugins::validation::is_qualified_name;

use crate::objects::pod::PodSpecInfo;

/// Plugin name in the policy.
pub const NAME: &str = "NodeResourcesFit";

/// Highest weight of one scored resource (kube-scheduler's validation).
const MAX_RESOURCE_WEIGHT: i64 = 100;

/// How nodes are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum ScoringStrategyType {
    /// Prefer nodes with the most free capacity (spreading).
    #[default]
    LeastAllocated,
    /// Prefer nodes with the least free capacity (bin packing).
    MostAllocated,
    /// Score utilization through a piecewise-linear shape.
    RequestedToCapacityRatio,
}

/// One point of a `RequestedToCapacityRatio` shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilization in percent, 0..=100.
    pub utilization: i32,
    /// Score at that utilization, 0..=10.
    pub score: i32,
}

/// `requestedToCapacityRatio`: the shape.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    /// Points sorted by increasing utilization.
    pub shape: Vec<UtilizationShapePoint>,
}

/// Highest score of a shape point (kube-scheduler's `MaxCustomPriorityScore`).
const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;

/// One resource that takes part in scoring, with its weight.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "RawResourceSpec")]
pub struct ResourceSpec {
    /// Resource name (`cpu`, `memory`, `ephemeral-storage`, `example.com/gpu`, ...).
    pub name: NonEmpty,
    /// Weight in 1..=100 (0 or absent means 1, as kube-scheduler defaults it).
    pub weight: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResourceSpec {
    name: NonEmpty,
    #[serde(default)]
    weight: i64,
}

impl TryFrom<RawResourceSpec> for ResourceSpec {
    type Error = String;
    fn try_from(r: RawResourceSpec) -> Result<Self, String> {
        let weight = if r.weight == 0 { 1 } else { r.weight };
        if !(1..=MAX_RESOURCE_WEIGHT).contains(&weight) {
            return Err(format!(
                "weight: resource weight of {} not in valid range (0, {MAX_RESOURCE_WEIGHT}]",
                r.name
            ));
        }
        Ok(ResourceSpec {
            name: r.name,
            weight,
        })
    }
}

impl ResourceSpec {
    fn new(name: &'static str, weight: i64) -> Self {
        ResourceSpec {
            name: NonEmpty::from_static(name),
            weight,
        }
    }
}

/// `scoringStrategy`: the strategy and the resources it looks at.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawStrategy")]
pub struct ScoringStrategy {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: ScoringStrategyType,
    /// `resources`; defaults to `cpu` and `memory` with weight 1.
    pub resources: Vec<ResourceSpec>,
    /// The shape, with `RequestedToCapacityRatio` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: ScoringStrategyType::LeastAllocated,
            resources: default_resources(),
            requested_to_capacity_ratio: None,
        }
    }
}

/// kube-scheduler's `validateFunctionShape`, first error only.
fn validate_shape(shape: &[UtilizationShapePoint]) -> Result<(), String> {
    let at = "requestedToCapacityRatio.shape";
    if shape.is_empty() {
        return Err(format!("{at}: at least one point must be specified"));
    }
    for i in 1..shape.len() {
        if shape[i - 1].utilization >= shape[i].utilization {
            return Err(format!(
                "{at}[{i}].utilization: {}: values must be sorted in increasing order",
                shape[i].utilization
            ));
        }
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            return Err(format!(
                "{at}[{i}].utilization: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            return Err(format!(
                "{at}[{i}].score: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                p.score
            ));
        }
    }
    Ok(())
}

fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawStrategy {
    #[serde(rename = "type")]
    kind: ScoringStrategyType,
    #[serde(default)]
    resources: Vec<ResourceSpec>,
    requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

impl TryFrom<RawStrategy> for ScoringStrategy {
    type Error = String;
    fn try_from(r: RawStrategy) -> Result<Self, String> {
        let kind = r.kind;
        match (&r.requested_to_capacity_ratio, kind) {
            (None, ScoringStrategyType::RequestedToCapacityRatio) => {
                return Err("requestedToCapacityRatio: must be specified when type is \
                            RequestedToCapacityRatio"
                    .into());
            }
            (Some(p), ScoringStrategyType::RequestedToCapacityRatio) => validate_shape(&p.shape)?,
            (Some(_), _) => {
                return Err("requestedToCapacityRatio: must be nil when type is not \
                            RequestedToCapacityRatio"
                    .into());
            }
            (None, _) => {}
        }
        let mut seen = HashSet::new();
        for (i, res) in r.resources.iter().enumerate() {
            if !seen.insert(res.name.as_str()) {
                return Err(format!(
                    "resources[{i}].name: duplicate value {:?}",
                    res.name.as_str()
                ));
            }
        }
        Ok(ScoringStrategy {
            kind,
            resources: if r.resources.is_empty() {
                default_resources()
            } else {
                r.resources
            },
            requested_to_capacity_ratio: r.requested_to_capacity_ratio,
        })
    }
}

/// Arguments of NodeResourcesFit, with kube-scheduler's defaults filled.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter does not check.
    pub ignored_resources: Vec<String>,
    /// Groups (the part before `/`) of extended resources the filter does not check.
    pub ignored_resource_groups: Vec<String>,
    /// How nodes are scored.
    pub scoring_strategy: ScoringStrategy,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    scoring_strategy: Option<ScoringStrategy>,
}

impl TryFrom<RawArgs> for NodeResourcesFitArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        for (i, name) in r.ignored_resources.iter().enumerate() {
            if !is_qualified_name(name) {
                return Err(format!("ignoredResources[{i}]: {name:?} {NOT_QUALIFIED}"));
            }
        }
        for (i, group) in r.ignored_resource_groups.iter().enumerate() {
            if group.contains('/') {
                return Err(format!(
                    "ignoredResourceGroups[{i}]: {group:?}: resource group name can't contain '/'"
                ));
            }
            if !is_qualified_name(group) {
                return Err(format!(
                    "ignoredResourceGroups[{i}]: {group:?} {NOT_QUALIFIED}"
                ));
            }
        }
        Ok(NodeResourcesFitArgs {
            ignored_resources: r.ignored_resources,
            ignored_resource_groups: r.ignored_resource_groups,
            scoring_strategy: r.scoring_strategy.unwrap_or_default(),
        })
    }
}

const NOT_QUALIFIED: &str = "is not a qualified name (an optional DNS subdomain and '/', then \
                             at most 63 letters, digits, '-', '_' or '.', starting and ending \
                             with a letter or digit)";

/// `v1helper.IsExtendedResourceName`: outside the `kubernetes.io` domain,
/// not a quota name, and valid once prefixed with `requests.`.
fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && is_qualified_name(&format!("requests.{name}"))
}

/// `schedutil.IsScalarResourceName`: the resources kube-scheduler tracks
/// besides cpu, memory, ephemeral storage and pods.
fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// A scored resource, resolved once when the plugin is built.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ScoredResource {
    Cpu,
    Memory,
    EphemeralStorage,
    Scalar(String),
    /// A name kube-scheduler does not track (e.g. `pods`): never scored.
    Untracked,
}

impl ScoredResource {
    fn from_name(name: &str) -> Self {
        match name {
            "cpu" => ScoredResource::Cpu,
            "memory" => ScoredResource::Memory,
            "ephemeral-storage" => ScoredResource::EphemeralStorage,
            n if is_scalar_resource_name(n) => ScoredResource::Scalar(n.to_string()),
            _ => ScoredResource::Untracked,
        }
    }

    /// The pod's request for this resource (non-zero for cpu and memory).
    fn pod_request(&self, spec: &PodSpecInfo) -> i64 {
        let requests = &spec.requests;
        match self {
            ScoredResource::Cpu => spec.non_zero_requests.milli_cpu,
            ScoredResource::Memory => spec.non_zero_requests.memory,
            ScoredResource::EphemeralStorage => requests.ephemeral_storage,
            ScoredResource::Scalar(name) => requests.scalar.get(name).copied().unwrap_or(0),
            ScoredResource::Untracked => 0,
        }
    }

    /// `(allocatable, requested including the pod)` on `node`, or `(0, 0)`
    /// when the resource does not take part (kube-scheduler's
    /// `calculateResourceAllocatableRequest`).
    fn allocatable_and_requested(
        &self,
        node: &NodeInfo,
        usage: Option<&NodeUsage>,
        pod_request: i64,
    ) -> (i64, i64) {
        let alloc = &node.allocatable;
        let used = |f: fn(&Resources) -> i64| usage.map_or(0, |u| f(&u.requested));
        let non_zero = |f: fn(&Resources) -> i64| usage.map_or(0, |u| f(&u.non_zero_requested));
        match self {
            ScoredResource::Cpu => (alloc.milli_cpu, non_zero(|r| r.milli_cpu) + pod_request),
            ScoredResource::Memory => (alloc.memory, non_zero(|r| r.memory) + pod_request),
            ScoredResource::EphemeralStorage => (
                alloc.ephemeral_storage,
                used(|r| r.ephemeral_storage) + pod_request,
            ),
            ScoredResource::Scalar(_) if pod_request == 0 => (0, 0),
            ScoredResource::Scalar(name) => match alloc.scalar.get(name) {
                Some(&a) => {
                    let u = usage.and_then(|u| u.requested.scalar.get(name).copied());
                    (a, u.unwrap_or(0) + pod_request)
                }
                None => (0, 0),
            },
            ScoredResource::Untracked => (0, 0),
        }
    }
}

/// `leastRequestedScore`: the free share of the node, 0..=100.
fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    ((i128::from(capacity - requested) * i128::from(MAX_NODE_SCORE)) / i128::from(capacity)) as i64
}

/// `mostRequestedScore`: the used share of the node, 0..=100.
fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    let requested = requested.min(capacity);
    ((i128::from(requested) * i128::from(MAX_NODE_SCORE)) / i128::from(capacity)) as i64
}

/// kube-scheduler's `BuildBrokenLinearFunction`: the shape's score at
/// utilization `p`, interpolated between points (integer division), flat
/// before the first and after the last.
fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, score)) in shape.iter().enumerate() {
        if p <= u {
            let Some(&(u0, s0)) = i.checked_sub(1).and_then(|j| shape.get(j)) else {
                return score;
            };
            return s0 + (score - s0) * (p - u0) / (u - u0);
        }
    }
    shape.last().map_or(0, |&(_, s)| s)
}

/// The plugin.
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
    fn score_node(&self, pod_requests: &[i64], node: &NodeInfo, usage: Option<&NodeUsage>) -> i64 {
        let (mut node_score, mut weight_sum) = (0i64, 0i64);
        for ((resource, weight), &pod_request) in self.resources.iter().zip(pod_requests) {
            let (allocatable, requested) =
                resource.allocatable_and_requested(node, usage, pod_request);
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
                        ((i128::from(requested) * 100) / i128::from(allocatable)) as i64
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
}

/// The pod's request as the filter checks it (written in PreFilter).
struct FitRequest {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    /// Non-zero, not ignored, in name order.
    scalar: Vec<ScalarRequest>,
}

/// The pod's request per scored resource, in `resources` order (written in PreScore).
struct ScoreRequests(Vec<i64>);

crate::plugin!(
    NodeResourcesFit,
    NAME,
    [pre_filter, filter, pre_score, score]
);

impl PreFilterPlugin for NodeResourcesFit {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &ClusterState) -> Status {
        let r = &pod.spec.requests;
        let scalar = r
            .scalar
            .iter()
            .filter(|&(name, &q)| q != 0 && is_scalar_resource_name(name) && !self.is_ignored(name))
            .map(|(name, &quantity)| ScalarRequest {
                name: name.clone(),
                quantity,
                reason: format!("Insufficient {name}"),
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
        let Some(want) = state.read::<FitRequest>() else {
            return Status::error("PreFilter state missing");
        };
        let usage = cluster.usage(&node.name);
        let alloc = &node.allocatable;
        let used = |f: fn(&Resources) -> i64| usage.map_or(0, |u| f(&u.requested));

        // Allocates only when the node fails.
        let mut reasons: Vec<&str> = Vec::new();
        if usage.map_or(0, |u| u.pods) + 1 > alloc.pods {
            reasons.push("Too many pods");
        }
        let mut unresolvable = false;
        let mut check = |want: i64, allocatable: i64, used: i64, reason| {
            if want > 0 && want > allocatable - used {
                reasons.push(reason);
                unresolvable |= want > allocatable;
            }
        };
        check(
            want.milli_cpu,
            alloc.milli_cpu,
            used(|r| r.milli_cpu),
            "Insufficient cpu",
        );
        check(
            want.memory,
            alloc.memory,
            used(|r| r.memory),
            "Insufficient memory",
        );
        check(
            want.ephemeral_storage,
            alloc.ephemeral_storage,
            used(|r| r.ephemeral_storage),
            "Insufficient ephemeral-storage",
        );
        for s in &want.scalar {
            let allocatable = alloc.scalar.get(&s.name).copied().unwrap_or(0);
            let in_use = usage
                .and_then(|u| u.requested.scalar.get(&s.name).copied())
                .unwrap_or(0);
            check(s.quantity, allocatable, in_use, &s.reason);
        }

        let mut reasons = reasons.into_iter();
        let Some(first) = reasons.next() else {
            return Status::success();
        };
        let code = if unresolvable {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        reasons.fold(Status::new(code, first), Status::with_reason)
    }
}

impl PreScorePlugin for NodeResourcesFit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &ClusterState,
    ) -> Status {
        let requests = self
            .resources
            .iter()
            .map(|(r, _)| r.pod_request(&pod.spec))
            .collect();
        state.write(ScoreRequests(requests));
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<NodeScore, Status> {
        let Some(ScoreRequests(requests)) = state.read::<ScoreRequests>() else {
            return Err(Status::error("PreScore state missing"));
        };
        Ok(NodeScore::value(self.score_node(
            requests,
            node,
            cluster.usage(&node.name),
        )))
    }
}

#[cfg(test)]
mod tests;
