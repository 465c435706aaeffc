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

use crate::cache::Cache;
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
        let mut done = None;
        if pod.node_name.is_none() {
            let cluster = self.cache.read();
            inputs.generation = self.cache.generation();
            let evaluated = live::evaluate(&fw, &unbound, &cluster);
            if evaluated.post_filter.is_none() {
                done = Some(evaluated.explanation);
            }
        }
        // A bound pod is taken out of the cluster while it is evaluated, and
        // PostFilter's dry run edits the cluster in place: both need it
        // exclusively, as a standalone attempt does, and both restore it.
        let explanation = match done {
            Some(e) => e,
            None => {
                let mut cluster = self.cache.write();
                inputs.generation = self.cache.generation();
                let held = pod
                    .node_name
                    .as_ref()
                    .and_then(|_| cluster.pod(&pod.namespace, &pod.name).cloned())
                    .filter(|p| p.uid == pod.uid);
                if held.is_some() {
                    cluster.delete_pod(&pod.namespace, &pod.name);
                }
                let evaluated = live::evaluate(&fw, &unbound, &cluster);
                let e = live::post_filter(&fw, &unbound, evaluated, &mut cluster);
                if let Some(p) = held {
                    cluster.apply_pod(p);
                }
                e
            }
        };
        let mut explanation = explanation;
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
