//! One record per distinct pod spec among the counted pods.
//!
//! The pods of one Deployment, Job or batch have equal specs, and placer's
//! view of a spec ([`PodSpecInfo`]: requests, tolerations, selectors,
//! images) is about 1.7 KB in 13 allocations for a plain one-container pod
//! with the two default tolerations: more than half of what the cache holds
//! per pod. The state points every counted pod whose spec equals one it
//! already holds at that record, as kube-scheduler's cache cannot (each of
//! its `PodInfo`s holds the pod's own decoded object).
//!
//! Specs are looked up by [`PodSpecInfo`]'s hash, which skips what is costly
//! to hash, and confirmed by equality, so only equal specs are shared. The
//! table holds weak pointers: a spec no pod uses any more is freed, and its
//! entry goes at the next sweep.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::BuildHasher;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::objects::pod::PodSpecInfo;

/// Below this many entries the table is never swept.
const MIN_SWEEP: usize = 256;

/// Specs by hash, shared by every copy of the state (a replica's full copy
/// clones the pointer): any copy that applies an owned pod shares its spec
/// with the others.
#[derive(Debug, Default, Clone)]
pub(super) struct SpecTable(Arc<Mutex<Specs>>);

#[derive(Debug, Default)]
struct Specs {
    by_hash: HashMap<u64, Weak<PodSpecInfo>, foldhash::fast::FixedState>,
    /// Sweep dead entries when the table grows past this.
    sweep_at: usize,
}

impl SpecTable {
    /// Points `spec` at the table's equal record, or makes it the record
    /// for its hash (replacing a dead or different one).
    pub(super) fn share(&self, spec: &mut Arc<PodSpecInfo>) {
        let mut specs = self.0.lock();
        let hash = specs.by_hash.hasher().hash_one(&**spec);
        match specs.by_hash.entry(hash) {
            Entry::Occupied(mut entry) => match entry.get().upgrade() {
                Some(held) if Arc::ptr_eq(&held, spec) => {}
                Some(held) if *held == **spec => *spec = held,
                _ => {
                    entry.insert(Arc::downgrade(spec));
                }
            },
            Entry::Vacant(entry) => {
                entry.insert(Arc::downgrade(spec));
                specs.sweep_if_due();
            }
        }
    }

    /// Entries, dead or alive (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().by_hash.len()
    }
}

impl Specs {
    /// Drops the entries of freed specs once the table has doubled since
    /// the last sweep, so it stays within twice the live specs (a dead
    /// entry also holds its record's allocation, without its contents).
    fn sweep_if_due(&mut self) {
        if self.by_hash.len() <= self.sweep_at.max(MIN_SWEEP) {
            return;
        }
        self.by_hash.retain(|_, spec| spec.strong_count() > 0);
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
        let table = SpecTable::default();
        let (mut a, mut b) = (spec("x"), spec("x"));
        table.share(&mut a);
        table.share(&mut b);
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn different_specs_stay_apart() {
        let table = SpecTable::default();
        let (mut a, mut b) = (spec("x"), spec("y"));
        table.share(&mut a);
        table.share(&mut b);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.node_selector["pool"], "y");
    }

    #[test]
    fn a_spec_that_hashes_alike_but_differs_is_not_shared() {
        // Affinity is not hashed, only compared.
        let table = SpecTable::default();
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
        let table = SpecTable::default();
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
