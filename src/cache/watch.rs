//! Feeds the cache from the API server with kube-rs watchers.
//!
//! Each watcher keeps only the slim [`NodeInfo`]/[`PodInfo`] records; the full
//! objects are dropped as soon as they are converted, so nothing is held
//! twice. Watch errors are logged and retried with kube-rs' default backoff
//! (client-go's parameters); they never end the stream or the process.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use crate::cache::{Cache, ClusterState, Stored, object_key};
use crate::framework::namespace::NamespaceInfo;
use crate::framework::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::framework::workload::{
    ReplicaSetSelector, ReplicationControllerSelector, ServiceSelector, StatefulSetSelector,
};
use crate::framework::{DisruptionBudget, NodeInfo, PodInfo};

/// Only pods bound to a node matter to placer's indexes.
const ASSIGNED_PODS: &str = "spec.nodeName!=";

/// How one kind of object reaches the cluster state.
struct Sink<K, R> {
    kind: &'static str,
    convert: fn(&K) -> R,
    apply: fn(&mut ClusterState, R),
    delete: fn(&mut ClusterState, &K),
    replace: fn(&mut ClusterState, Vec<R>),
    synced: fn(&Cache),
    /// Whether an Apply of this kind may let waiting pods fit (a node added
    /// or changed may; an assigned pod appearing does not). Deletes always may.
    apply_is_event: bool,
}

/// Watches Nodes forever, applying every event to `cache`.
pub async fn watch_nodes(client: Client, cache: Arc<Cache>) {
    let sink = Sink {
        kind: "node",
        convert: |n: &Node| NodeInfo::from(n),
        apply: ClusterState::apply_node,
        delete: |s, n: &Node| {
            if let Some(name) = n.metadata.name.as_deref() {
                s.delete_node(name);
            }
        },
        replace: ClusterState::replace_nodes,
        synced: Cache::mark_nodes_synced,
        apply_is_event: true,
    };
    feed(Api::all(client), watcher::Config::default(), cache, sink).await;
}

/// Watches assigned Pods forever, applying every event to `cache`.
pub async fn watch_pods(client: Client, cache: Arc<Cache>) {
    let sink = Sink {
        kind: "pod",
        convert: |p: &Pod| PodInfo::from(p),
        apply: ClusterState::apply_pod,
        delete: |s, p: &Pod| {
            let meta = &p.metadata;
            s.delete_pod(
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or(""),
            );
        },
        replace: ClusterState::replace_pods,
        synced: Cache::mark_pods_synced,
        apply_is_event: false,
    };
    let config = watcher::Config::default().fields(ASSIGNED_PODS);
    feed(Api::all(client), config, cache, sink).await;
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
        apply: |s, r| s.objects_mut::<R>().apply(r),
        delete: |s, k: &K| s.objects_mut::<R>().delete(&object_key(k.meta())),
        replace: |s, all| s.objects_mut::<R>().replace(all),
        synced: |_| {},
        apply_is_event: is_event,
    };
    feed(
        Api::all(client.clone()),
        watcher::Config::default(),
        cache.clone(),
        sink,
    )
    .await;
}

/// Applies one watch stream to the cache until the stream ends (it does not).
/// A relist (`Init` .. `InitDone`) replaces the kind's records in one step.
async fn feed<K, R>(api: Api<K>, config: watcher::Config, cache: Arc<Cache>, sink: Sink<K, R>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Vec<R> = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relist.clear(),
            Ok(watcher::Event::InitApply(o)) => relist.push((sink.convert)(&o)),
            Ok(watcher::Event::InitDone) => {
                let count = relist.len();
                (sink.replace)(&mut cache.write(), std::mem::take(&mut relist));
                (sink.synced)(&cache);
                if sink.apply_is_event {
                    cache.note_event();
                }
                info!(kind = sink.kind, count, "list synced");
            }
            Ok(watcher::Event::Apply(o)) => {
                (sink.apply)(&mut cache.write(), (sink.convert)(&o));
                if sink.apply_is_event {
                    cache.note_event();
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                (sink.delete)(&mut cache.write(), &o);
                cache.note_event();
            }
            Err(e) => warn!(kind = sink.kind, error = %e, "watch failed; retrying with backoff"),
        }
    }
}
