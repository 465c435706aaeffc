//! The cache's side of per-node plugin inputs (see [`crate::objects::inputs`]):
//! which label keys have an inline slot, and the interned values of each.
//!
//! Slots are only ever added (a policy reload that reads a new label key adds
//! one and recomputes every node), so ids handed to a request stay valid for
//! as long as it holds the read lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::objects::NodeInfo;
use crate::objects::inputs::{INPUT_SLOTS, LabelSlot, NodeInputs, WantedLabel};

/// Slots pods' node selectors leave free, for keys a reloaded policy declares.
const SLOTS_KEPT_FOR_POLICY: usize = 2;

/// Values interned per key at most; more distinct values (a key such as
/// `kubernetes.io/hostname` on a huge cluster) are read by string instead.
const MAX_VALUES_PER_KEY: usize = 1 << 16;

/// Generations are unique across every cache in the process, so a node
/// record from one cache never reads as current in another.
static NEXT_EPOCH: AtomicU32 = AtomicU32::new(1);

/// The label keys with an inline slot and their interned values.
#[derive(Debug, Default, Clone)]
pub struct LabelSlots {
    epoch: u32,
    keys: Vec<String>,
    values: Vec<HashMap<String, u32, foldhash::fast::RandomState>>,
}

impl LabelSlots {
    /// The slot of label `key`, if it has one.
    pub fn slot(&self, key: &str) -> Option<LabelSlot> {
        let index = self.keys.iter().position(|k| k == key)?;
        Some(LabelSlot {
            epoch: self.epoch,
            index: index as u8,
        })
    }

    /// The id of `value` under `slot`; `None` when no node carries it (or it
    /// was not interned, which plugins learn per node from [`NodeInputs`]).
    pub fn id(&self, slot: LabelSlot, value: &str) -> Option<u32> {
        if slot.epoch != self.epoch {
            return None;
        }
        self.values.get(slot.index as usize)?.get(value).copied()
    }

    /// `key=value` as a node's inline table answers it, if `key` has a slot.
    pub fn wanted(&self, key: &str, value: &str) -> Option<WantedLabel> {
        let slot = self.slot(key)?;
        Some(WantedLabel {
            slot,
            id: self.id(slot, value),
        })
    }

    /// Whether a pod's node selector naming `key` would give it a slot:
    /// it has none, and one is free beyond those kept for the policy.
    pub fn takes_selector_key(&self, key: &str) -> bool {
        self.keys.len() + SLOTS_KEPT_FOR_POLICY < INPUT_SLOTS && !self.keys.iter().any(|k| k == key)
    }

    /// Identifies the content: slots and values are only ever added, so two
    /// copies of one growing table with the same stamp are equal.
    pub fn stamp(&self) -> (u32, usize, usize) {
        (
            self.epoch,
            self.keys.len(),
            self.values.iter().map(HashMap::len).sum(),
        )
    }

    /// Gives slots to the keys in `keys` that have none (while slots last).
    /// True when a slot was added: every node must then be recomputed.
    pub fn add_keys<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) -> bool {
        self.add_keys_up_to(keys, INPUT_SLOTS)
    }

    /// [`LabelSlots::add_keys`] for the keys of pods' node selectors, which
    /// leave [`SLOTS_KEPT_FOR_POLICY`] slots free.
    pub fn add_selector_keys<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) -> bool {
        self.add_keys_up_to(keys, INPUT_SLOTS - SLOTS_KEPT_FOR_POLICY)
    }

    fn add_keys_up_to<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a str>,
        limit: usize,
    ) -> bool {
        let mut added = false;
        for key in keys {
            if self.keys.len() < limit && !self.keys.iter().any(|k| k == key) {
                self.keys.push(key.to_string());
                self.values.push(HashMap::default());
                added = true;
            }
        }
        if added {
            self.epoch = NEXT_EPOCH.fetch_add(1, Ordering::Relaxed);
        }
        added
    }

    /// Fills `node`'s inline table, interning values it is the first to carry.
    pub fn assign(&mut self, node: &mut NodeInfo) {
        if self.keys.is_empty() {
            return;
        }
        let mut inputs = NodeInputs::empty(self.epoch);
        for (index, key) in self.keys.iter().enumerate() {
            let id = node.label(key).map(|value| {
                let table = &mut self.values[index];
                match table.get(value) {
                    Some(&id) => Some(id),
                    None if table.len() < MAX_VALUES_PER_KEY => {
                        let id = table.len() as u32;
                        table.insert(value.to_string(), id);
                        Some(id)
                    }
                    None => None,
                }
            });
            inputs.set(index, id);
        }
        node.inputs = inputs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::inputs::NodeLabel;

    #[test]
    fn nodes_get_ids_of_the_watched_labels_only() {
        let mut slots = LabelSlots::default();
        assert!(slots.add_keys(["zone", "net"]));
        assert!(!slots.add_keys(["zone"]), "already slotted");
        let mut a = NodeInfo::new("a", [("zone", "z1"), ("net", "high"), ("x", "y")]);
        let mut b = NodeInfo::new("b", [("zone", "z1")]);
        slots.assign(&mut a);
        slots.assign(&mut b);
        let zone = slots.slot("zone").unwrap();
        let net = slots.slot("net").unwrap();
        assert_eq!(slots.slot("x"), None);
        assert_eq!(a.inputs.get(zone), b.inputs.get(zone));
        assert_eq!(
            a.inputs.get(zone),
            NodeLabel::Value(slots.id(zone, "z1").unwrap())
        );
        assert_eq!(
            a.inputs.get(net),
            NodeLabel::Value(slots.id(net, "high").unwrap())
        );
        assert_eq!(b.inputs.get(net), NodeLabel::Absent);
        assert_eq!(slots.id(net, "low"), None);
        // Adding a key starts a new generation: old tables no longer answer.
        slots.add_keys(["pool"]);
        let zone = slots.slot("zone").unwrap();
        assert_eq!(a.inputs.get(zone), NodeLabel::Unknown);
    }

    #[test]
    fn selector_keys_leave_slots_for_the_policy() {
        let mut slots = LabelSlots::default();
        slots.add_keys(["zone"]);
        assert!(slots.takes_selector_key("run"));
        assert!(!slots.takes_selector_key("zone"), "already slotted");
        let keys: Vec<String> = (0..INPUT_SLOTS).map(|i| format!("s{i}")).collect();
        assert!(slots.add_selector_keys(keys.iter().map(String::as_str)));
        let taken = INPUT_SLOTS - SLOTS_KEPT_FOR_POLICY;
        assert!(slots.slot(&keys[taken - 2]).is_some());
        assert_eq!(slots.slot(&keys[taken - 1]), None, "kept for the policy");
        assert!(!slots.takes_selector_key("other"));
        assert!(slots.add_keys(["net"]), "a policy key still gets one");
        let mut a = NodeInfo::new("a", [("s0", "x")]);
        slots.assign(&mut a);
        let wanted = slots.wanted("s0", "x").unwrap();
        assert_eq!(wanted.carried_by(&a.inputs), Some(true));
        assert_eq!(slots.wanted("s0", "y").unwrap().id, None);
        assert_eq!(slots.wanted("unslotted", "x"), None);
    }

    #[test]
    fn keys_beyond_the_inline_slots_have_none() {
        let mut slots = LabelSlots::default();
        let keys: Vec<String> = (0..INPUT_SLOTS + 2).map(|i| format!("k{i}")).collect();
        slots.add_keys(keys.iter().map(String::as_str));
        assert!(slots.slot(&keys[INPUT_SLOTS - 1]).is_some());
        assert_eq!(slots.slot(&keys[INPUT_SLOTS]), None);
    }
}

#[cfg(test)]
mod equivalence {
    use std::sync::Arc;

    use crate::cache::ClusterState;
    use crate::framework::CycleState;
    use crate::objects::{NodeInfo, PodInfo};
    use crate::policy::{CompiledPolicy, parse};

    /// The shipped policy's verdicts and scores over `cluster`, for a pod that
    /// triggers every extender plugin.
    fn run(cluster: &ClusterState, nodes: &[Arc<NodeInfo>]) -> (Vec<Option<String>>, Vec<i64>) {
        let policy = CompiledPolicy::new(
            parse(include_str!("../../policy.yaml"), "policy.yaml").expect("policy"),
        );
        let fw = policy.profile("extender").expect("profile").clone();
        let pod = PodInfo {
            name: "p".into(),
            labels: std::sync::Arc::new(
                [("qos".to_string(), "latency-sensitive".to_string())].into(),
            ),
            annotations: [(
                "myorg.io/require-hw-encrypt".to_string(),
                "true".to_string(),
            )]
            .into(),
            ..Default::default()
        };
        let mut state = CycleState::new();
        let pre = fw.pre_filter(&mut state, &pod, cluster);
        let verdicts = fw
            .filter_nodes(&state, &pre, &pod, nodes, cluster)
            .into_iter()
            .map(|v| v.map(|s| s.message()))
            .collect();
        let table = fw
            .score(&mut CycleState::new(), &pod, nodes, cluster)
            .expect("score");
        let scores = (0..nodes.len()).map(|i| table.extender_score(i)).collect();
        (verdicts, scores)
    }

    #[test]
    fn inline_ids_give_the_same_answers_as_label_lookups() {
        let labels = |i: usize| {
            let mut l = vec![("topology.kubernetes.io/zone", format!("z{}", i % 3))];
            match i % 4 {
                0 => l.push(("net", "high".into())),
                1 => l.push(("net", "low".into())),
                2 => l.push(("net", "medium".into())),
                _ => {}
            }
            if !i.is_multiple_of(3) {
                l.push(("node.kubernetes.io/hw-encrypt", "true".into()));
            }
            if i == 7 {
                l.retain(|(k, _)| *k != "topology.kubernetes.io/zone");
            }
            l
        };
        let nodes: Vec<NodeInfo> = (0..12)
            .map(|i| NodeInfo::new(&format!("n{i}"), labels(i)))
            .collect();
        let fill = |c: &mut ClusterState| {
            c.replace_nodes(nodes.clone());
            for i in 0..20 {
                c.apply_pod(PodInfo {
                    name: format!("q{i}"),
                    node_name: Some(format!("n{}", i % 5)),
                    ..Default::default()
                });
            }
        };
        let policy = CompiledPolicy::new(
            parse(include_str!("../../policy.yaml"), "policy.yaml").expect("policy"),
        );
        let mut plain = ClusterState::with_dimensions(&policy.count_dimensions());
        fill(&mut plain);
        let mut inline = ClusterState::with_dimensions(&policy.count_dimensions());
        inline.watch_labels(policy.node_label_keys().iter().map(String::as_str));
        fill(&mut inline);
        let cached = |c: &ClusterState| -> Vec<Arc<NodeInfo>> {
            (0..12)
                .map(|i| c.node(&format!("n{i}")).expect("node").clone())
                .collect()
        };
        let expected = run(&plain, &cached(&plain));
        assert!(expected.0.iter().any(Option::is_some) && expected.0.iter().any(Option::is_none));
        assert_eq!(run(&inline, &cached(&inline)), expected);
        // Nodes from a request's own `Nodes` (no inline table) read by string.
        let uncached: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        assert_eq!(run(&inline, &uncached), expected);
    }
}

#[cfg(test)]
mod reload {
    use crate::cache::ClusterState;
    use crate::objects::NodeInfo;
    use crate::objects::inputs::NodeLabel;

    #[test]
    fn watching_a_new_key_fills_the_nodes_already_cached() {
        let mut c = ClusterState::default();
        c.apply_node(NodeInfo::new("a", [("zone", "z1"), ("net", "high")]));
        c.watch_labels(["zone"]);
        c.watch_labels(["zone", "net"]);
        let slots = c.label_slots();
        let node = c.node("a").expect("node");
        for (key, value) in [("zone", "z1"), ("net", "high")] {
            let slot = slots.slot(key).expect("slot");
            let id = slots.id(slot, value).expect("interned");
            assert_eq!(node.inputs.get(slot), NodeLabel::Value(id), "{key}");
        }
        // A node applied later gets the same ids for the same values.
        c.apply_node(NodeInfo::new("b", [("net", "high")]));
        let slots = c.label_slots();
        let net = slots.slot("net").expect("slot");
        let b = c.node("b").expect("node");
        assert_eq!(
            b.inputs.get(net),
            c.node("a").expect("node").inputs.get(net)
        );
        assert_eq!(
            b.inputs.get(slots.slot("zone").expect("slot")),
            NodeLabel::Absent
        );
    }
}
