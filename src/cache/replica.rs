//! A private copy of the cluster state that catches up incrementally: the
//! standalone scheduler's view (design §7, "standalone cycle view").
//!
//! kube-scheduler's cycle reads a snapshot that `UpdateSnapshot` brings up
//! to date at cycle start by copying only the nodes whose generation moved.
//! [`Replica::sync`] does the same against the shared [`ClusterState`]: under
//! the cache's read lock, for as long as the copy takes (microseconds for the
//! few nodes an assume or a watch event touches), it re-copies each node
//! changed since the last sync, with the pods counted on it; a relist or new
//! zone dimensions cost one full copy. After that the cycle owns its view:
//! the watch loops write to the shared state while the cycle runs, and
//! preemption's dry runs move pods in the replica, not in the state requests
//! read.
//!
//! Node and pod records are shared by `Arc` with the shared state, so a
//! copied node or pod costs a pointer (and the indexes' keys).

use std::sync::Arc;

use crate::cache::ClusterState;
use crate::objects::NodeInfo;

/// The copy and the generation it is synced to.
#[derive(Debug, Default, Clone)]
pub struct Replica {
    state: ClusterState,
    synced: u64,
    /// Every node by name, kept until a node record changes (sorting 5,000
    /// names per attempt is not free).
    by_name: Option<Arc<[Arc<NodeInfo>]>>,
    /// Nodes re-copied by syncs so far (for tests and `/debug`).
    copied_nodes: u64,
    /// Full copies so far.
    full_copies: u64,
}

/// What one [`Replica::sync`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncStats {
    /// Nodes re-copied.
    pub nodes: usize,
    /// Whether the whole state was copied.
    pub full: bool,
}

impl Replica {
    /// Brings the copy up to date with `shared`.
    pub fn sync(&mut self, shared: &ClusterState) -> SyncStats {
        let g = shared.generations();
        let mut stats = SyncStats::default();
        if g.current() == self.synced {
            return stats;
        }
        // A replica that was never synced starts with a full copy too.
        if g.everything() > self.synced || self.synced == 0 {
            self.state = shared.clone();
            self.by_name = None;
            self.synced = g.current();
            self.full_copies += 1;
            stats.full = true;
            return stats;
        }
        if g.objects() > self.synced {
            self.state.copy_objects_from(shared);
        }
        let mut records_changed = false;
        for name in g.nodes_since(self.synced) {
            records_changed |= copy_node(&mut self.state, shared, name);
            stats.nodes += 1;
        }
        if records_changed {
            self.by_name = None;
            // A new node may carry a label value the shared state interned
            // for it; the replica must read that id the same way.
            self.state.copy_label_slots_from(shared);
        }
        self.copied_nodes += stats.nodes as u64;
        self.synced = g.current();
        stats
    }

    /// The view, to read or to dry-run on (callers leave it as they found
    /// it; a change they keep would be overwritten only when its node next
    /// changes in the shared state).
    pub fn state_mut(&mut self) -> &mut ClusterState {
        &mut self.state
    }

    /// Every node of the view, by name.
    pub fn nodes_by_name(&mut self) -> Arc<[Arc<NodeInfo>]> {
        if let Some(n) = &self.by_name {
            return n.clone();
        }
        let mut nodes: Vec<Arc<NodeInfo>> = self.state.nodes().cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let nodes: Arc<[Arc<NodeInfo>]> = nodes.into();
        self.by_name = Some(nodes.clone());
        nodes
    }

    /// The view.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// The shared generation the view reflects.
    pub fn synced(&self) -> u64 {
        self.synced
    }

    /// Nodes re-copied and full copies made so far.
    pub fn copies(&self) -> (u64, u64) {
        (self.copied_nodes, self.full_copies)
    }
}

/// Makes node `name` and the pods counted on it in `view` what they are in
/// `shared`. Pods that left the node go first, then the record, then the
/// pods now on it, so zone counts move under the right labels. Returns
/// whether the node record changed.
fn copy_node(view: &mut ClusterState, shared: &ClusterState, name: &str) -> bool {
    let gone: Vec<(String, String)> = view
        .pods_on(name)
        .filter(|p| {
            shared
                .pod(&p.namespace, &p.name)
                .is_none_or(|s| s.node_name.as_deref() != Some(name))
        })
        .map(|p| (p.namespace.clone(), p.name.clone()))
        .collect();
    for (namespace, pod) in gone {
        view.delete_pod(&namespace, &pod);
    }
    let record_changed = match (shared.node(name), view.node(name)) {
        (Some(n), v) if v.is_none_or(|v| !Arc::ptr_eq(v, n)) => view.apply_shared_node(n.clone()),
        (None, Some(_)) => {
            view.delete_node(name);
            true
        }
        _ => false,
    };
    for p in shared.shared_pods_on(name) {
        let same = view
            .shared_pod(&p.namespace, &p.name)
            .is_some_and(|v| Arc::ptr_eq(v, p));
        if !same {
            view.apply_shared_pod(p.clone());
        }
    }
    record_changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::zone_index::{CountDimension, CountSelector};
    use crate::objects::{DisruptionBudget, PodInfo, Resources};

    fn dim() -> CountDimension {
        CountDimension {
            zone_label: "zone".into(),
            selector: CountSelector::All,
            same_namespace: false,
        }
    }

    fn pod(name: &str, node: &str, cpu: &str) -> PodInfo {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": node,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap()
    }

    /// Everything a plugin can read, in a comparable form.
    fn observed(s: &ClusterState) -> String {
        let mut nodes: Vec<String> = s
            .nodes()
            .map(|n| format!("{}={:?}", n.name, n.labels))
            .collect();
        nodes.sort();
        let mut pods: Vec<String> = s
            .pods()
            .map(|p| format!("{}@{:?}", p.name, p.node_name))
            .collect();
        pods.sort();
        let mut usage: Vec<String> = s
            .nodes()
            .map(|n| {
                let u = s.usage(&n.name).cloned().unwrap_or_default();
                let mut on: Vec<&str> = s.pods_on(&n.name).map(|p| p.name.as_str()).collect();
                on.sort_unstable();
                format!("{}:{}:{}:{on:?}", n.name, u.requested.milli_cpu, u.pods)
            })
            .collect();
        usage.sort();
        let mut zones: Vec<(String, u64)> = s
            .zones()
            .counts(&dim(), &PodInfo::default())
            .map(|c| c.iter().map(|(z, n)| (z.clone(), *n)).collect())
            .unwrap_or_default();
        zones.sort();
        let budgets = s.objects::<DisruptionBudget>().len();
        format!("{nodes:?}\n{pods:?}\n{usage:?}\n{zones:?}\n{budgets}")
    }

    fn node(name: &str, zone: &str) -> NodeInfo {
        NodeInfo {
            allocatable: Resources::from_list([("cpu", "4"), ("pods", "10")]).unwrap(),
            ..NodeInfo::new(name, [("zone", zone)])
        }
    }

    #[test]
    fn incremental_syncs_match_the_shared_state_and_copy_only_what_changed() {
        let mut shared = ClusterState::with_dimensions(&[dim()]);
        shared.apply_node(node("a", "z1"));
        shared.apply_node(node("b", "z2"));
        shared.apply_pod(pod("p", "a", "1"));
        let mut r = Replica::default();
        assert!(r.sync(&shared).full, "the first sync copies everything");
        assert_eq!(observed(r.state()), observed(&shared));
        assert_eq!(r.sync(&shared), SyncStats::default(), "nothing changed");

        // One event per step, as the watches apply them; each sync must
        // leave the replica equal to the shared state.
        type Step = (&'static str, fn(&mut ClusterState));
        let steps: [Step; 9] = [
            ("pod added", |s| {
                let _ = s.apply_pod(pod("q", "b", "1"));
            }),
            ("pod resized", |s| {
                let _ = s.apply_pod(pod("q", "b", "2"));
            }),
            ("node relabelled", |s| {
                let _ = s.apply_node(node("a", "z3"));
            }),
            ("pod deleted", |s| {
                let _ = s.delete_pod("ns", "p");
            }),
            ("pod on an unknown node", |s| {
                let _ = s.apply_pod(pod("r", "c", "1"));
            }),
            ("its node arrives", |s| {
                let _ = s.apply_node(node("c", "z1"));
            }),
            ("node deleted", |s| s.delete_node("b")),
            ("pod moved (forget and assume)", |s| {
                s.delete_pod("ns", "r");
                s.apply_pod(pod("r", "a", "1"));
            }),
            ("budget", |s| {
                s.objects_mut::<DisruptionBudget>()
                    .replace(vec![DisruptionBudget::default()])
            }),
        ];
        for (what, step) in steps {
            step(&mut shared);
            let stats = r.sync(&shared);
            assert!(!stats.full, "{what}: no full copy");
            assert!(stats.nodes <= 2, "{what}: copied {} nodes", stats.nodes);
            assert_eq!(observed(r.state()), observed(&shared), "after {what}");
        }
        let names: Vec<String> = r.nodes_by_name().iter().map(|n| n.name.clone()).collect();
        assert_eq!(names, ["a", "c"]);
        shared.apply_pod(pod("t", "a", "1"));
        r.sync(&shared);
        assert!(r.by_name.is_some(), "a pod change keeps the node list");
        shared.apply_node(node("d", "z1"));
        r.sync(&shared);
        assert_eq!(r.nodes_by_name().len(), 3, "a new node is listed");
        shared.replace_pods(vec![pod("s", "a", "1")]);
        assert!(r.sync(&shared).full, "a relist is copied whole");
        assert_eq!(observed(r.state()), observed(&shared));
    }

    #[test]
    fn copies_share_the_pod_records() {
        let mut shared = ClusterState::default();
        shared.apply_node(node("a", "z1"));
        shared.apply_pod(pod("p", "a", "1"));
        let mut r = Replica::default();
        assert!(r.sync(&shared).full);
        shared.apply_pod(pod("q", "a", "1"));
        assert!(!r.sync(&shared).full);
        for name in ["p", "q"] {
            let (view, stored) = (
                r.state().shared_pod("ns", name),
                shared.shared_pod("ns", name),
            );
            assert!(
                view.zip(stored).is_some_and(|(v, s)| Arc::ptr_eq(v, s)),
                "{name} is copied, not shared"
            );
        }
    }

    #[test]
    fn a_heartbeat_then_an_assume_keeps_the_node_list() {
        let mut shared = ClusterState::with_dimensions(&[dim()]);
        shared.apply_node(node("a", "z1"));
        shared.apply_node(node("b", "z2"));
        let mut r = Replica::default();
        r.sync(&shared);
        let listed = r.nodes_by_name();
        let stored = shared.node("a").unwrap().clone();
        // A status-only update decodes to an equal record in a new allocation.
        assert!(
            !shared.apply_node(node("a", "z1")),
            "nothing placer keeps changed"
        );
        assert!(
            Arc::ptr_eq(&stored, shared.node("a").unwrap()),
            "the stored record stays"
        );
        shared.apply_pod(pod("p", "a", "1"));
        let stats = r.sync(&shared);
        assert_eq!(stats.nodes, 1);
        assert!(
            Arc::ptr_eq(&listed, &r.nodes_by_name()),
            "the node list was rebuilt for an unchanged record"
        );
        assert_eq!(observed(r.state()), observed(&shared));
    }

    #[test]
    fn label_values_interned_for_a_new_node_read_the_same_in_the_replica() {
        let mut shared = ClusterState::default();
        shared.watch_labels(["zone"]);
        shared.apply_node(node("a", "z1"));
        let mut r = Replica::default();
        r.sync(&shared);
        shared.apply_node(node("b", "z9"));
        assert!(!r.sync(&shared).full);
        let id = |s: &ClusterState| {
            let slots = s.label_slots();
            slots.slot("zone").and_then(|slot| slots.id(slot, "z9"))
        };
        assert!(id(&shared).is_some());
        assert_eq!(
            id(r.state()),
            id(&shared),
            "the replica knows the new value"
        );
    }

    /// Every node's index in `s`, as its table and its record say, with the
    /// usage its record reads.
    fn indexes(s: &ClusterState) -> Vec<String> {
        let mut v: Vec<String> = s
            .nodes()
            .map(|n| {
                let (at, _) = s.node_indexed(&n.name).unwrap();
                let cpu = s.usage_of(n).map(|u| u.requested.milli_cpu);
                assert_eq!(s.usage_of(n), s.usage(&n.name), "{}", n.name);
                format!("{}@{at}/{:?}:{cpu:?}", n.name, n.index.get())
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_replica_keeps_the_shared_states_node_indexes() {
        let mut shared = ClusterState::with_dimensions(&[dim()]);
        for (n, cpu) in [("a", "1"), ("b", "2"), ("c", "3")] {
            shared.apply_node(node(n, "z1"));
            shared.apply_pod(pod(&format!("p-{n}"), n, cpu));
        }
        let mut r = Replica::default();
        r.sync(&shared);
        // Each step is synced at once; the syncs visit nodes oldest change
        // first, not in the order of the operations, so a replica handing
        // out its own indexes would give them differently.
        type Step = (&'static str, fn(&mut ClusterState));
        let steps: [Step; 4] = [
            (
                "freed indexes taken while the node holding one still waits",
                |s| {
                    s.delete_node("a");
                    s.delete_node("b");
                    s.apply_node(node("d", "z2"));
                    s.apply_node(node("e", "z2"));
                    // a's pod changes after e took a's index: a is visited last.
                    let _ = s.apply_pod(pod("p-a", "a", "4"));
                },
            ),
            ("a deleted node comes back", |s| {
                let _ = s.apply_node(node("a", "z1"));
            }),
            ("an unchanged record re-added under another index", |s| {
                s.delete_node("c");
                s.delete_node("d");
                let _ = s.apply_node(node("c", "z1"));
                let _ = s.apply_node(node("f", "z2"));
            }),
            ("pods move", |s| {
                let _ = s.delete_pod("ns", "p-c");
                let _ = s.apply_pod(pod("p-f", "f", "5"));
            }),
        ];
        for (what, step) in steps {
            step(&mut shared);
            assert!(!r.sync(&shared).full, "{what}: no full copy");
            assert_eq!(observed(r.state()), observed(&shared), "after {what}");
            let expected = indexes(&shared);
            assert!(
                expected.iter().all(|e| !e.contains("/None")),
                "{what}: {expected:?}"
            );
            assert_eq!(indexes(r.state()), expected, "after {what}");
        }
        let f = r.state().node("f").unwrap().clone();
        assert_eq!(f.index.get(), shared.node("f").unwrap().index.get());
        // Preemption's dry runs move pods in the replica: the record reads
        // the moved usage there, the shared state keeps its own.
        r.state_mut().delete_pod("ns", "p-f");
        assert!(r.state().usage_of(&f).is_none());
        assert_eq!(
            shared.usage_of(&f).map(|u| u.requested.milli_cpu),
            Some(5000)
        );
        r.state_mut().apply_pod(pod("p-f", "f", "5"));
        assert_eq!(indexes(r.state()), indexes(&shared));
    }

    #[test]
    fn dry_runs_on_the_replica_leave_the_shared_state_alone() {
        let mut shared = ClusterState::default();
        shared.apply_node(node("a", "z1"));
        shared.apply_pod(pod("p", "a", "1"));
        let mut r = Replica::default();
        r.sync(&shared);
        r.state_mut().delete_pod("ns", "p");
        assert!(shared.pod("ns", "p").is_some());
        r.state_mut().apply_pod(pod("p", "a", "1"));
        assert_eq!(observed(r.state()), observed(&shared));
    }
}
