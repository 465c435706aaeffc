//! Nodes by name, each with a small dense index.
//!
//! A request deduplicates the names it was sent: with an index per node
//! that is one bit per node in a request-sized bitset (a few hundred bytes at
//! 5,000 nodes) instead of a hash set of 5,000 entries filled per request.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use crate::objects::NodeInfo;

/// The node records of a [`super::ClusterState`], by name. Every node has an
/// index below [`NodeTable::index_bound`], distinct from every other node's
/// while both are in the table; a deleted node's index is given to the next
/// new node.
#[derive(Debug, Default, Clone)]
pub struct NodeTable {
    by_name: HashMap<String, Indexed, foldhash::fast::RandomState>,
    /// Indexes of deleted nodes, for reuse.
    free: Vec<u32>,
    /// Every index handed out is below this.
    bound: u32,
}

#[derive(Debug, Clone)]
struct Indexed {
    index: u32,
    node: Arc<NodeInfo>,
}

impl NodeTable {
    /// The node called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.by_name.get(name).map(|e| &e.node)
    }

    /// The node called `name` with its index.
    pub fn get_indexed(&self, name: &str) -> Option<(usize, &Arc<NodeInfo>)> {
        self.by_name.get(name).map(|e| (e.index as usize, &e.node))
    }

    /// Adds `node` as `name` (a new index) or replaces the record of that
    /// name (same index); returns the record replaced.
    pub fn insert(&mut self, name: String, node: Arc<NodeInfo>) -> Option<Arc<NodeInfo>> {
        match self.by_name.entry(name) {
            Entry::Occupied(mut e) => Some(std::mem::replace(&mut e.get_mut().node, node)),
            Entry::Vacant(e) => {
                let index = self.free.pop().unwrap_or_else(|| {
                    self.bound += 1;
                    self.bound - 1
                });
                e.insert(Indexed { index, node });
                None
            }
        }
    }

    /// Removes the node called `name`; its index is free again.
    pub fn remove(&mut self, name: &str) -> Option<Arc<NodeInfo>> {
        let e = self.by_name.remove(name)?;
        self.free.push(e.index);
        Some(e.node)
    }

    /// Every node, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.by_name.values().map(|e| &e.node)
    }

    /// Every node, for updating in place (the index stays).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Arc<NodeInfo>> {
        self.by_name.values_mut().map(|e| &mut e.node)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Every node's index is below this.
    pub fn index_bound(&self) -> usize {
        self.bound as usize
    }
}

impl FromIterator<(String, Arc<NodeInfo>)> for NodeTable {
    fn from_iter<I: IntoIterator<Item = (String, Arc<NodeInfo>)>>(iter: I) -> Self {
        let mut table = NodeTable::default();
        for (name, node) in iter {
            table.insert(name, node);
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Arc<NodeInfo> {
        Arc::new(NodeInfo::new(name, Vec::<(String, String)>::new()))
    }

    fn index(t: &NodeTable, name: &str) -> usize {
        t.get_indexed(name).map(|(i, _)| i).unwrap()
    }

    #[test]
    fn indexes_are_distinct_kept_on_update_and_reused_after_delete() {
        let mut t: NodeTable = ["a", "b", "c"]
            .into_iter()
            .map(|n| (n.to_string(), node(n)))
            .collect();
        let mut all: Vec<usize> = ["a", "b", "c"].iter().map(|n| index(&t, n)).collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2]);
        assert_eq!(t.index_bound(), 3);

        let b = index(&t, "b");
        let old = t.insert("b".into(), node("b"));
        assert!(old.is_some(), "an update returns the old record");
        assert_eq!(index(&t, "b"), b, "an update keeps the index");

        assert!(t.remove("b").is_some());
        assert!(t.get("b").is_none() && t.get_indexed("b").is_none());
        assert!(t.insert("d".into(), node("d")).is_none());
        assert_eq!(index(&t, "d"), b, "a new node takes the freed index");
        assert_eq!(t.index_bound(), 3);
        assert!(t.insert("e".into(), node("e")).is_none());
        assert_eq!(index(&t, "e"), 3);
        assert_eq!((t.len(), t.index_bound()), (4, 4));
        assert!(t.remove("zz").is_none());
    }
}
