//! Pods that preemption nominated to a node and that wait for their victims
//! to go (kube-scheduler's nominator). While they wait, pods of lower or equal
//! priority must not take the room they made.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::objects::PodInfo;

/// Nominated pods by `namespace/name`, each with `node_name` set to its node.
#[derive(Debug, Default)]
pub struct Nominator {
    pods: Mutex<HashMap<String, PodInfo>>,
}

impl Nominator {
    /// Records that `pod` waits for `node`.
    pub fn nominate(&self, pod: &PodInfo, node: &str) {
        let mut p = pod.clone();
        p.node_name = Some(node.to_string());
        self.pods.lock().insert(pod.key(), p);
    }

    /// Forgets the nomination of `key` (bound, deleted, or cleared); true if there was one.
    pub fn remove(&self, key: &str) -> bool {
        self.pods.lock().remove(key).is_some()
    }

    /// The node `pod` is nominated to.
    pub fn node_of(&self, pod: &PodInfo) -> Option<String> {
        self.pods
            .lock()
            .get(&pod.key())
            .and_then(|p| p.node_name.clone())
    }

    /// The other nominated pods `pod` must leave room for: those of the same
    /// or higher priority.
    pub fn ahead_of(&self, pod: &PodInfo) -> Vec<PodInfo> {
        let key = pod.key();
        self.pods
            .lock()
            .iter()
            .filter(|(k, p)| **k != key && p.priority >= pod.priority)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Removes and returns the pods nominated to `node` with a priority
    /// below `priority`: a preemption there may leave them no room.
    pub fn take_lower(&self, node: &str, priority: i32) -> Vec<PodInfo> {
        let mut pods = self.pods.lock();
        let keys: Vec<String> = pods
            .iter()
            .filter(|(_, p)| p.node_name.as_deref() == Some(node) && p.priority < priority)
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| pods.remove(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, priority: i32) -> PodInfo {
        PodInfo {
            name: name.into(),
            namespace: "ns".into(),
            priority,
            ..Default::default()
        }
    }

    #[test]
    fn pods_leave_room_only_for_equal_or_higher_priority() {
        let n = Nominator::default();
        n.nominate(&pod("high", 100), "a");
        n.nominate(&pod("low", 1), "a");
        let names = |v: Vec<PodInfo>| {
            let mut v: Vec<String> = v.into_iter().map(|p| p.name).collect();
            v.sort();
            v
        };
        assert_eq!(names(n.ahead_of(&pod("mid", 50))), ["high"]);
        assert_eq!(names(n.ahead_of(&pod("high", 100))), Vec::<String>::new());
        assert_eq!(names(n.ahead_of(&pod("other", 1))), ["high", "low"]);
        assert_eq!(n.node_of(&pod("low", 1)).as_deref(), Some("a"));
        assert_eq!(
            n.ahead_of(&pod("x", 0))[0].node_name.as_deref(),
            Some("a"),
            "nominated pods carry their node"
        );
    }

    #[test]
    fn a_preemption_takes_lower_nominations_on_its_node() {
        let n = Nominator::default();
        n.nominate(&pod("low", 1), "a");
        n.nominate(&pod("elsewhere", 1), "b");
        n.nominate(&pod("peer", 100), "a");
        let taken = n.take_lower("a", 100);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].name, "low");
        assert!(n.node_of(&pod("low", 1)).is_none());
        assert!(n.node_of(&pod("elsewhere", 1)).is_some());
        assert!(n.remove("ns/peer"));
        assert!(!n.remove("ns/peer"));
    }
}
