//! The scheduling cycle's view of the cluster: a [`Replica`] of the cache
//! brought up to date at the start of each attempt, so the cycle never holds
//! the cache's lock while it runs (design §7, "standalone cycle view").
//!
//! The cache's read lock is taken only while the replica copies the nodes
//! changed since the previous attempt; watch events, assumes and extender
//! requests (`--mode both`) go on while Filter, Score and preemption's dry
//! runs work on the replica. An assumed or forgotten pod is written to the
//! cache; the next attempt's sync copies its node, so every attempt sees the
//! assumes before it, and extender requests see them at once.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::cache::{Cache, ClusterState, Replica, SyncStats};
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::{NodeInfo, PodInfo};

/// The replica, used by one attempt at a time.
#[derive(Debug, Default)]
pub struct CycleView {
    replica: Mutex<Replica>,
}

impl CycleView {
    /// Syncs the view with `cache`, then runs `attempt` on it with no lock
    /// on the cache held. `attempt` may change the view to try hypothetical
    /// states (preemption) but must leave it as it found it.
    /// `attempt` gets the view and its nodes by name.
    pub fn attempt<T>(
        &self,
        cache: &Cache,
        attempt: impl FnOnce(&mut ClusterState, &[Arc<NodeInfo>]) -> T,
    ) -> T {
        let mut replica = self.replica.lock();
        let _stats: SyncStats = replica.sync(&cache.read());
        let nodes = replica.nodes_by_name();
        attempt(replica.state_mut(), &nodes)
    }

    /// [`attempt`](Self::attempt) on tokio's blocking pool. An attempt is
    /// computation only (about a millisecond at 5,000 nodes, a preemption's
    /// dry runs far longer); run inline it would hold a runtime worker for
    /// all of it, and on 2 cores that leaves the watches, the binds and, in
    /// `--mode both`, the extender's connections one worker between them.
    /// If the attempt panics the view is dropped (it may have been left
    /// mid-change) and the next attempt starts from a full copy.
    pub async fn attempt_off_runtime<T: Send + 'static>(
        self: &Arc<Self>,
        cache: &Arc<Cache>,
        attempt: impl FnOnce(&mut ClusterState, &[Arc<NodeInfo>]) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let (view, cache) = (self.clone(), cache.clone());
        let result = tokio::task::spawn_blocking(move || view.attempt(&cache, attempt)).await;
        if result.is_err() {
            *self.replica.lock() = Replica::default();
        }
        result
    }

    /// Nodes re-copied and full copies made so far.
    pub fn copies(&self) -> (u64, u64) {
        self.replica.lock().copies()
    }
}

/// Gives the keys of the pod's node selector inline label slots in the cache
/// the first time a pod names them (while slots last), so that NodeAffinity
/// compares ids on every node instead of strings. Most pods of a workload
/// select on the same few keys; a new key costs one pass over the nodes and
/// one full copy of the cycle's view.
pub fn slot_selector_labels(cache: &Cache, pod: &PodInfo) {
    let new: Vec<&str> = {
        let state = cache.read();
        let slots = state.label_slots();
        RequiredNodeAffinity::selector_keys(pod)
            .filter(|k| slots.takes_selector_key(k))
            .collect()
    };
    if !new.is_empty() {
        cache.write().watch_selector_labels(new);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::modes::standalone::cycle::{Nominated, TieBreak, schedule_one};
    use crate::objects::{NodeInfo, PodInfo};
    use crate::policy::{CompiledPolicy, parse};

    use crate::plugins::test_support::{
        PREEMPTION_POLICY as POLICY, one_cpu_node as node, one_cpu_pod as pod,
    };

    /// Runs `f` on another thread and says whether it finished within 10 s
    /// (it would never finish if it waited for a lock the cycle holds).
    fn finishes(f: impl FnOnce() + Send + 'static) -> bool {
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            f();
            let _ = done.send(());
        });
        finished.recv_timeout(Duration::from_secs(10)).is_ok()
    }

    /// A single-threaded runtime, a cache with node `a`, and a fresh view.
    fn one_node_on_one_thread() -> (tokio::runtime::Runtime, Arc<Cache>, Arc<CycleView>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let cache = Arc::new(Cache::from_state(ClusterState::default()));
        cache.write().apply_node(node("a"));
        (runtime, cache, Arc::new(CycleView::default()))
    }

    /// On a runtime with a single thread, an attempt that waits for a task
    /// of that runtime finishes only if it does not run on the runtime's
    /// thread.
    #[test]
    fn an_attempt_leaves_the_runtime_free() {
        let (runtime, cache, view) = one_node_on_one_thread();
        let (started, attempt_started) = tokio::sync::oneshot::channel();
        let (tick, ticked) = mpsc::channel();
        let seen = runtime.block_on(async {
            // Another task on the runtime (a watch, a bind, a request) that
            // has work once the attempt is under way.
            tokio::spawn(async move {
                if attempt_started.await.is_ok() {
                    let _ = tick.send(());
                }
            });
            view.attempt_off_runtime(&cache, move |cluster, nodes| {
                let _ = started.send(());
                let other_task_ran = ticked.recv_timeout(Duration::from_secs(10)).is_ok();
                (other_task_ran, cluster.node_count(), nodes.len())
            })
            .await
            .unwrap()
        });
        assert_eq!(
            seen,
            (true, 1, 1),
            "the runtime's other task ran during the attempt"
        );
    }

    #[test]
    fn a_panicking_attempt_leaves_a_fresh_view() {
        let (runtime, cache, view) = one_node_on_one_thread();
        runtime.block_on(async {
            let failed = view
                .attempt_off_runtime(&cache, |cluster, _| {
                    cluster.delete_node("a");
                    panic!("a plugin bug");
                })
                .await;
            assert!(failed.is_err());
            let after = view
                .attempt_off_runtime(&cache, |cluster, _| cluster.node_count())
                .await
                .unwrap();
            assert_eq!(after, 1, "the half-changed view was not reused");
        });
    }

    #[test]
    fn watch_events_apply_while_a_cycle_runs_and_the_cycle_keeps_its_view() {
        let cache = Arc::new(Cache::from_state(ClusterState::default()));
        for n in ["a", "b"] {
            cache.write().apply_node(node(n));
            cache
                .write()
                .apply_pod(pod(&format!("low-{n}"), Some(n), 0));
        }
        let policy = CompiledPolicy::new(parse(POLICY, "t").unwrap());
        let framework = policy.profile("s").unwrap().clone();
        let view = Arc::new(CycleView::default());
        let (started, cycle_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        // A preemption cycle held open in the middle, after its dry runs
        // moved pods in the view, by a hook around the real attempt.
        let cycle = {
            let (cache, view) = (cache.clone(), view.clone());
            std::thread::spawn(move || {
                view.attempt(&cache, |cluster, _| {
                    let incoming = pod("high", None, 100);
                    let tie_break = TieBreak::default();
                    let out = schedule_one(
                        &framework,
                        &incoming,
                        cluster,
                        Nominated::default(),
                        &tie_break,
                    );
                    let seen = cluster.node_count();
                    let _ = started.send(());
                    let _ = released.recv();
                    (out, seen, cluster.node_count())
                })
            })
        };
        cycle_started
            .recv_timeout(Duration::from_secs(60))
            .expect("cycle started");
        let watched = cache.clone();
        assert!(
            finishes(move || {
                // What the node and pod watches do for one event each.
                watched.write().apply_node(node("c"));
                watched.write().delete_pod("ns", "low-a");
            }),
            "watch events queued behind the running cycle"
        );
        let reader = cache.clone();
        assert!(
            finishes(move || assert_eq!(reader.read().node_count(), 3)),
            "a read (an extender request) waited for the running cycle"
        );
        assert!(cache.read().pod("ns", "low-a").is_none());
        release.send(()).unwrap();
        let (out, before, after) = cycle.join().unwrap();
        assert_eq!(
            (before, after),
            (2, 2),
            "the running cycle keeps the view it started with"
        );
        let failure = out.expect_err("both nodes are full: preemption");
        assert!(
            matches!(
                failure.nominating(),
                crate::framework::Nominating::Nominate(_)
            ),
            "{failure:?}"
        );
        assert!(
            cache.read().pod("ns", "low-b").is_some(),
            "the dry run did not touch the cache"
        );
        // The next attempt catches up with exactly the changed nodes.
        let (nodes, pods) = view.attempt(&cache, |c, n| (n.len(), c.pod_count()));
        assert_eq!((nodes, pods), (3, 1));
        assert_eq!(
            view.copies(),
            (2, 1),
            "nodes a and c re-copied, one full copy"
        );
    }

    #[test]
    fn a_node_selector_key_gets_a_slot_once() {
        let mut state = ClusterState::default();
        state.apply_node(NodeInfo::new("a", [("run", "r1")]));
        let cache = Cache::from_state(state);
        let pod: PodInfo = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeSelector": {"run": "r1"}}
        }))
        .unwrap();
        slot_selector_labels(&cache, &pod);
        let wanted = cache.read().label_slots().wanted("run", "r1");
        let node = cache.read().node("a").unwrap().clone();
        assert_eq!(
            wanted.and_then(|w| w.carried_by(&node.inputs)),
            Some(true),
            "the node carries the value by id"
        );
        let written = cache.generation();
        slot_selector_labels(&cache, &pod);
        assert_eq!(
            cache.generation(),
            written,
            "a known key takes no write lock"
        );
        slot_selector_labels(&cache, &PodInfo::default());
        assert_eq!(cache.generation(), written, "no selector, nothing to do");
    }
}
