//! Prompting kube-scheduler to retry a pod: a merge patch of one annotation
//! on the pending pod, which kube-scheduler sees as an update of the pod
//! itself and answers by requeueing it (its "Extender" stand-in plugin
//! registers every event, the pod's own updates included).
//!
//! Prompts go through a bounded, de-duplicated queue to one worker that
//! sends at most `qps` per second (burst `burst`), so a policy reload that
//! frees a thousand pods at once costs a steady trickle of small PATCHes,
//! never a spike. Nothing here runs on the request path.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::metrics::Metrics;

/// The annotation placer sets on a pod to make kube-scheduler retry it; its
/// value is the time of the prompt (RFC 3339). Only its change matters.
pub const RETRY_ANNOTATION: &str = "placer.io/retry-at";

/// How long one PATCH may take before it counts as failed.
const PATCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The pod to prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID: the patch is refused if the name now belongs to another pod.
    pub uid: String,
}

/// The queue between the re-checks and the worker.
pub struct Prompts {
    queue: Mutex<(VecDeque<Target>, HashSet<String>)>,
    capacity: usize,
    notify: Notify,
    metrics: Arc<Metrics>,
}

impl Prompts {
    /// A queue of at most `capacity` pods.
    pub fn new(capacity: usize, metrics: Arc<Metrics>) -> Self {
        Prompts {
            queue: Mutex::new((VecDeque::new(), HashSet::new())),
            capacity: capacity.max(1),
            notify: Notify::new(),
            metrics,
        }
    }

    /// Queues a prompt; a pod already queued, or a full queue, suppresses it.
    pub fn push(&self, target: Target) -> bool {
        let queued = {
            let mut q = self.queue.lock();
            let (order, uids) = &mut *q;
            if order.len() >= self.capacity || !uids.insert(target.uid.clone()) {
                false
            } else {
                order.push_back(target);
                true
            }
        };
        if queued {
            self.notify.notify_one();
        } else {
            self.metrics.retry_prompt("suppressed");
        }
        queued
    }

    /// Pods waiting to be prompted.
    pub fn len(&self) -> usize {
        self.queue.lock().0.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn pop(&self) -> Option<Target> {
        let mut q = self.queue.lock();
        let (order, uids) = &mut *q;
        let t = order.pop_front()?;
        uids.remove(&t.uid);
        Some(t)
    }

    async fn next(&self) -> Target {
        loop {
            if let Some(t) = self.pop() {
                return t;
            }
            self.notify.notified().await;
        }
    }

    /// Sends the queued prompts forever, at most `qps` per second after a
    /// burst of `burst`.
    pub async fn run(self: Arc<Self>, client: Client, qps: f64, burst: u32) {
        let mut bucket = TokenBucket::new(qps, burst, Instant::now());
        loop {
            let target = self.next().await;
            let wait = bucket.take(Instant::now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let result = send(&client, &target).await;
            self.metrics.retry_prompt(result);
        }
    }
}

/// Patches the annotation; returns the metric result (`sent`, `gone`, `failed`).
async fn send(client: &Client, t: &Target) -> &'static str {
    let api: Api<Pod> = Api::namespaced(client.clone(), &t.namespace);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    // metadata.uid turns the patch into a precondition: a pod recreated under
    // the same name is not prompted (409).
    let patch = json!({ "metadata": { "uid": t.uid, "annotations": { RETRY_ANNOTATION: now } } });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let call = api.patch(&t.name, &params, &patch);
    match tokio::time::timeout(PATCH_TIMEOUT, call).await {
        Ok(Ok(_)) => {
            debug!(pod = %format!("{}/{}", t.namespace, t.name), "prompted kube-scheduler to retry");
            "sent"
        }
        Ok(Err(kube::Error::Api(e))) if e.code == 404 || e.code == 409 => "gone",
        Ok(Err(e)) => {
            warn!(pod = %format!("{}/{}", t.namespace, t.name), error = %e, "could not prompt a retry");
            "failed"
        }
        Err(_) => {
            warn!(pod = %format!("{}/{}", t.namespace, t.name), "prompt timed out");
            "failed"
        }
    }
}

/// A token bucket: `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
struct TokenBucket {
    per_token: Duration,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let qps = if qps.is_finite() && qps > 0.0 {
            qps
        } else {
            1.0
        };
        let burst = f64::from(burst.max(1));
        TokenBucket {
            per_token: Duration::from_secs_f64(1.0 / qps),
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Takes one token; returns how long to wait before using it.
    fn take(&mut self, now: Instant) -> Duration {
        let refill =
            now.saturating_duration_since(self.at).as_secs_f64() / self.per_token.as_secs_f64();
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            self.per_token.mul_f64(-self.tokens)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(uid: &str) -> Target {
        Target {
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn queue_dedupes_and_is_bounded() {
        let metrics = Arc::new(Metrics::new());
        let q = Prompts::new(2, metrics.clone());
        assert!(q.push(target("a")));
        assert!(!q.push(target("a")), "already queued");
        assert!(q.push(target("b")));
        assert!(!q.push(target("c")), "full");
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some(target("a")));
        assert!(q.push(target("a")), "may be queued again once taken");
        assert!(
            metrics
                .encode()
                .contains(r#"placer_retry_prompts_total{result="suppressed"} 2"#)
        );
    }

    #[test]
    fn bucket_allows_a_burst_then_paces() {
        let t = Instant::now();
        let mut b = TokenBucket::new(10.0, 3, t);
        let waits: Vec<Duration> = (0..5).map(|_| b.take(t)).collect();
        assert_eq!(&waits[..3], &[Duration::ZERO; 3]);
        assert_eq!(waits[3], Duration::from_millis(100));
        assert_eq!(waits[4], Duration::from_millis(200));
        // After a second the bucket refilled (capped at the burst).
        assert_eq!(b.take(t + Duration::from_secs(1)), Duration::ZERO);
    }
}
