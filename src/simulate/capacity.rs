//! `--max-of`: how many more copies of a pod fit on the cluster as a run
//! left it.
//!
//! A copy of a pod that nothing ties to other pods (no required pod
//! affinity or anti-affinity, no `DoNotSchedule` spread constraint, no
//! host ports, volumes or claims) fits on a node as long as the node's
//! free resources hold it: whether the profile's other filters pass a node
//! does not change as copies land on it. Then the answer is one Filter pass
//! of the profile over every node and, on the nodes that pass, the count
//! NodeResourcesFit's arithmetic gives (free over requested, per resource,
//! and the pod count) — well under a second at 5,000 nodes. Any other pod
//! is scheduled copy after copy by the engine, up to [`MAX_COPIES`].

use std::sync::Arc;

use serde::Serialize;

use super::engine::Arrival;
use super::run_with;
use crate::cache::{Cache, ClusterState};
use crate::objects::{NodeInfo, PodInfo};
use crate::policy::CompiledPolicy;

/// Most copies scheduled one by one.
pub const MAX_COPIES: usize = 10_000;

/// The answer to `--max-of`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MaxOf {
    /// The template pod, `namespace/name`.
    pub pod: String,
    /// How many more copies fit.
    pub count: usize,
    /// `count` is a lower bound: the one-by-one search stopped at [`MAX_COPIES`].
    pub at_least: bool,
    /// How it was counted: `resources` (one Filter pass and arithmetic) or
    /// `scheduled` (copy after copy).
    pub method: &'static str,
    /// Copies per node, most first (nodes with none left out).
    pub nodes: Vec<NodeCount>,
}

/// Copies on one node.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NodeCount {
    /// The node.
    pub node: String,
    /// Copies that fit there.
    pub count: usize,
}

/// Whether copies of `pod` are independent of each other for Filter.
fn copies_independent(pod: &PodInfo) -> bool {
    let spec = &pod.spec;
    let affinity = spec.affinity.as_ref();
    let required_affinity = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty())
        });
    let required_anti = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty())
        });
    let hard_spread = spec
        .topology_spread_constraints
        .iter()
        .any(|c| c.when_unsatisfiable == "DoNotSchedule");
    !(required_affinity
        || required_anti
        || hard_spread
        || !spec.host_ports.is_empty()
        || !spec.pvc_claims.is_empty()
        || !spec.resource_claims.is_empty()
        || !spec.extended_requests.is_empty())
}

/// How many copies of `pod` the node's free resources hold.
fn copies_on(node: &NodeInfo, cluster: &ClusterState, pod: &PodInfo) -> usize {
    let want = &pod.spec.requests;
    let usage = cluster.usage_of(node);
    let used = usage.map(|u| u.requested.clone()).unwrap_or_default();
    let pods_used = usage.map_or(0, |u| u.pods);
    let fits = |free: i64, each: i64| {
        if each <= 0 {
            usize::MAX
        } else {
            usize::try_from(free.max(0) / each).unwrap_or(0)
        }
    };
    let a = &node.allocatable;
    let mut n = fits(a.pods - pods_used, 1)
        .min(fits(a.milli_cpu - used.milli_cpu, want.milli_cpu))
        .min(fits(a.memory - used.memory, want.memory))
        .min(fits(
            a.ephemeral_storage - used.ephemeral_storage,
            want.ephemeral_storage,
        ));
    for (name, each) in &want.scalar {
        let total = a.scalar.get(name).copied().unwrap_or(0);
        let taken = used.scalar.get(name).copied().unwrap_or(0);
        n = n.min(fits(total - taken, *each));
    }
    n
}

/// How many more copies of `pod` fit on `cache` with its profile in
/// `policy`: by arithmetic when copies are independent, else scheduled one
/// by one on the cache (which they then occupy).
pub fn max_of(
    policy: &Arc<CompiledPolicy>,
    cache: &Arc<Cache>,
    pod: &PodInfo,
    seed: u64,
) -> Result<MaxOf, String> {
    let framework = policy
        .profile(&pod.scheduler_name)
        .ok_or_else(|| format!("no profile for schedulerName {:?}", pod.scheduler_name))?;
    if !copies_independent(pod) {
        return scheduled(policy, cache, pod, seed);
    }
    let cluster = cache.read();
    let mut nodes: Vec<Arc<NodeInfo>> = cluster.nodes().cloned().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let (state, pre) = framework
        .pre_filter_attempt(pod, &cluster)
        .map_err(|e| e.to_string())?;
    let mut counts = Vec::new();
    if pre.rejection.is_none() {
        let verdicts = framework
            .filter_attempt(&state, &pre, pod, &nodes, &cluster)
            .map_err(|e| e.to_string())?;
        for (node, verdict) in nodes.iter().zip(verdicts) {
            if verdict.is_none() {
                let n = copies_on(node, &cluster, pod);
                counts.push(NodeCount {
                    node: node.name.clone(),
                    count: n,
                });
            }
        }
    }
    counts.retain(|c| c.count > 0);
    counts.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.node.cmp(&b.node)));
    let count = counts
        .iter()
        .map(|c| c.count)
        .fold(0usize, usize::saturating_add);
    Ok(MaxOf {
        pod: pod.key(),
        count,
        at_least: false,
        method: "resources",
        nodes: counts,
    })
}

/// Schedules copies until one does not fit, or [`MAX_COPIES`]; copies do
/// not preempt (`preemptionPolicy: Never`): the question is the room there is.
fn scheduled(
    policy: &Arc<CompiledPolicy>,
    cache: &Arc<Cache>,
    pod: &PodInfo,
    seed: u64,
) -> Result<MaxOf, String> {
    // No more copies than the free resources could hold, plus the one that fails.
    let bound = {
        let cluster = cache.read();
        cluster
            .nodes()
            .map(|n| copies_on(n, &cluster, pod))
            .fold(0usize, usize::saturating_add)
            .saturating_add(1)
            .min(MAX_COPIES)
    };
    let copies: Vec<Arrival> = (0..bound)
        .map(|i| {
            let mut copy = pod.clone();
            copy.name = format!("{}-{i}", pod.name);
            copy.uid = format!("{}-{i}", pod.uid);
            // Room that is free, not room preemption would make.
            copy.preemption.never = true;
            Arrival {
                at: std::time::Duration::ZERO,
                runs_for: None,
                pod: copy,
            }
        })
        .collect();
    let outcome = run_with(policy.clone(), cache.clone(), copies, seed, |e| {
        e.stopping_at_first_failure()
    })
    .map_err(|e| e.to_string())?;
    let mut by_node = std::collections::BTreeMap::<String, usize>::new();
    for p in outcome.pods.iter().filter(|p| p.state == "Placed") {
        if let Some(n) = &p.node {
            *by_node.entry(n.clone()).or_default() += 1;
        }
    }
    let mut nodes: Vec<NodeCount> = by_node
        .into_iter()
        .map(|(node, count)| NodeCount { node, count })
        .collect();
    nodes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.node.cmp(&b.node)));
    let count = outcome.summary.placed;
    Ok(MaxOf {
        pod: pod.key(),
        count,
        at_least: count == MAX_COPIES,
        method: "scheduled",
        nodes,
    })
}

#[cfg(test)]
mod tests;
