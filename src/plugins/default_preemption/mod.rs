//! DefaultPreemption: when no node fits a pod, find pods of lower priority
//! whose eviction would make it fit, pick the node where that costs least, and
//! nominate it (design §8, PostFilter).
//!
//! Mirrors kube-scheduler v1.37's `plugins/defaultpreemption` and
//! `framework/preemption` for single pods (pod groups are not modelled):
//! eligibility (`preemptionPolicy: Never`, victims of an earlier preemption
//! still terminating on the nominated node), candidate nodes (those that
//! failed with `Unschedulable`, never `UnschedulableAndUnresolvable`), victim
//! selection (remove every lower-priority pod, check the pod fits, then
//! reprieve the most important pods one by one while it still fits), and the
//! choice among candidates (fewest PodDisruptionBudget violations, lowest
//! highest victim priority, smallest priority sum, fewest victims, latest
//! start). Messages are kube-scheduler's, prefixed with "preemption: ".
//!
//! The dry run removes a node's possible victims from the cluster state,
//! checks the pod, puts victims back one by one, and finally restores every
//! pod, so the cluster is never copied. PreFilter runs once per attempt, on
//! the unchanged cluster; each candidate node works on a clone of that cycle
//! state (a pointer per plugin) which the plugins' PreFilter extensions
//! (`AddPod`/`RemovePod`) update as victims leave and come back, as
//! kube-scheduler's `SelectVictimsOnNode` does. A PreFilter rejection or
//! skip holds for every hypothetical state: no plugin's PreFilter verdict
//! depends on other pods, only the counts the extensions keep.
//! Candidate nodes are tried from an offset, as kube-scheduler's
//! `GetOffsetAndNumCandidates` does, so that preemptors do not all evict
//! from the first nodes by name. kube-scheduler draws the offset at random;
//! placer derives it from the pod's uid, which spreads pods as well and
//! keeps one pod's outcome on one cluster reproducible.

use std::cmp::Reverse;

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{
    Code, CycleState, Diagnosis, Framework, Nominating, Nomination, PostFilterPlugin,
    PostFilterResult, PreFilterResult, ReasonHistogram, Status,
};
use crate::objects::{DisruptionBudget, NodeInfo, PodInfo};

mod pdb;
#[cfg(test)]
mod tests;

/// Plugin name in the policy.
pub const NAME: &str = "DefaultPreemption";

/// Reason for a node whose pods all have the pod's priority or more.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Reason for the nodes preemption cannot help (failed unresolvably, or not evaluated).
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// The prefix of every message this plugin returns.
pub const PREFIX: &str = "preemption: ";

/// Arguments, with kube-scheduler's defaults and validation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct DefaultPreemptionArgs {
    /// At least this share of the candidate nodes is dry-run (0..=100).
    pub min_candidate_nodes_percentage: u32,
    /// And at least this many.
    pub min_candidate_nodes_absolute: u32,
}

impl crate::framework::CacheNeeds for DefaultPreemptionArgs {}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    min_candidate_nodes_percentage: Option<i64>,
    min_candidate_nodes_absolute: Option<i64>,
}

impl TryFrom<RawArgs> for DefaultPreemptionArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        let d = DefaultPreemptionArgs::default();
        let pct = r
            .min_candidate_nodes_percentage
            .unwrap_or(i64::from(d.min_candidate_nodes_percentage));
        let abs = r
            .min_candidate_nodes_absolute
            .unwrap_or(i64::from(d.min_candidate_nodes_absolute));
        if !(0..=100).contains(&pct) {
            return Err(format!(
                "minCandidateNodesPercentage: {pct} is not in valid range [0, 100]"
            ));
        }
        let abs = u32::try_from(abs)
            .map_err(|_| format!("minCandidateNodesAbsolute: {abs} must be 0 or more"))?;
        if pct == 0 && abs == 0 {
            return Err(
                "both minCandidateNodesPercentage and minCandidateNodesAbsolute cannot be zero"
                    .into(),
            );
        }
        Ok(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: pct as u32,
            min_candidate_nodes_absolute: abs,
        })
    }
}

/// The plugin.
#[derive(Debug)]
pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
}

impl DefaultPreemption {
    /// Builds the plugin.
    pub fn new(args: &DefaultPreemptionArgs) -> Self {
        DefaultPreemption { args: args.clone() }
    }

    /// How many candidates to find among `potential` nodes before choosing.
    fn candidates_wanted(&self, potential: usize) -> usize {
        let pct = potential * self.args.min_candidate_nodes_percentage as usize / 100;
        pct.max(self.args.min_candidate_nodes_absolute as usize)
            .min(potential)
    }
}

crate::plugin!(DefaultPreemption, NAME, [post_filter]);

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        handle: &Framework,
        pod: &PodInfo,
        diagnosis: &Diagnosis<'_>,
        cluster: &mut ClusterState,
    ) -> PostFilterResult {
        let mut r = self.preempt(handle, pod, diagnosis, cluster);
        let message = r.status.message();
        if !message.is_empty() {
            r.status = Status::new(r.status.code(), format!("{PREFIX}{message}"));
        }
        r
    }
}

/// A node where evicting `victims` makes the pod fit.
#[derive(Debug)]
struct Candidate<'a> {
    node: &'a NodeInfo,
    /// Most important first.
    victims: Vec<PodInfo>,
    pdb_violations: usize,
}

impl DefaultPreemption {
    fn preempt(
        &self,
        handle: &Framework,
        pod: &PodInfo,
        diagnosis: &Diagnosis<'_>,
        cluster: &mut ClusterState,
    ) -> PostFilterResult {
        if let Err(why) = eligible(pod, diagnosis, cluster) {
            return PostFilterResult {
                status: Status::unschedulable(why),
                nominating: Nominating::Unchanged,
                writes: Vec::new(),
            };
        }
        let mut potential: Vec<&NodeInfo> = diagnosis
            .failed
            .iter()
            .filter(|(_, s)| s.code() == Code::Unschedulable)
            .map(|(n, _)| &**n)
            .collect();
        let offset = start_offset(pod, potential.len());
        potential.rotate_left(offset);
        let wanted = self.candidates_wanted(potential.len());
        let budgets: Vec<DisruptionBudget> = pdb::budgets_of(cluster);
        let mut base = CycleState::new();
        let pre = handle.pre_filter_unobserved(&mut base, pod, cluster);
        let dry = DryRun {
            handle,
            pod,
            base: &base,
            pre: &pre,
        };
        let mut candidates: Vec<Candidate<'_>> = Vec::new();
        let mut statuses: Vec<Status> = Vec::new();
        for node in potential {
            match select_victims(&dry, node, cluster, &budgets) {
                Ok(c) => candidates.push(c),
                Err(s) => statuses.push(s),
            }
            let clean = candidates.iter().any(|c| c.pdb_violations == 0);
            if clean && candidates.len() >= wanted {
                break;
            }
        }
        if candidates.is_empty() {
            if let Some(e) = statuses.iter().find(|s| s.code() == Code::Error) {
                return PostFilterResult {
                    status: e.clone(),
                    nominating: Nominating::Unchanged,
                    writes: Vec::new(),
                };
            }
            let mut h = ReasonHistogram::default();
            for s in &statuses {
                h.add(s);
            }
            let absent = diagnosis.total.saturating_sub(statuses.len());
            h.add_n(&Status::unresolvable(NOT_HELPFUL), absent);
            return PostFilterResult {
                status: Status::unschedulable(h.message(diagnosis.total)),
                nominating: Nominating::Clear,
                writes: Vec::new(),
            };
        }
        let best = pick_one(candidates);
        PostFilterResult {
            status: Status::new(
                Code::Success,
                format!(
                    "found a potential placement for pod on node {}, preempting {} victims",
                    best.node.name,
                    best.victims.len()
                ),
            ),
            nominating: Nominating::Nominate(Nomination {
                node: best.node.name.clone(),
                victims: best.victims,
            }),
            writes: Vec::new(),
        }
    }
}

/// Where among `potential` candidate nodes the dry run starts (see the
/// module documentation).
fn start_offset(pod: &PodInfo, potential: usize) -> usize {
    use std::hash::BuildHasher;
    if potential == 0 {
        return 0;
    }
    let seed = foldhash::fast::FixedState::with_seed(0x706c_6163_6572);
    (seed.hash_one(pod.uid.as_str()) % potential as u64) as usize
}

/// kube-scheduler's `PodEligibleToPreemptOthers`.
fn eligible(
    pod: &PodInfo,
    diagnosis: &Diagnosis<'_>,
    cluster: &ClusterState,
) -> Result<(), &'static str> {
    if pod.preemption.never {
        return Err("not eligible due to preemptionPolicy=Never.");
    }
    let Some(nominated) = pod.preemption.nominated_node.as_deref() else {
        return Ok(());
    };
    // A nominated node that can no longer take the pod at all frees it to preempt elsewhere.
    let unresolvable = diagnosis
        .failed
        .iter()
        .find(|(n, _)| n.name == nominated)
        .is_none_or(|(_, s)| s.code() == Code::UnschedulableAndUnresolvable);
    if unresolvable {
        return Ok(());
    }
    let waiting = cluster
        .pods_on(nominated)
        .any(|p| p.priority < pod.priority && p.terminating_by_preemption());
    if waiting {
        return Err("not eligible due to a terminating pod on the nominated node.");
    }
    Ok(())
}

/// Ordering key: more important pods first (higher priority, then started
/// earlier; a pod without a start time counts as started now).
fn importance(p: &PodInfo) -> (Reverse<i32>, i64) {
    (
        Reverse(p.priority),
        p.preemption.start_time.unwrap_or(i64::MAX),
    )
}

/// What one attempt's dry runs share: PreFilter's state and result on the
/// unchanged cluster.
struct DryRun<'a> {
    handle: &'a Framework,
    pod: &'a PodInfo,
    base: &'a CycleState,
    pre: &'a PreFilterResult,
}

impl DryRun<'_> {
    /// Moves `victim` off `node` in `cluster` and in `state`.
    fn remove(
        &self,
        state: &mut CycleState,
        victim: &PodInfo,
        node: &NodeInfo,
        cluster: &mut ClusterState,
    ) -> Result<(), Status> {
        cluster.delete_pod(&victim.namespace, &victim.name);
        self.handle
            .remove_pod(state, self.pre, self.pod, victim, node, cluster)
            .map_err(|e| Status::error(e.to_string()))
    }

    /// Puts `victim` back on `node` in `cluster` and in `state`.
    fn add(
        &self,
        state: &mut CycleState,
        victim: &PodInfo,
        node: &NodeInfo,
        cluster: &mut ClusterState,
    ) -> Result<(), Status> {
        cluster.apply_pod(victim.clone());
        self.handle
            .add_pod(state, self.pre, self.pod, victim, node, cluster)
            .map_err(|e| Status::error(e.to_string()))
    }

    /// Filter's first rejection of `node` in the current state.
    fn rejects(
        &self,
        state: &CycleState,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Option<Status> {
        self.handle
            .filter_node(state, self.pre, self.pod, node, cluster)
    }
}

/// kube-scheduler's `SelectVictimsOnNode` for one node. Moves pods out of
/// `cluster` and back; on return every pod is where it was, whatever the
/// outcome.
fn select_victims<'a>(
    dry: &DryRun<'_>,
    node: &'a NodeInfo,
    cluster: &mut ClusterState,
    budgets: &[DisruptionBudget],
) -> Result<Candidate<'a>, Status> {
    let mut potential: Vec<PodInfo> = cluster
        .pods_on(&node.name)
        .filter(|p| p.priority < dry.pod.priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS));
    }
    potential.sort_by_key(importance);
    let (violating, clean) = pdb::split(potential, budgets);
    // Reprieve budget-protected pods first, then the rest, most important first.
    let order: Vec<(PodInfo, bool)> = violating
        .into_iter()
        .map(|v| (v, true))
        .chain(clean.into_iter().map(|v| (v, false)))
        .collect();
    let mut out = vec![false; order.len()];
    let mut state = dry.base.clone();
    let tried = try_victims(dry, &mut state, &order, &mut out, node, cluster);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for ((v, protected), out) in order.into_iter().zip(out) {
        if out {
            cluster.apply_pod(v.clone());
            pdb_violations += usize::from(protected);
            victims.push(v);
        }
    }
    tried?;
    if victims.is_empty() {
        return Err(Status::error(format!(
            "expected at least one victim pod on node {:?}",
            node.name
        )));
    }
    victims.sort_by_key(importance);
    Ok(Candidate {
        node,
        victims,
        pdb_violations,
    })
}

/// The dry run proper over `order`: removes every pod, checks the pod fits,
/// then puts them back one by one, keeping out those without which it no
/// longer fits. `out[i]` tells whether `order[i]` is out of `cluster` (the
/// victims on success; on an early return, what the caller must restore).
fn try_victims(
    dry: &DryRun<'_>,
    state: &mut CycleState,
    order: &[(PodInfo, bool)],
    out: &mut [bool],
    node: &NodeInfo,
    cluster: &mut ClusterState,
) -> Result<(), Status> {
    for ((v, _), out) in order.iter().zip(out.iter_mut()) {
        *out = true;
        dry.remove(state, v, node, cluster)?;
    }
    if let Some(s) = dry.rejects(state, node, cluster) {
        return Err(s);
    }
    for ((v, _), out) in order.iter().zip(out.iter_mut()) {
        *out = false;
        dry.add(state, v, node, cluster)?;
        if dry.rejects(state, node, cluster).is_some() {
            *out = true;
            dry.remove(state, v, node, cluster)?;
        }
    }
    Ok(())
}

/// kube-scheduler's `pickOneNodeForPreemption`: each criterion narrows the
/// field until one node is left; the first remaining node wins ties.
fn pick_one(mut field: Vec<Candidate<'_>>) -> Candidate<'_> {
    type Criterion = fn(&Candidate<'_>) -> i64;
    let criteria: [Criterion; 5] = [
        |c| -(c.pdb_violations as i64),
        |c| -i64::from(c.victims[0].priority),
        |c| {
            -c.victims
                .iter()
                .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
                .sum::<i64>()
        },
        |c| -(c.victims.len() as i64),
        // The latest start among the highest-priority victims' earliest starts.
        |c| {
            let top = c.victims[0].priority;
            c.victims
                .iter()
                .filter(|v| v.priority == top)
                .map(|v| v.preemption.start_time.unwrap_or(i64::MAX))
                .min()
                .unwrap_or(i64::MAX)
        },
    ];
    for criterion in criteria {
        if field.len() == 1 {
            break;
        }
        let best = field.iter().map(criterion).max().unwrap_or(0);
        field.retain(|c| criterion(c) == best);
    }
    field.swap_remove(0)
}
