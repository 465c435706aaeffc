//! The cluster cache: nodes and assigned pods with the indexes plugins read.
//!
//! - [`state`]: the data and its indexes, updated one event at a time.
//! - [`zone_index`]: per-zone pod counts for ZoneSpread.
//! - [`node_inputs`]: interned values of the labels plugins read, inline per node.
//! - [`Objects`]: kinds looked up by key only (budgets, volumes, claims, storage classes).
//! - [`watch`]: the watches that feed the state from the API server, on the
//!   list-and-watch loop of [`watch_stream`], with per-kind [`watch_health`].
//! - [`changes`]: which nodes changed, for the extender's parked-pod re-checks.
//! - [`events`]: what changed, classified as kube-scheduler's cluster events,
//!   for standalone mode's queueing hints.
//! - [`generations`] and [`Replica`]: per-node change numbers, and the
//!   standalone scheduler's private copy that catches up on them.
//! - [`published`]: the immutable snapshot extender requests read, two
//!   replicas taking turns.
//! - [`snapshot_file`]: fills the same state from a YAML/JSON file instead.
//!
//! Extender requests read [`Cache::snapshot`]: an immutable view at least as
//! new as every write completed before they asked, evaluated without the
//! lock. Writers and the replicas' syncs use [`Cache::write`] and
//! [`Cache::read`].

pub mod changes;
pub mod dra;
pub mod dra_taints;
pub mod events;
pub mod generations;
pub mod lean;
pub mod node_inputs;
mod objects;
pub mod published;
mod replica;
pub mod snapshot_file;
mod state;
pub mod watch;
pub mod watch_health;
pub mod watch_stream;
pub mod zone_index;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use changes::{ChangeFeed, Changes};
pub use events::EventFeed;
pub use objects::Objects;
pub use published::{PublishStats, Published, Snapshot};
pub use replica::{Replica, SyncStats};
pub use state::{ClusterState, ImageState, NodeUsage, Stored, read_pod, share_counted};
pub use watch_health::{WatchHealth, WatchHealthSet};
pub use zone_index::{CountDimension, CountKey, CountSelector, ZoneIndex};

/// Shared, lock-protected cluster state plus sync flags for readiness.
#[derive(Debug, Default)]
pub struct Cache {
    state: RwLock<ClusterState>,
    nodes_synced: AtomicBool,
    pods_synced: AtomicBool,
    events: EventFeed,
    /// Bumped by every [`Cache::write`]; see [`Cache::generation`].
    generation: AtomicU64,
    changes: ChangeFeed,
    watches: WatchHealthSet,
    /// Built on the first request (standalone mode never pays for it).
    published: Published,
}

impl Cache {
    /// An empty, unsynced cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `state`, already synced (snapshot files, tests).
    pub fn from_state(state: ClusterState) -> Self {
        let c = Cache {
            state: RwLock::new(state),
            ..Default::default()
        };
        c.mark_nodes_synced();
        c.mark_pods_synced();
        c
    }

    /// The view an extender request evaluates on: reflects every write
    /// completed before this call; hold it for one evaluation (a snapshot
    /// still held two publishes later costs the next one a copy).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.published.fresh(self)
    }

    /// What publishing [`Cache::snapshot`]s cost so far.
    pub fn publish_stats(&self) -> PublishStats {
        self.published.stats()
    }

    /// A consistent read view; hold it for one evaluation, not across awaits.
    pub fn read(&self) -> RwLockReadGuard<'_, ClusterState> {
        self.state.read()
    }

    /// Exclusive access for the writers (watch loops, policy reloads).
    pub fn write(&self) -> RwLockWriteGuard<'_, ClusterState> {
        let guard = self.state.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        guard
    }

    /// How many times the state was opened for writing: unchanged since a
    /// reading means nothing can have changed (a writer that changed nothing
    /// still counts, so equality is conservative). Read it while holding a
    /// guard to tie it to what the guard shows. `/explain/pods` reuses a
    /// diagnosis while this stays put.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// True once the initial node and pod lists have been applied.
    pub fn is_synced(&self) -> bool {
        self.nodes_synced.load(Ordering::Acquire) && self.pods_synced.load(Ordering::Acquire)
    }

    /// Records that the initial node list is in.
    pub fn mark_nodes_synced(&self) {
        self.nodes_synced.store(true, Ordering::Release);
    }

    /// Takes a pod the scheduler assumed out again (its binding failed): for
    /// the queue, an assigned pod's deletion, as kube-scheduler reports it.
    pub fn forget_pod(&self, namespace: &str, name: &str) {
        let mut state = self.write();
        let old = state.shared_pod(namespace, name).cloned();
        state.delete_pod(namespace, name);
        if let Some(old) = old {
            self.events.push(events::Observed {
                event: events::ClusterEvent::new(
                    events::EventResource::AssignedPod,
                    events::ActionType::DELETE,
                ),
                change: events::Change::Pod {
                    old: Some(old),
                    new: None,
                },
            });
        }
    }

    /// The cluster events standalone mode's queue reads (fed by the watches,
    /// the scheduler's own forgets and policy reloads).
    pub fn events(&self) -> &EventFeed {
        &self.events
    }

    /// Which nodes changed (fed by the watches, read by the extender's
    /// parked-pod re-checks).
    pub fn changes(&self) -> &ChangeFeed {
        &self.changes
    }

    /// Health of each watched kind (empty for snapshot caches).
    pub fn watches(&self) -> &WatchHealthSet {
        &self.watches
    }

    /// Records that the initial pod list is in.
    pub fn mark_pods_synced(&self) {
        self.pods_synced.store(true, Ordering::Release);
    }
}
