//! The last diagnosis of each pending pod, kept in memory and bounded.
//!
//! Two things per pod: what standalone mode's last scheduling attempt
//! reported (the FailedScheduling text, recorded by the scheduling loop), and
//! the last explanation `/explain/pods` computed, with the cache generation,
//! policy and pod it was computed from, so asking again while none of them
//! changed returns it without evaluating anything.
//!
//! Bounded by a cap on pods (least recently recorded goes first) and emptied
//! as pods leave: bound or deleted ([`super::pending::watch`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::warn;

use super::LiveExplanation;
use super::simulator::Outcome;
use crate::objects::PodInfo;

/// Pods remembered by default (`--explain-diagnoses-cap`).
pub const DEFAULT_CAP: usize = 10_000;

/// What a standalone attempt reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The FailedScheduling message of the attempt.
    pub message: String,
    /// [`Cache::generation`](crate::cache::Cache::generation) right after it.
    pub generation: u64,
    /// When, in seconds since the Unix epoch.
    pub at_unix_seconds: u64,
}

/// What an explanation was computed from.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The cache generation read while holding the guard it was computed under.
    pub generation: u64,
    /// Identity of the policy in force (its allocation).
    pub policy: usize,
    /// The pod as evaluated.
    pub pod: Arc<PodInfo>,
}

impl Inputs {
    fn same(&self, other: &Inputs) -> bool {
        self.generation == other.generation
            && self.policy == other.policy
            && (Arc::ptr_eq(&self.pod, &other.pod) || self.pod == other.pod)
    }
}

#[derive(Debug)]
struct Entry {
    uid: String,
    seq: u64,
    attempt: Option<Attempt>,
    memo: Option<(Inputs, Arc<LiveExplanation>)>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// `seq` → key, oldest first.
    order: BTreeMap<u64, String>,
    next: u64,
}

/// The store.
#[derive(Debug)]
pub struct Diagnoses {
    cap: usize,
    inner: Mutex<Inner>,
    /// Where standalone outcomes go for the simulator annotations, if on.
    outcomes: Option<mpsc::Sender<Outcome>>,
}

impl Default for Diagnoses {
    fn default() -> Self {
        Self::new(DEFAULT_CAP)
    }
}

impl Diagnoses {
    /// Remembers at most `cap` pods (0 remembers none).
    pub fn new(cap: usize) -> Self {
        Diagnoses {
            cap,
            inner: Mutex::new(Inner::default()),
            outcomes: None,
        }
    }

    /// Also reports every standalone outcome to `tx` (`--simulator-annotations`);
    /// when it is full the outcome is dropped, never waited for.
    #[must_use]
    pub fn reporting_outcomes(mut self, tx: mpsc::Sender<Outcome>) -> Self {
        self.outcomes = Some(tx);
        self
    }

    fn report(&self, pod: &PodInfo, node: Option<&str>) {
        if let Some(tx) = &self.outcomes
            && tx
                .try_send((Arc::new(pod.clone()), node.map(str::to_string)))
                .is_err()
        {
            warn!(pod = %pod.key(), "simulator annotations fall behind; skipping this outcome");
        }
    }

    /// Records that a standalone attempt placed `pod` on `node`.
    pub fn record_placement(&self, pod: &PodInfo, node: &str) {
        self.forget(&pod.namespace, &pod.name);
        self.report(pod, Some(node));
    }

    /// Pods remembered now.
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// True when no pod is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a standalone attempt's FailedScheduling `message`.
    pub fn record_attempt(&self, pod: &PodInfo, message: &str, generation: u64) {
        let at_unix_seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.touch(pod, |e| {
            e.attempt = Some(Attempt {
                message: message.to_string(),
                generation,
                at_unix_seconds,
            });
        });
        self.report(pod, None);
    }

    /// The last attempt recorded for `pod` (the same UID).
    pub fn attempt(&self, pod: &PodInfo) -> Option<Attempt> {
        let inner = self.inner.lock();
        let e = inner.entries.get(&pod.key())?;
        (e.uid == pod.uid).then(|| e.attempt.clone()).flatten()
    }

    /// The explanation computed from `inputs`, if the last one was.
    pub fn cached(&self, inputs: &Inputs) -> Option<Arc<LiveExplanation>> {
        let inner = self.inner.lock();
        let e = inner.entries.get(&inputs.pod.key())?;
        match &e.memo {
            Some((from, explanation)) if e.uid == inputs.pod.uid && from.same(inputs) => {
                Some(explanation.clone())
            }
            _ => None,
        }
    }

    /// Keeps `explanation`, computed from `inputs`.
    pub fn keep(&self, inputs: Inputs, explanation: Arc<LiveExplanation>) {
        let pod = inputs.pod.clone();
        self.touch(&pod, |e| e.memo = Some((inputs, explanation)));
    }

    /// Forgets `namespace/name` (bound or deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.forget_key(&format!("{namespace}/{name}"));
    }

    /// Forgets the pod with key `namespace/name`.
    pub fn forget_key(&self, key: &str) {
        let mut inner = self.inner.lock();
        if let Some(e) = inner.entries.remove(key) {
            inner.order.remove(&e.seq);
        }
    }

    /// Updates (or creates, evicting the oldest beyond the cap) `pod`'s entry.
    /// A new UID under the same name starts afresh.
    fn touch(&self, pod: &PodInfo, update: impl FnOnce(&mut Entry)) {
        if self.cap == 0 {
            return;
        }
        let key = pod.key();
        let mut inner = self.inner.lock();
        inner.next += 1;
        let seq = inner.next;
        let old = inner.entries.remove(&key);
        let mut entry = match old {
            Some(e) => {
                inner.order.remove(&e.seq);
                if e.uid == pod.uid {
                    Entry { seq, ..e }
                } else {
                    Entry {
                        uid: pod.uid.clone(),
                        seq,
                        attempt: None,
                        memo: None,
                    }
                }
            }
            None => Entry {
                uid: pod.uid.clone(),
                seq,
                attempt: None,
                memo: None,
            },
        };
        update(&mut entry);
        inner.order.insert(seq, key.clone());
        inner.entries.insert(key, entry);
        while inner.entries.len() > self.cap {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            inner.entries.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str) -> PodInfo {
        PodInfo {
            name: name.into(),
            namespace: "ns".into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_cap_evicts_the_least_recently_recorded() {
        let d = Diagnoses::new(2);
        d.record_attempt(&pod("a", "1"), "m-a", 1);
        d.record_attempt(&pod("b", "2"), "m-b", 1);
        d.record_attempt(&pod("a", "1"), "m-a2", 2);
        d.record_attempt(&pod("c", "3"), "m-c", 3);
        assert_eq!(d.len(), 2);
        assert!(d.attempt(&pod("b", "2")).is_none(), "b was the oldest");
        assert_eq!(d.attempt(&pod("a", "1")).unwrap().message, "m-a2");
        d.forget("ns", "a");
        assert!(d.attempt(&pod("a", "1")).is_none());
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_new_uid_under_the_same_name_starts_afresh() {
        let d = Diagnoses::new(4);
        d.record_attempt(&pod("a", "1"), "old", 1);
        assert!(d.attempt(&pod("a", "2")).is_none());
        d.record_attempt(&pod("a", "2"), "new", 2);
        assert_eq!(d.attempt(&pod("a", "2")).unwrap().message, "new");
        assert!(d.attempt(&pod("a", "1")).is_none());
    }

    #[test]
    fn a_cap_of_zero_remembers_nothing() {
        let d = Diagnoses::new(0);
        d.record_attempt(&pod("a", "1"), "m", 1);
        assert!(d.is_empty());
    }
}
