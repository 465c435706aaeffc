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
//! lookup touches as little memory as it can ([`by_name`]): a slot and a row
//! holding the name and the record per name, prefetched ahead, apart from
//! the usage, which is larger and which the extender's verbs never read.

mod by_name;

use std::collections::HashMap;
use std::sync::Arc;

use crate::objects::pod::HostPort;
use crate::objects::{NodeIndex, NodeInfo, PodInfo, Resources};

#[cfg(test)]
use by_name::INLINE_NAME;
use by_name::{ByName, Row};

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
    by_name: ByName,
    /// By index: the name and record there (no record: a free index).
    rows: Vec<Row>,
    /// By index: what the pods counted on the node there take from it.
    usages: Vec<NodeUsage>,
    /// Free indexes, the next one to hand out last.
    free: Vec<u32>,
    /// Usage counted on names no record has: a pod seen before its node, or
    /// kept while its node is deleted. Moves into the node's entry when the
    /// node arrives (and back when it leaves).
    unlisted: HashMap<String, NodeUsage, foldhash::fast::RandomState>,
}

impl NodeTable {
    /// The node called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.get_indexed(name).map(|(_, n)| n)
    }

    /// The node called `name` with its index.
    pub fn get_indexed(&self, name: &str) -> Option<(usize, &Arc<NodeInfo>)> {
        let index = self.by_name.get(&self.rows, name)? as usize;
        Some((index, self.record(index)?))
    }

    /// The record at `index`.
    fn record(&self, index: usize) -> Option<&Arc<NodeInfo>> {
        self.rows.get(index)?.record.as_ref()
    }

    /// Calls `each` with every name of `names`, in order, and what
    /// [`NodeTable::get_indexed`] gives for it: one pass that overlaps the
    /// lookups' memory loads (an extender request's names).
    pub fn get_indexed_each<'c, 'n, S: AsRef<str>>(
        &'c self,
        names: &'n [S],
        mut each: impl FnMut(&'n S, Option<(usize, &'c Arc<NodeInfo>)>),
    ) {
        self.by_name.get_each(&self.rows, names, |name, index| {
            let found = index.and_then(|i| Some((i as usize, self.record(i as usize)?)));
            if let Some((_, record)) = found {
                // The part of a record the extender's plugins read (label
                // ids): loading now, while the names are looked up, it is
                // in cache when they run.
                by_name::prefetch(&record.inputs);
            }
            each(name, found);
        });
    }

    /// The index node `name` has, or would get if it were inserted now.
    pub fn index_for(&self, name: &str) -> u32 {
        self.by_name
            .get(&self.rows, name)
            .unwrap_or_else(|| self.free.last().copied().unwrap_or(self.rows.len() as u32))
    }

    /// The nodes that must leave before `name` can sit at `index`: another
    /// node holding `index`, and `name` itself held under another index.
    pub fn displaced_by(&self, name: &str, index: u32) -> Vec<String> {
        let mut displaced = Vec::new();
        let holder = self.record(index as usize);
        if let Some(holder) = holder.filter(|h| h.name != name) {
            displaced.push(holder.name.clone());
        }
        if self
            .by_name
            .get(&self.rows, name)
            .is_some_and(|i| i != index)
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
        if let Some(Row {
            record: Some(old), ..
        }) = self.rows.get_mut(index as usize)
        {
            return Some(std::mem::replace(old, node));
        }
        self.take_index(index);
        let usage = self.unlisted.remove(&node.name).unwrap_or_default();
        if let Some(slot) = self.usages.get_mut(index as usize) {
            *slot = usage;
        }
        self.by_name.insert(&mut self.rows, index, node);
        None
    }

    /// Makes the free `index` used, growing the table to hold it.
    fn take_index(&mut self, index: u32) {
        if let Some(at) = self.free.iter().rposition(|&i| i == index) {
            self.free.remove(at);
        }
        while self.rows.len() <= index as usize {
            let grown = self.rows.len() as u32;
            self.rows.push(Row::default());
            self.usages.push(NodeUsage::default());
            if grown != index {
                self.free.push(grown);
            }
        }
    }

    /// Removes the node called `name`; its index is free again, and the
    /// usage of its pods waits for it under its name.
    pub fn remove(&mut self, name: &str) -> Option<Arc<NodeInfo>> {
        let index = self.by_name.remove(&self.rows, name)?;
        let node = self.rows.get_mut(index as usize)?.record.take();
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
        let rows = std::mem::take(&mut self.rows);
        let usages = std::mem::take(&mut self.usages);
        for (row, usage) in rows.into_iter().zip(usages) {
            if let Some(node) = row.record
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
        match self.by_name.get(&self.rows, name) {
            Some(index) => self.usages.get(index as usize)?.counted(),
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
        let held = index.and_then(|i| self.record(i));
        match (held, index.and_then(|i| self.usages.get(i))) {
            (Some(held), Some(usage)) if std::ptr::eq(Arc::as_ptr(held), node) => usage.counted(),
            _ => self.usage(&node.name),
        }
    }

    /// Counts `pod` on node `name`.
    pub fn count_pod(&mut self, name: &str, pod: &PodInfo) {
        let held = match self.by_name.get(&self.rows, name) {
            Some(index) => self.usages.get_mut(index as usize),
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
        if let Some(index) = self.by_name.get(&self.rows, name) {
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
        self.rows.iter().filter_map(|r| r.record.as_ref())
    }

    /// Every node, for updating in place (the index stays).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Arc<NodeInfo>> {
        self.rows.iter_mut().filter_map(|r| r.record.as_mut())
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Every node's index is below this.
    pub fn index_bound(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests;
