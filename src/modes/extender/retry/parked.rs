//! The parked pods: pods whose last `/filter` answer left them with no
//! feasible node, bounded in number and age.
//!
//! `/filter` inserts (a rejection) or removes (a pass) one entry per call, in
//! amortized O(1): a map by UID plus an insertion-ordered queue for eviction
//! and expiry. A re-parked pod leaves a stale queue entry behind; stale
//! entries are skipped when they reach the front and the queue is compacted
//! once they outnumber the live ones, so it never grows past twice the map.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;

use crate::objects::PodInfo;

/// One parked pod.
#[derive(Debug)]
pub struct ParkedPod {
    /// The pod as kube-scheduler sent it.
    pub pod: PodInfo,
    /// The plugins that rejected its nodes (`NodeCache` for nodes placer did not know).
    pub plugins: Vec<&'static str>,
    /// How many nodes were rejected.
    pub nodes: usize,
    /// When `/filter` rejected it.
    pub at: Instant,
    /// The change feed's sequence number when the rejection was computed.
    pub seen_seq: u64,
    /// Changes were reported between the evaluation and the insertion, so
    /// the next re-check must look at every node, not only the changed ones.
    pub late: AtomicBool,
}

#[derive(Debug, Default)]
struct Inner {
    by_uid: HashMap<String, Arc<ParkedPod>>,
    order: VecDeque<(Instant, String)>,
}

impl Inner {
    fn is_live(&self, at: Instant, uid: &str) -> bool {
        self.by_uid.get(uid).is_some_and(|e| e.at == at)
    }

    /// Drops queue entries from the front while they are stale or (when
    /// `expire_before` is given) older than it, and evicts one live entry
    /// when `evict_one` is set.
    fn trim_front(&mut self, expire_before: Option<Instant>, mut evict_one: bool) -> usize {
        let mut removed = 0;
        while let Some((at, uid)) = self.order.front() {
            let live = self.is_live(*at, uid);
            let expired = expire_before.is_some_and(|t| *at < t);
            if live && !expired && !evict_one {
                break;
            }
            if live {
                self.by_uid.remove(uid.as_str());
                removed += 1;
                evict_one = false;
            }
            self.order.pop_front();
        }
        removed
    }
}

/// The registry.
#[derive(Debug)]
pub struct Parked {
    inner: Mutex<Inner>,
    /// Entries, readable without the lock (the common path checks it first).
    len: AtomicUsize,
    /// `placer_parked_pods`, set under the lock with `len` so concurrent
    /// changes cannot leave it stale.
    gauge: Gauge,
    capacity: usize,
    max_age: Duration,
}

impl Parked {
    /// At most `capacity` pods, each kept at most `max_age`.
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Parked {
            inner: Mutex::new(Inner::default()),
            len: AtomicUsize::new(0),
            gauge: Gauge::default(),
            capacity: capacity.max(1),
            max_age,
        }
    }

    /// The same registry, keeping `gauge` at its number of entries.
    #[must_use]
    pub fn publishing(mut self, gauge: Gauge) -> Self {
        gauge.set(self.len() as i64);
        self.gauge = gauge;
        self
    }

    /// Records the number of entries (called with the lock held).
    fn publish(&self, len: usize) {
        self.len.store(len, Ordering::Release);
        self.gauge.set(len as i64);
    }

    /// Number of parked pods.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// True when no pod is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parks (or re-parks) a pod; returns how many older entries were
    /// evicted to make room.
    pub fn park(&self, entry: ParkedPod) -> usize {
        let mut inner = self.inner.lock();
        let uid = entry.pod.uid.clone();
        let at = entry.at;
        let expire_before = at.checked_sub(self.max_age);
        let mut evicted = inner.trim_front(expire_before, false);
        let fresh = inner.by_uid.insert(uid.clone(), Arc::new(entry)).is_none();
        inner.order.push_back((at, uid));
        if fresh && inner.by_uid.len() > self.capacity {
            evicted += inner.trim_front(None, true);
        }
        if inner.order.len() > 2 * inner.by_uid.len() + 64 {
            let Inner { by_uid, order } = &mut *inner;
            order.retain(|(at, uid)| by_uid.get(uid).is_some_and(|e| e.at == *at));
        }
        self.publish(inner.by_uid.len());
        evicted
    }

    /// Forgets the pod `uid` (it passed `/filter`, was bound or prompted).
    pub fn unpark(&self, uid: &str) -> Option<Arc<ParkedPod>> {
        if self.is_empty() {
            return None;
        }
        let mut inner = self.inner.lock();
        let removed = inner.by_uid.remove(uid);
        self.publish(inner.by_uid.len());
        removed
    }

    /// Forgets `uid` only if it is still the entry `entry` (not re-parked since).
    pub fn unpark_if_same(&self, entry: &Arc<ParkedPod>) -> bool {
        let mut inner = self.inner.lock();
        let same = inner
            .by_uid
            .get(&entry.pod.uid)
            .is_some_and(|e| Arc::ptr_eq(e, entry));
        if same {
            inner.by_uid.remove(&entry.pod.uid);
            self.publish(inner.by_uid.len());
        }
        same
    }

    /// The live entries (expired ones are dropped first), for a re-check.
    pub fn snapshot(&self, now: Instant) -> Vec<Arc<ParkedPod>> {
        let mut inner = self.inner.lock();
        inner.trim_front(now.checked_sub(self.max_age), false);
        self.publish(inner.by_uid.len());
        inner.by_uid.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uid: &str, at: Instant) -> ParkedPod {
        ParkedPod {
            pod: PodInfo {
                uid: uid.into(),
                name: uid.into(),
                ..Default::default()
            },
            plugins: vec!["CapabilityFilter"],
            nodes: 1,
            at,
            seen_seq: 0,
            late: AtomicBool::new(false),
        }
    }

    #[test]
    fn bounded_in_number_oldest_evicted_first() {
        let p = Parked::new(2, Duration::from_secs(300));
        let t = Instant::now();
        assert_eq!(p.park(entry("a", t)), 0);
        assert_eq!(p.park(entry("b", t + Duration::from_millis(1))), 0);
        assert_eq!(
            p.park(entry("a", t + Duration::from_millis(2))),
            0,
            "re-park"
        );
        assert_eq!(p.park(entry("c", t + Duration::from_millis(3))), 1);
        let mut left: Vec<String> = p
            .snapshot(t + Duration::from_millis(3))
            .iter()
            .map(|e| e.pod.uid.clone())
            .collect();
        left.sort();
        assert_eq!(left, ["a", "c"], "b was the oldest live entry");
    }

    #[test]
    fn bounded_in_age() {
        let p = Parked::new(10, Duration::from_secs(300));
        let t = Instant::now();
        p.park(entry("old", t));
        p.park(entry("new", t + Duration::from_secs(200)));
        let left = p.snapshot(t + Duration::from_secs(301));
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].pod.uid, "new");
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn queue_stays_bounded_under_re_parks() {
        let p = Parked::new(10, Duration::from_secs(300));
        let t = Instant::now();
        for i in 0..10_000_u64 {
            p.park(entry("same", t + Duration::from_micros(i)));
        }
        assert!(p.inner.lock().order.len() <= 2 + 64 + 1);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn unpark_only_the_same_entry() {
        let p = Parked::new(10, Duration::from_secs(300));
        let t = Instant::now();
        p.park(entry("a", t));
        let first = p.snapshot(t).pop().unwrap();
        p.park(entry("a", t + Duration::from_millis(1)));
        assert!(!p.unpark_if_same(&first), "re-parked since: keep it");
        assert_eq!(p.len(), 1);
        assert!(p.unpark("a").is_some());
        assert!(p.is_empty());
        assert!(p.unpark("a").is_none());
    }
}
