//! The capacity questions that change the cluster or the profile and run
//! the whole simulation again: `--drain`, `--add-nodes`, `--compare-profile`.

use std::sync::Arc;

pub use super::answers::{AddNodes, Comparison, Difference};
use super::engine::Arrival;
use super::expand::Expanded;
use super::outcome::Outcome;
use super::{cluster_cache, run_blocking};
use crate::cache::snapshot_file::Snapshot;
use crate::objects::NodeInfo;
use crate::policy::CompiledPolicy;

/// One run's inputs, kept to run again with a change.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The cluster's nodes and pods.
    pub nodes: Vec<NodeInfo>,
    /// The cluster's pods.
    pub pods: Vec<crate::objects::PodInfo>,
    /// The workload.
    pub workload: Expanded,
    /// The workload's pods as they arrive.
    pub arrivals: Vec<Arrival>,
    /// The tie-break's seed.
    pub seed: u64,
    /// The profile of the cluster's pending pods whose scheduler the
    /// policy has no profile for (`default-scheduler`'s pods, drained
    /// pods): in the simulation the profile stands for the cluster's scheduler.
    pub scheduler_name: String,
}

impl Inputs {
    /// Runs the simulation on these inputs with `policy`.
    pub fn run(
        &self,
        policy: &Arc<CompiledPolicy>,
    ) -> std::io::Result<(Outcome, Arc<crate::cache::Cache>)> {
        let snapshot = Snapshot {
            nodes: self.nodes.clone(),
            pods: self.pods.clone(),
        };
        let (cache, mut arrivals) = cluster_cache(policy, snapshot, &self.workload);
        for a in &mut arrivals {
            if policy.profile(&a.pod.scheduler_name).is_none() {
                a.pod.scheduler_name.clone_from(&self.scheduler_name);
            }
        }
        arrivals.extend(self.arrivals.iter().cloned());
        let outcome = run_blocking(policy.clone(), cache.clone(), arrivals, self.seed)?;
        Ok((outcome, cache))
    }
}

/// A node label selector as `kubectl --selector` writes it, restricted to
/// what drains need: `key=value`, `key==value`, `key!=value`, `key`,
/// `!key`, comma-separated, all of which must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelector(Vec<(String, Requirement)>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String),
    NotEquals(String),
    Exists,
    Absent,
}

impl std::str::FromStr for NodeSelector {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim) {
            let valid = |k: &str| {
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            };
            let (key, req) = if let Some((k, v)) = term.split_once("!=") {
                (k, Requirement::NotEquals(v.trim().into()))
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, Requirement::Equals(v.trim().into()))
            } else if let Some(k) = term.strip_prefix('!') {
                (k, Requirement::Absent)
            } else {
                (term, Requirement::Exists)
            };
            let key = key.trim();
            if !valid(key) {
                return Err(format!(
                    "{term:?}: expected key=value, key!=value, key or !key"
                ));
            }
            terms.push((key.to_string(), req));
        }
        Ok(NodeSelector(terms))
    }
}

impl NodeSelector {
    /// Whether `node`'s labels satisfy every term.
    pub fn matches(&self, node: &NodeInfo) -> bool {
        self.0.iter().all(|(key, req)| {
            let value = node.labels.get(key);
            match req {
                Requirement::Equals(v) => value == Some(v.as_str()),
                Requirement::NotEquals(v) => value != Some(v.as_str()),
                Requirement::Exists => value.is_some(),
                Requirement::Absent => value.is_none(),
            }
        })
    }
}

/// Drains the nodes `selector` matches, as `kubectl drain
/// --ignore-daemonsets`: they are cordoned, and their pods (but those of
/// DaemonSets, which stay) are taken off to be scheduled again first, as
/// their controllers would recreate them. Returns how many nodes and pods.
pub fn drain(inputs: &mut Inputs, selector: &NodeSelector) -> (usize, usize) {
    let mut drained = std::collections::HashSet::new();
    for node in inputs.nodes.iter_mut().filter(|n| selector.matches(n)) {
        node.unschedulable = true;
        drained.insert(node.name.clone());
    }
    let mut moved = 0;
    for pod in &mut inputs.pods {
        let on_drained = pod.node_name.as_ref().is_some_and(|n| drained.contains(n));
        let daemon = pod
            .controller
            .as_ref()
            .is_some_and(|c| c.kind == "DaemonSet");
        if on_drained && !daemon && !pod.is_terminal() {
            pod.node_name = None;
            moved += 1;
        }
    }
    (drained.len(), moved)
}

/// Most nodes `--add-nodes` adds.
pub const MAX_ADDED_NODES: usize = 16_384;

/// The smallest number of copies of `template` to add for no pod to stay
/// pending: doubling until one count fits, then bisecting (it assumes more
/// nodes never leave more pods pending, which holds but for rare ties).
pub fn add_nodes(
    inputs: &Inputs,
    policy: &Arc<CompiledPolicy>,
    template: &NodeInfo,
) -> std::io::Result<AddNodes> {
    let pending_with = |count: usize| -> std::io::Result<usize> {
        let mut more = inputs.clone();
        for i in 0..count {
            let mut node = template.clone();
            node.name = format!("{}-{i}", template.name);
            more.nodes.push(node);
        }
        Ok(more.run(policy)?.0.summary.pending)
    };
    let answer = |count, searched_up_to, still_pending| AddNodes {
        template: template.name.clone(),
        count,
        searched_up_to,
        still_pending,
    };
    if pending_with(0)? == 0 {
        return Ok(answer(Some(0), 0, 0));
    }
    let (mut low, mut high) = (0, 1);
    loop {
        let pending = pending_with(high)?;
        if pending == 0 {
            break;
        }
        if high >= MAX_ADDED_NODES {
            return Ok(answer(None, high, pending));
        }
        low = high;
        high = (high * 2).min(MAX_ADDED_NODES);
    }
    let searched = high;
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if pending_with(mid)? == 0 {
            high = mid;
        } else {
            low = mid;
        }
    }
    Ok(answer(Some(high), searched, 0))
}

/// Compares `this` run with `other`'s (made with the policy in `file`).
pub fn compare(this: &Outcome, other: &Outcome, file: &str) -> Comparison {
    let where_ =
        |p: &super::outcome::PodResult| p.node.clone().unwrap_or_else(|| p.state.to_string());
    let theirs: std::collections::HashMap<&str, String> = other
        .pods
        .iter()
        .map(|p| (p.pod.as_str(), where_(p)))
        .collect();
    let differences = this
        .pods
        .iter()
        .filter_map(|p| {
            let mine = where_(p);
            let other = theirs
                .get(p.pod.as_str())
                .cloned()
                .unwrap_or_else(|| "-".into());
            (mine != other).then(|| Difference {
                pod: p.pod.clone(),
                this: mine,
                other,
            })
        })
        .collect();
    Comparison {
        policy: file.to_string(),
        placed: other.summary.placed,
        pending: other.summary.pending,
        evicted: other.summary.evicted,
        differences,
    }
}

#[cfg(test)]
mod tests;
