//! The cluster as placer knows it: nodes, assigned pods and the indexes
//! derived from them.
//!
//! `ClusterState` is updated by one writer (the watch loops or a snapshot
//! file) under the cache's lock. Nothing evaluates on it there: requests and
//! the standalone cycle read replicas of it, which catch up under the read
//! lock by copying the nodes changed since ([`Replica`](crate::cache::Replica)),
//! sharing node and pod records by `Arc`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::cache::Objects;
use crate::cache::dra::DraState;
use crate::cache::generations::Generations;
use crate::cache::node_inputs::LabelSlots;
use crate::cache::zone_index::{CountDimension, ZoneIndex};
use crate::objects::Keyed;
use crate::objects::csi::{AttachmentInfo, CsiDriverInfo, CsiNodeInfo, StorageCapacityInfo};
use crate::objects::namespace::NamespaceInfo;
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::workload::{
    ReplicaSetSelector, ReplicationControllerSelector, ServiceSelector, StatefulSetSelector,
};
use crate::objects::{DisruptionBudget, NodeIndex, NodeInfo, PodInfo};
pub use dedup::{read_pod, share_counted};
use images::ImageIndex;
pub use images::ImageState;
use node_table::NodeTable;
pub use node_table::NodeUsage;

/// Nodes by name, assigned pods by `namespace/name`, and the indexes derived
/// from them: pods per node, usage per node (kept with the nodes), pods per
/// zone.
///
/// `Clone` is for [`Replica`](crate::cache::Replica)'s full copies (after a
/// relist); every other change reaches a replica node by node through the
/// [`Generations`] kept here.
#[derive(Debug, Default, Clone)]
pub struct ClusterState {
    nodes: NodeTable,
    /// Shared by `Arc`, so a replica's copy of a pod is a pointer (at
    /// 150,000 pods a copy of the records themselves cost ~250 MB).
    pods: HashMap<String, Arc<PodInfo>>,
    pods_by_node: HashMap<String, HashSet<String>, foldhash::fast::RandomState>,
    zones: ZoneIndex,
    /// Which labels are interned inline in every node record.
    label_slots: LabelSlots,
    /// Pods with any pod (anti-)affinity term (kube-scheduler's `PodsWithAffinity`).
    with_affinity: HashSet<String>,
    /// Pods with a required anti-affinity term (`PodsWithRequiredAntiAffinity`).
    with_required_anti: HashSet<String>,
    budgets: Objects<DisruptionBudget>,
    claims: Objects<ClaimInfo>,
    volumes: Objects<VolumeInfo>,
    storage_classes: Objects<StorageClassInfo>,
    csi_nodes: Objects<CsiNodeInfo>,
    csi_drivers: Objects<CsiDriverInfo>,
    attachments: Objects<AttachmentInfo>,
    capacities: Objects<StorageCapacityInfo>,
    namespaces: Objects<NamespaceInfo>,
    services: Objects<ServiceSelector>,
    replication_controllers: Objects<ReplicationControllerSelector>,
    replica_sets: Objects<ReplicaSetSelector>,
    stateful_sets: Objects<StatefulSetSelector>,
    /// Dynamic Resource Allocation's claims, classes and slices.
    dra: DraState,
    generations: Generations,
    /// Images the nodes hold, for ImageLocality.
    images: ImageIndex,
}

impl ClusterState {
    /// An empty state that indexes `dims`.
    pub fn with_dimensions(dims: &[CountDimension]) -> Self {
        let mut s = ClusterState::default();
        s.zones.reset(dims);
        s
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.nodes.get(name)
    }

    /// The node called `name` with its index: distinct from every other
    /// node's in this state and below [`ClusterState::node_index_bound`], for
    /// per-request bitsets over nodes.
    pub fn node_indexed(&self, name: &str) -> Option<(usize, &Arc<NodeInfo>)> {
        self.nodes.get_indexed(name)
    }

    /// [`ClusterState::node_indexed`] of every name of `names`, in order, in
    /// one pass that overlaps the lookups' memory loads.
    pub fn nodes_indexed_each<'c, 'n, S: AsRef<str>>(
        &'c self,
        names: &'n [S],
        each: impl FnMut(&'n S, Option<(usize, &'c Arc<NodeInfo>)>),
    ) {
        self.nodes.get_indexed_each(names, each);
    }

    /// Every node's index (see [`ClusterState::node_indexed`]) is below this.
    pub fn node_index_bound(&self) -> usize {
        self.nodes.index_bound()
    }

    /// Every node, in no particular order.
    pub fn nodes(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.nodes.values()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The image called `name` (normalized as the node reports it): its
    /// size and how many nodes hold it; `None` when no node does.
    pub fn image(&self, name: &str) -> Option<ImageState> {
        self.images.get(name)
    }

    /// Number of counted (assigned, non-terminal) pods.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The assigned pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodInfo> {
        self.shared_pod(namespace, name).map(Arc::as_ref)
    }

    /// The assigned pod `namespace/name` as stored (for replicas).
    pub fn shared_pod(&self, namespace: &str, name: &str) -> Option<&Arc<PodInfo>> {
        self.pods.get(&pod_key(namespace, name))
    }

    /// What the pods on node `name` use (`None` when none are there).
    pub fn usage(&self, name: &str) -> Option<&NodeUsage> {
        self.nodes.usage(name)
    }

    /// [`usage`](Self::usage) of `node`: without a name lookup when `node`
    /// is this state's record (what plugins read per node in every attempt),
    /// by name otherwise.
    pub fn usage_of(&self, node: &NodeInfo) -> Option<&NodeUsage> {
        self.nodes.usage_of(node)
    }

    /// The pods assigned to node `name`.
    pub fn pods_on(&self, name: &str) -> impl Iterator<Item = &PodInfo> {
        self.shared_pods_on(name).map(Arc::as_ref)
    }

    /// The pods assigned to node `name` as stored (for replicas).
    pub fn shared_pods_on(&self, name: &str) -> impl Iterator<Item = &Arc<PodInfo>> {
        self.pods_by_node
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }

    /// Every assigned pod.
    pub fn pods(&self) -> impl Iterator<Item = &PodInfo> {
        self.pods.values().map(Arc::as_ref)
    }

    /// The assigned pods with any pod affinity or anti-affinity term, so
    /// that InterPodAffinity does not walk every pod for a pod without terms.
    pub fn pods_with_affinity(&self) -> impl Iterator<Item = &PodInfo> {
        self.with_affinity
            .iter()
            .filter_map(|k| self.pods.get(k))
            .map(Arc::as_ref)
    }

    /// The assigned pods with a required pod anti-affinity term.
    pub fn pods_with_required_anti_affinity(&self) -> impl Iterator<Item = &PodInfo> {
        self.with_required_anti
            .iter()
            .filter_map(|k| self.pods.get(k))
            .map(Arc::as_ref)
    }

    /// The objects of one keyed kind (budgets, claims, volumes, storage
    /// classes, namespaces, services, controllers), e.g.
    /// `cluster.objects::<ClaimInfo>()`. Standalone mode watches them; in
    /// extender mode they stay empty and unsynced.
    pub fn objects<T: Stored>(&self) -> &Objects<T> {
        T::store(self)
    }

    /// The objects of one keyed kind, to change (watches, tests).
    pub fn objects_mut<T: Stored>(&mut self) -> &mut Objects<T> {
        self.generations.touch_objects();
        T::store_mut(self)
    }

    /// What changed when (for incremental copies).
    pub fn generations(&self) -> &Generations {
        &self.generations
    }

    /// Takes every keyed object store from `other` (a replica catching up
    /// on a change to any of them; they are small next to the pods).
    pub fn copy_objects_from(&mut self, other: &ClusterState) {
        self.budgets.clone_from(&other.budgets);
        self.claims.clone_from(&other.claims);
        self.volumes.clone_from(&other.volumes);
        self.storage_classes.clone_from(&other.storage_classes);
        self.csi_nodes.clone_from(&other.csi_nodes);
        self.csi_drivers.clone_from(&other.csi_drivers);
        self.attachments.clone_from(&other.attachments);
        self.capacities.clone_from(&other.capacities);
        self.namespaces.clone_from(&other.namespaces);
        self.services.clone_from(&other.services);
        self.replication_controllers
            .clone_from(&other.replication_controllers);
        self.replica_sets.clone_from(&other.replica_sets);
        self.stateful_sets.clone_from(&other.stateful_sets);
        self.dra.clone_from(&other.dra);
    }

    /// Dynamic Resource Allocation's objects.
    pub fn dra(&self) -> &DraState {
        &self.dra
    }

    /// Dynamic Resource Allocation's objects, to change (watches, tests).
    pub fn dra_mut(&mut self) -> &mut DraState {
        self.generations.touch_objects();
        &mut self.dra
    }

    /// The zone index (read side).
    pub fn zones(&self) -> &ZoneIndex {
        &self.zones
    }

    /// The inline label slots (see [`crate::objects::inputs`]).
    pub fn label_slots(&self) -> &LabelSlots {
        &self.label_slots
    }

    /// Keeps the values of label `keys` inline in every node record from now
    /// on (the keys the policy's plugins read; earlier keys keep their slots).
    pub fn watch_labels<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) {
        if self.label_slots.add_keys(keys) {
            self.reassign_label_inputs();
        }
    }

    /// [`watch_labels`](Self::watch_labels) for the keys of a pod's node
    /// selector, while slots beyond those kept for the policy last
    /// ([`LabelSlots::takes_selector_key`]). Each new key costs one pass over
    /// the nodes (and a full copy for replicas), once.
    pub fn watch_selector_labels<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) {
        if self.label_slots.add_selector_keys(keys) {
            self.reassign_label_inputs();
        }
    }

    fn reassign_label_inputs(&mut self) {
        for node in self.nodes.values_mut() {
            self.label_slots.assign(Arc::make_mut(node));
        }
        // Every node record changed: a replica copies the state again.
        self.generations.touch_everything();
    }

    /// Takes the label slots of `other` when they changed since the last
    /// copy (a replica whose node records come from `other`: ids the records
    /// carry must read the same in both). Slots and values are only added,
    /// so an unchanged [`LabelSlots::stamp`] means unchanged content.
    pub fn copy_label_slots_from(&mut self, other: &ClusterState) {
        if self.label_slots.stamp() != other.label_slots.stamp() {
            self.label_slots.clone_from(&other.label_slots);
        }
    }

    /// Indexes exactly `dims` from now on, recounting every pod if they changed
    /// (a policy reload that adds or changes a ZoneSpread configuration).
    pub fn set_dimensions(&mut self, dims: &[CountDimension]) {
        if self.zones.has_dimensions(dims) {
            return;
        }
        self.zones.reset(dims);
        self.recount();
        self.generations.touch_everything();
    }

    /// Adds or replaces a node; pods already on it are recounted under its new labels.
    /// Returns false when the node was already known exactly so (status-only
    /// updates such as heartbeats change nothing placer keeps).
    pub fn apply_node(&mut self, mut node: NodeInfo) -> bool {
        self.label_slots.assign(&mut node);
        self.images.intern(&mut node);
        self.apply_shared_node(Arc::new(node))
    }

    /// [`apply_node`](Self::apply_node) for a record already shared, whose
    /// inline label inputs and index the state it comes from filled (a
    /// replica takes the same `Arc`, and that state's label slots with it).
    ///
    /// The record goes in at its index, so that a replica's indexes are the
    /// shared state's and the record reads its usage from its index in both.
    /// A node here holding that index, or this node held under another one,
    /// was deleted there since the replica last synced (and re-added
    /// elsewhere, or not): its own change is copied in the same sync, and it
    /// is deleted here first so that its pods stop counting under it.
    pub(crate) fn apply_shared_node(&mut self, mut new: Arc<NodeInfo>) -> bool {
        let index = match new.index.get() {
            Some(index) => index,
            None => {
                let index = self.nodes.index_for(&new.name);
                Arc::make_mut(&mut new).index = NodeIndex::at(index);
                index
            }
        };
        // An equal record (a heartbeat: only status fields placer does not
        // keep changed) at the same index leaves the stored one in place.
        // Swapping in the new allocation would make a replica sharing the old
        // one see a changed record the next time the node's pods change, and
        // rebuild its node list for nothing.
        if self
            .nodes
            .get_indexed(&new.name)
            .is_some_and(|(at, old)| at == index as usize && **old == *new)
        {
            return false;
        }
        for stale in self.nodes.displaced_by(&new.name, index) {
            self.delete_node(&stale);
        }
        let name = new.name.clone();
        let old = self.nodes.insert(new.clone());
        self.generations.touch_node(&name);
        if let Some(old) = &old {
            self.images.remove(old);
        }
        self.images.add(&new);
        let Some(keys) = self.pods_by_node.get(&name) else {
            return true;
        };
        for key in keys {
            if let Some(pod) = self.pods.get(key) {
                if let Some(old) = &old {
                    self.zones.remove(pod, old);
                }
                self.zones.add(pod, &new);
            }
        }
        true
    }

    /// Removes a node; its pods stop counting (they are kept, and count again
    /// if the node comes back, as a re-registered kubelet's would).
    pub fn delete_node(&mut self, name: &str) {
        let Some(old) = self.nodes.remove(name) else {
            return;
        };
        self.generations.touch_node(name);
        self.images.remove(&old);
        if let Some(keys) = self.pods_by_node.get(name) {
            for key in keys {
                if let Some(pod) = self.pods.get(key) {
                    self.zones.remove(pod, &old);
                }
            }
        }
    }

    /// Adds, updates or (when it is unassigned or terminal) forgets a pod.
    /// Returns the node whose pods changed, `None` when nothing did (the same
    /// record again, or a pod that was never counted).
    ///
    /// The state keeps `pod` as it comes: readers that want its spec and
    /// labels shared with equal pods' (the watches, the snapshot loader) call
    /// [`share_counted`] as they read it, outside the cache's write lock.
    pub fn apply_pod(&mut self, pod: PodInfo) -> Option<String> {
        self.apply_shared_pod(Arc::new(pod))
    }

    /// [`apply_pod`](Self::apply_pod) for a record another state holds
    /// (a replica catching up shares it).
    pub fn apply_shared_pod(&mut self, pod: Arc<PodInfo>) -> Option<String> {
        let key = pod_key(&pod.namespace, &pod.name);
        if self
            .pods
            .get(&key)
            .is_some_and(|p| Arc::ptr_eq(p, &pod) || **p == *pod)
        {
            return None;
        }
        let forgotten = self.forget_pod(&key);
        let Some(node_name) = pod.node_name.clone() else {
            return forgotten;
        };
        if pod.is_terminal() {
            return forgotten;
        }
        if let Some(node) = self.nodes.get(&node_name) {
            self.zones.add(&pod, node);
        }
        self.generations.touch_node(&node_name);
        self.nodes.count_pod(&node_name, &pod);
        self.pods_by_node
            .entry(node_name.clone())
            .or_default()
            .insert(key.clone());
        let (any, required_anti) = affinity_kinds(&pod);
        if any {
            self.with_affinity.insert(key.clone());
        }
        if required_anti {
            self.with_required_anti.insert(key.clone());
        }
        self.pods.insert(key, pod);
        Some(node_name)
    }

    /// Forgets the pod `namespace/name`; returns the node it was counted on.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Option<String> {
        self.forget_pod(&pod_key(namespace, name))
    }

    /// Forgets a pod; returns the node it was counted on.
    fn forget_pod(&mut self, key: &str) -> Option<String> {
        let old = self.pods.remove(key)?;
        self.with_affinity.remove(key);
        self.with_required_anti.remove(key);
        let node_name = old.node_name.as_deref()?;
        self.generations.touch_node(node_name);
        if let Some(node) = self.nodes.get(node_name) {
            self.zones.remove(&old, node);
        }
        if let Some(keys) = self.pods_by_node.get_mut(node_name) {
            keys.remove(key);
            if keys.is_empty() {
                self.pods_by_node.remove(node_name);
            }
            self.nodes.uncount_pod(node_name, &old);
        }
        Some(node_name.to_owned())
    }

    /// Replaces every node (after a full relist).
    pub fn replace_nodes(&mut self, nodes: Vec<NodeInfo>) {
        let slots = &mut self.label_slots;
        let images = &mut self.images;
        images.clear();
        self.nodes.replace(nodes, |n| {
            slots.assign(n);
            images.intern(n);
            images.add(n);
        });
        self.recount();
        self.generations.touch_everything();
    }

    /// Replaces every pod (after a full relist).
    pub fn replace_pods(&mut self, pods: Vec<PodInfo>) {
        self.pods.clear();
        self.with_affinity.clear();
        self.with_required_anti.clear();
        self.pods_by_node.clear();
        self.nodes.clear_usage();
        self.zones.clear_counts();
        for pod in pods {
            let _ = self.apply_pod(pod);
        }
        self.generations.touch_everything();
    }

    fn recount(&mut self) {
        self.zones.clear_counts();
        for pod in self.pods.values() {
            if let Some(node) = pod.node_name.as_deref().and_then(|n| self.nodes.get(n)) {
                self.zones.add(pod, node);
            }
        }
    }
}

/// Whether `pod` has any pod (anti-)affinity term, and a required anti-affinity term.
fn affinity_kinds(pod: &PodInfo) -> (bool, bool) {
    let Some(a) = pod.spec.affinity.as_ref() else {
        return (false, false);
    };
    let required_anti = a
        .pod_anti_affinity
        .as_ref()
        .and_then(|p| {
            p.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|t| !t.is_empty());
    let any_terms = |aff: Option<(bool, bool)>| aff.is_some_and(|(r, p)| r || p);
    let affinity = any_terms(a.pod_affinity.as_ref().map(|p| {
        (
            p.required_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty()),
            p.preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty()),
        )
    }));
    let anti = any_terms(a.pod_anti_affinity.as_ref().map(|p| {
        (
            required_anti,
            p.preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty()),
        )
    }));
    (affinity || anti, required_anti)
}

/// A kind kept in one of the cluster state's [`Objects`] stores.
pub trait Stored: Keyed + Sized {
    /// Its store.
    fn store(state: &ClusterState) -> &Objects<Self>;
    /// Its store, to change.
    fn store_mut(state: &mut ClusterState) -> &mut Objects<Self>;
}

macro_rules! stored {
    ($($ty:ty => $field:ident),* $(,)?) => {
        $(impl Stored for $ty {
            fn store(state: &ClusterState) -> &Objects<Self> {
                &state.$field
            }
            fn store_mut(state: &mut ClusterState) -> &mut Objects<Self> {
                &mut state.$field
            }
        })*
    };
}

stored! {
    DisruptionBudget => budgets,
    ClaimInfo => claims,
    VolumeInfo => volumes,
    StorageClassInfo => storage_classes,
    CsiNodeInfo => csi_nodes,
    CsiDriverInfo => csi_drivers,
    AttachmentInfo => attachments,
    StorageCapacityInfo => capacities,
    NamespaceInfo => namespaces,
    ServiceSelector => services,
    ReplicationControllerSelector => replication_controllers,
    ReplicaSetSelector => replica_sets,
    StatefulSetSelector => stateful_sets,
}

fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

mod dedup;
mod images;
mod node_table;
#[cfg(test)]
mod tests;
