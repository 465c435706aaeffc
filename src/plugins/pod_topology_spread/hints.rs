//! PodTopologySpread's queueing hints (kube-scheduler's `EventsToRegister`
//! and `isSchedulableAfter*` in `plugin.go`), read from the pod's hard
//! constraints as written, without building them (no allocation):
//!
//! - AssignedPod Add|UpdatePodLabel|Delete: a placed pod in the pod's
//!   namespace that a constraint selects arriving or going, or whose label
//!   change makes a constraint select it or stop selecting it;
//! - TargetPod UpdatePodToleration|UpdatePodLabel: the pod gaining a
//!   toleration while a constraint honors node taints, or its label change
//!   turning a constraint's selection of it;
//! - Node Add|Delete|UpdateNodeLabel|UpdateNodeTaint: a node with every
//!   topology key added or deleted, gaining or losing one, or, with every
//!   key, moving to another domain or changing taints.
//!
//! A pod with the default constraints is spread over the pods its Services
//! and controller select, which the hints cannot see: pod events queue it
//! whenever they concern its namespace (node events only read topology keys).

use super::{DO_NOT_SCHEDULE, PodTopologySpread, honors, merged_selects};
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{EnqueueExtensions, EventHint, queue_if};
use crate::objects::{NodeInfo, PodInfo};
use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use std::collections::BTreeMap;
use std::sync::Arc;

impl EnqueueExtensions for PodTopologySpread {
    fn events_to_register(&self) -> Vec<EventHint> {
        let plugin = Arc::new(self.clone());
        let (assigned, target, node) = (plugin.clone(), plugin.clone(), plugin);
        vec![
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
                move |pod, change| assigned.assigned_pod_change(pod, change),
            ),
            EventHint::when(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_TOLERATION | ActionType::UPDATE_POD_LABEL,
                move |pod, change| target.own_change(pod, change),
            ),
            EventHint::when(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::DELETE
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_TAINT,
                move |pod, change| node.node_change(pod, change),
            ),
        ]
    }
}

impl PodTopologySpread {
    /// The pod's hard constraints as written (its own, or the defaults).
    fn hard<'a>(&'a self, pod: &'a PodInfo) -> impl Iterator<Item = &'a TopologySpreadConstraint> {
        self.written(pod)
            .iter()
            .filter(|c| c.when_unsatisfiable == DO_NOT_SCHEDULE)
    }

    /// `isSchedulableAfterAssignedPodChange`.
    fn assigned_pod_change(&self, pod: &PodInfo, change: &Change) -> QueueingHint {
        let Some((before, after)) = change.pods() else {
            return QueueingHint::Queue;
        };
        if [before, after]
            .into_iter()
            .flatten()
            .any(|p| !counts_for(p, pod))
        {
            return QueueingHint::Skip;
        }
        match (before, after) {
            (Some(b), Some(a)) => self.label_change(pod, &b.labels, &a.labels),
            (None, Some(p)) | (Some(p), None) => queue_if(self.any_selects(pod, &p.labels)),
            (None, None) => QueueingHint::Queue,
        }
    }

    /// `isSchedulableAfterTargetPodChange`: the pod is the updated one.
    fn own_change(&self, pod: &PodInfo, change: &Change) -> QueueingHint {
        let Some((Some(before), Some(after))) = change.pods() else {
            return QueueingHint::Queue;
        };
        if before.spec.tolerations != after.spec.tolerations
            && self
                .hard(pod)
                .any(|c| honors(c.node_taints_policy.as_deref(), false))
        {
            return QueueingHint::Queue;
        }
        self.label_change(pod, &before.labels, &after.labels)
    }

    /// `isSchedulableAfterPodLabelChange`: some constraint selects one of
    /// the label sets and not the other.
    fn label_change(
        &self,
        pod: &PodInfo,
        before: &BTreeMap<String, String>,
        after: &BTreeMap<String, String>,
    ) -> QueueingHint {
        if before == after {
            return QueueingHint::Skip;
        }
        if Self::defaulted(pod) {
            return QueueingHint::Queue;
        }
        queue_if(
            self.hard(pod)
                .any(|c| selects(pod, c, before) != selects(pod, c, after)),
        )
    }

    /// `podLabelsMatchSpreadConstraints` (always for default constraints,
    /// whose selectors the hints cannot see).
    fn any_selects(&self, pod: &PodInfo, labels: &BTreeMap<String, String>) -> bool {
        Self::defaulted(pod) || self.hard(pod).any(|c| selects(pod, c, labels))
    }

    /// `isSchedulableAfterNodeChange`.
    fn node_change(&self, pod: &PodInfo, change: &Change) -> QueueingHint {
        let has_keys = |n: &NodeInfo| {
            self.hard(pod)
                .all(|c| n.labels.contains_key(&c.topology_key))
        };
        match change.nodes() {
            Some((Some(before), Some(after))) => {
                let (was, is) = (has_keys(before), has_keys(after));
                let moved = || {
                    self.hard(pod)
                        .any(|c| before.label(&c.topology_key) != after.label(&c.topology_key))
                };
                queue_if(was != is || (is && (moved() || before.taints != after.taints)))
            }
            Some((None, Some(added))) => queue_if(has_keys(added)),
            Some((Some(deleted), None)) => queue_if(has_keys(deleted)),
            _ => QueueingHint::Queue,
        }
    }
}

/// `involvedInTopologySpreading`: `other` is placed (bound or nominated)
/// in `pod`'s namespace.
fn counts_for(other: &PodInfo, pod: &PodInfo) -> bool {
    let placed = other.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || other.preemption.nominated_node.is_some();
    placed && other.namespace == pod.namespace
}

/// Whether constraint `c` of `pod` selects a pod with `labels`: its
/// `labelSelector` merged with `pod`'s values for `matchLabelKeys`.
fn selects(pod: &PodInfo, c: &TopologySpreadConstraint, labels: &BTreeMap<String, String>) -> bool {
    let pairs = c
        .match_label_keys
        .iter()
        .flatten()
        .filter_map(|k| pod.labels.get_key_value(k));
    merged_selects(c.label_selector.as_ref(), pairs, labels)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plugins::PodTopologySpreadArgs;
    use crate::plugins::test_support::{
        PodBuilder, hint, incoming, node_added, node_deleted, node_updated, pod_event,
        target_pod_updated,
    };
    use k8s_openapi::api::core::v1::Taint;

    /// kube-scheduler's test plugin: `List` defaulting without defaults.
    fn plugin() -> PodTopologySpread {
        PodTopologySpread::new(&PodTopologySpreadArgs {
            defaulting_type: super::super::DefaultingType::List,
            default_constraints: Vec::new(),
        })
    }

    /// A hard constraint on `key` selecting pods that carry label `selects`.
    fn hard(key: &str, selects: &str) -> serde_json::Value {
        json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchExpressions": [{"key": selects, "operator": "Exists"}]}})
    }

    /// The waiting pod `ns/incoming`, labelled `foo`, with `constraints`.
    fn waiting(constraints: serde_json::Value) -> PodInfo {
        incoming(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": constraints}),
        )
    }

    fn node(labels: &[(&str, &str)], taint: Option<&str>) -> NodeInfo {
        NodeInfo {
            taints: taint
                .map(|key| Taint {
                    key: key.into(),
                    value: Some("bbb".into()),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..NodeInfo::new("node-a", labels.iter().copied())
        }
    }

    /// Cases of kube-scheduler's `Test_isSchedulableAfterNodeChange` (`plugin_test.go`).
    #[test]
    fn node_hints_follow_the_topology_keys() {
        let (pl, zone) = (plugin(), waiting(json!([hard("zone", "foo")])));
        let on = |p: &PodInfo, event| hint(&pl, p, event);
        let node = |l: &[(&str, &str)]| node(l, None);
        let relabel = |a: &[(&str, &str)], b: &[(&str, &str)]| node_updated(node(a), node(b));
        assert_eq!(
            on(&zone, relabel(&[("zone", "zone1")], &[("zone", "zone2")])),
            QueueingHint::Queue
        );
        assert_eq!(
            on(&zone, relabel(&[("foo", "bar1")], &[("foo", "bar2")])),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&zone, node_added(node(&[("foo", "bar")]))),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&zone, node_added(node(&[("zone", "zone1")]))),
            QueueingHint::Queue
        );
        assert_eq!(
            on(&zone, node_deleted(node(&[("foo", "bar")]))),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&zone, node_deleted(node(&[("zone", "zone1")]))),
            QueueingHint::Queue
        );

        let both = waiting(json!([hard("zone", "foo"), hard("node", "foo")]));
        let zn = [("zone", "zone1"), ("node", "node1")];
        assert_eq!(
            on(
                &both,
                relabel(&[("zone", "zone1"), ("node", "node1"), ("foo", "bar")], &zn)
            ),
            QueueingHint::Skip,
            "unrelated label"
        );
        assert_eq!(
            on(&both, node_added(node(&[("zone", "zone1")]))),
            QueueingHint::Skip
        );
        assert_eq!(on(&both, node_added(node(&zn))), QueueingHint::Queue);
        assert_eq!(
            on(&both, relabel(&zn, &[("zone", "zone1"), ("node", "node2")])),
            QueueingHint::Queue,
            "moved to another domain"
        );
        let tainted = |l: &[(&str, &str)], t| self::node(l, Some(t));
        assert_eq!(
            on(
                &both,
                node_updated(tainted(&zn, "aaa"), tainted(&zn, "ccc"))
            ),
            QueueingHint::Queue
        );
        let one = [("node", "node1")];
        assert_eq!(
            on(
                &both,
                node_updated(tainted(&one, "aaa"), tainted(&one, "ccc"))
            ),
            QueueingHint::Skip,
            "taints of a node outside the topology"
        );
    }

    /// Cases of `Test_isSchedulableAfterAssignedPodChange`.
    #[test]
    fn assigned_pod_hints_follow_the_selectors() {
        let (pl, zone) = (plugin(), waiting(json!([hard("zone", "foo")])));
        let other = |node: Option<&str>, labels: &[(&str, &str)]| {
            PodBuilder::new("p2").on(node).labels(labels).build()
        };
        let event = |b, a| hint(&pl, &zone, pod_event(EventResource::AssignedPod, b, a));
        let foo = [("foo", "")];
        assert_eq!(
            event(None, Some(other(Some("n"), &foo))),
            QueueingHint::Queue
        );
        assert_eq!(
            event(None, Some(other(None, &foo))),
            QueueingHint::Skip,
            "unscheduled"
        );
        assert_eq!(
            event(Some(other(None, &[("bar", "")])), Some(other(None, &foo))),
            QueueingHint::Skip
        );
        assert_eq!(event(Some(other(None, &foo)), None), QueueingHint::Skip);
        let elsewhere = PodBuilder::new("p2")
            .namespace("other")
            .on("n")
            .labels(&foo)
            .build();
        assert_eq!(
            event(None, Some(elsewhere)),
            QueueingHint::Skip,
            "other namespace"
        );
        assert_eq!(
            event(None, Some(other(Some("n"), &[("bar", "")]))),
            QueueingHint::Skip
        );
        assert_eq!(
            event(Some(other(Some("n"), &foo)), None),
            QueueingHint::Queue
        );
        let mut nominated = other(None, &[("bar", "")]);
        nominated.preemption.nominated_node = Some("n".into());
        assert_eq!(event(Some(nominated.clone()), None), QueueingHint::Skip);
        nominated.labels = crate::plugins::test_support::labels(&foo).into();
        assert_eq!(event(Some(nominated), None), QueueingHint::Queue);
        assert_eq!(
            event(Some(other(Some("n"), &[("bar", "")])), None),
            QueueingHint::Skip
        );
        let relabel = |b: &[(&str, &str)], a: &[(&str, &str)]| {
            event(Some(other(Some("n"), b)), Some(other(Some("n"), a)))
        };
        assert_eq!(
            relabel(
                &[("foo", ""), ("bar", "bar1")],
                &[("foo", ""), ("bar", "bar2")]
            ),
            QueueingHint::Skip
        );
        assert_eq!(relabel(&[], &foo), QueueingHint::Queue);
        assert_eq!(relabel(&foo, &[]), QueueingHint::Queue);
        assert_eq!(
            relabel(&[("foo", "foo1")], &[("foo", "foo2")]),
            QueueingHint::Skip
        );

        let both = waiting(json!([hard("zone", "foo"), hard("node", "bar")]));
        let relabel = |b: &[(&str, &str)], a: &[(&str, &str)]| {
            let e = pod_event(
                EventResource::AssignedPod,
                Some(other(Some("n"), b)),
                Some(other(Some("n"), a)),
            );
            hint(&pl, &both, e)
        };
        assert_eq!(
            relabel(&foo, &[("foo", ""), ("bar", "bar2")]),
            QueueingHint::Queue
        );
        assert_eq!(
            relabel(&foo, &[("foo", ""), ("baz", "")]),
            QueueingHint::Skip
        );
        assert_eq!(
            relabel(&[("foo", ""), ("bar", "")], &[("foo", ""), ("bar", "bar2")]),
            QueueingHint::Skip
        );
    }

    /// Cases of `Test_isSchedulableAfterTargetPodChange`.
    #[test]
    fn own_changes_queue_the_pod_when_they_can_change_the_spreading() {
        let pl = plugin();
        let mut honor = hard("zone", "foo");
        honor["nodeTaintsPolicy"] = json!("Honor");
        let mut ignore = hard("zone", "foo");
        ignore["nodeTaintsPolicy"] = json!("Ignore");
        for (first, expected) in [
            (honor, QueueingHint::Queue),
            (ignore.clone(), QueueingHint::Skip),
        ] {
            let before = waiting(json!([first, hard("node", "bar")]));
            let mut after = before.clone();
            let mut spec = (*after.spec).clone();
            spec.tolerations = serde_json::from_value(
                json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
            )
            .unwrap();
            after.spec = Arc::new(spec);
            assert_eq!(
                hint(&pl, &after, target_pod_updated(before, after.clone())),
                expected
            );
        }
        let unlabelled = incoming(
            "ns",
            &[],
            json!({"topologySpreadConstraints": [ignore.clone(), hard("node", "bar")]}),
        );
        let labelled = |l| {
            incoming(
                "ns",
                &[(l, "")],
                json!({"topologySpreadConstraints": [ignore.clone(), hard("node", "bar")]}),
            )
        };
        let relabelled = |after: PodInfo| {
            hint(
                &pl,
                &after,
                target_pod_updated(unlabelled.clone(), after.clone()),
            )
        };
        assert_eq!(relabelled(labelled("foo")), QueueingHint::Queue);
        assert_eq!(relabelled(labelled("unrelated")), QueueingHint::Skip);
    }
}
