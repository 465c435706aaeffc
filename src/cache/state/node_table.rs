//! Nodes by name, each with a small dense index, and what the pods counted
//! on each node take from it.
//!
//! A request deduplicates the names it was sent: with an index per node
//! that is one bit per node in a request-sized bitset (a few hundred bytes at
//! 5,000 nodes) instead of a hash set of 5,000 entries filled per request.
//!
//! The index is also written into the node record ([`NodeInfo::index`]) and
//! the usage is kept next to the record under it: Filter and Score read a
//! node's usage per node and plugin in every attempt, and from the record
//! that is an array access instead of a hash of the name and a compare
//! against a cold key string (a third of a standalone attempt at 5,000
//! nodes went there).
//!
//! A request looks up every name it was sent (5,000 at 5,000 nodes), so the
//! lookup touches as little memory as it can: the names sit in the hash
//! table's buckets ([`NameKey`]), not behind a pointer to a string allocated
//! somewhere among the node's labels, and the records sit in their own dense
//! vector of pointers (8 bytes per node), apart from the usage, which is
//! larger and which the extender's verbs never read.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::objects::pod::HostPort;
use crate::objects::{NodeIndex, NodeInfo, PodInfo, Resources};

/// What the pods assigned to one node take from it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NodeUsage {
    /// Sum of the pods' effective requests.
    pub requested: Resources,
    /// Sum of the pods' requests with scoring defaults for missing cpu/memory
    /// (kube-scheduler's `NonZeroRequested`).
    pub non_zero_requested: Resources,
    /// Number of pods.
    pub pods: i64,
    /// Host ports in use, with how many pods bind each.
    pub host_ports: HashMap<HostPort, u32>,
}

impl NodeUsage {
    fn add(&mut self, pod: &PodInfo) {
        self.requested.add(&pod.spec.counted);
        self.non_zero_requested.add(&pod.spec.non_zero_requests);
        self.pods += 1;
        for p in &pod.spec.host_ports {
            *self.host_ports.entry(p.clone()).or_default() += 1;
        }
    }

    fn remove(&mut self, pod: &PodInfo) {
        self.requested.sub(&pod.spec.counted);
        self.non_zero_requested.sub(&pod.spec.non_zero_requests);
        self.pods -= 1;
        for p in &pod.spec.host_ports {
            if let Some(n) = self.host_ports.get_mut(p) {
                *n -= 1;
                if *n == 0 {
                    self.host_ports.remove(p);
                }
            }
        }
    }

    /// `Some` while any pod is counted: a node without pods reads as one
    /// whose usage was never recorded.
    fn counted(&self) -> Option<&NodeUsage> {
        (self.pods > 0).then_some(self)
    }
}

/// The node records of a [`super::ClusterState`], by name and by index, with
/// their usage. Every node has an index below [`NodeTable::index_bound`],
/// distinct from every other node's while both are in the table; a deleted
/// node's index is given to the next new node.
#[derive(Debug, Default, Clone)]
pub struct NodeTable {
    by_name: HashMap<NameKey, u32, foldhash::fast::RandomState>,
    /// By index: the record there (`None`: a free index).
    records: Vec<Option<Arc<NodeInfo>>>,
    /// By index: what the pods counted on the node there take from it.
    usages: Vec<NodeUsage>,
    /// Free indexes, the next one to hand out last.
    free: Vec<u32>,
    /// Usage counted on names no record has: a pod seen before its node, or
    /// kept while its node is deleted. Moves into the node's entry when the
    /// node arrives (and back when it leaves).
    unlisted: HashMap<String, NodeUsage, foldhash::fast::RandomState>,
}

/// Names up to this many bytes sit in the bucket: cloud node names run to
/// 30–45 bytes (`ip-10-0-1-36.us-east-1.compute.internal`), past what 23-byte
/// inline-string crates hold; the key is 48 bytes, its bucket 56.
const INLINE_NAME: usize = 46;

/// A node's name as the table's key, hashed and compared as its bytes (a
/// lookup borrows `&[u8]`).
#[derive(Debug, Clone)]
enum NameKey {
    /// Short enough to sit in the bucket.
    Inline { len: u8, bytes: [u8; INLINE_NAME] },
    /// Longer names.
    Heap(Box<[u8]>),
}

impl NameKey {
    fn new(name: &str) -> Self {
        let mut bytes = [0; INLINE_NAME];
        match (bytes.get_mut(..name.len()), u8::try_from(name.len())) {
            (Some(prefix), Ok(len)) => {
                prefix.copy_from_slice(name.as_bytes());
                NameKey::Inline { len, bytes }
            }
            _ => NameKey::Heap(name.as_bytes().into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            NameKey::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            NameKey::Heap(bytes) => bytes,
        }
    }
}

/// `Borrow<[u8]>` needs hashing and equality to agree with the bytes'.
impl std::hash::Hash for NameKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for NameKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for NameKey {}

impl Borrow<[u8]> for NameKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl NodeTable {
    /// The node called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.get_indexed(name).map(|(_, n)| n)
    }

    /// The node called `name` with its index.
    pub fn get_indexed(&self, name: &str) -> Option<(usize, &Arc<NodeInfo>)> {
        let index = *self.by_name.get(name.as_bytes())? as usize;
        Some((index, self.records.get(index)?.as_ref()?))
    }

    /// The index node `name` has, or would get if it were inserted now.
    pub fn index_for(&self, name: &str) -> u32 {
        self.by_name
            .get(name.as_bytes())
            .copied()
            .unwrap_or_else(|| {
                self.free
                    .last()
                    .copied()
                    .unwrap_or(self.records.len() as u32)
            })
    }

    /// The nodes that must leave before `name` can sit at `index`: another
    /// node holding `index`, and `name` itself held under another index.
    pub fn displaced_by(&self, name: &str, index: u32) -> Vec<String> {
        let mut displaced = Vec::new();
        let holder = self.records.get(index as usize).and_then(Option::as_ref);
        if let Some(holder) = holder.filter(|h| h.name != name) {
            displaced.push(holder.name.clone());
        }
        if self
            .by_name
            .get(name.as_bytes())
            .is_some_and(|&i| i != index)
        {
            displaced.push(name.to_owned());
        }
        displaced
    }

    /// Adds `node` at the index its record carries ([`NodeTable::index_for`]
    /// when it carries none), or replaces the record of that name there;
    /// returns the record replaced. Nodes [`NodeTable::displaced_by`] it
    /// are removed first (callers that keep more per node remove them
    /// themselves beforehand).
    pub fn insert(&mut self, node: Arc<NodeInfo>) -> Option<Arc<NodeInfo>> {
        let index = node
            .index
            .get()
            .unwrap_or_else(|| self.index_for(&node.name));
        for name in self.displaced_by(&node.name, index) {
            self.remove(&name);
        }
        if let Some(Some(old)) = self.records.get_mut(index as usize) {
            return Some(std::mem::replace(old, node));
        }
        self.take_index(index);
        let usage = self.unlisted.remove(&node.name).unwrap_or_default();
        self.by_name.insert(NameKey::new(&node.name), index);
        if let Some(slot) = self.usages.get_mut(index as usize) {
            *slot = usage;
        }
        if let Some(slot) = self.records.get_mut(index as usize) {
            *slot = Some(node);
        }
        None
    }

    /// Makes the free `index` used, growing the table to hold it.
    fn take_index(&mut self, index: u32) {
        if let Some(at) = self.free.iter().rposition(|&i| i == index) {
            self.free.remove(at);
        }
        while self.records.len() <= index as usize {
            let grown = self.records.len() as u32;
            self.records.push(None);
            self.usages.push(NodeUsage::default());
            if grown != index {
                self.free.push(grown);
            }
        }
    }

    /// Removes the node called `name`; its index is free again, and the
    /// usage of its pods waits for it under its name.
    pub fn remove(&mut self, name: &str) -> Option<Arc<NodeInfo>> {
        let index = self.by_name.remove(name.as_bytes())?;
        let node = self.records.get_mut(index as usize)?.take();
        let usage = self
            .usages
            .get_mut(index as usize)
            .map(std::mem::take)
            .unwrap_or_default();
        self.free.push(index);
        if usage.pods > 0 {
            self.unlisted.insert(name.to_owned(), usage);
        }
        node
    }

    /// Replaces every node (a relist) with `nodes`, after `prepare` filled
    /// each; the usage of the pods stays with their nodes' names.
    pub fn replace(
        &mut self,
        nodes: impl IntoIterator<Item = NodeInfo>,
        mut prepare: impl FnMut(&mut NodeInfo),
    ) {
        let records = std::mem::take(&mut self.records);
        let usages = std::mem::take(&mut self.usages);
        for (node, usage) in records.into_iter().zip(usages) {
            if let Some(node) = node
                && usage.pods > 0
            {
                self.unlisted.insert(node.name.clone(), usage);
            }
        }
        self.by_name.clear();
        self.free.clear();
        for mut node in nodes {
            prepare(&mut node);
            node.index = NodeIndex::at(self.index_for(&node.name));
            self.insert(Arc::new(node));
        }
    }

    /// What the pods on node `name` use (`None` when none are counted).
    pub fn usage(&self, name: &str) -> Option<&NodeUsage> {
        match self.by_name.get(name.as_bytes()) {
            Some(&index) => self.usages.get(index as usize)?.counted(),
            None => self.unlisted.get(name),
        }
    }

    /// [`NodeTable::usage`] of `node`'s name, straight from its index when
    /// `node` is the record this table holds there. The address check makes
    /// a record from elsewhere (a test's, a dry run's copy, a stale record
    /// whose index another node took since) read by name, never the usage of
    /// whichever node holds its index.
    pub fn usage_of(&self, node: &NodeInfo) -> Option<&NodeUsage> {
        let index = node.index.get().map(|index| index as usize);
        let held = index.and_then(|i| self.records.get(i)?.as_ref());
        match (held, index.and_then(|i| self.usages.get(i))) {
            (Some(held), Some(usage)) if std::ptr::eq(Arc::as_ptr(held), node) => usage.counted(),
            _ => self.usage(&node.name),
        }
    }

    /// Counts `pod` on node `name`.
    pub fn count_pod(&mut self, name: &str, pod: &PodInfo) {
        let held = match self.by_name.get(name.as_bytes()) {
            Some(&index) => self.usages.get_mut(index as usize),
            None => None,
        };
        match held {
            Some(usage) => usage.add(pod),
            None => self.unlisted.entry(name.to_owned()).or_default().add(pod),
        }
    }

    /// Stops counting `pod` on node `name`; a node left without pods starts
    /// afresh (no zero entries of extended resources or ports linger).
    pub fn uncount_pod(&mut self, name: &str, pod: &PodInfo) {
        if let Some(&index) = self.by_name.get(name.as_bytes()) {
            if let Some(usage) = self.usages.get_mut(index as usize) {
                usage.remove(pod);
                if usage.pods <= 0 {
                    *usage = NodeUsage::default();
                }
            }
        } else if let Some(usage) = self.unlisted.get_mut(name) {
            usage.remove(pod);
            if usage.pods <= 0 {
                self.unlisted.remove(name);
            }
        }
    }

    /// Forgets every node's usage (a pod relist recounts it).
    pub fn clear_usage(&mut self) {
        for usage in &mut self.usages {
            *usage = NodeUsage::default();
        }
        self.unlisted.clear();
    }

    /// Every node, in index order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.records.iter().filter_map(Option::as_ref)
    }

    /// Every node, for updating in place (the index stays).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Arc<NodeInfo>> {
        self.records.iter_mut().filter_map(Option::as_mut)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Every node's index is below this.
    pub fn index_bound(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests;
