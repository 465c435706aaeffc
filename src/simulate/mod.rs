//! `placer simulate`: the standalone scheduler run over an in-memory
//! cluster instead of an API server (design §8, "Simulation").
//!
//! - [`workload`]: reading the workload's manifests, with positions in errors;
//! - [`expand`]: controllers into the pods their controllers would create;
//! - [`api`]: the in-memory API server the binding cycle writes to;
//! - [`timing`]: when a timed workload's pods arrive and how long they run;
//! - [`engine`]: standalone mode's loop on paused time;
//! - [`capacity`]: `--max-of`, how many more copies of a pod fit;
//! - [`whatif`]: `--drain`, `--add-nodes`, `--compare-profile`: the run again, changed;
//! - [`answers`]: what `--add-nodes` and `--compare-profile` answer, as data;
//! - [`outcome`]: the report (table, JSON).
//!
//! No plugin has a second implementation: the queue, the attempt, Reserve,
//! Permit, PreBind, Bind and preemption are standalone mode's own.

pub mod answers;
pub mod api;
pub mod capacity;
pub mod engine;
pub mod expand;
pub mod outcome;
pub mod timing;
pub mod whatif;
pub mod workload;

use std::sync::Arc;

use crate::cache::snapshot_file::Snapshot;
use crate::cache::{Cache, ClusterState};
use crate::policy::CompiledPolicy;
use engine::{Arrival, Engine};
use expand::Expanded;
use outcome::Outcome;

/// Builds the cache a run starts from: the cluster's nodes and bound pods,
/// with the workload's controllers (their selectors feed PodTopologySpread's
/// default constraints). The cluster's pending pods are returned: they are
/// scheduled first, before the workload.
pub fn cluster_cache(
    policy: &CompiledPolicy,
    cluster: Snapshot,
    workload: &Expanded,
) -> (Arc<Cache>, Vec<Arrival>) {
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    state.watch_labels(policy.node_label_keys().iter().map(String::as_str));
    let (bound, pending): (Vec<_>, Vec<_>) = cluster
        .pods
        .into_iter()
        .partition(|p| p.node_name.is_some());
    Snapshot {
        nodes: cluster.nodes,
        pods: bound,
    }
    .fill(&mut state);
    for rs in &workload.replica_sets {
        state.objects_mut().apply(rs.clone());
    }
    for ss in &workload.stateful_sets {
        state.objects_mut().apply(ss.clone());
    }
    let pending = pending
        .into_iter()
        .filter(|p| !p.is_terminal())
        .map(|pod| Arrival {
            at: std::time::Duration::ZERO,
            runs_for: None,
            pod,
        })
        .collect();
    (Arc::new(Cache::from_state(state)), pending)
}

/// Runs `arrivals` on `cache` with `policy`, ties broken from `seed`, on a
/// runtime of its own whose clock is paused (simulated time: a backoff or
/// an hour of a timed workload takes no wall time).
pub fn run_blocking(
    policy: Arc<CompiledPolicy>,
    cache: Arc<Cache>,
    arrivals: Vec<Arrival>,
    seed: u64,
) -> std::io::Result<Outcome> {
    run_with(policy, cache, arrivals, seed, |e| e)
}

/// [`run_blocking`] with the engine adjusted by `adjust` first.
pub fn run_with(
    policy: Arc<CompiledPolicy>,
    cache: Arc<Cache>,
    arrivals: Vec<Arrival>,
    seed: u64,
    adjust: impl FnOnce(Engine) -> Engine,
) -> std::io::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    // The client's buffer task is spawned on the runtime that makes it.
    let record = runtime.block_on(async {
        adjust(Engine::new(policy, cache.clone(), seed))
            .run(arrivals)
            .await
    });
    let state = cache.read();
    Ok(Outcome::new(&record, &state))
}

#[cfg(test)]
mod tests;
