//! One record per distinct value among the counted pods' specs and label
//! sets.
//!
//! The pods of one Deployment, Job or batch have equal specs and equal
//! labels; they differ in name, uid and node. Placer's view of a plain
//! one-container pod's spec with the two default tolerations
//! ([`PodSpecInfo`]: requests, tolerations, selectors, images) is about
//! 1.7 KB in 13 allocations, and a label map about 0.6 KB (a B-tree leaf is
//! allocated whole): together more than three quarters of what the cache
//! held per pod. The state points every counted pod whose spec or labels
//! equal a record it already holds at that record. kube-scheduler's cache
//! cannot: each of its `PodInfo`s holds the pod's own decoded object.
//!
//! Records are looked up by their hash (for specs one that skips what is
//! costly to hash) and confirmed by equality, so only equal values are
//! shared. The table holds weak pointers: a record no pod uses any more is
//! freed, and its entry goes at the next sweep. A pod whose values are its
//! own (a StatefulSet's labels name the pod) costs one entry, about 20
//! bytes.
//!
//! The tables are the process's (as Go's `unique` package is): a pod is
//! shared as soon as it is converted from a listed page or a snapshot file,
//! before the state holds it. Sharing only when the state applied a relist
//! would first allocate every pod's own copies and then free them in between
//! live records, where the allocator cannot give the pages back (a
//! 150,000-pod snapshot settled at 310 MB that way, at 172 MB shared as
//! read; `docs/benchmarks.md`). Values are immutable behind their `Arc`, so
//! sharing across states (a test's, a replica's) is sharing equal values.
//!
//! [`PodSpecInfo`]: crate::objects::pod::PodSpecInfo

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, LazyLock, Weak};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

use crate::objects::PodInfo;
use crate::objects::pod::PodSpecInfo;

/// Below this many entries a table is never swept.
const MIN_SWEEP: usize = 256;

/// The counted pods' spec records.
static SPECS: LazyLock<Dedup<PodSpecInfo>> = LazyLock::new(Dedup::default);
/// The counted pods' label maps.
static LABELS: LazyLock<Dedup<BTreeMap<String, String>>> = LazyLock::new(Dedup::default);

/// `pod` as the cache keeps it: converted, and, if the state counts it,
/// sharing its spec and labels with equal pods' (see [`share_counted`]).
/// Where pods enter the cache (watches, snapshot files, one-shot lists).
pub fn read_pod(pod: &Pod) -> PodInfo {
    let mut info = PodInfo::from(pod);
    share_counted(&mut info);
    info
}

/// Points a pod that the state counts (assigned, not terminal) at the
/// spec record and label map held for equal values; other pods are left
/// alone (a pending pod's spec is its own until it is bound).
pub fn share_counted(pod: &mut PodInfo) {
    if pod.node_name.is_some() && !pod.is_terminal() {
        SPECS.share(&mut pod.spec);
        LABELS.share(&mut pod.labels);
    }
}

/// Records of `T` by hash.
#[derive(Debug)]
pub(super) struct Dedup<T>(Mutex<Records<T>>);

// A derived `Default` would ask `T` for one; the table does not need it.
impl<T> Default for Dedup<T> {
    fn default() -> Self {
        Dedup(Mutex::new(Records {
            by_hash: HashMap::default(),
            sweep_at: 0,
        }))
    }
}

#[derive(Debug)]
struct Records<T> {
    by_hash: HashMap<u64, Weak<T>, foldhash::fast::FixedState>,
    /// Sweep dead entries when the table grows past this.
    sweep_at: usize,
}

impl<T: Hash + PartialEq> Dedup<T> {
    /// Points `value` at the table's equal record, or makes it the record
    /// for its hash (replacing a dead or different one).
    pub(super) fn share(&self, value: &mut Arc<T>) {
        let mut records = self.0.lock();
        let hash = records.by_hash.hasher().hash_one(&**value);
        match records.by_hash.entry(hash) {
            Entry::Occupied(mut entry) => match entry.get().upgrade() {
                Some(held) if Arc::ptr_eq(&held, value) => {}
                Some(held) if *held == **value => *value = held,
                _ => {
                    entry.insert(Arc::downgrade(value));
                }
            },
            Entry::Vacant(entry) => {
                entry.insert(Arc::downgrade(value));
                records.sweep_if_due();
            }
        }
    }

    /// Entries, dead or alive (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().by_hash.len()
    }
}

impl<T> Records<T> {
    /// Drops the entries of freed records once the table has doubled since
    /// the last sweep, so it stays within twice the live records (a dead
    /// entry also holds its record's allocation, without its contents).
    fn sweep_if_due(&mut self) {
        if self.by_hash.len() <= self.sweep_at.max(MIN_SWEEP) {
            return;
        }
        self.by_hash.retain(|_, record| record.strong_count() > 0);
        self.sweep_at = 2 * self.by_hash.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(selector: &str) -> Arc<PodSpecInfo> {
        Arc::new(PodSpecInfo {
            node_selector: [("pool".to_owned(), selector.to_owned())].into(),
            ..PodSpecInfo::default()
        })
    }

    #[test]
    fn equal_specs_end_up_as_one_record() {
        let table = Dedup::default();
        let (mut a, mut b) = (spec("x"), spec("x"));
        table.share(&mut a);
        table.share(&mut b);
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn different_specs_stay_apart() {
        let table = Dedup::default();
        let (mut a, mut b) = (spec("x"), spec("y"));
        table.share(&mut a);
        table.share(&mut b);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.node_selector["pool"], "y");
    }

    #[test]
    fn a_spec_that_hashes_alike_but_differs_is_not_shared() {
        // Affinity is not hashed, only compared.
        let table = Dedup::default();
        let mut plain = spec("x");
        let mut with_affinity = Arc::new(PodSpecInfo {
            affinity: Some(Default::default()),
            ..(*spec("x")).clone()
        });
        let mut other_affinity = Arc::new(PodSpecInfo {
            affinity: Some(k8s_openapi::api::core::v1::Affinity {
                node_affinity: Some(Default::default()),
                ..Default::default()
            }),
            ..(*spec("x")).clone()
        });
        table.share(&mut plain);
        table.share(&mut with_affinity);
        table.share(&mut other_affinity);
        assert!(!Arc::ptr_eq(&with_affinity, &other_affinity));
        assert_eq!(
            other_affinity
                .affinity
                .as_ref()
                .map(|a| a.node_affinity.is_some()),
            Some(true)
        );
    }

    #[test]
    fn freed_specs_are_swept_and_live_ones_kept() {
        let table = Dedup::default();
        let mut live = spec("live");
        table.share(&mut live);
        for i in 0..4 * MIN_SWEEP {
            let mut s = spec(&i.to_string());
            table.share(&mut s);
        }
        assert!(table.len() <= MIN_SWEEP + 1, "{} entries", table.len());
        let mut again = spec("live");
        table.share(&mut again);
        assert!(Arc::ptr_eq(&live, &again));
    }
}
