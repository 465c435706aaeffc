//! Re-checking parked pods after the cache changed: which of them would now
//! pass `/filter` on some node, so kube-scheduler should retry them.
//!
//! A node change (record or counted pods) re-checks every parked pod against
//! that node only; a relist, a policy reload or a pod parked while a change
//! was being applied re-checks against every node. A node counts as passing
//! when the pod's profile accepts it and so do kube-scheduler's node-local
//! filters ([`gate`]): without those, a node in another pool (one the pod's
//! `nodeSelector` excludes) gaining a label would prompt pods kube-scheduler
//! would never send there.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::cache::{Cache, Changes, ClusterState};
use crate::framework::{CycleState, Framework, WeightedPlugin};
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::PluginArgs;
use crate::plugins::{node_affinity, node_name, node_unschedulable, taint_toleration};
use crate::policy::CompiledPolicy;

use super::parked::{Parked, ParkedPod};

/// kube-scheduler's node-local filters that placer also implements; a node
/// they reject is never sent to the extender, so it cannot free a pod.
pub fn gate() -> Framework {
    let plugins = [
        node_unschedulable::NAME,
        node_name::NAME,
        taint_toleration::NAME,
        node_affinity::NAME,
    ]
    .into_iter()
    .filter_map(PluginArgs::default_for)
    .map(|args| WeightedPlugin {
        plugin: args.build(),
        weight: 1,
    })
    .collect();
    Framework::new("retry-gate", plugins)
}

/// What one re-check decided.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Entries that would now pass somewhere: prompt them.
    pub freed: Vec<Arc<ParkedPod>>,
    /// Entries whose pod is bound by now: forget them.
    pub bound: Vec<Arc<ParkedPod>>,
}

/// Re-checks `entries` after `changes`, on a fresh snapshot per pod: each
/// sees every change taken so far, and none is held for a whole re-check
/// (a snapshot still read two publishes later costs the publisher a copy).
pub fn recheck(
    entries: &[Arc<ParkedPod>],
    changes: &Changes,
    policy: &CompiledPolicy,
    gate: &Framework,
    cache: &Cache,
) -> Outcome {
    let mut out = Outcome::default();
    for entry in entries {
        let snapshot = cache.snapshot();
        let cluster = snapshot.state();
        if is_bound(&entry.pod, cluster) {
            out.bound.push(entry.clone());
            continue;
        }
        let Some(framework) = policy.profile_for_extender(&entry.pod.scheduler_name) else {
            continue;
        };
        // Cleared once checked: the full look covers what it may have missed.
        let late = entry.late.swap(false, Ordering::AcqRel);
        let freed = if changes.everything || late {
            passes_any(framework, gate, &entry.pod, cluster.nodes(), cluster)
        } else {
            let nodes = changes.nodes.iter().filter_map(|n| cluster.node(n));
            passes_any(framework, gate, &entry.pod, nodes, cluster)
        };
        if freed {
            out.freed.push(entry.clone());
        }
    }
    out
}

/// Whether `pod` passes both `framework` and `gate` on any of `nodes`.
fn passes_any<'a>(
    framework: &Framework,
    gate: &Framework,
    pod: &PodInfo,
    mut nodes: impl Iterator<Item = &'a Arc<NodeInfo>>,
    cluster: &ClusterState,
) -> bool {
    let mut state = CycleState::new();
    let pre = framework.pre_filter_unobserved(&mut state, pod, cluster);
    if pre.rejection.is_some() {
        return false;
    }
    let mut gate_state = CycleState::new();
    let gate_pre = gate.pre_filter_unobserved(&mut gate_state, pod, cluster);
    nodes.any(|n| {
        gate.filter_node(&gate_state, &gate_pre, pod, n, cluster)
            .is_none()
            && framework
                .filter_node(&state, &pre, pod, n, cluster)
                .is_none()
    })
}

/// Whether the cache holds `pod` as assigned (same UID): kube-scheduler
/// placed it, so there is nothing left to prompt.
fn is_bound(pod: &PodInfo, cluster: &ClusterState) -> bool {
    cluster
        .pod(&pod.namespace, &pod.name)
        .is_some_and(|p| p.uid == pod.uid)
}

/// Forgets the entries of bound pods and hands the freed ones to `freed`,
/// removing them from `parked` first so each is prompted once per parking
/// (an entry re-parked meanwhile is newer than the re-check: kept).
pub fn settle(parked: &Parked, outcome: &Outcome, mut freed: impl FnMut(&ParkedPod)) {
    for entry in &outcome.bound {
        parked.unpark_if_same(entry);
    }
    for entry in &outcome.freed {
        if parked.unpark_if_same(entry) {
            freed(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    use super::*;
    use crate::policy;

    const POLICY: &str = r#"
apiVersion: placer/v1alpha1
kind: Policy
extender: { defaultProfile: p }
profiles:
  - schedulerName: p
    plugins:
      - name: CapabilityFilter
        args: { rules: [{ podAnnotation: hw, nodeLabel: hw, reason: no hw }] }
"#;

    fn compiled() -> CompiledPolicy {
        CompiledPolicy::new(policy::parse(POLICY, "test").unwrap())
    }

    fn parked(uid: &str, selector: Option<(&str, &str)>) -> Arc<ParkedPod> {
        let mut pod = serde_json::json!({
            "metadata": {"name": uid, "namespace": "ns", "uid": uid, "annotations": {"hw": "true"}},
            "spec": {"containers": [{"name": "c"}]}
        });
        if let Some((k, v)) = selector {
            pod["spec"]["nodeSelector"] = serde_json::json!({ k: v });
        }
        Arc::new(ParkedPod {
            pod: serde_json::from_value(pod).unwrap(),
            plugins: vec!["CapabilityFilter"],
            nodes: 1,
            at: Instant::now(),
            seen_seq: 0,
            late: AtomicBool::new(false),
        })
    }

    fn changed(nodes: &[&str]) -> Changes {
        Changes {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            everything: false,
        }
    }

    fn freed(outcome: &Outcome) -> Vec<String> {
        outcome.freed.iter().map(|e| e.pod.name.clone()).collect()
    }

    #[test]
    fn a_changed_node_frees_only_the_pods_it_now_fits() {
        let cache = Cache::from_state(ClusterState::default());
        cache
            .write()
            .apply_node(NodeInfo::new("n1", [("pool", "a")]));
        cache
            .write()
            .apply_node(NodeInfo::new("n2", [("pool", "b")]));
        let (policy, gate) = (compiled(), gate());
        let entries = [
            parked("any", None),
            parked("pool-a", Some(("pool", "a"))),
            parked("pool-b", Some(("pool", "b"))),
        ];
        let none = recheck(&entries, &changed(&["n1"]), &policy, &gate, &cache);
        assert!(none.freed.is_empty(), "n1 still lacks the label");

        cache
            .write()
            .apply_node(NodeInfo::new("n1", [("pool", "a"), ("hw", "true")]));
        let out = recheck(&entries, &changed(&["n1"]), &policy, &gate, &cache);
        assert_eq!(
            freed(&out),
            ["any", "pool-a"],
            "pool-b's nodeSelector excludes n1: kube-scheduler would not send it"
        );
        let out = recheck(&entries, &changed(&["n2"]), &policy, &gate, &cache);
        assert!(out.freed.is_empty(), "only the changed node is looked at");
        let all = Changes {
            everything: true,
            ..Changes::default()
        };
        assert_eq!(
            freed(&recheck(&entries, &all, &policy, &gate, &cache)),
            ["any", "pool-a"]
        );
    }

    #[test]
    fn late_entries_get_one_full_look_and_bound_pods_are_dropped() {
        let cache = Cache::from_state(ClusterState::default());
        cache
            .write()
            .apply_node(NodeInfo::new("n1", [("hw", "true")]));
        let (policy, gate) = (compiled(), gate());
        let late = parked("late", None);
        late.late.store(true, Ordering::Release);
        let out = recheck(
            std::slice::from_ref(&late),
            &Changes::default(),
            &policy,
            &gate,
            &cache,
        );
        assert_eq!(freed(&out), ["late"]);
        let out = recheck(
            std::slice::from_ref(&late),
            &Changes::default(),
            &policy,
            &gate,
            &cache,
        );
        assert!(out.freed.is_empty(), "the full look happens once");

        let mut bound = late.pod.clone();
        bound.node_name = Some("n1".into());
        cache.write().apply_pod(bound);
        let out = recheck(
            std::slice::from_ref(&late),
            &changed(&["n1"]),
            &policy,
            &gate,
            &cache,
        );
        assert_eq!(out.bound.len(), 1);
        assert!(out.freed.is_empty());

        let registry = Parked::new(10, std::time::Duration::from_secs(60));
        let mut prompted = Vec::new();
        let entry = ParkedPod {
            pod: late.pod.clone(),
            plugins: vec![],
            nodes: 1,
            at: Instant::now(),
            seen_seq: 0,
            late: AtomicBool::new(false),
        };
        registry.park(entry);
        let snapshot = registry.snapshot(Instant::now());
        let outcome = Outcome {
            freed: snapshot.clone(),
            bound: vec![],
        };
        settle(&registry, &outcome, |e| prompted.push(e.pod.name.clone()));
        settle(&registry, &outcome, |e| prompted.push(e.pod.name.clone()));
        assert_eq!(prompted, ["late"], "prompted once per parking");
        assert!(registry.is_empty());
    }
}
