//! "Why is my pod pending?": a live pod explained from the cache, with
//! kube-scheduler's in-tree verdicts next to placer's
//! (`GET /explain/pods/{namespace}/{name}`, `placer explain`).
//!
//! - [`names`]: the path's namespace and name, checked as the API server does;
//! - [`pending`]: unassigned pods (the cache keeps assigned ones only) and their watch;
//! - [`in_tree`]: kube-scheduler's default profile, or a `KubeSchedulerConfiguration`;
//! - [`report`]: the answer's shape; [`live`]: the evaluation over every node;
//!   [`hints`]: what would change it;
//!   [`table`]: its text form;
//! - [`diagnoses`]: the last diagnosis per pending pod, bounded, reused while
//!   nothing changed;
//! - [`http`]: the handler; [`simulator`]: kube-scheduler-simulator's result annotations.
//!
//! [`Explainer`] ties them together; one is built per process by `placer serve`
//! (or once by `placer explain --kubeconfig`).

pub mod diagnoses;
pub mod hints;
pub mod http;
pub mod in_tree;
pub mod live;
pub mod names;
pub mod pending;
pub mod report;
pub mod simulator;
mod table;

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::cache::{Cache, Replica};
use crate::objects::PodInfo;
use crate::policy::CompiledPolicy;
use crate::state::Mode;

pub use diagnoses::{Attempt, Diagnoses};
pub use in_tree::InTree;
pub use pending::PendingPods;
pub use report::LiveExplanation;

/// Everything an explanation reads.
pub struct Explainer {
    /// The policy in force.
    pub policy: Arc<ArcSwap<CompiledPolicy>>,
    /// The cluster cache (nodes, assigned pods, keyed kinds).
    pub cache: Arc<Cache>,
    /// What this placer runs: decides whether a pod is placer's to schedule.
    pub mode: Mode,
    /// Unassigned pods.
    pub pending: Arc<PendingPods>,
    /// kube-scheduler's plugins, for pods of extender deployments (`None`:
    /// placer's verdicts only).
    pub in_tree: Option<Arc<InTree>>,
    /// Last diagnoses.
    pub diagnoses: Arc<Diagnoses>,
    /// The cluster as explanations evaluate it: a private copy of the
    /// cache, caught up at each explanation (`Default::default()`: empty
    /// until the first one copies it whole).
    pub replica: Mutex<Replica>,
}

/// An explanation and whether it was reused.
pub struct Answer {
    /// The explanation.
    pub explanation: Arc<LiveExplanation>,
    /// True when it was computed earlier from the same inputs.
    pub reused: bool,
    /// Standalone mode's last attempt for the pod.
    pub last_attempt: Option<Attempt>,
}

impl Explainer {
    /// The pod `namespace/name`: pending, else assigned.
    pub fn find(&self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        self.pending.get(namespace, name).or_else(|| {
            self.cache
                .read()
                .pod(namespace, name)
                .map(|p| Arc::new(p.clone()))
        })
    }

    /// Explains `pod`, or says why no profile of placer's applies to it.
    pub fn explain(&self, pod: Arc<PodInfo>) -> Result<Answer, String> {
        let policy = self.policy.load_full();
        let last_attempt = self.diagnoses.attempt(&pod);
        let (placer, standalone) = if self.mode.schedules()
            && let Some(f) = policy.profile(&pod.scheduler_name)
        {
            (f.clone(), true)
        } else if self.mode.serves_verbs()
            && let Some(f) = policy.profile_for_extender(&pod.scheduler_name)
        {
            (f.clone(), false)
        } else {
            return Err(format!(
                "pod {} has schedulerName {:?}: no placer profile schedules it{}",
                pod.key(),
                pod.scheduler_name,
                if self.mode.serves_verbs() {
                    " and the policy has no extender.defaultProfile"
                } else {
                    " (extender verbs are off: --mode standalone)"
                }
            ));
        };
        let in_tree = match (&self.in_tree, standalone) {
            (Some(t), false) => {
                t.profile_for(&pod.scheduler_name)
                    .map(|(f, missing)| live::InTreeRun {
                        framework: f,
                        not_evaluated: missing,
                        extender_weight: t.extender_weight,
                        source: &t.source,
                    })
            }
            _ => None,
        };
        let fw = live::Frameworks {
            in_tree,
            placer: &placer,
        };
        let mut inputs = diagnoses::Inputs {
            generation: self.cache.generation(),
            policy: Arc::as_ptr(&policy) as usize,
            pod: pod.clone(),
        };
        if let Some(explanation) = self.diagnoses.cached(&inputs) {
            return Ok(Answer {
                explanation,
                reused: true,
                last_attempt,
            });
        }
        // Evaluated as the scheduler saw it: without a node.
        let unbound = match &pod.node_name {
            None => pod.clone(),
            Some(_) => Arc::new(PodInfo {
                node_name: None,
                ..(*pod).clone()
            }),
        };
        // Evaluated on the explainer's replica, synced under the cache's read
        // lock for as long as the copy of the changed nodes takes: a bound pod
        // is taken out and PostFilter's dry run moves pods, which both need
        // the cluster exclusively, and the evaluation itself (every filter on
        // every node) would otherwise hold the read lock, which a waiting
        // watch writer turns into a wait for every extender request behind
        // it. Concurrent explanations wait for each other here, not for the
        // cache.
        let mut replica = self.replica.lock();
        {
            let shared = self.cache.read();
            inputs.generation = self.cache.generation();
            replica.sync(&shared);
        }
        let cluster = replica.state_mut();
        let held = pod
            .node_name
            .as_ref()
            .and_then(|_| cluster.pod(&pod.namespace, &pod.name).cloned())
            .filter(|p| p.uid == pod.uid);
        if held.is_some() {
            cluster.delete_pod(&pod.namespace, &pod.name);
        }
        let evaluated = live::evaluate(&fw, &unbound, cluster);
        let mut explanation = live::post_filter(&fw, &unbound, evaluated, cluster);
        // The replica is left as it was found, as a standalone attempt leaves
        // its view.
        if let Some(p) = held {
            cluster.apply_pod(p);
        }
        drop(replica);
        explanation.bound_node = pod.node_name.clone();
        let explanation = Arc::new(explanation);
        self.diagnoses.keep(inputs, explanation.clone());
        Ok(Answer {
            explanation,
            reused: false,
            last_attempt,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::cache::ClusterState;
    use crate::policy::parse;

    use crate::plugins::test_support::{
        PREEMPTION_POLICY as POLICY, one_cpu_node as node, one_cpu_pod as pod,
    };

    /// One full node, its low-priority pod, and a high-priority pod pending.
    fn explainer() -> Arc<Explainer> {
        let mut state = ClusterState::default();
        state.apply_node(node("n1"));
        state.apply_pod(pod("low", Some("n1"), 0));
        Arc::new(Explainer {
            policy: Arc::new(ArcSwap::from_pointee(CompiledPolicy::new(
                parse(POLICY, "t").unwrap(),
            ))),
            cache: Arc::new(Cache::from_state(state)),
            mode: Mode::Standalone,
            pending: Arc::new(PendingPods::from_pods([pod("high", None, 100)])),
            in_tree: None,
            diagnoses: Arc::new(Diagnoses::default()),
            replica: Default::default(),
        })
    }

    /// Explains `namespace/name` on another thread while this one holds the
    /// cache's read lock, as a long extender request does; `None` if it did
    /// not finish within 10 s (it never would if it waited for the write
    /// lock).
    fn explained_under_a_read(
        explainer: &Arc<Explainer>,
        name: &'static str,
    ) -> Option<Arc<LiveExplanation>> {
        let held = explainer.cache.read();
        let (done, finished) = mpsc::channel();
        let e = explainer.clone();
        std::thread::spawn(move || {
            let answer = e
                .find("ns", name)
                .ok_or_else(|| format!("{name} not found"))
                .and_then(|p| e.explain(p));
            let _ = done.send(answer);
        });
        let answer = finished.recv_timeout(Duration::from_secs(10)).ok();
        drop(held);
        answer.map(|a| a.unwrap().explanation)
    }

    #[test]
    fn a_preemption_dry_run_does_not_wait_for_readers_nor_touch_the_cache() {
        let e = explainer();
        let explained = explained_under_a_read(&e, "high")
            .expect("the explanation waited for the cache's readers");
        assert!(
            explained.summary.ends_with(
                "preemption: found a potential placement for pod on node n1, preempting 1 victims"
            ),
            "{}",
            explained.summary
        );
        assert!(
            e.cache.read().pod("ns", "low").is_some(),
            "the dry run moved pods in the replica only"
        );
        let replica = e.replica.lock();
        assert_eq!(
            replica.state().pod("ns", "low"),
            e.cache.read().pod("ns", "low"),
            "the dry run left the replica as it found it"
        );
    }

    #[test]
    fn a_bound_pod_is_taken_out_of_the_replica_only_and_put_back() {
        let e = explainer();
        let explained = explained_under_a_read(&e, "low")
            .expect("the explanation waited for the cache's readers");
        assert_eq!(explained.winner.as_deref(), Some("n1"), "{explained:?}");
        assert_eq!(explained.bound_node.as_deref(), Some("n1"));
        assert_eq!(
            e.replica.lock().state().pod("ns", "low"),
            e.cache.read().pod("ns", "low"),
            "the bound pod is back in the replica"
        );
        // The next explanation syncs the replica with what changed since.
        e.cache.write().delete_pod("ns", "low");
        let again = explained_under_a_read(&e, "high").expect("explained");
        assert_eq!(again.winner.as_deref(), Some("n1"), "{}", again.summary);
    }
}
