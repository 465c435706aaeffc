//! Per-node plugin inputs precomputed when the node enters the cache.
//!
//! A request reads a few labels of every node it is asked about (the zone,
//! the network tier, a capability). Looked up by string, each read chases the
//! node's label store (two more allocations, scattered over the heap once the
//! cache holds a large cluster) and compares keys byte by byte: at 5,000 nodes
//! that was most of a request's time, mostly cache misses. The cache instead
//! interns the values of the label keys the policy's plugins declare
//! (their `CacheNeeds::node_label_keys`) and keeps their ids inline
//! in the [`crate::objects::NodeInfo`], on the cache line the request touches
//! anyway. Plugins compare ids; nodes whose ids were not computed by the
//! current cache (full `Nodes` in a request, tests) read as
//! [`NodeLabel::Unknown`] and plugins fall back to the string lookup.

/// Label values kept inline per node; keys beyond this are read by string.
/// The policy's keys come first; pods' node selectors take the rest (see
/// [`crate::cache::node_inputs`]), less a few kept for a policy reload.
pub const INPUT_SLOTS: usize = 8;

/// No such label on the node.
const ABSENT: u32 = u32::MAX;
/// The value was not interned (its key's table is full): read it by string.
const UNINTERNED: u32 = u32::MAX - 1;

/// The interned label values of one node, valid for the cache generation
/// `epoch` (0: never computed).
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeInputs {
    epoch: u32,
    ids: [u32; INPUT_SLOTS],
}

/// Derived from the labels, so it never makes two node records differ: a node
/// compares equal to the same node before the cache filled its table.
impl PartialEq for NodeInputs {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// One slot of the inline table, as handed out by the cache: which slot and
/// for which generation of the cache's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelSlot {
    /// Generation of the cache's slot table.
    pub epoch: u32,
    /// Position in [`NodeInputs`].
    pub index: u8,
}

/// What a node's inline table says about one label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeLabel {
    /// The node carries the label, with the value of this id.
    Value(u32),
    /// The node does not carry the label.
    Absent,
    /// Not known from the table: look the label up by string.
    Unknown,
}

/// One `key=value` a pod asks of every node (a node selector pair, a
/// capability): the key's slot and the value's id, looked up once per pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WantedLabel {
    /// The key's slot.
    pub slot: LabelSlot,
    /// The value's id; `None` when no node the cache interned carries it.
    pub id: Option<u32>,
}

impl WantedLabel {
    /// Whether `inputs` carry the value: `Some` when the inline table
    /// answers, `None` when the label must be read by string.
    pub fn carried_by(self, inputs: &NodeInputs) -> Option<bool> {
        match inputs.get(self.slot) {
            NodeLabel::Value(id) => Some(Some(id) == self.id),
            NodeLabel::Absent => Some(false),
            NodeLabel::Unknown => None,
        }
    }
}

impl NodeInputs {
    /// A table for generation `epoch` with every slot absent.
    pub fn empty(epoch: u32) -> Self {
        NodeInputs {
            epoch,
            ids: [ABSENT; INPUT_SLOTS],
        }
    }

    /// Records value id `id` (`None`: the label is absent; `Some(None)`: present
    /// but not interned) in `slot`.
    pub fn set(&mut self, index: usize, id: Option<Option<u32>>) {
        if let Some(cell) = self.ids.get_mut(index) {
            *cell = match id {
                None => ABSENT,
                Some(None) => UNINTERNED,
                Some(Some(id)) => id.min(UNINTERNED - 1),
            };
        }
    }

    /// The label in `slot`, if this table belongs to the slot's generation.
    pub fn get(&self, slot: LabelSlot) -> NodeLabel {
        if self.epoch == 0 || self.epoch != slot.epoch {
            return NodeLabel::Unknown;
        }
        match self.ids.get(slot.index as usize).copied() {
            Some(ABSENT) => NodeLabel::Absent,
            Some(UNINTERNED) | None => NodeLabel::Unknown,
            Some(id) => NodeLabel::Value(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_answers_only_for_its_own_generation() {
        let mut t = NodeInputs::empty(3);
        t.set(0, Some(Some(5)));
        t.set(1, Some(None));
        let slot = |index| LabelSlot { epoch: 3, index };
        assert_eq!(t.get(slot(0)), NodeLabel::Value(5));
        assert_eq!(t.get(slot(1)), NodeLabel::Unknown, "not interned");
        assert_eq!(t.get(slot(2)), NodeLabel::Absent);
        assert_eq!(
            t.get(LabelSlot { epoch: 4, index: 0 }),
            NodeLabel::Unknown,
            "another generation's slot"
        );
        assert_eq!(NodeInputs::default().get(slot(0)), NodeLabel::Unknown);
        let wanted = |index, id| WantedLabel {
            slot: slot(index),
            id,
        };
        assert_eq!(wanted(0, Some(5)).carried_by(&t), Some(true));
        assert_eq!(wanted(0, Some(6)).carried_by(&t), Some(false));
        assert_eq!(
            wanted(0, None).carried_by(&t),
            Some(false),
            "value no node has"
        );
        assert_eq!(wanted(2, Some(5)).carried_by(&t), Some(false), "absent");
        assert_eq!(wanted(1, Some(5)).carried_by(&t), None, "read by string");
    }
}
