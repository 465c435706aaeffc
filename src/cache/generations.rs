//! Which parts of a [`ClusterState`](super::ClusterState) changed since a
//! given moment: the bookkeeping behind [`Replica`](super::Replica)'s
//! incremental copies (kube-scheduler's `NodeInfo.Generation` and the
//! generation-ordered node list its `UpdateSnapshot` walks).
//!
//! Every change takes the next number from one counter. A node's number is
//! the last change to its record or to the pods counted on it; the
//! generation-ordered index lets a reader that synced at `g` visit exactly
//! the nodes changed after `g`, without looking at the others. Changes no
//! per-node copy can follow (a relist, new zone dimensions) and changes to
//! the keyed object stores have a number of their own.

use std::collections::{BTreeMap, HashMap};

/// Change numbers of one cluster state.
#[derive(Debug, Default, Clone)]
pub struct Generations {
    current: u64,
    by_node: HashMap<String, u64, foldhash::fast::RandomState>,
    /// The same numbers ordered, each naming its node: a node appears once,
    /// under its latest number. Deleted nodes stay (a reader must learn of
    /// the deletion); the index is bounded by the node names ever seen.
    order: BTreeMap<u64, String>,
    everything: u64,
    objects: u64,
}

impl Generations {
    /// The number of the latest change (0: none yet).
    pub fn current(&self) -> u64 {
        self.current
    }

    /// The number of the latest change that only a full copy follows.
    pub fn everything(&self) -> u64 {
        self.everything
    }

    /// The number of the latest change to a keyed object store.
    pub fn objects(&self) -> u64 {
        self.objects
    }

    /// The nodes changed after `since`, oldest change first.
    pub fn nodes_since(&self, since: u64) -> impl Iterator<Item = &str> {
        self.order
            .range(since.saturating_add(1)..)
            .map(|(_, n)| n.as_str())
    }

    /// Records a change to node `name` (its record or its pods).
    pub fn touch_node(&mut self, name: &str) {
        self.current += 1;
        let now = self.current;
        let old = match self.by_node.get_mut(name) {
            Some(g) => Some(std::mem::replace(g, now)),
            None => {
                self.by_node.insert(name.to_owned(), now);
                None
            }
        };
        let name = match old.and_then(|g| self.order.remove(&g)) {
            Some(reused) => reused,
            None => name.to_owned(),
        };
        self.order.insert(now, name);
    }

    /// Records a change only a full copy follows.
    pub fn touch_everything(&mut self) {
        self.current += 1;
        self.everything = self.current;
    }

    /// Records a change to a keyed object store.
    pub fn touch_objects(&mut self) {
        self.current += 1;
        self.objects = self.current;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_each_changed_node_once_in_change_order() {
        let mut g = Generations::default();
        g.touch_node("a");
        g.touch_node("b");
        let after_b = g.current();
        g.touch_node("c");
        g.touch_node("a");
        assert_eq!(g.nodes_since(0).collect::<Vec<_>>(), ["b", "c", "a"]);
        assert_eq!(g.nodes_since(after_b).collect::<Vec<_>>(), ["c", "a"]);
        assert_eq!(g.nodes_since(g.current()).count(), 0);
        g.touch_objects();
        g.touch_everything();
        assert_eq!((g.objects(), g.everything(), g.current()), (5, 6, 6));
    }
}
