//! One scheduling attempt for one pod over one snapshot: PreFilter, Filter,
//! PostFilter (when nothing fits), PreScore, Score, NormalizeScore and the
//! choice of a node. No I/O: the loop around it assumes, binds, evicts and
//! reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cache::ClusterState;
use crate::framework::{
    ApiWrite, CycleState, Diagnosis, Framework, Nominating, PluginError, Status, fit_error_message,
};
use crate::objects::{NodeInfo, PodInfo};

use super::sample::{Search, feasible_nodes_to_find};

/// Where the pod should go.
#[derive(Clone)]
pub struct Placement {
    /// The chosen node.
    pub node: String,
    /// Nodes evaluated.
    pub evaluated: usize,
    /// Nodes that fit.
    pub feasible: usize,
    /// What the attempt's plugins wrote, for Reserve through PostBind.
    pub state: CycleState,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("node", &self.node)
            .field("evaluated", &self.evaluated)
            .field("feasible", &self.feasible)
            .finish_non_exhaustive()
    }
}

/// Why the pod could not be placed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No node fits: "0/N nodes are available: ...", with PostFilter's
    /// message appended. Retried on cluster events.
    Unschedulable {
        /// kube-scheduler's FitError message.
        message: String,
        /// What PostFilter decided about the pod's nomination.
        nominating: Nominating,
        /// The plugins that rejected the pod (kube-scheduler's
        /// `UnschedulablePlugins`): their queueing hints decide which
        /// cluster events retry it. Empty: any event does.
        rejectors: Vec<&'static str>,
        /// API writes PostFilter asked for, sent before the attempt is
        /// reported (boxed: rare, and the failure travels in every `Err`).
        writes: Option<Box<PostFilterWrites>>,
    },
    /// A plugin failed (`Error` status); retried with backoff.
    Error {
        /// What failed.
        message: String,
    },
}

/// PostFilter's API writes and where its part of the failure message
/// starts: kube-scheduler's plugin writes during PostFilter and, when the
/// write fails, ends PostFilter with the error, which then is the whole
/// PostFilter part of the message and leaves the nomination unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct PostFilterWrites {
    /// The writes, in plugin order.
    pub writes: Vec<ApiWrite>,
    /// The length of the message before PostFilter's part.
    pub message_start: usize,
}

impl Failure {
    /// The message for the event and the pod condition.
    pub fn message(&self) -> &str {
        match self {
            Failure::Unschedulable { message, .. } | Failure::Error { message } => message,
        }
    }

    /// What happens to the pod's `nominatedNodeName` (an error clears it, as in kube-scheduler).
    pub fn nominating(&self) -> &Nominating {
        const CLEAR: &Nominating = &Nominating::Clear;
        match self {
            Failure::Unschedulable { nominating, .. } => nominating,
            Failure::Error { .. } => CLEAR,
        }
    }

    fn unschedulable(message: String, rejectors: Vec<&'static str>) -> Self {
        Failure::Unschedulable {
            message,
            nominating: Nominating::Clear,
            rejectors,
            writes: None,
        }
    }

    /// Takes the PostFilter writes out of the failure.
    pub fn take_writes(&mut self) -> Option<Box<PostFilterWrites>> {
        match self {
            Failure::Unschedulable { writes, .. } => writes.take(),
            Failure::Error { .. } => None,
        }
    }

    /// A PostFilter write failed with `error`: as kube-scheduler, the
    /// error replaces PostFilter's part of the message and the nomination
    /// stays as it was (no later PostFilter plugin ran there).
    pub fn post_filter_write_failed(&mut self, message_start: usize, error: &str) {
        if let Failure::Unschedulable {
            message,
            nominating,
            ..
        } = self
        {
            message.truncate(message_start);
            message.push(' ');
            message.push_str(error);
            *nominating = Nominating::Unchanged;
        }
    }

    /// The plugins whose queueing hints decide when the pod is retried
    /// (none for an error, which backs off).
    pub fn rejectors(&self) -> &[&'static str] {
        match self {
            Failure::Unschedulable { rejectors, .. } => rejectors,
            Failure::Error { .. } => &[],
        }
    }
}

impl From<PluginError> for Failure {
    fn from(e: PluginError) -> Self {
        Failure::Error {
            message: e.to_string(),
        }
    }
}

/// Pods waiting for a node preemption freed, as the attempt must respect them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Nominated<'a> {
    /// Other pods of the same or higher priority, each with `node_name` set
    /// to its nominated node: they count as placed there (kube-scheduler's
    /// `RunFilterPluginsWithNominatedPods`).
    pub others: &'a [PodInfo],
    /// The node this pod itself is nominated to: taken at once if it fits.
    pub own: Option<&'a str>,
}

/// Picks one of equally good nodes uniformly at random, as kube-scheduler's
/// `selectHost` does (reservoir sampling over the best totals).
///
/// The draws are SplitMix64 over a counter: independent of the nodes' order,
/// and the same sequence from a fresh value, so tests can name the outcome.
/// A plain rotation (the attempt count modulo the number of ties) was tried
/// first and lined up with node names striped across zones: with every node
/// scored, the scale harness's pods went 1,336 / 5,332 / 4,332 to its three
/// equal zones.
#[derive(Debug, Default)]
pub struct TieBreak(AtomicU64);

/// SplitMix64's increment: the fractional part of the golden ratio.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl TieBreak {
    /// Draws from `seed` on: two runs with one seed break the same ties the
    /// same way (`placer simulate --seed`); the default is seed 0.
    pub fn seeded(seed: u64) -> Self {
        TieBreak(AtomicU64::new(seed))
    }

    fn pick(&self, ties: usize) -> usize {
        if ties <= 1 {
            return 0;
        }
        let mut z = self
            .0
            .fetch_add(GOLDEN_GAMMA, Ordering::Relaxed)
            .wrapping_add(GOLDEN_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // The draw scaled to 0..ties (multiply-shift: no division, and a
        // bias below ties / 2^64).
        ((u128::from(z) * ties as u128) >> 64) as usize
    }
}

/// Runs `f` with the `others` placed on their nominated nodes, then takes
/// them out again. A nominated pod the cluster already holds (it was bound
/// meanwhile) is left alone.
fn with_room_held<T>(
    cluster: &mut ClusterState,
    others: &[PodInfo],
    f: impl FnOnce(&mut ClusterState) -> T,
) -> T {
    let mut held = Vec::new();
    for p in others {
        if cluster.pod(&p.namespace, &p.name).is_none() {
            cluster.apply_pod(p.clone());
            held.push(p);
        }
    }
    let out = f(cluster);
    for p in held {
        cluster.delete_pod(&p.namespace, &p.name);
    }
    out
}

/// Runs one attempt for `pod` on every node of `cluster`. The cluster is
/// borrowed mutably because nominated pods and preemption's dry run are
/// tried on it in place; it is returned exactly as it was.
pub fn schedule_one(
    framework: &Framework,
    pod: &PodInfo,
    cluster: &mut ClusterState,
    nominated: Nominated<'_>,
    tie_break: &TieBreak,
) -> Result<Placement, Failure> {
    let mut nodes: Vec<Arc<NodeInfo>> = cluster.nodes().cloned().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    schedule_on(
        framework,
        pod,
        cluster,
        &nodes,
        nominated,
        tie_break,
        Search::ALL,
    )
}

/// [`schedule_one`] over `nodes` (every node of `cluster`, by name: the
/// scheduler's view keeps that list between attempts), looking for as many
/// feasible nodes as `search` asks.
pub fn schedule_on(
    framework: &Framework,
    pod: &PodInfo,
    cluster: &mut ClusterState,
    nodes: &[Arc<NodeInfo>],
    nominated: Nominated<'_>,
    tie_break: &TieBreak,
    search: Search<'_>,
) -> Result<Placement, Failure> {
    let total = nodes.len();
    if total == 0 {
        return Err(Failure::unschedulable(
            "0/0 nodes are available: no nodes available to schedule pods.".into(),
            Vec::new(),
        ));
    }
    let alone = framework.pre_filter_attempt(pod, cluster)?;
    // A node must fit both without and with the nominated pods on it.
    let others = nominated.others;
    let held = if others.is_empty() {
        None
    } else {
        Some(with_room_held(cluster, others, |c| {
            framework.pre_filter_attempt(pod, c)
        })?)
    };
    let rejection = alone
        .1
        .rejection
        .clone()
        .or_else(|| held.as_ref().and_then(|h| h.1.rejection.clone()));
    let evaluate = |chunk: &[Arc<NodeInfo>], cluster: &mut ClusterState| {
        let (state, pre) = &alone;
        let mut verdicts = framework.filter_attempt(state, pre, pod, chunk, cluster)?;
        if let Some(h) = &held {
            let with = with_room_held(cluster, others, |c| {
                framework.filter_attempt(&h.0, &h.1, pod, chunk, c)
            })?;
            for (v, w) in verdicts.iter_mut().zip(with) {
                if w.is_some() {
                    *v = w;
                }
            }
        }
        Ok::<_, Failure>(verdicts)
    };
    let wanted = feasible_nodes_to_find(search.percentage, total);
    let (nodes, verdicts): (std::borrow::Cow<'_, [Arc<NodeInfo>]>, Vec<Option<Status>>) =
        if wanted >= total {
            (nodes.into(), evaluate(nodes, cluster)?)
        } else {
            let start = search.start(total);
            let (processed, verdicts) =
                sampled(nodes, start, wanted, |chunk| evaluate(chunk, cluster))?;
            search.advance(processed, total);
            (rotated_prefix(nodes, start, processed), verdicts)
        };
    let evaluated = nodes.len();
    let mut pre = alone.1;
    pre.rejection = rejection;
    let count = verdicts.iter().filter(|v| v.is_none()).count();
    if count == 0 {
        let failed: Vec<(Arc<NodeInfo>, Status)> = nodes
            .iter()
            .cloned()
            .zip(verdicts.into_iter().flatten())
            .collect();
        let message = match &pre.rejection {
            // kube-scheduler states a PreFilter rejection once, not per node.
            Some(r) => format!("0/{total} nodes are available: {}.", r.message()),
            None => fit_error_message(total, failed.iter().map(|(_, s)| s)),
        };
        let rejectors = rejectors_of(pre.rejection.iter().chain(failed.iter().map(|(_, s)| s)));
        if !framework.has_post_filters() {
            return Err(Failure::unschedulable(message, rejectors));
        }
        let diagnosis = Diagnosis {
            total,
            failed: &failed,
            state: Some(&alone.0),
        };
        let post = with_room_held(cluster, nominated.others, |c| {
            framework.post_filter(pod, &diagnosis, c)
        });
        let extra = post.status.message();
        let writes = (!post.writes.is_empty()).then(|| {
            Box::new(PostFilterWrites {
                writes: post.writes,
                message_start: message.len(),
            })
        });
        return Err(Failure::Unschedulable {
            message: if extra.is_empty() {
                message
            } else {
                format!("{message} {extra}")
            },
            nominating: post.nominating,
            rejectors,
            writes,
        });
    }
    // Most pods fit every node: then the node list itself is the feasible
    // list, and no node's record is shared once more (an atomic increment
    // and decrement per node, on as many cache lines).
    let feasible: std::borrow::Cow<'_, [Arc<NodeInfo>]> = if count == evaluated {
        std::borrow::Cow::Borrowed(&*nodes)
    } else {
        nodes
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_none())
            .map(|(n, _)| n.clone())
            .collect()
    };
    let own = nominated
        .own
        .and_then(|name| feasible.iter().find(|n| n.name == name));
    let mut state = alone.0;
    if let Some(node) = own.or(if count == 1 { feasible.first() } else { None }) {
        // kube-scheduler takes a fitting nominated node at once, and skips
        // scoring when only one node fits.
        return Ok(Placement {
            node: node.name.clone(),
            evaluated,
            feasible: count,
            state,
        });
    }
    let table = framework.score_attempt(&mut state, pod, &feasible, &*cluster)?;
    let best = table.totals.iter().copied().max().unwrap_or(0);
    // Two passes over the totals instead of a list of the tied indices:
    // with every node scored, thousands tie, and the list was an
    // allocation per attempt.
    let tied = || (0..count).filter(|&i| table.totals[i] == best);
    let chosen = tied().nth(tie_break.pick(tied().count())).unwrap_or(0);
    Ok(Placement {
        node: feasible[chosen].name.clone(),
        evaluated,
        feasible: count,
        state,
    })
}

/// The plugins behind `statuses`, each once, in order of first appearance
/// (a node a PreFilter result ruled out names that plugin too).
fn rejectors_of<'a>(statuses: impl Iterator<Item = &'a Status>) -> Vec<&'static str> {
    let mut plugins: Vec<&'static str> = Vec::new();
    for status in statuses {
        let plugin = status.plugin();
        if !plugin.is_empty() && !plugins.contains(&plugin) {
            plugins.push(plugin);
        }
    }
    plugins
}

/// Filters `nodes` in the order that starts at `start` and wraps around,
/// chunk by chunk, until `wanted` nodes fit or every node was looked at;
/// returns how many nodes were processed (those up to the `wanted`-th fit: a
/// chunk's later nodes do not count, as kube-scheduler stops there) and their
/// verdicts. A chunk ends at the end of `nodes` and the next one goes on from
/// the first node, so every chunk is borrowed: sampling looks at a tenth of
/// 5,000 nodes, and a rotated copy of all of them shared every record once
/// more (an atomic increment and decrement per node, on as many cache lines).
fn sampled(
    nodes: &[Arc<NodeInfo>],
    start: usize,
    wanted: usize,
    mut evaluate: impl FnMut(&[Arc<NodeInfo>]) -> Result<Vec<Option<Status>>, Failure>,
) -> Result<(usize, Vec<Option<Status>>), Failure> {
    /// Smallest chunk, so a pod most nodes reject does not pay the
    /// per-plugin overhead of the runner for one node at a time.
    const MIN_CHUNK: usize = 64;
    let total = nodes.len();
    let mut verdicts = Vec::new();
    let mut fits = 0;
    while verdicts.len() < total && fits < wanted {
        let from = verdicts.len();
        let at = (start + from) % total;
        let len = (wanted - fits)
            .max(MIN_CHUNK)
            .min(total - from)
            .min(total - at);
        let Some(chunk) = nodes.get(at..at + len) else {
            break;
        };
        for v in evaluate(chunk)? {
            if fits == wanted {
                break;
            }
            fits += usize::from(v.is_none());
            verdicts.push(v);
        }
    }
    Ok((verdicts.len(), verdicts))
}

/// The first `len` nodes of `nodes` in the order that starts at `start` and
/// wraps around: borrowed unless they wrap past the end.
fn rotated_prefix(
    nodes: &[Arc<NodeInfo>],
    start: usize,
    len: usize,
) -> std::borrow::Cow<'_, [Arc<NodeInfo>]> {
    if let Some(run) = nodes.get(start..start + len) {
        return std::borrow::Cow::Borrowed(run);
    }
    let (before, after) = nodes.split_at(start.min(nodes.len()));
    after.iter().chain(before).take(len).cloned().collect()
}

#[cfg(test)]
mod tests;
