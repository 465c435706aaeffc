//! Which images the cluster's nodes hold: per image name, the size the
//! first node to report it gave and how many nodes hold it now
//! (kube-scheduler's cache `imageStates`, which ImageLocality reads as
//! `ImageStateSummary`). The index also owns the one copy of each name that
//! every node record holding the image points at.

use std::collections::HashMap;
use std::sync::Arc;

use crate::objects::NodeInfo;

/// One image across the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageState {
    /// `sizeBytes` as the first node that reported the name gave it (kept
    /// while any node holds the image, as kube-scheduler keeps it).
    pub size: i64,
    /// Nodes holding the image.
    pub nodes: u32,
}

/// Image states by name.
#[derive(Debug, Default, Clone)]
pub(super) struct ImageIndex {
    states: HashMap<Arc<str>, ImageState>,
}

impl ImageIndex {
    /// Points the node's image names at the index's copies where it has them.
    pub(super) fn intern(&self, node: &mut NodeInfo) {
        node.images.intern(|name| {
            self.states
                .get_key_value(&**name)
                .map_or_else(|| name.clone(), |(shared, _)| shared.clone())
        });
    }

    /// Forgets every image (before a relist counts them again).
    pub(super) fn clear(&mut self) {
        self.states.clear();
    }

    /// Counts the images of a node that joined (or changed to this record).
    pub(super) fn add(&mut self, node: &NodeInfo) {
        for (name, size) in node.images.iter() {
            self.states
                .entry(name.clone())
                .and_modify(|s| s.nodes += 1)
                .or_insert(ImageState { size, nodes: 1 });
        }
    }

    /// Stops counting the images of a node that left (or changed from this record).
    pub(super) fn remove(&mut self, node: &NodeInfo) {
        for (name, _) in node.images.iter() {
            if let Some(s) = self.states.get_mut(&**name) {
                s.nodes = s.nodes.saturating_sub(1);
                if s.nodes == 0 {
                    self.states.remove(&**name);
                }
            }
        }
    }

    /// The image called `name`, if a node holds it.
    pub(super) fn get(&self, name: &str) -> Option<ImageState> {
        self.states.get(name).copied()
    }
}
