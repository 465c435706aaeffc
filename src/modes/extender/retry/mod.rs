//! Retry prompts: kube-scheduler never keeps a pod waiting because placer
//! rejected it from a view older than kube-scheduler's.
//!
//! kube-scheduler and placer watch the API server independently. When
//! kube-scheduler sees a change first (a node labelled), it retries the
//! waiting pods at once; placer, a few milliseconds behind, rejects them from
//! its old view; kube-scheduler parks them as unschedulable by "Extender" and
//! waits for the next cluster event, or five minutes. The fix:
//!
//! 1. `/filter` remembers each pod its answer left with no feasible node
//!    ([`parked`]: bounded in number and age, O(1) per request, no I/O).
//! 2. When the cache later applies a change, a background task re-checks the
//!    parked pods against what changed ([`recheck`]).
//! 3. A pod that would now pass somewhere is prompted once: an annotation
//!    patch on the pod ([`prompt`]), which kube-scheduler treats as an update
//!    of the pod and answers by retrying it. Prompts are queued, de-duplicated
//!    and rate-limited.
//!
//! See `docs/freshness.md` for the reasoning and the measurements.

pub mod parked;
pub mod prompt;
pub mod recheck;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tracing::warn;

use crate::cache::Cache;
use crate::metrics::Metrics;
use crate::objects::PodInfo;
use crate::policy::CompiledPolicy;

use parked::{Parked, ParkedPod};
use prompt::{Prompts, Target};

/// Pods remembered at most; beyond it the oldest entries are dropped (they
/// then wait for kube-scheduler's own retry, as without this module).
pub const MAX_PARKED: usize = 10_000;
/// How long a rejection is remembered: kube-scheduler retries every pod that
/// waited this long by itself (`podMaxInUnschedulablePodsDuration`).
pub const MAX_PARKED_AGE: Duration = Duration::from_secs(5 * 60);
/// Prompts sent per second at most, after a burst of [`PROMPT_BURST`].
pub const PROMPT_QPS: f64 = 20.0;
/// Prompts sent back to back before [`PROMPT_QPS`] applies.
pub const PROMPT_BURST: u32 = 50;
/// How long a re-check waits after the first change so that a burst of
/// events (a relist, a rollout) is handled in one pass.
const COALESCE: Duration = Duration::from_millis(20);

/// Name recorded for nodes rejected because placer did not know them yet.
pub const NODE_CACHE: &str = "NodeCache";

/// The parked pods and the prompt queue.
pub struct Retry {
    parked: Parked,
    prompts: Arc<Prompts>,
    metrics: Arc<Metrics>,
}

impl Retry {
    /// An empty registry reporting to `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Retry {
            parked: Parked::new(MAX_PARKED, MAX_PARKED_AGE).publishing(metrics.parked_pods.clone()),
            prompts: Arc::new(Prompts::new(MAX_PARKED, metrics.clone())),
            metrics,
        }
    }

    /// Remembers that `/filter` left `pod` with no feasible node: `plugins`
    /// rejected its `nodes` nodes, from the cache as of change `seen_seq`.
    pub fn park(
        &self,
        cache: &Cache,
        pod: PodInfo,
        plugins: Vec<&'static str>,
        nodes: usize,
        seen_seq: u64,
    ) {
        if pod.uid.is_empty() {
            // Without a UID the pod cannot be patched safely.
            return;
        }
        // A change reported after the evaluation may have been re-checked
        // before this entry existed: check this pod against every node.
        let late = cache.changes().seq() != seen_seq;
        let evicted = self.parked.park(ParkedPod {
            pod,
            plugins,
            nodes,
            at: Instant::now(),
            seen_seq,
            late: AtomicBool::new(late),
        });
        if evicted > 0 {
            self.metrics.parked_evicted.inc_by(evicted as u64);
        }
        if late {
            cache.changes().wake();
        }
    }

    /// `/filter` found a node for the pod: nothing to remember.
    pub fn unpark(&self, uid: &str) {
        self.parked.unpark(uid);
    }

    /// Number of parked pods.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// Starts the re-check task and the prompt worker.
    pub fn spawn(
        self: &Arc<Self>,
        client: kube::Client,
        cache: Arc<Cache>,
        policy: Arc<ArcSwap<CompiledPolicy>>,
    ) {
        cache.changes().enable();
        tokio::spawn(self.prompts.clone().run(client, PROMPT_QPS, PROMPT_BURST));
        tokio::spawn(self.clone().rechecks(cache, policy));
    }

    /// Re-checks the parked pods after every batch of changes, forever.
    async fn rechecks(self: Arc<Self>, cache: Arc<Cache>, policy: Arc<ArcSwap<CompiledPolicy>>) {
        let gate = Arc::new(recheck::gate());
        loop {
            cache.changes().changed().await;
            tokio::time::sleep(COALESCE).await;
            let changes = cache.changes().take();
            let entries = self.parked.snapshot(Instant::now());
            let any_late = entries.iter().any(|e| e.late.load(Ordering::Acquire));
            if entries.is_empty() || (changes.is_empty() && !any_late) {
                continue;
            }
            let (c, p, g) = (cache.clone(), policy.clone(), gate.clone());
            let count = entries.len() as u64;
            let done = tokio::task::spawn_blocking(move || {
                let outcome = recheck::recheck(&entries, &changes, &p.load(), &g, &c);
                (entries, outcome)
            })
            .await;
            let outcome = match done {
                Ok((_, outcome)) => outcome,
                Err(e) => {
                    warn!(error = %e, "parked-pod re-check failed");
                    continue;
                }
            };
            self.metrics.retry_rechecks.inc_by(count);
            recheck::settle(&self.parked, &outcome, |entry| {
                self.prompts.push(Target {
                    namespace: entry.pod.namespace.clone(),
                    name: entry.pod.name.clone(),
                    uid: entry.pod.uid.clone(),
                });
            });
        }
    }
}
