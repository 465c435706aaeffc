//! NodeResourcesFit: does the node have room for the pod's requests, and how
//! full would it be (SPEC §5.2). kube-scheduler's plugin of the same name
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
//! the emptiest node) or `MostAllocated` (bin packing) over
//! `scoringStrategy.resources` (default `cpu` and `memory`, weight 1):
//! per resource `(allocatable - requested) × 100 / allocatable`, or
//! `requested × 100 / allocatable`, then the weighted mean (integer
//! divisions, as kube-scheduler). A resource the node has none of is left
//! out, and so is an extended resource the pod does not request. For `cpu`
//! and `memory` a request of 0 counts as 100m and 200Mi (kube-scheduler's
//! `DefaultMilliCPURequest`, `DefaultMemoryRequest`), so best-effort pods
//! still spread.
//!
//! Not (yet) like kube-scheduler:
//! - `RequestedToCapacityRatio` scoring is not implemented; the policy loader
//!   rejects it with a clear message.
//! - The 100m/200Mi defaults apply to the pod's effective request, not per
//!   container: a pod with two containers without a cpu request counts as
//!   100m where kube-scheduler counts 200m.
//! - The node side of scoring uses the sum of the node's pods' real requests
//!   (`NodeUsage::requested`), not kube-scheduler's `NonZeroRequested`: the
//!   cache does not track the defaulted sum yet, so best-effort pods already
//!   on a node do not make it look fuller.

use std::collections::HashSet;
use std::sync::Arc;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::cache::{ClusterState, NodeUsage};
use crate::framework::{
    Code, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreScorePlugin, Resources, ScorePlugin, Status,
};
use crate::policy::fields::NonEmpty;

use crate::framework::pod::PodSpecInfo;

/// Plugin name in the policy.
pub const NAME: &str = "NodeResourcesFit";

/// Highest weight of one scored resource (kube-scheduler's validation).
const MAX_RESOURCE_WEIGHT: i64 = 100;

/// How nodes are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum ScoringStrategyType {
    /// Prefer nodes with the most free capacity (spreading).
    #[default]
    LeastAllocated,
    /// Prefer nodes with the least free capacity (bin packing).
    MostAllocated,
}

/// The policy spelling, including the strategy placer does not implement yet.
#[derive(Deserialize)]
enum RawStrategyType {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
}

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
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy {
            kind: ScoringStrategyType::LeastAllocated,
            resources: default_resources(),
        }
    }
}

fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawStrategy {
    #[serde(rename = "type")]
    kind: RawStrategyType,
    #[serde(default)]
    resources: Vec<ResourceSpec>,
    /// Accepted only to be rejected with a clear message.
    requested_to_capacity_ratio: Option<IgnoredAny>,
}

impl TryFrom<RawStrategy> for ScoringStrategy {
    type Error = String;
    fn try_from(r: RawStrategy) -> Result<Self, String> {
        let kind = match (r.kind, r.requested_to_capacity_ratio) {
            (RawStrategyType::RequestedToCapacityRatio, _) | (_, Some(_)) => {
                return Err(
                    "type: RequestedToCapacityRatio scoring is not supported by placer \
                            yet; use LeastAllocated or MostAllocated"
                        .into(),
                );
            }
            (RawStrategyType::LeastAllocated, None) => ScoringStrategyType::LeastAllocated,
            (RawStrategyType::MostAllocated, None) => ScoringStrategyType::MostAllocated,
        };
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

/// Kubernetes' `IsQualifiedName` (label keys, resource names).
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    name_ok && prefix.is_none_or(is_dns_subdomain)
}

/// Kubernetes' `IsDNS1123Subdomain`.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

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

/// The plugin.
pub struct NodeResourcesFit {
    ignored_resources: HashSet<String>,
    ignored_groups: HashSet<String>,
    strategy: ScoringStrategyType,
    resources: Vec<(ScoredResource, i64)>,
}

impl NodeResourcesFit {
    /// Builds the plugin from its arguments.
    pub fn new(args: &NodeResourcesFitArgs) -> Self {
        NodeResourcesFit {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_groups: args.ignored_resource_groups.iter().cloned().collect(),
            strategy: args.scoring_strategy.kind,
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
            };
            node_score += score * weight;
            weight_sum += weight;
        }
        if weight_sum == 0 {
            0
        } else {
            node_score / weight_sum
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

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

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
            return Status::error("NodeResourcesFit: PreFilter state missing");
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
            return Err(Status::error("NodeResourcesFit: PreScore state missing"));
        };
        Ok(NodeScore::value(self.score_node(
            requests,
            node,
            cluster.usage(&node.name),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::pod::PodSpecInfo;

    const MI: i64 = 1 << 20;

    fn args(yaml: &str) -> NodeResourcesFitArgs {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn res(list: &[(&str, &str)]) -> Resources {
        Resources::from_list(list.iter().copied()).unwrap()
    }

    fn pod(name: &str, node: Option<&str>, requests: &[(&str, &str)]) -> PodInfo {
        PodInfo {
            name: name.into(),
            namespace: "ns".into(),
            node_name: node.map(str::to_string),
            spec: Arc::new(PodSpecInfo {
                requests: res(requests),
                // One container: its defaults are the pod's.
                non_zero_requests: res(requests).with_non_zero_defaults(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn node(allocatable: &[(&str, &str)]) -> NodeInfo {
        NodeInfo {
            allocatable: res(allocatable),
            ..NodeInfo::new("n1", Vec::<(String, String)>::new())
        }
    }

    /// A cluster with `node` and `existing` pods (requests each) bound to it.
    fn cluster(node: &NodeInfo, existing: &[&[(&str, &str)]]) -> ClusterState {
        let mut c = ClusterState::default();
        c.apply_node(node.clone());
        for (i, r) in existing.iter().enumerate() {
            c.apply_pod(pod(&format!("p{i}"), Some(&node.name), r));
        }
        c
    }

    fn filter(a: &NodeResourcesFitArgs, p: &PodInfo, n: &NodeInfo, c: &ClusterState) -> Status {
        let plugin = NodeResourcesFit::new(a);
        let mut state = CycleState::new();
        assert_eq!(plugin.pre_filter(&mut state, p, c).code(), Code::Success);
        plugin.filter(&state, p, n, c)
    }

    fn score(a: &NodeResourcesFitArgs, p: &PodInfo, n: &NodeInfo, c: &ClusterState) -> i64 {
        let plugin = NodeResourcesFit::new(a);
        let mut state = CycleState::new();
        let nodes = [Arc::new(n.clone())];
        assert!(plugin.pre_score(&mut state, p, &nodes, c).is_success());
        plugin.score(&state, p, n, c).unwrap().score
    }

    const NODE: &[(&str, &str)] = &[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("ephemeral-storage", "10Gi"),
        ("pods", "3"),
        ("example.com/gpu", "2"),
    ];

    #[test]
    fn fitting_pod_passes() {
        let n = node(NODE);
        let c = cluster(&n, &[&[("cpu", "1"), ("memory", "2Gi")]]);
        let p = pod(
            "new",
            None,
            &[("cpu", "3"), ("memory", "6Gi"), ("example.com/gpu", "2")],
        );
        assert_eq!(filter(&Default::default(), &p, &n, &c), Status::success());
    }

    #[test]
    fn every_insufficient_resource_is_listed_in_kube_order() {
        let n = node(&[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("ephemeral-storage", "10Gi"),
            ("pods", "2"),
            ("example.com/gpu", "2"),
            ("example.com/fpga", "1"),
        ]);
        let used: &[(&str, &str)] = &[
            ("cpu", "3"),
            ("memory", "7Gi"),
            ("ephemeral-storage", "9Gi"),
            ("example.com/gpu", "1"),
        ];
        let c = cluster(&n, &[used, &[]]);
        let p = pod(
            "new",
            None,
            &[
                ("cpu", "2"),
                ("memory", "2Gi"),
                ("ephemeral-storage", "2Gi"),
                ("example.com/gpu", "2"),
                ("example.com/fpga", "1"),
            ],
        );
        let s = filter(&Default::default(), &p, &n, &c);
        assert_eq!(s.code(), Code::Unschedulable, "each fits an empty node");
        assert_eq!(
            s.reasons(),
            [
                "Too many pods",
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage",
                "Insufficient example.com/gpu",
            ]
        );
        assert_eq!(
            s.message(),
            "Too many pods, Insufficient cpu, Insufficient memory, \
             Insufficient ephemeral-storage, Insufficient example.com/gpu"
        );
    }

    #[test]
    fn request_larger_than_the_whole_node_is_unresolvable() {
        let n = node(NODE);
        let c = cluster(&n, &[]);
        let s = filter(
            &Default::default(),
            &pod("new", None, &[("cpu", "5")]),
            &n,
            &c,
        );
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.reasons(), ["Insufficient cpu"]);
        let s = filter(
            &Default::default(),
            &pod("new", None, &[("memory", "1Gi"), ("example.com/tpu", "1")]),
            &n,
            &c,
        );
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.reasons(),
            ["Insufficient example.com/tpu"],
            "a resource the node lacks entirely"
        );
    }

    #[test]
    fn pod_count_is_checked_even_for_pods_that_request_nothing() {
        let n = node(&[("cpu", "1"), ("pods", "2")]);
        let c = cluster(&n, &[&[("cpu", "1")], &[]]);
        let s = filter(&Default::default(), &pod("new", None, &[]), &n, &c);
        assert_eq!(s.code(), Code::Unschedulable);
        assert_eq!(s.reasons(), ["Too many pods"]);
        let n = node(&[("pods", "110")]);
        let c = cluster(&n, &[&[("cpu", "1")]]);
        assert_eq!(
            filter(&Default::default(), &pod("new", None, &[]), &n, &c),
            Status::success(),
            "zero requests skip every resource check"
        );
        let s = filter(&Default::default(), &pod("new", None, &[]), &node(&[]), &c);
        assert_eq!(s.reasons(), ["Too many pods"], "no pods allocatable at all");
    }

    #[test]
    fn resources_the_pod_does_not_request_are_not_checked() {
        let n = node(&[("cpu", "1"), ("pods", "10")]);
        let c = cluster(&n, &[&[("cpu", "1")]]);
        let p = pod("new", None, &[("memory", "0"), ("example.com/gpu", "0")]);
        assert_eq!(filter(&Default::default(), &p, &n, &c), Status::success());
        let p = pod("new", None, &[("cpu", "1m")]);
        assert_eq!(
            filter(&Default::default(), &p, &n, &c).reasons(),
            ["Insufficient cpu"]
        );
    }

    #[test]
    fn ignored_resources_and_groups_skip_extended_resources_only() {
        let n = node(&[("cpu", "1"), ("pods", "10")]);
        let c = cluster(&n, &[]);
        let p = pod(
            "new",
            None,
            &[
                ("example.com/gpu", "1"),
                ("vendor.io/nic", "1"),
                ("hugepages-2Mi", "2Mi"),
            ],
        );
        let all = [
            "Insufficient example.com/gpu",
            "Insufficient hugepages-2Mi",
            "Insufficient vendor.io/nic",
        ];
        assert_eq!(filter(&Default::default(), &p, &n, &c).reasons(), all);
        let a = args("ignoredResources: [example.com/gpu, hugepages-2Mi]");
        assert_eq!(
            filter(&a, &p, &n, &c).reasons(),
            ["Insufficient hugepages-2Mi", "Insufficient vendor.io/nic"],
            "hugepages are not an extended resource"
        );
        let a = args("ignoredResourceGroups: [vendor.io]");
        assert_eq!(
            filter(&a, &p, &n, &c).reasons(),
            ["Insufficient example.com/gpu", "Insufficient hugepages-2Mi"]
        );
        let a = args("ignoredResources: [example.com/gpu]\nignoredResourceGroups: [vendor.io]");
        assert_eq!(
            filter(&a, &p, &n, &c).reasons(),
            ["Insufficient hugepages-2Mi"]
        );
    }

    #[test]
    fn existing_usage_is_subtracted_per_extended_resource() {
        let n = node(NODE);
        let c = cluster(&n, &[&[("example.com/gpu", "1")]]);
        let one = pod("new", None, &[("example.com/gpu", "1")]);
        assert_eq!(filter(&Default::default(), &one, &n, &c), Status::success());
        let two = pod("new", None, &[("example.com/gpu", "2")]);
        let s = filter(&Default::default(), &two, &n, &c);
        assert_eq!(
            (s.code(), s.message().as_str()),
            (Code::Unschedulable, "Insufficient example.com/gpu")
        );
    }

    #[test]
    fn least_and_most_allocated_by_hand() {
        // 4 cpu, 8Gi; 1 cpu and 2Gi in use; the pod asks 500m and 3Gi.
        // cpu requested 1500/4000: least (2500×100)/4000 = 62, most 150000/4000 = 37.
        // memory requested 5Gi/8Gi: least 3×100/8 = 37, most 5×100/8 = 62.
        let n = node(NODE);
        let c = cluster(&n, &[&[("cpu", "1"), ("memory", "2Gi")]]);
        let p = pod("new", None, &[("cpu", "500m"), ("memory", "3Gi")]);
        assert_eq!(score(&Default::default(), &p, &n, &c), (62 + 37) / 2);
        let least = args(
            "scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 3}, {name: memory}]}",
        );
        assert_eq!(score(&least, &p, &n, &c), (62 * 3 + 37) / 4);
        assert_eq!(score(&least, &p, &n, &c), 55);
        let most = args(
            "scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 3}, {name: memory, weight: 1}]}",
        );
        assert_eq!(score(&most, &p, &n, &c), (37 * 3 + 62) / 4);
        assert_eq!(score(&most, &p, &n, &c), 43);
    }

    #[test]
    fn zero_request_pods_score_with_the_non_zero_defaults() {
        // 1000m and 1000Mi; the pod counts as 100m and 200Mi.
        let n = node(&[("cpu", "1"), ("memory", "1000Mi")]);
        let c = cluster(&n, &[]);
        let p = pod("best-effort", None, &[]);
        // least: cpu 900×100/1000 = 90, memory 800×100/1000 = 80 → 85.
        assert_eq!(score(&Default::default(), &p, &n, &c), 85);
        // most: cpu 10, memory 20 → 15.
        assert_eq!(
            score(&args("scoringStrategy: {type: MostAllocated}"), &p, &n, &c),
            15
        );
        let defaults = Resources::default().with_non_zero_defaults();
        assert_eq!((defaults.milli_cpu, defaults.memory), (100, 200 * MI));
    }

    #[test]
    fn overcommitted_nodes_score_zero_or_full() {
        let n = node(&[("cpu", "1"), ("memory", "1Gi")]);
        let c = cluster(&n, &[&[("cpu", "2"), ("memory", "2Gi")]]);
        let p = pod("new", None, &[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(score(&Default::default(), &p, &n, &c), 0);
        assert_eq!(
            score(&args("scoringStrategy: {type: MostAllocated}"), &p, &n, &c),
            100
        );
    }

    #[test]
    fn extended_resources_score_only_when_requested_and_present() {
        let a = args(
            "scoringStrategy: {type: LeastAllocated, resources: [{name: cpu}, {name: example.com/gpu, weight: 2}]}",
        );
        // gpu: 2 allocatable, 1 in use, pod asks 1 → requested 2: least 0.
        // cpu: 4000m; the existing pod requests no cpu and counts 100m (non-zero
        // default), the pod 1000m → (4000 - 1100) × 100 / 4000 = 72. (72 + 2×0) / 3 = 24.
        let n = node(NODE);
        let c = cluster(&n, &[&[("example.com/gpu", "1")]]);
        let gpu = pod("new", None, &[("cpu", "1"), ("example.com/gpu", "1")]);
        assert_eq!(score(&a, &gpu, &n, &c), 24);
        let plain = pod("new", None, &[("cpu", "1")]);
        assert_eq!(score(&a, &plain, &n, &c), 72, "gpu left out of the weights");
        let no_gpu_node = node(&[("cpu", "4")]);
        assert_eq!(
            score(&a, &gpu, &no_gpu_node, &c),
            72,
            "node without the resource (same name, so the same usage)"
        );
        let empty = node(&[]);
        assert_eq!(score(&a, &gpu, &empty, &c), 0, "nothing allocatable");
    }

    #[test]
    fn ephemeral_storage_and_untracked_names_in_scoring() {
        let a = args(
            "scoringStrategy: {type: MostAllocated, resources: [{name: ephemeral-storage}, {name: pods, weight: 5}]}",
        );
        let n = node(NODE);
        let c = cluster(&n, &[&[("ephemeral-storage", "4Gi")]]);
        let p = pod("new", None, &[("ephemeral-storage", "1Gi")]);
        assert_eq!(score(&a, &p, &n, &c), 50, "5Gi of 10Gi; pods never scored");
    }

    #[test]
    fn args_defaults_and_round_trip() {
        let d = args("{}");
        assert_eq!(d, NodeResourcesFitArgs::default());
        assert_eq!(d.scoring_strategy.kind, ScoringStrategyType::LeastAllocated);
        assert_eq!(
            d.scoring_strategy.resources,
            [ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
        );
        let a = args("scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 0}]}");
        assert_eq!(a.scoring_strategy.resources, [ResourceSpec::new("cpu", 1)]);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["scoringStrategy"]["type"], "MostAllocated");
        assert_eq!(json["scoringStrategy"]["resources"][0]["weight"], 1);
        let back: NodeResourcesFitArgs = serde_json::from_value(json).unwrap();
        assert_eq!(back, a);
        let empty = args("scoringStrategy: {type: MostAllocated, resources: []}");
        assert_eq!(
            empty.scoring_strategy.resources.len(),
            2,
            "empty means default"
        );
    }

    #[test]
    fn bad_args_are_rejected() {
        let err = |yaml: &str| {
            serde_yaml_ng::from_str::<NodeResourcesFitArgs>(yaml)
                .unwrap_err()
                .to_string()
        };
        assert!(err("ignoredResource: [x]").contains("unknown field"));
        assert!(err("scoringStrategy: {resources: [{name: cpu}]}").contains("type"));
        assert!(err("scoringStrategy: {type: Balanced}").contains("unknown variant"));
        let e = err("scoringStrategy: {type: RequestedToCapacityRatio}");
        assert!(e.contains("not supported by placer"), "{e}");
        let e =
            err("scoringStrategy: {type: LeastAllocated, requestedToCapacityRatio: {shape: []}}");
        assert!(e.contains("not supported by placer"), "{e}");
        let e =
            err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 101}]}");
        assert!(
            e.contains("resource weight of cpu not in valid range (0, 100]"),
            "{e}"
        );
        assert!(
            err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: -1}]}")
                .contains("not in valid range")
        );
        let e =
            err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu}, {name: cpu}]}");
        assert!(e.contains("resources[1].name: duplicate"), "{e}");
        assert!(
            err("scoringStrategy: {type: LeastAllocated, resources: [{name: ''}]}")
                .contains("non-empty")
        );
        assert!(
            err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, extra: 1}]}")
                .contains("unknown field")
        );
        let e = err("ignoredResourceGroups: [example.com/gpu]");
        assert!(e.contains("resource group name can't contain '/'"), "{e}");
        assert!(err("ignoredResources: ['-bad']").contains("ignoredResources[0]"));
        assert!(err("ignoredResources: ['Example.com/gpu']").contains("not a qualified name"));
    }

    #[test]
    fn resource_name_classes_match_kubernetes() {
        for name in ["example.com/gpu", "nvidia.com/gpu", "foo.bar/baz-1"] {
            assert!(is_extended_resource_name(name), "{name}");
        }
        for name in [
            "cpu",
            "hugepages-2Mi",
            "kubernetes.io/foo",
            "requests.example.com/x",
            "example.com/-bad",
        ] {
            assert!(!is_extended_resource_name(name), "{name}");
        }
        assert!(is_scalar_resource_name("hugepages-1Gi"));
        assert!(is_scalar_resource_name("attachable-volumes-aws-ebs"));
        assert!(is_scalar_resource_name("example.com/gpu"));
        assert!(!is_scalar_resource_name("pods"));
        assert!(is_qualified_name("a.b/c_d.e-f"));
        assert!(!is_qualified_name("a/b/c"));
        assert!(!is_qualified_name(&"x".repeat(64)));
    }
}
