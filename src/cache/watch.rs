//! Feeds the cache from the API server.
//!
//! Each watcher keeps only the slim [`NodeInfo`]/[`PodInfo`] records; the full
//! objects are dropped as soon as they are converted, so nothing is held
//! twice. The list-and-watch loop ([`watch_stream`]) retries failures with a
//! short, capped backoff and reports each kind's health; it never ends the
//! stream or the process. Every applied change that may let a parked pod fit
//! is reported to the cache's [`ChangeFeed`](crate::cache::ChangeFeed) while
//! the write lock is still held, so a request that read the cache before the
//! change sees a smaller sequence number than the report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::info;

use crate::cache::watch_stream::{self, Step};
use crate::cache::{Cache, ClusterState, Stored};
use crate::objects::namespace::NamespaceInfo;
use crate::objects::object_key;
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::workload::{
    ReplicaSetSelector, ReplicationControllerSelector, ServiceSelector, StatefulSetSelector,
};
use crate::objects::{DisruptionBudget, NodeInfo, PodInfo};

/// Only pods bound to a node matter to placer's indexes.
const ASSIGNED_PODS: &str = "spec.nodeName!=";

/// How one kind of object reaches the cluster state.
struct Sink<K, R> {
    kind: &'static str,
    convert: fn(&K) -> R,
    /// Applies one record; returns the node whose record or pods changed.
    apply: fn(&mut ClusterState, R) -> Option<String>,
    /// Deletes one object; returns the node whose record or pods changed.
    delete: fn(&mut ClusterState, &K) -> Option<String>,
    replace: fn(&mut ClusterState, Vec<R>),
    synced: fn(&Cache),
    /// Whether an Apply of this kind may let waiting pods fit (a node added
    /// or changed may; an assigned pod appearing does not). Deletes always may.
    apply_is_event: bool,
}

/// Watches Nodes forever, applying every event to `cache`, each `delay`
/// after it arrived (zero except in tests that need placer to see changes
/// after kube-scheduler does).
pub async fn watch_nodes(client: Client, cache: Arc<Cache>, delay: Duration) {
    let sink = Sink {
        kind: "node",
        convert: |n: &Node| NodeInfo::from(n),
        apply: |s, n| {
            let name = n.name.clone();
            s.apply_node(n).then_some(name)
        },
        delete: |s, n: &Node| {
            let name = n.metadata.name.as_deref()?;
            s.delete_node(name);
            Some(name.to_owned())
        },
        replace: ClusterState::replace_nodes,
        synced: Cache::mark_nodes_synced,
        apply_is_event: true,
    };
    feed(Api::all(client), None, cache, sink, delay).await;
}

/// Watches assigned Pods forever, applying every event to `cache` `delay`
/// after it arrived (see [`watch_nodes`]).
pub async fn watch_pods(client: Client, cache: Arc<Cache>, delay: Duration) {
    let sink = Sink {
        kind: "pod",
        convert: |p: &Pod| PodInfo::from(p),
        apply: ClusterState::apply_pod,
        delete: |s, p: &Pod| {
            let meta = &p.metadata;
            s.delete_pod(
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or(""),
            )
        },
        replace: ClusterState::replace_pods,
        synced: Cache::mark_pods_synced,
        apply_is_event: false,
    };
    feed(Api::all(client), Some(ASSIGNED_PODS), cache, sink, delay).await;
}

/// Watches forever every kind only standalone mode reads, each into its
/// [`Objects`] store. The last argument says whether a change may let a
/// waiting pod fit (a cluster event):
///
/// - PodDisruptionBudgets (preemption prefers victims no budget protects):
///   they only rank candidates, no;
/// - PersistentVolumeClaims, PersistentVolumes, StorageClasses
///   (VolumeBinding): a claim getting bound, yes;
/// - Namespaces (`namespaceSelector` in pod affinity terms): a label change, yes;
/// - Services, ReplicationControllers, ReplicaSets, StatefulSets (selectors
///   of PodTopologySpread's default constraints): soft spreading only, no.
pub async fn watch_scheduling_objects(client: Client, cache: Arc<Cache>) {
    let (c, k) = (&client, &cache);
    tokio::join!(
        watch_keyed::<PodDisruptionBudget, DisruptionBudget>(c, k, "poddisruptionbudget", false),
        watch_keyed::<PersistentVolumeClaim, ClaimInfo>(c, k, "persistentvolumeclaim", true),
        watch_keyed::<PersistentVolume, VolumeInfo>(c, k, "persistentvolume", true),
        watch_keyed::<StorageClass, StorageClassInfo>(c, k, "storageclass", true),
        watch_keyed::<Namespace, NamespaceInfo>(c, k, "namespace", true),
        watch_keyed::<Service, ServiceSelector>(c, k, "service", false),
        watch_keyed::<ReplicationController, ReplicationControllerSelector>(
            c,
            k,
            "replicationcontroller",
            false
        ),
        watch_keyed::<ReplicaSet, ReplicaSetSelector>(c, k, "replicaset", false),
        watch_keyed::<StatefulSet, StatefulSetSelector>(c, k, "statefulset", false),
    );
}

/// Watches one kind kept in an [`Objects`] store of the cluster state. Its
/// sync does not gate readiness: plugins treat a missing object as missing.
async fn watch_keyed<K, R>(client: &Client, cache: &Arc<Cache>, kind: &'static str, is_event: bool)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
    R: Stored + for<'a> From<&'a K>,
{
    let sink = Sink {
        kind,
        convert: |k: &K| R::from(k),
        // The extender's filters do not read these kinds (they are watched in
        // standalone mode only), so no node is reported as changed.
        apply: |s, r| {
            s.objects_mut::<R>().apply(r);
            None
        },
        delete: |s, k: &K| {
            s.objects_mut::<R>().delete(&object_key(k.meta()));
            None
        },
        replace: |s, all| s.objects_mut::<R>().replace(all),
        synced: |_| {},
        apply_is_event: is_event,
    };
    feed(
        Api::all(client.clone()),
        None,
        cache.clone(),
        sink,
        Duration::ZERO,
    )
    .await;
}
/// Applies one kind's list-and-watch steps to the cache forever. A relist
/// replaces the kind's records in one step.
async fn feed<K, R>(
    api: Api<K>,
    fields: Option<&str>,
    cache: Arc<Cache>,
    sink: Sink<K, R>,
    delay: Duration,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let health = cache.watches().kind(sink.kind);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, Step<K>)>(1024);
    // The loop runs on its own task and stamps each step on arrival, so a
    // delay shifts every event by the same amount instead of stacking up.
    tokio::spawn(watch_stream::run(
        api,
        fields.map(str::to_owned),
        health,
        tx,
    ));
    while let Some((arrived, step)) = rx.recv().await {
        if !delay.is_zero() {
            tokio::time::sleep_until((arrived + delay).into()).await;
        }
        apply_step(&cache, &sink, step);
    }
}

/// Applies one step under the write lock and reports the node it changed
/// (a relist: everything) to the change feed before the lock is released.
fn apply_step<K, R>(cache: &Cache, sink: &Sink<K, R>, step: Step<K>) {
    let mut state = cache.write();
    let is_event = match step {
        Step::Listed(all) => {
            let count = all.len();
            (sink.replace)(&mut state, all.iter().map(sink.convert).collect());
            cache.changes().everything();
            drop(state);
            (sink.synced)(cache);
            // Logged once per list: the first one and every relist.
            info!(kind = sink.kind, count, "list applied");
            sink.apply_is_event
        }
        Step::Applied(o) => {
            if let Some(node) = (sink.apply)(&mut state, (sink.convert)(&o)) {
                cache.changes().node(&node);
            }
            sink.apply_is_event
        }
        Step::Deleted(o) => {
            if let Some(node) = (sink.delete)(&mut state, &o) {
                cache.changes().node(&node);
            }
            true
        }
    };
    if is_event {
        cache.note_event();
    }
}
