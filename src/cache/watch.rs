//! Feeds the cache from the API server.
//!
//! Each watcher keeps only the slim [`NodeInfo`](crate::objects::NodeInfo) /
//! [`PodInfo`] records: nodes are decoded straight into theirs
//! ([`LeanNode`]), other objects are dropped as soon as they are converted,
//! so nothing is held twice. The list-and-watch loop ([`watch_stream`]) retries failures with
//! client-go's reflector backoff and reports each kind's health; it never ends the
//! stream or the process. Every applied change that may let a parked pod fit
//! is reported to the cache's [`ChangeFeed`](crate::cache::ChangeFeed) while
//! the write lock is still held, so a request that read the cache before the
//! change sees a smaller sequence number than the report; and every change
//! a plugin reads is reported, classified, to the cache's
//! [`EventFeed`](crate::cache::EventFeed) for standalone mode's queue (a
//! heartbeat that changes nothing placer keeps is no event).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::info;

use crate::cache::dra_taints::RuleTaint;
use crate::cache::events::{
    ActionType, Change, ClusterEvent, EventResource, Observed, kinds, node_update, pod_update,
};
use crate::cache::lean::{Lean, LeanNode};
use crate::cache::watch_stream::{self, Step};
use crate::cache::{Cache, ClusterState, Stored, read_pod};
use crate::objects::csi::{AttachmentInfo, CsiDriverInfo, CsiNodeInfo, StorageCapacityInfo};
use crate::objects::namespace::NamespaceInfo;
use crate::objects::object_key;
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::workload::{
    ReplicaSetSelector, ReplicationControllerSelector, ServiceSelector, StatefulSetSelector,
};
use crate::objects::{DisruptionBudget, PodInfo};

/// Only pods bound to a node matter to placer's indexes.
const ASSIGNED_PODS: &str = "spec.nodeName!=";

/// What applying one watch event changed.
#[derive(Default)]
struct Applied {
    /// The node whose record or pods changed (for the change feed).
    node: Option<String>,
    /// The cluster event, when the queue reads them and something a plugin
    /// reads changed.
    event: Option<Observed>,
    /// For a kind kept by key: what happened to the object, and the change
    /// (the event is named after the sink's kind).
    object: Option<(ActionType, Change)>,
    /// Events about objects of other kinds that the change altered (a
    /// DeviceTaintRule's: the slices whose devices it taints or untaints).
    others: Vec<Observed>,
}

/// How one kind of object reaches the cluster state.
struct Sink<K, R> {
    kind: &'static str,
    convert: fn(K) -> R,
    /// Applies one record; `events` says whether to classify the change.
    apply: fn(&mut ClusterState, R, bool) -> Applied,
    /// Deletes one object; `events` as for `apply`.
    delete: fn(&mut ClusterState, &K, bool) -> Applied,
    replace: fn(&mut ClusterState, Vec<R>),
    synced: fn(&Cache),
}

/// Watches Nodes forever, applying every event to `cache`, each `delay`
/// after it arrived (zero except in tests that need placer to see changes
/// after kube-scheduler does).
pub async fn watch_nodes(client: Client, cache: Arc<Cache>, delay: Duration) {
    let sink = Sink {
        kind: "node",
        convert: |n: LeanNode| n.info,
        apply: |s, n, events| {
            let name = n.name.clone();
            let old = events.then(|| s.node(&name).cloned()).flatten();
            if !s.apply_node(n) {
                return Applied::default();
            }
            let event = events.then(|| {
                let new = s.node(&name).cloned();
                let actions = match (&old, &new) {
                    (Some(o), Some(n)) => node_update(o, n),
                    _ => ActionType::ADD,
                };
                (!actions.is_empty()).then_some(Observed {
                    event: ClusterEvent::new(EventResource::Node, actions),
                    change: Change::Node { old, new },
                })
            });
            Applied {
                node: Some(name),
                event: event.flatten(),
                ..Applied::default()
            }
        },
        delete: |s, n: &LeanNode, events| {
            let name = n.info.name.as_str();
            if name.is_empty() {
                return Applied::default();
            }
            let old = s.node(name).cloned();
            s.delete_node(name);
            Applied {
                node: Some(name.to_owned()),
                event: (events && old.is_some()).then(|| Observed {
                    event: ClusterEvent::new(EventResource::Node, ActionType::DELETE),
                    change: Change::Node { old, new: None },
                }),
                ..Applied::default()
            }
        },
        replace: ClusterState::replace_nodes,
        synced: Cache::mark_nodes_synced,
    };
    feed(Api::all(client), None, cache, sink, delay).await;
}

/// A watched pod as the state keeps it. Shared as it is read, so a listed
/// page's pods never hold copies of the records their neighbours already
/// hold, and the cache's write lock is not held for it (see [`read_pod`]).
fn convert_pod(p: Lean<Pod>) -> PodInfo {
    read_pod(&p.0)
}

/// Watches assigned Pods forever, applying every event to `cache` `delay`
/// after it arrived (see [`watch_nodes`]).
pub async fn watch_pods(client: Client, cache: Arc<Cache>, delay: Duration) {
    let sink = Sink {
        kind: "pod",
        convert: convert_pod,
        apply: |s, p, events| {
            if !events {
                return Applied {
                    node: s.apply_pod(p),
                    ..Applied::default()
                };
            }
            let (namespace, name) = (p.namespace.clone(), p.name.clone());
            let old = s.shared_pod(&namespace, &name).cloned();
            let node = s.apply_pod(p);
            let new = s.shared_pod(&namespace, &name).cloned();
            Applied {
                node,
                event: assigned_pod_event(old, new),
                ..Applied::default()
            }
        },
        delete: |s, p: &Lean<Pod>, events| {
            let meta = &p.0.metadata;
            let (namespace, name) = (
                meta.namespace.as_deref().unwrap_or(""),
                meta.name.as_deref().unwrap_or(""),
            );
            let old = events
                .then(|| s.shared_pod(namespace, name).cloned())
                .flatten();
            Applied {
                node: s.delete_pod(namespace, name),
                event: assigned_pod_event(old, None),
                ..Applied::default()
            }
        },
        replace: ClusterState::replace_pods,
        synced: Cache::mark_pods_synced,
    };
    feed(Api::all(client), Some(ASSIGNED_PODS), cache, sink, delay).await;
}

/// The event of an assigned pod going from `old` to `new` (either `None`
/// for an add or a delete), or none when nothing a plugin reads changed.
fn assigned_pod_event(old: Option<Arc<PodInfo>>, new: Option<Arc<PodInfo>>) -> Option<Observed> {
    let actions = match (&old, &new) {
        (None, None) => return None,
        (None, Some(_)) => ActionType::ADD,
        (Some(_), None) => ActionType::DELETE,
        (Some(o), Some(n)) => pod_update(o, n),
    };
    (!actions.is_empty()).then_some(Observed {
        event: ClusterEvent::new(EventResource::AssignedPod, actions),
        change: Change::Pod { old, new },
    })
}

/// Watches forever every kind only standalone mode reads, each into its
/// [`Objects`](crate::cache::Objects) store, each change an event of
/// [`EventResource::Kind`] named as the watch is (plugins that read a kind
/// register for its events):
///
/// - PodDisruptionBudgets (preemption prefers victims no budget protects);
/// - PersistentVolumeClaims, PersistentVolumes, StorageClasses (VolumeBinding,
///   VolumeZone, VolumeRestrictions, NodeVolumeLimits);
/// - CSINodes, CSIDrivers, VolumeAttachments (NodeVolumeLimits: per-driver
///   limits and what is attached already) and CSIStorageCapacities
///   (VolumeBinding's provisioning check);
/// - Namespaces (`namespaceSelector` in pod affinity terms);
/// - Services, ReplicationControllers, ReplicaSets, StatefulSets (selectors
///   of PodTopologySpread's default constraints).
pub async fn watch_scheduling_objects(client: Client, cache: Arc<Cache>) {
    let (c, k) = (&client, &cache);
    tokio::join!(
        watch_keyed::<PodDisruptionBudget, DisruptionBudget>(c, k, "poddisruptionbudget"),
        watch_keyed::<PersistentVolumeClaim, ClaimInfo>(c, k, kinds::PERSISTENT_VOLUME_CLAIM),
        watch_keyed::<PersistentVolume, VolumeInfo>(c, k, kinds::PERSISTENT_VOLUME),
        watch_keyed::<StorageClass, StorageClassInfo>(c, k, kinds::STORAGE_CLASS),
        watch_keyed::<CSINode, CsiNodeInfo>(c, k, kinds::CSI_NODE),
        watch_keyed::<CSIDriver, CsiDriverInfo>(c, k, kinds::CSI_DRIVER),
        watch_keyed::<VolumeAttachment, AttachmentInfo>(c, k, kinds::VOLUME_ATTACHMENT),
        watch_keyed::<CSIStorageCapacity, StorageCapacityInfo>(c, k, kinds::CSI_STORAGE_CAPACITY),
        watch_keyed::<Namespace, NamespaceInfo>(c, k, "namespace"),
        watch_keyed::<Service, ServiceSelector>(c, k, "service"),
        watch_keyed::<ReplicationController, ReplicationControllerSelector>(
            c,
            k,
            "replicationcontroller",
        ),
        watch_keyed::<ReplicaSet, ReplicaSetSelector>(c, k, "replicaset"),
        watch_keyed::<StatefulSet, StatefulSetSelector>(c, k, "statefulset"),
    );
}

/// Watches one kind kept in an [`Objects`] store of the cluster state. Its
/// sync does not gate readiness: plugins treat a missing object as missing.
async fn watch_keyed<K, R>(client: &Client, cache: &Arc<Cache>, kind: &'static str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
    R: Stored + for<'a> From<&'a K> + Clone + Send + Sync + 'static,
{
    let sink = Sink {
        kind,
        convert: |k: K| R::from(&k),
        // The extender's filters do not read these kinds (they are watched in
        // standalone mode only), so no node is reported as changed.
        apply: |s, r, events| {
            let store = s.objects_mut::<R>();
            // Copies of the record before and after for the hints: these
            // kinds change seldom, and only when the queue reads events.
            let object = events.then(|| {
                let key = r.key();
                let old = store.get(&key).cloned();
                let action = if old.is_some() {
                    ActionType::UPDATE_OTHER
                } else {
                    ActionType::ADD
                };
                (action, Change::object(&key, old, Some(r.clone())))
            });
            store.apply(r);
            Applied {
                object,
                ..Applied::default()
            }
        },
        delete: |s, k: &K, events| {
            let key = object_key(k.meta());
            let store = s.objects_mut::<R>();
            let object = events.then(|| {
                let old = store.get(&key).cloned();
                (ActionType::DELETE, Change::object::<R>(&key, old, None))
            });
            store.delete(&key);
            Applied {
                object,
                ..Applied::default()
            }
        },
        replace: |s, all| s.objects_mut::<R>().replace(all),
        synced: |_| {},
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
/// Watches forever what Dynamic Resource Allocation reads, into the
/// cluster state's [`DraState`](crate::cache::dra::DraState): ResourceClaims,
/// ResourceSlices, DeviceClasses and DeviceTaintRules (`resource.k8s.io/v1`).
/// Started only when a profile runs DynamicResources, so clusters without it
/// pay nothing.
pub async fn watch_dra_objects(client: Client, cache: Arc<Cache>) {
    let (c, k) = (&client, &cache);
    tokio::join!(
        watch_dra::<ResourceClaim>(c, k),
        watch_dra::<ResourceSlice>(c, k),
        watch_dra::<DeviceClass>(c, k),
        watch_taint_rules(c, k),
    );
}

/// DeviceTaintRules, kept compact ([`RuleTaint`]). kube-scheduler v1.37
/// registers no event for them: its slice tracker applies a rule to the
/// slices and reports each slice whose devices' taints changed as an updated
/// ResourceSlice, which is what DynamicResources listens to. So does this
/// watch; a rule change that taints nothing anew (a status update, a
/// selector that names no device) is no event.
async fn watch_taint_rules(client: &Client, cache: &Arc<Cache>) {
    /// One ResourceSlice update per slice in `slices`.
    fn slice_updates(slices: Vec<Arc<ResourceSlice>>) -> Applied {
        let others = slices
            .into_iter()
            .map(|slice| Observed {
                event: ClusterEvent::new(
                    EventResource::Kind(kinds::RESOURCE_SLICE),
                    ActionType::UPDATE_OTHER,
                ),
                // The new record only, as for the slices' own updates.
                change: Change::object(&object_key(&slice.metadata), None, Some(slice)),
            })
            .collect();
        Applied {
            others,
            ..Applied::default()
        }
    }
    let sink: Sink<DeviceTaintRule, (String, RuleTaint)> = Sink {
        kind: kinds::DEVICE_TAINT_RULE,
        convert: |r| (object_key(&r.metadata), RuleTaint::of(&r)),
        apply: |s, (name, rule), events| {
            let retainted = s.dra_mut().apply_taint_rule(name, rule);
            if events {
                slice_updates(retainted)
            } else {
                Applied::default()
            }
        },
        delete: |s, r, events| {
            let retainted = s.dra_mut().delete_taint_rule(&object_key(&r.metadata));
            if events {
                slice_updates(retainted)
            } else {
                Applied::default()
            }
        },
        replace: |s, all| s.dra_mut().replace_taint_rules(all),
        synced: |_| {},
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

/// How one DRA kind is kept in the [`DraState`](crate::cache::dra::DraState).
trait DraKind: Resource + Sized {
    /// The kind's event name.
    const KIND: &'static str;
    /// The stored object `key`, when the kind's hints compare the old and the
    /// new object (claims); `None` for the kinds whose hints do not.
    fn stored(_s: &ClusterState, _key: &str) -> Option<Arc<Self>> {
        None
    }
    fn apply(s: &mut ClusterState, o: Arc<Self>);
    fn delete(s: &mut ClusterState, key: &str);
    fn replace(s: &mut ClusterState, all: Vec<Arc<Self>>);
}

impl DraKind for ResourceClaim {
    const KIND: &'static str = kinds::RESOURCE_CLAIM;
    fn stored(s: &ClusterState, key: &str) -> Option<Arc<Self>> {
        let (namespace, name) = key.split_once('/')?;
        s.dra().claim(namespace, name).cloned()
    }
    fn apply(s: &mut ClusterState, o: Arc<Self>) {
        s.dra_mut().apply_claim(o);
    }
    fn delete(s: &mut ClusterState, key: &str) {
        s.dra_mut().delete_claim(key);
    }
    fn replace(s: &mut ClusterState, all: Vec<Arc<Self>>) {
        s.dra_mut().replace_claims(all);
    }
}

impl DraKind for ResourceSlice {
    const KIND: &'static str = kinds::RESOURCE_SLICE;
    fn apply(s: &mut ClusterState, o: Arc<Self>) {
        s.dra_mut().apply_slice(o);
    }
    fn delete(s: &mut ClusterState, key: &str) {
        s.dra_mut().delete_slice(key);
    }
    fn replace(s: &mut ClusterState, all: Vec<Arc<Self>>) {
        s.dra_mut().replace_slices(all);
    }
}

impl DraKind for DeviceClass {
    const KIND: &'static str = kinds::DEVICE_CLASS;
    fn apply(s: &mut ClusterState, o: Arc<Self>) {
        s.dra_mut().apply_class(o);
    }
    fn delete(s: &mut ClusterState, key: &str) {
        s.dra_mut().delete_class(key);
    }
    fn replace(s: &mut ClusterState, all: Vec<Arc<Self>>) {
        s.dra_mut().replace_classes(all);
    }
}

/// One DRA kind's list-and-watch: each change an event of
/// [`EventResource::Kind`] named after the kind, with the object's key
/// (`namespace/name` for claims, the name otherwise).
async fn watch_dra<K>(client: &Client, cache: &Arc<Cache>)
where
    K: DraKind + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let sink: Sink<K, Arc<K>> = Sink {
        kind: K::KIND,
        convert: Arc::new,
        // As for the keyed kinds: the extender's filters do not read these.
        apply: |s, o, events| {
            let key = object_key(o.meta());
            let action = if events && is_known::<K>(s, &key) {
                ActionType::UPDATE_OTHER
            } else {
                ActionType::ADD
            };
            // The old record where the kind's hints read it (claims).
            let object = events.then(|| {
                (
                    action,
                    Change::object(&key, K::stored(s, &key), Some(o.clone())),
                )
            });
            K::apply(s, o);
            Applied {
                object,
                ..Applied::default()
            }
        },
        delete: |s, k: &K, events| {
            let key = object_key(k.meta());
            let old = if events { K::stored(s, &key) } else { None };
            K::delete(s, &key);
            Applied {
                object: events.then(|| (ActionType::DELETE, Change::object(&key, old, None))),
                ..Applied::default()
            }
        },
        replace: K::replace,
        synced: |_| {},
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

/// Whether the object `key` of DRA kind `K` is in the cache already.
fn is_known<K: DraKind>(s: &ClusterState, key: &str) -> bool {
    let dra = s.dra();
    match K::KIND {
        kinds::RESOURCE_CLAIM => key
            .split_once('/')
            .is_some_and(|(ns, name)| dra.claim(ns, name).is_some()),
        kinds::DEVICE_CLASS => dra.class(key).is_some(),
        _ => dra.has_slice(key),
    }
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
    R: Send + 'static,
{
    let health = cache.watches().kind(sink.kind);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, Step<K, R>)>(1024);
    // The loop runs on its own task and stamps each step on arrival, so a
    // delay shifts every event by the same amount instead of stacking up.
    // Listed pages are converted as they arrive (the start-up and relist
    // peak is one page of API objects, not the whole list).
    let convert = sink.convert;
    tokio::spawn(watch_stream::run_converting(
        api,
        fields.map(str::to_owned),
        health,
        tx,
        convert,
    ));
    while let Some((arrived, step)) = rx.recv().await {
        if !delay.is_zero() {
            tokio::time::sleep_until((arrived + delay).into()).await;
        }
        apply_step(&cache, &sink, step);
    }
}

/// Applies one step under the write lock and reports the node it changed
/// (a relist: everything) to the change feed, and the cluster event to the
/// event feed (a relist: a wildcard event), before the lock is released.
fn apply_step<K, R>(cache: &Cache, sink: &Sink<K, R>, step: Step<K, R>) {
    let events = cache.events().is_enabled();
    let mut state = cache.write();
    let applied = match step {
        Step::Listed(all) => {
            let count = all.len();
            (sink.replace)(&mut state, all);
            cache.changes().everything();
            cache.events().push(Observed::wildcard());
            drop(state);
            (sink.synced)(cache);
            // Logged once per list: the first one and every relist.
            info!(kind = sink.kind, count, "list applied");
            return;
        }
        Step::Applied(o) => (sink.apply)(&mut state, (sink.convert)(o), events),
        Step::Deleted(o) => (sink.delete)(&mut state, &o, events),
    };
    if let Some(node) = applied.node {
        cache.changes().node(&node);
    }
    if let Some(event) = applied.event {
        cache.events().push(event);
    }
    if let Some((actions, change)) = applied.object {
        cache.events().push(Observed {
            event: ClusterEvent::new(EventResource::Kind(sink.kind), actions),
            change,
        });
    }
    for event in applied.others {
        cache.events().push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watched_bound_pods_share_equal_specs_and_labels() {
        let read = |name: &str, node: Option<&str>| {
            convert_pod(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
                    "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app:1"}]}
                }))
                .unwrap(),
            )
        };
        let (a, b) = (read("a", Some("n1")), read("b", Some("n2")));
        assert!(Arc::ptr_eq(&a.spec, &b.spec));
        assert!(Arc::ptr_eq(&a.labels, &b.labels));
        // A pending pod keeps its own records until it is bound.
        let pending = read("c", None);
        assert!(!Arc::ptr_eq(&a.spec, &pending.spec));
    }
}
