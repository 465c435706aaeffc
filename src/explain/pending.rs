//! Pods no scheduler has placed yet (`spec.nodeName` empty), by
//! `namespace/name`: the cluster cache keeps assigned pods only, so the pods
//! people ask "why pending?" about live here.
//!
//! Fed by one list-and-watch of `spec.nodeName=` pods (the same loop and
//! health reporting as the cache's watches), or, where placer schedules, by
//! the scheduler's own watch of the same pods through a [`PendingFeed`] (a
//! second watch would make the API server send, and placer decode, every
//! pending pod twice), or from a snapshot file's unassigned pods. A pod that gets bound leaves the field selector, which the
//! watch reports as a deletion, so the store holds pending pods only and also
//! drops their diagnoses ([`super::Diagnoses`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use parking_lot::RwLock;
use tracing::info;

use super::Diagnoses;
use crate::cache::Cache;
use crate::cache::lean::Lean;
use crate::cache::watch_stream::{self, Step};
use crate::objects::PodInfo;

/// Only unassigned pods.
const UNASSIGNED_PODS: &str = "spec.nodeName=";

/// The pending pods, converted once ([`PodInfo`]: only what plugins read).
#[derive(Debug, Default)]
pub struct PendingPods {
    pods: RwLock<HashMap<String, Arc<PodInfo>>>,
    synced: AtomicBool,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl PendingPods {
    /// An empty, unsynced store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A synced store holding `pods` (snapshot files, tests); assigned pods are skipped.
    pub fn from_pods(pods: impl IntoIterator<Item = PodInfo>) -> Self {
        let store = Self::new();
        store.replace(pods.into_iter().collect());
        store.synced.store(true, Ordering::Release);
        store
    }

    /// The pending pod `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        self.pods.read().get(&key(namespace, name)).cloned()
    }

    /// How many pods are pending.
    pub fn len(&self) -> usize {
        self.pods.read().len()
    }

    /// True when no pod is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the first list is in (without it, "not found" may be premature).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Adds or updates a pod; an assigned or terminal one is forgotten instead.
    pub fn apply(&self, pod: PodInfo) {
        let k = key(&pod.namespace, &pod.name);
        if pod.node_name.is_some() || pod.is_terminal() {
            self.pods.write().remove(&k);
        } else {
            self.pods.write().insert(k, Arc::new(pod));
        }
    }

    /// Forgets `namespace/name`.
    pub fn delete(&self, namespace: &str, name: &str) {
        self.pods.write().remove(&key(namespace, name));
    }

    /// Replaces every pod (a relist); returns the keys that went away.
    pub fn replace(&self, pods: Vec<PodInfo>) -> Vec<String> {
        let fresh: HashMap<String, Arc<PodInfo>> = pods
            .into_iter()
            .filter(|p| p.node_name.is_none() && !p.is_terminal())
            .map(|p| (key(&p.namespace, &p.name), Arc::new(p)))
            .collect();
        let mut pods = self.pods.write();
        let gone = pods
            .keys()
            .filter(|k| !fresh.contains_key(*k))
            .cloned()
            .collect();
        *pods = fresh;
        gone
    }
}

/// What a watch of unassigned pods reports, applied to the store; a pod that
/// leaves it (bound, finished or deleted) also leaves the diagnoses.
#[derive(Debug, Clone)]
pub struct PendingFeed {
    /// The store fed.
    pub pending: Arc<PendingPods>,
    /// The diagnoses kept for its pods.
    pub diagnoses: Arc<Diagnoses>,
}

impl PendingFeed {
    /// A (re)list: `pods` replace the store, which is synced from now on.
    pub fn listed(&self, pods: Vec<PodInfo>) {
        let count = pods.len();
        for gone in self.pending.replace(pods) {
            self.diagnoses.forget_key(&gone);
        }
        self.pending.synced.store(true, Ordering::Release);
        info!(kind = "pendingpod", count, "list applied");
    }

    /// A pod added or changed.
    pub fn applied(&self, pod: PodInfo) {
        if pod.node_name.is_some() || pod.is_terminal() {
            self.diagnoses.forget(&pod.namespace, &pod.name);
        }
        self.pending.apply(pod);
    }

    /// A pod deleted, or bound (it left the `spec.nodeName=` selector).
    pub fn deleted(&self, namespace: &str, name: &str) {
        self.pending.delete(namespace, name);
        self.diagnoses.forget(namespace, name);
    }
}

/// Watches unassigned pods forever into `feed`, with health reported as kind
/// `pendingpod` in `cache`'s watch health. Only for modes that do not
/// schedule: the scheduler's watch feeds the store otherwise.
pub async fn watch(client: Client, cache: Arc<Cache>, feed: PendingFeed) {
    // Decoded without managedFields; listed pages converted as they arrive.
    let api: Api<Lean<Pod>> = Api::all(client);
    let health = cache.watches().kind("pendingpod");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, Step<Lean<Pod>, PodInfo>)>(1024);
    tokio::spawn(watch_stream::run_converting(
        api,
        Some(UNASSIGNED_PODS.to_owned()),
        health,
        tx,
        |p: Lean<Pod>| PodInfo::from(&p.0),
    ));
    while let Some((_, step)) = rx.recv().await {
        match step {
            Step::Listed(all) => feed.listed(all),
            Step::Applied(p) => feed.applied(PodInfo::from(&p.0)),
            Step::Deleted(p) => {
                let pod = PodInfo::from(&p.0);
                feed.deleted(&pod.namespace, &pod.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> PodInfo {
        PodInfo {
            name: name.into(),
            namespace: "ns".into(),
            node_name: node.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn holds_unassigned_pods_only() {
        let store = PendingPods::from_pods([pod("a", None), pod("b", Some("n1"))]);
        assert!(store.get("ns", "a").is_some());
        assert!(
            store.get("ns", "b").is_none(),
            "assigned pods are the cache's"
        );
        store.apply(pod("a", Some("n1")));
        assert!(store.get("ns", "a").is_none(), "a bound pod leaves");
        store.apply(pod("c", None));
        assert_eq!(
            store.replace(vec![pod("d", None)]),
            vec!["ns/c".to_string()]
        );
        assert_eq!(store.len(), 1);
    }
}
