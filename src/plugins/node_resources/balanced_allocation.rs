//! NodeResourcesBalancedAllocation: prefer the node whose resources stay in
//! balance once the pod is on it. kube-scheduler's plugin of the same name
//! (`pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go`
//! and `resource_allocation.go`), to its integer score.
//!
//! **PreScore.** The pod's request per resource of `resources` (default
//! `cpu` and `memory`), as requested (a missing request is 0, not the
//! 100m/200Mi NodeResourcesFit scores with; pod-level and resize status
//! included, [`crate::objects::pod::PodSpecInfo::counted`]). A pod that
//! requests none of them skips the plugin (kube-scheduler skips best-effort
//! pods so they do not pile onto one node, kubernetes/kubernetes#129138).
//!
//! **Score.** Per resource the node has (an extended resource only when the
//! pod requests it), the fraction requested by the node's pods, with and
//! without the pod, capped at 1; the balance of a set of fractions is
//! `(1 - std) × 100` truncated (`std` = half the difference for two,
//! the standard deviation for more, 0 for one); the score is
//! `50 + (50 + with - without) / 2`: about 75 when the pod changes nothing,
//! towards 100 when it improves the balance, towards 50 when it worsens it.
//!
//! **Args.** `resources`: a list of `{name, weight}`; the weight must be 1
//! (0 or absent means 1), names must not repeat. An extended resource a
//! DeviceClass serves (Dynamic Resource Allocation) counts the node's devices
//! of that class and the ones allocated, as kube-scheduler's does.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::strategy::{DraScoring, NodeRequests, ScoredResource};
use crate::cache::ClusterState;
use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin, Status,
};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// One resource that takes part in the balance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BalancedResource {
    /// Resource name (`cpu`, `memory`, `ephemeral-storage`, `example.com/gpu`, ...).
    pub name: String,
    /// Always 1 (kube-scheduler's validation).
    pub weight: i64,
}

/// Arguments of NodeResourcesBalancedAllocation, with kube-scheduler's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawArgs")]
pub struct BalancedAllocationArgs {
    /// `resources`; defaults to `cpu` and `memory`.
    pub resources: Vec<BalancedResource>,
}

impl Default for BalancedAllocationArgs {
    fn default() -> Self {
        let one = |name: &str| BalancedResource {
            name: name.to_string(),
            weight: 1,
        };
        BalancedAllocationArgs {
            resources: vec![one("cpu"), one("memory")],
        }
    }
}

impl crate::framework::CacheNeeds for BalancedAllocationArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    resources: Vec<RawResource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResource {
    name: String,
    #[serde(default)]
    weight: i64,
}

impl TryFrom<RawArgs> for BalancedAllocationArgs {
    type Error = String;

    /// `SetDefaults_NodeResourcesBalancedAllocationArgs`, then
    /// `ValidateNodeResourcesBalancedAllocationArgs` (first error).
    fn try_from(raw: RawArgs) -> Result<Self, String> {
        if raw.resources.is_empty() {
            return Ok(Self::default());
        }
        let mut seen = HashSet::new();
        let mut resources = Vec::with_capacity(raw.resources.len());
        for (i, r) in raw.resources.into_iter().enumerate() {
            if !seen.insert(r.name.clone()) {
                return Err(format!("resources[{i}].name: duplicate value {:?}", r.name));
            }
            let weight = if r.weight == 0 { 1 } else { r.weight };
            if weight != 1 {
                return Err(format!("resources[{i}].weight: {weight}: must be 1"));
            }
            resources.push(BalancedResource {
                name: r.name,
                weight,
            });
        }
        Ok(BalancedAllocationArgs { resources })
    }
}

/// The plugin.
pub struct BalancedAllocation {
    resources: Vec<ScoredResource>,
}

impl BalancedAllocation {
    /// Builds the plugin from its arguments.
    pub fn new(args: &BalancedAllocationArgs) -> Self {
        BalancedAllocation {
            resources: args
                .resources
                .iter()
                .map(|r| ScoredResource::from_name(&r.name))
                .collect(),
        }
    }
}

/// The pod's request per resource, in `resources` order, and what the scores read of DRA when
/// a DeviceClass serves some of them (written in PreScore).
struct PodRequests(Vec<i64>, Option<DraScoring>);

crate::plugin!(BalancedAllocation, NAME, [pre_score, score]);

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status {
        let requests: Vec<i64> = self
            .resources
            .iter()
            .map(|r| r.pod_requested(&pod.spec))
            .collect();
        if requests.iter().all(|&r| r == 0) {
            return Status::skip("the pod requests none of the balanced resources");
        }
        let dra = DraScoring::new(self.resources.iter(), cluster);
        state.write(PodRequests(requests, dra));
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    crate::score_from_pre_score!(PodRequests, node_score);
}

impl BalancedAllocation {
    /// `node`'s score for a pod with these requests.
    // Inlined into the batch loop, the score is built in its slot rather
    // than returned through memory (measured: 10 % of the default
    // profile's attempt).
    #[inline(always)]
    fn node_score(
        &self,
        requests: &PodRequests,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> NodeScore {
        let PodRequests(requests, dra) = requests;
        let dra = |i: usize| dra.as_ref().and_then(|d| d.totals(i, node, cluster));
        let usage = cluster.usage_of(node);
        // Each resource's share of the node with the pod and without it, for
        // the resources that take part: worked out once (a balance reads them
        // twice), on the stack up to INLINE_RESOURCES.
        let shares = (self.resources.iter().zip(requests).enumerate()).filter_map(
            |(i, (resource, &pod))| {
                let (allocatable, used) = resource.allocatable_and_allocated(
                    node,
                    usage,
                    pod,
                    NodeRequests::Requested,
                    || dra(i),
                )?;
                Some((
                    fraction(used + pod, allocatable),
                    fraction(used, allocatable),
                ))
            },
        );
        let mut inline = [(0.0, 0.0); INLINE_RESOURCES];
        let mut spilled: Vec<(f64, f64)> = Vec::new();
        let mut count = 0;
        for share in shares {
            match inline.get_mut(count) {
                Some(slot) => *slot = share,
                None if spilled.is_empty() => spilled.extend(inline.iter().copied().chain([share])),
                None => spilled.push(share),
            }
            count += 1;
        }
        let shares = if count <= INLINE_RESOURCES {
            &inline[..count]
        } else {
            &spilled[..]
        };
        let with_pod = balance(shares.iter().map(|&(with, _)| with));
        let without_pod = balance(shares.iter().map(|&(_, without)| without));
        let half = MAX_NODE_SCORE / 2;
        NodeScore::value(half + (half + with_pod - without_pod) / 2)
    }
}

/// How many resources a node's balance is worked out over without
/// allocating: kube-scheduler's default (cpu and memory) and a few extended
/// resources besides.
const INLINE_RESOURCES: usize = 4;

/// `requested / allocatable`, at most 1 (`allocatable` is not 0).
fn fraction(requested: i64, allocatable: i64) -> f64 {
    (requested as f64 / allocatable as f64).min(1.0)
}

/// `balancedResourceScore`: `(1 - std) × 100`, truncated as Go's `int64()`;
/// `std` is half the difference of two fractions, the standard deviation of
/// more (summed in order, as kube-scheduler does), 0 for one or none.
fn balance(fractions: impl Iterator<Item = f64> + Clone) -> i64 {
    let (n, total) = fractions
        .clone()
        .fold((0usize, 0.0f64), |(n, t), f| (n + 1, t + f));
    let std = match n {
        2 => {
            let mut two = fractions;
            let (a, b) = (two.next().unwrap_or(0.0), two.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        n if n > 2 => {
            let mean = total / n as f64;
            let squares = fractions.fold(0.0f64, |sum, f| sum + (f - mean) * (f - mean));
            (squares / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{self, pod_with_spec, res};

    fn args(yaml: &str) -> Result<BalancedAllocationArgs, String> {
        serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
    }

    /// A pod whose containers request `containers` (cpu, memory[, gpu]).
    fn pod(node: Option<&str>, containers: &[&[(&str, &str)]]) -> PodInfo {
        let containers: Vec<serde_json::Value> = containers
            .iter()
            .map(|r| {
                let r: serde_json::Map<String, serde_json::Value> = r
                    .iter()
                    .map(|(k, v)| (k.to_string(), (*v).into()))
                    .collect();
                serde_json::json!({"name": "c", "resources": {"requests": r}})
            })
            .collect();
        let mut p = pod_with_spec(serde_json::json!({ "containers": containers }));
        p.node_name = node.map(str::to_string);
        p
    }

    fn node(name: &str, cpu: &str, memory: &str, gpu: Option<&str>) -> NodeInfo {
        let mut alloc = vec![("cpu", cpu), ("memory", memory), ("pods", "100")];
        alloc.extend(gpu.map(|g| ("nvidia.com/gpu", g)));
        NodeInfo {
            allocatable: res(&alloc),
            ..NodeInfo::new(name, Vec::<(String, String)>::new())
        }
    }

    /// PreScore and Score over `nodes` with `existing` pods placed.
    fn scores(
        a: &BalancedAllocationArgs,
        incoming: &PodInfo,
        nodes: &[NodeInfo],
        existing: Vec<PodInfo>,
    ) -> (Code, Vec<i64>) {
        let mut c = ClusterState::default();
        for n in nodes {
            c.apply_node(n.clone());
        }
        for (i, mut p) in existing.into_iter().enumerate() {
            p.name = format!("existing-{i}");
            p.uid = p.name.clone();
            c.apply_pod(p);
        }
        let nodes: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        let (s, scores) = test_support::score(&BalancedAllocation::new(a), incoming, &nodes, &c);
        (s.code(), scores.iter().map(|s| s.score).collect())
    }

    const CPU_MEM_1: &[(&str, &str)] = &[("cpu", "1000m"), ("memory", "2000")];
    const CPU_MEM_2: &[(&str, &str)] = &[("cpu", "2000m"), ("memory", "3000")];
    const CPU_1: &[(&str, &str)] = &[("cpu", "1000m")];
    const CPU_2: &[(&str, &str)] = &[("cpu", "2000m")];

    /// The cases of kube-scheduler's `TestNodeResourcesBalancedAllocation`
    /// (`balanced_allocation_test.go`), but for the DRA ones.
    /// Five resources take part, one more than the stack holds, and four.
    #[test]
    fn more_resources_than_the_stack_holds_score_as_fewer_do() {
        let names = [
            "cpu",
            "memory",
            "ephemeral-storage",
            "example.com/a",
            "example.com/b",
        ];
        let wide = NodeInfo {
            allocatable: res(&[
                ("cpu", "4"),
                ("memory", "4000"),
                ("ephemeral-storage", "4000"),
                ("example.com/a", "4"),
                ("example.com/b", "4"),
                ("pods", "100"),
            ]),
            ..NodeInfo::new("wide", Vec::<(String, String)>::new())
        };
        let incoming = pod(
            None,
            &[&[
                ("cpu", "1"),
                ("memory", "2000"),
                ("ephemeral-storage", "3000"),
                ("example.com/a", "1"),
                ("example.com/b", "4"),
            ]],
        );
        // Shares with the pod 1/4, 1/2, 3/4, 1/4 and 1, none without it:
        // std 0.2916 (five) and 0.2073 (four), so 70 and 79 against 100.
        for (taking_part, expected) in [(5, 60), (4, 64)] {
            let list: Vec<String> = (names[..taking_part].iter())
                .map(|n| format!("{{name: {n}, weight: 1}}"))
                .collect();
            let a = args(&format!("resources: [{}]", list.join(", "))).unwrap();
            let (code, got) = scores(&a, &incoming, std::slice::from_ref(&wide), vec![]);
            assert_eq!(
                (code, got),
                (Code::Success, vec![expected]),
                "{taking_part} resources"
            );
        }
    }

    #[test]
    fn scores_match_kube_schedulers_table() {
        let d = BalancedAllocationArgs::default();
        let gpu_args =
            args("resources: [{name: cpu}, {name: memory}, {name: nvidia.com/gpu, weight: 1}]")
                .unwrap();
        let two = pod(None, &[CPU_MEM_1, CPU_MEM_2]);
        // Best effort: skipped in PreScore.
        let n = [
            node("node1", "4000m", "10000", None),
            node("node2", "4000m", "10000", None),
        ];
        assert_eq!(scores(&d, &pod(None, &[&[]]), &n, vec![]).0, Code::Skip);
        // Nothing scheduled, differently sized nodes: 68, 75.
        let n = [
            node("node1", "4000m", "10000", None),
            node("node2", "6000m", "10000", None),
        ];
        assert_eq!(scores(&d, &two, &n, vec![]), (Code::Success, vec![68, 75]));
        // Pods scheduled with resources: 73, 74.
        let existing = || {
            vec![
                pod(Some("node1"), &[CPU_1, CPU_2]),
                pod(Some("node2"), &[CPU_MEM_1, CPU_MEM_2]),
            ]
        };
        let n = [
            node("node1", "10000m", "20000", None),
            node("node2", "10000m", "20000", None),
        ];
        assert_eq!(scores(&d, &two, &n, existing()).1, [73, 74]);
        // ... on differently sized nodes: 73, 70.
        let n = [
            node("node1", "10000m", "20000", None),
            node("node2", "10000m", "50000", None),
        ];
        assert_eq!(scores(&d, &two, &n, existing()).1, [73, 70]);
        // Reaching the min and max scores: 100, 50.
        let n = [
            node("node1", "3000m", "5000", None),
            node("node2", "3000m", "5000", None),
        ];
        let memory_only = pod(None, &[&[("memory", "2000")], &[("memory", "3000")]]);
        let on_node1 = vec![pod(Some("node1"), &[CPU_1, CPU_2])];
        assert_eq!(scores(&d, &memory_only, &n, on_node1).1, [100, 50]);
        // Requested resources at node capacity: 62, 62.
        let n = [
            node("node1", "6000m", "10000", None),
            node("node2", "6000m", "10000", None),
        ];
        let cpu_only = pod(None, &[CPU_1, CPU_2]);
        assert_eq!(scores(&d, &cpu_only, &n, existing()).1, [62, 62]);
        // A scalar resource the pod requests takes part: 75, 76.
        let n = [
            node("node1", "3500m", "40000", Some("8")),
            node("node2", "3500m", "40000", Some("8")),
        ];
        let gpu_pod = pod(
            None,
            &[&[("cpu", "0"), ("memory", "0"), ("nvidia.com/gpu", "1")]],
        );
        let with_gpus = vec![
            pod(
                Some("node1"),
                &[
                    CPU_MEM_1,
                    &[
                        ("cpu", "2000m"),
                        ("memory", "3000"),
                        ("nvidia.com/gpu", "3"),
                    ],
                ],
            ),
            pod(Some("node2"), &[CPU_MEM_1, CPU_MEM_2]),
        ];
        assert_eq!(scores(&gpu_args, &gpu_pod, &n, with_gpus).1, [75, 76]);
        // ... and one it does not request does not: 56, 56.
        let n = [
            node("node1", "3500m", "40000", Some("8")),
            node("node2", "3500m", "40000", None),
        ];
        assert_eq!(scores(&gpu_args, &two, &n, vec![]).1, [56, 56]);
    }

    #[test]
    fn pod_level_requests_are_what_is_balanced() {
        // Pod-level cpu 3 and memory 5000 over containers that request less.
        let mut p = pod_with_spec(serde_json::json!({
            "resources": {"requests": {"cpu": "3", "memory": "5000"}},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
        }));
        p.name = "incoming".into();
        let n = [
            node("node1", "4000m", "10000", None),
            node("node2", "6000m", "10000", None),
        ];
        let d = BalancedAllocationArgs::default();
        assert_eq!(scores(&d, &p, &n, vec![]).1, [68, 75]);
    }

    #[test]
    fn args_are_strict_with_kube_schedulers_defaults() {
        assert_eq!(args("{}").unwrap(), BalancedAllocationArgs::default());
        assert_eq!(
            args("resources: []").unwrap(),
            BalancedAllocationArgs::default()
        );
        let a = args("resources: [{name: cpu, weight: 0}, {name: example.com/foo}]").unwrap();
        assert_eq!(
            a.resources
                .iter()
                .map(|r| (r.name.as_str(), r.weight))
                .collect::<Vec<_>>(),
            [("cpu", 1), ("example.com/foo", 1)]
        );
        let e = args("resources: [{name: cpu, weight: 2}]").unwrap_err();
        assert!(e.contains("resources[0].weight: 2: must be 1"), "{e}");
        let e = args("resources: [{name: cpu}, {name: cpu}]").unwrap_err();
        assert!(
            e.contains("resources[1].name: duplicate value \"cpu\""),
            "{e}"
        );
        let e = args("resourcez: []").unwrap_err();
        assert!(e.contains("unknown field `resourcez`"), "{e}");
        let e = args("resources: [{name: cpu, wieght: 1}]").unwrap_err();
        assert!(e.contains("unknown field `wieght`"), "{e}");
    }

    #[test]
    fn bad_args_in_a_policy_and_a_kube_scheduler_configuration_name_their_place() {
        let policy = "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n  - name: NodeResourcesBalancedAllocation\n    args:\n      resources:\n      - {name: cpu, weight: 3}\n";
        let e = crate::policy::parse(policy, "p.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.yaml:6:5: profiles[0].plugins[0].args: "),
            "{e}"
        );
        assert!(e.contains("resources[0].weight: 3: must be 1"), "{e}");
        let ks = "kind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesBalancedAllocation\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      kind: NodeResourcesBalancedAllocationArgs\n      resources: [{name: cpu}, {name: memory}, {name: example.com/gpu}]\n";
        let t = crate::explain::in_tree::InTree::parse(ks, "ks.yaml").unwrap();
        let (f, missing) = t.profile_for("default-scheduler").unwrap();
        assert!(f.plugins().iter().any(|p| p.plugin.name() == NAME));
        assert!(!missing.iter().any(|m| m == NAME));
    }

    #[test]
    fn score_needs_pre_score() {
        let plugin = BalancedAllocation::new(&BalancedAllocationArgs::default());
        assert_eq!(
            test_support::score_without_pre_score(&plugin).code(),
            Code::Error
        );
    }
}
