//! The view extender requests read: an immutable [`Snapshot`] of the cluster
//! state, published through an `ArcSwap`, so a request evaluates without
//! holding the cache's lock and the watch loops apply events while it runs
//! (design §7, "request view").
//!
//! **Buffers.** A publish brings a [`Replica`] up to date with the nodes
//! changed since its last sync, under the cache's read lock for as long as
//! that copy takes. When no request holds the published snapshot (requests
//! hold it for one evaluation, and kube-scheduler sends them one at a time)
//! it is taken out and synced in place, so it catches up on one interval
//! of changes; syncing a spare instead made every publish catch up on two
//! (measured: ~30 nodes per probe request during a 400 pods/s burst). When
//! a request still reads it, a spare (a snapshot replaced while read, once
//! its readers are done) is synced and swapped in, and the held one becomes
//! the spare; with no spare free, the published view is cloned (lock-free,
//! but a copy of the indexes). [`PublishStats`] counts both cases.
//!
//! **Freshness.** A request must see every write that completed before it
//! started, as it did under the read lock. [`Published::fresh`] compares
//! the cache's write count, read when the request asks, with the one the
//! snapshot reflects (read under the read lock at sync time, when no write
//! is in progress), and brings the snapshot up to date on the request's own
//! thread when it is older. Concurrent stale requests wait for one sync
//! and share it. Rejected: a publisher task woken by the writers. It would
//! publish for every write burst whether or not requests come, and a stale
//! request would still wait, for the sync plus a wake-up and a context
//! switch on two busy cores; syncing inline costs the request only the copy
//! of the nodes changed since the last request (one or two after a bind).
//!
//! **Nothing changed.** Most writes change nothing placer keeps (node
//! heartbeats), yet count as writes. When the state's own change number
//! and the change feed's sequence both stand where the published snapshot
//! has them, its content is current: only its write count moves, in place.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use tracing::info;

use super::{Cache, ClusterState, Replica};

/// One published view of the cluster state.
#[derive(Debug)]
pub struct Snapshot {
    replica: Replica,
    /// The cache's write count this view reflects; only raised, and only
    /// while the state is unchanged.
    writes: AtomicU64,
    changes_seq: u64,
}

impl Snapshot {
    /// The state to evaluate on.
    pub fn state(&self) -> &ClusterState {
        self.replica.state()
    }

    /// [`ChangeFeed::seq`](super::ChangeFeed::seq) when the view was taken:
    /// changes reported with a larger number are newer than this view.
    pub fn changes_seq(&self) -> u64 {
        self.changes_seq
    }

    /// The number of cache writes the view reflects
    /// ([`Cache::generation`]).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }
}

/// What the publisher did so far (for `/debug/snapshot` and tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishStats {
    /// Snapshots swapped in.
    pub published: u64,
    /// Stale snapshots found current (nothing placer keeps had changed).
    pub refreshed: u64,
    /// Publishes that found the published snapshot still read, so the
    /// spare buffer was synced instead of it.
    pub held: u64,
    /// Publishes that found both buffers read and cloned the published one.
    pub cloned: u64,
    /// Nodes re-copied by syncs.
    pub copied_nodes: u64,
    /// Full copies (first sync, relists, new zone dimensions).
    pub full_copies: u64,
    /// Time spent syncing buffers under the read lock, in microseconds.
    pub sync_micros: u64,
}

/// The published snapshot and the publisher's spare buffer.
#[derive(Debug, Default)]
pub struct Published {
    current: ArcSwapOption<Snapshot>,
    /// Held by the one request that syncs; the others wait here and then
    /// find the snapshot it published.
    publisher: Mutex<Publisher>,
}

#[derive(Debug, Default)]
struct Publisher {
    /// A snapshot requests still read when it was replaced: the spare,
    /// once they are done with it.
    retired: Option<Arc<Snapshot>>,
    stats: PublishStats,
}

impl Published {
    /// A snapshot reflecting at least every write to `cache` completed
    /// before this call.
    pub fn fresh(&self, cache: &Cache) -> Arc<Snapshot> {
        let wanted = cache.generation();
        if let Some(s) = self.current_if_fresh(wanted) {
            return s;
        }
        let mut publisher = self.publisher.lock();
        // Another request may have published while this one waited.
        if let Some(s) = self.current_if_fresh(wanted) {
            return s;
        }
        let current = self.current.load_full();
        let mut shared = cache.read();
        // Under the read lock no write is in progress: the count is exactly
        // the writes the state reflects, and the feed's sequence the reports
        // they made.
        if let Some(current) = &current
            && current.replica.synced() == shared.generations().current()
            && current.changes_seq == cache.changes().seq()
        {
            current
                .writes
                .fetch_max(cache.generation(), Ordering::AcqRel);
            publisher.stats.refreshed += 1;
            return current.clone();
        }
        // Ours must not count as a reader.
        drop(current);
        // Readers arriving while the view is out wait above for this sync.
        let (mut next, still_read) = match self.current.swap(None).map(Arc::try_unwrap) {
            None => (Replica::default(), None),
            // Synced in place: it catches up on the changes since it was
            // published, not those of two publishes.
            Some(Ok(unread)) => (unread.replica, None),
            Some(Err(read)) => {
                publisher.stats.held += 1;
                let spare = match publisher.retired.take().map(Arc::try_unwrap) {
                    Some(Ok(spare)) => spare.replica,
                    _ => {
                        publisher.stats.cloned += 1;
                        // Rare (a request outlasting two publishes), and a
                        // copy of the indexes: worth seeing in the log.
                        info!(
                            cloned = publisher.stats.cloned,
                            "requests still read both snapshot buffers; publishing a copy"
                        );
                        // Made without holding the writers off.
                        drop(shared);
                        let copy = read.replica.clone();
                        shared = cache.read();
                        copy
                    }
                };
                (spare, Some(read))
            }
        };
        let writes = cache.generation();
        let changes_seq = cache.changes().seq();
        let (nodes_before, full_before) = next.copies();
        let started = Instant::now();
        next.sync(&shared);
        drop(shared);
        let took = started.elapsed();
        let (nodes_after, full_after) = next.copies();
        let stats = &mut publisher.stats;
        stats.copied_nodes += nodes_after - nodes_before;
        stats.full_copies += full_after - full_before;
        stats.sync_micros += u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        stats.published += 1;
        let next = Arc::new(Snapshot {
            replica: next,
            writes: AtomicU64::new(writes),
            changes_seq,
        });
        self.current.store(Some(next.clone()));
        if let Some(read) = still_read {
            // The spare once its readers are done.
            publisher.retired = Some(read);
        }
        next
    }

    fn current_if_fresh(&self, wanted: u64) -> Option<Arc<Snapshot>> {
        self.current.load_full().filter(|s| s.writes() >= wanted)
    }

    /// What the publisher did so far.
    pub fn stats(&self) -> PublishStats {
        self.publisher.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{NodeInfo, PodInfo, Resources};

    fn node(name: &str) -> NodeInfo {
        NodeInfo {
            allocatable: Resources::from_list([("cpu", "4"), ("pods", "110")]).unwrap(),
            ..NodeInfo::new(name, [("zone", "z1")])
        }
    }

    fn pod(name: &str, node: &str) -> PodInfo {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]}
        }))
        .unwrap()
    }

    fn cache_with(nodes: &[&str]) -> Cache {
        let mut state = ClusterState::default();
        for n in nodes {
            state.apply_node(node(n));
        }
        Cache::from_state(state)
    }

    fn pods_of(s: &ClusterState) -> Vec<String> {
        let mut pods: Vec<String> = s
            .pods()
            .map(|p| format!("{}@{:?}", p.name, p.node_name))
            .collect();
        pods.sort();
        pods
    }

    #[test]
    fn every_completed_write_is_in_the_next_snapshot() {
        let cache = cache_with(&["a", "b"]);
        let first = cache.snapshot();
        assert_eq!(first.state().node_count(), 2, "the first sync copies all");
        type Step = (&'static str, fn(&mut ClusterState));
        let steps: [Step; 5] = [
            ("pod assumed", |s| {
                s.apply_pod(pod("p", "a"));
            }),
            ("pod moved", |s| {
                s.delete_pod("ns", "p");
                s.apply_pod(pod("p", "b"));
            }),
            ("node added", |s| {
                s.apply_node(node("c"));
            }),
            ("node deleted", |s| s.delete_node("a")),
            ("relist", |s| s.replace_pods(vec![pod("q", "c")])),
        ];
        for (what, step) in steps {
            step(&mut cache.write());
            let snapshot = cache.snapshot();
            let shared = cache.read();
            assert_eq!(pods_of(snapshot.state()), pods_of(&shared), "after {what}");
            assert_eq!(
                snapshot.state().node_count(),
                shared.node_count(),
                "after {what}"
            );
            assert_eq!(snapshot.writes(), cache.generation(), "after {what}");
        }
        assert_eq!(
            first.state().pod_count(),
            0,
            "a held snapshot never changes"
        );
        assert!(first.state().node("a").is_some());
    }

    #[test]
    fn an_unread_snapshot_catches_up_in_place_on_the_changed_nodes() {
        let cache = cache_with(&["a", "b", "c"]);
        drop(cache.snapshot());
        drop(cache.snapshot());
        cache.write().apply_pod(pod("p", "a"));
        drop(cache.snapshot());
        let warm = cache.publish_stats();
        assert_eq!((warm.published, warm.full_copies), (2, 1), "{warm:?}");
        for i in 0..10 {
            cache.write().apply_pod(pod(&format!("q{i}"), "b"));
            let s = cache.snapshot();
            assert!(s.state().pod("ns", &format!("q{i}")).is_some());
        }
        let after = cache.publish_stats();
        assert_eq!(after.published - warm.published, 10);
        assert_eq!(after.full_copies, warm.full_copies, "no full copy");
        assert_eq!((after.held, after.cloned), (0, 0), "no request held one");
        // One interval each: node b alone.
        assert_eq!(after.copied_nodes - warm.copied_nodes, 10, "{after:?}");
    }

    #[test]
    fn a_snapshot_still_read_is_left_to_its_reader() {
        let cache = cache_with(&["a"]);
        let old = cache.snapshot();
        cache.write().apply_pod(pod("p", "a"));
        let middle = cache.snapshot();
        let stats = cache.publish_stats();
        assert_eq!((stats.held, stats.cloned), (1, 1), "no spare yet: a copy");
        assert_eq!(pods_of(old.state()), Vec::<String>::new());
        drop(old);
        cache.write().apply_pod(pod("q", "a"));
        let new = cache.snapshot();
        let stats = cache.publish_stats();
        assert_eq!(
            (stats.held, stats.cloned),
            (2, 1),
            "the snapshot its reader let go is the spare"
        );
        assert_eq!(pods_of(middle.state()), ["p@Some(\"a\")"]);
        assert_eq!(pods_of(new.state()), pods_of(&cache.read()));
        assert_eq!(stats.full_copies, 1);
    }

    #[test]
    fn a_write_that_changes_nothing_keeps_the_snapshot() {
        let cache = cache_with(&["a"]);
        let before = cache.snapshot();
        // A heartbeat: an equal node record.
        assert!(!cache.write().apply_node(node("a")));
        let after = cache.snapshot();
        assert!(Arc::ptr_eq(&before, &after));
        assert_eq!(after.writes(), cache.generation());
        assert_eq!(cache.publish_stats().refreshed, 1);
    }

    #[test]
    fn the_change_sequence_is_the_one_the_view_reflects() {
        let cache = cache_with(&["a"]);
        cache.changes().enable();
        let before = cache.snapshot();
        {
            let mut state = cache.write();
            state.apply_pod(pod("p", "a"));
            cache.changes().node("a");
        }
        let after = cache.snapshot();
        assert_eq!(before.changes_seq() + 1, after.changes_seq());
        assert_eq!(after.changes_seq(), cache.changes().seq());
        // A report without a state change still moves the view's number.
        {
            let _state = cache.write();
            cache.changes().everything();
        }
        let reported = cache.snapshot();
        assert!(!Arc::ptr_eq(&after, &reported));
        assert_eq!(reported.changes_seq(), cache.changes().seq());
    }

    #[test]
    fn readers_racing_a_writer_never_see_an_older_state() {
        use std::sync::Barrier;
        use std::sync::atomic::AtomicUsize;
        const PODS: usize = 2000;
        let names: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
        let cache = Arc::new(cache_with(
            &names.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        // The number of pods whose write has completed.
        let written = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(3));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (cache, written, start) = (cache.clone(), written.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let (mut reads, mut stale) = (0, 0);
                    loop {
                        let done = written.load(Ordering::Acquire);
                        if done == PODS {
                            return (reads, stale);
                        }
                        let s = cache.snapshot();
                        reads += 1;
                        if s.state().pod_count() < done {
                            stale += 1;
                        }
                    }
                })
            })
            .collect();
        start.wait();
        for i in 0..PODS {
            let pod = pod(&format!("p{i}"), &names[i % names.len()]);
            cache.write().apply_pod(pod);
            written.store(i + 1, Ordering::Release);
        }
        for r in readers {
            let (reads, stale) = r.join().unwrap();
            assert!(reads > 0, "the reader raced the writer");
            assert_eq!(stale, 0, "{stale} of {reads} reads saw a stale snapshot");
        }
        assert_eq!(cache.snapshot().state().pod_count(), PODS);
    }
}
