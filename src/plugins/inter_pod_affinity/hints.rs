//! InterPodAffinity's queueing hints (kube-scheduler's `EventsToRegister`
//! and `isSchedulableAfter*` in `plugin.go`), on the pod's required terms
//! with the filter's own term matching:
//!
//! - AssignedPod Add|UpdatePodLabel|Delete: a placed pod arriving that
//!   matches every affinity term; one relabelled into matching them, or out
//!   of matching an anti-affinity term; one going that matched an
//!   anti-affinity term, or whose own anti-affinity matched the pod;
//! - TargetPod UpdatePodLabel: always (another pod's anti-affinity may have
//!   matched the old labels);
//! - Node Add|UpdateNodeLabel: a node gaining an affinity term's topology
//!   key or moving to another of its domains; any node added when the pod
//!   has anti-affinity, or one losing an anti-affinity term's key or
//!   moving to another of its domains.
//!
//! Hints see no namespace labels: a term whose non-empty
//! `namespaceSelector` decides is taken to match when that queues the pod.

use std::sync::LazyLock;

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::{InterPodAffinity, TermMatch, Terms, term_matches};
use crate::cache::Objects;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{EnqueueExtensions, EventHint, queue_if};
use crate::objects::PodInfo;
use crate::objects::namespace::NamespaceInfo;

/// Namespace labels as the hints know them: not at all.
static UNKNOWN_NAMESPACES: LazyLock<Objects<NamespaceInfo>> = LazyLock::new(Objects::default);

impl EnqueueExtensions for InterPodAffinity {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
                assigned_pod_change,
            ),
            EventHint::always(EventResource::TargetPod, ActionType::UPDATE_POD_LABEL),
            EventHint::when(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                node_change,
            ),
        ]
    }
}

impl TermMatch {
    /// It may match.
    fn may(self) -> bool {
        self != TermMatch::No
    }

    /// It may not match.
    fn may_not(self) -> bool {
        self != TermMatch::Yes
    }
}

/// `podMatchesAllAffinityTerms`: `terms` of a pod in `owner_ns` all select
/// `target` (no terms: no).
fn all_select(terms: &[PodAffinityTerm], owner_ns: &str, target: &PodInfo) -> TermMatch {
    if terms.is_empty() {
        return TermMatch::No;
    }
    let mut all = TermMatch::Yes;
    for t in terms {
        match term_matches(t, owner_ns, target, &UNKNOWN_NAMESPACES) {
            TermMatch::No => return TermMatch::No,
            TermMatch::Unknown => all = TermMatch::Unknown,
            TermMatch::Yes => {}
        }
    }
    all
}

/// `podMatchesAnyAffinityTerms`: one of `terms` selects `target`.
fn any_selects(terms: &[PodAffinityTerm], owner_ns: &str, target: &PodInfo) -> TermMatch {
    let mut any = TermMatch::No;
    for t in terms {
        match term_matches(t, owner_ns, target, &UNKNOWN_NAMESPACES) {
            TermMatch::Yes => return TermMatch::Yes,
            TermMatch::Unknown => any = TermMatch::Unknown,
            TermMatch::No => {}
        }
    }
    any
}

/// `isSchedulableAfterAssignedPodChange`.
fn assigned_pod_change(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((before, after)) = change.pods() else {
        return QueueingHint::Queue;
    };
    let placed = |p: &PodInfo| {
        p.node_name.as_deref().is_some_and(|n| !n.is_empty())
            || p.preemption.nominated_node.is_some()
    };
    if [before, after].into_iter().flatten().any(|p| !placed(p)) {
        return QueueingHint::Skip;
    }
    let terms = Terms::of(pod);
    let ns = pod.namespace.as_str();
    let (affinity, anti) = (terms.required_affinity, terms.required_anti);
    match (before, after) {
        (Some(b), Some(a)) => queue_if(
            (all_select(affinity, ns, b).may_not() && all_select(affinity, ns, a).may())
                || (any_selects(anti, ns, b).may() && any_selects(anti, ns, a).may_not()),
        ),
        (None, Some(added)) => queue_if(all_select(affinity, ns, added).may()),
        (Some(deleted), None) => queue_if(
            any_selects(anti, ns, deleted).may()
                || any_selects(Terms::of(deleted).required_anti, &deleted.namespace, pod).may(),
        ),
        (None, None) => QueueingHint::Queue,
    }
}

/// `isSchedulableAfterNodeChange`.
fn node_change(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((before, Some(after))) = change.nodes() else {
        return QueueingHint::Queue;
    };
    let terms = Terms::of(pod);
    fn key_of(t: &PodAffinityTerm) -> &str {
        t.topology_key.as_str()
    }
    let Some(before) = before else {
        let affinity_key = terms
            .required_affinity
            .iter()
            .any(|t| after.labels.contains_key(key_of(t)));
        return queue_if(affinity_key || !terms.required_anti.is_empty());
    };
    // Affinity: the key gained or its domain changed; anti-affinity: the
    // key lost or its domain changed.
    let affinity = terms
        .required_affinity
        .iter()
        .map(key_of)
        .any(|k| after.label(k).is_some() && before.label(k) != after.label(k));
    let anti = terms
        .required_anti
        .iter()
        .map(key_of)
        .any(|k| before.label(k).is_some() && before.label(k) != after.label(k));
    queue_if(affinity || anti)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::plugins::InterPodAffinityArgs;
    use crate::plugins::test_support::{
        PodBuilder, hint, incoming, node_added, node_updated, pod_event, target_pod_updated,
    };

    fn plugin() -> InterPodAffinity {
        InterPodAffinity::new(&InterPodAffinityArgs::default())
    }

    /// A required term on `topology` selecting `key In values` (or `Exists`
    /// without values).
    fn term(key: &str, topology: &str, values: &[&str]) -> Value {
        let expr = if values.is_empty() {
            json!({"key": key, "operator": "Exists"})
        } else {
            json!({"key": key, "operator": "In", "values": values})
        };
        json!({"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topology})
    }

    /// A pending pod with `labels` and these required (anti-)affinity terms.
    fn waiting(labels: &[(&str, &str)], affinity: &[Value], anti: &[Value]) -> PodInfo {
        incoming("default", labels, required(affinity, anti))
    }

    fn required(affinity: &[Value], anti: &[Value]) -> Value {
        json!({"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}}})
    }

    /// Another pod in the same namespace, bound to `node` (or pending).
    fn other(node: Option<&str>, labels: &[(&str, &str)]) -> PodInfo {
        PodBuilder::new("other")
            .namespace("default")
            .on(node)
            .labels(labels)
            .build()
    }

    fn assigned(pod: &PodInfo, before: Option<PodInfo>, after: Option<PodInfo>) -> QueueingHint {
        hint(
            &plugin(),
            pod,
            pod_event(EventResource::AssignedPod, before, after),
        )
    }

    /// Cases of kube-scheduler's `Test_isSchedulableAfterAssignedPodChange` (`plugin_test.go`).
    #[test]
    fn assigned_pod_hints_follow_the_terms() {
        let affine = waiting(
            &[],
            &[term("service", "region", &["securityscan", "value2"])],
            &[],
        );
        let scan = [("service", "securityscan")];
        let n = Some("fake-node");
        assert_eq!(
            assigned(&affine, None, Some(other(n, &scan))),
            QueueingHint::Queue
        );
        assert_eq!(
            assigned(&affine, None, Some(other(None, &scan))),
            QueueingHint::Skip
        );
        assert_eq!(
            assigned(&affine, None, Some(other(n, &[("aaa", "a")]))),
            QueueingHint::Skip
        );
        let relabel = |p: &PodInfo, b: &[(&str, &str)], a: &[(&str, &str)]| {
            assigned(p, Some(other(n, b)), Some(other(n, a)))
        };
        assert_eq!(
            relabel(&affine, &[("aaa", "a")], &scan),
            QueueingHint::Queue
        );
        assert_eq!(
            relabel(&affine, &[("service", "value2")], &scan),
            QueueingHint::Skip
        );
        assert_eq!(
            assigned(
                &affine,
                Some(other(None, &[("aaa", "a")])),
                Some(other(None, &scan))
            ),
            QueueingHint::Skip
        );
        assert_eq!(relabel(&affine, &scan, &[("aaa", "a")]), QueueingHint::Skip);
        let two = waiting(
            &[],
            &[term("aaa", "hostname", &[]), term("bbb", "hostname", &[])],
            &[],
        );
        assert_eq!(relabel(&two, &[("aaa", "a")], &scan), QueueingHint::Skip);
        assert_eq!(
            relabel(&two, &[("aaa", "a")], &[("aaa", ""), ("bbb", "")]),
            QueueingHint::Queue
        );

        let hostile = waiting(
            &[],
            &[],
            &[term("service", "region", &["securityscan", "value2"])],
        );
        assert_eq!(
            relabel(&hostile, &scan, &[("service", "aaaa")]),
            QueueingHint::Queue
        );
        assert_eq!(
            relabel(&hostile, &[("service", "bbb")], &scan),
            QueueingHint::Skip
        );
        assert_eq!(
            assigned(&hostile, Some(other(n, &[("aaa", "a")])), None),
            QueueingHint::Skip
        );
        assert_eq!(
            assigned(&hostile, Some(other(n, &scan)), None),
            QueueingHint::Queue
        );
        let mut nominated = other(None, &scan);
        nominated.preemption.nominated_node = Some("fake-node".into());
        assert_eq!(
            assigned(&hostile, Some(nominated), None),
            QueueingHint::Queue
        );

        // The deleted pod's own anti-affinity matched the waiting pod.
        let scanned = waiting(&scan, &[], &[]);
        let hater = |labels: &[(&str, &str)]| {
            let mut p = incoming(
                "default",
                labels,
                required(
                    &[],
                    &[term("service", "region", &["securityscan", "value2"])],
                ),
            );
            p.node_name = Some("fake-node".into());
            p
        };
        assert_eq!(
            assigned(&scanned, Some(hater(&[])), None),
            QueueingHint::Queue
        );
        let foo = waiting(&[("service", "foo")], &[], &[]);
        assert_eq!(assigned(&foo, Some(hater(&[])), None), QueueingHint::Skip);

        let both = waiting(
            &[],
            &[],
            &[
                term("service", "region", &["securityscan"]),
                term("app", "region", &["web"]),
            ],
        );
        assert_eq!(
            relabel(
                &both,
                &[("service", "securityscan"), ("app", "bar")],
                &[("service", "foo"), ("app", "bar")]
            ),
            QueueingHint::Queue
        );
        assert_eq!(
            relabel(
                &both,
                &[("service", "securityscan"), ("app", "bar")],
                &[("service", "foo"), ("app", "web")]
            ),
            QueueingHint::Skip
        );
    }

    #[test]
    fn terms_decided_by_namespace_labels_queue_the_pod() {
        let mut t = term("service", "region", &["securityscan"]);
        t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
        let affine = waiting(&[], &[t], &[]);
        let elsewhere = PodBuilder::new("other")
            .namespace("team-a")
            .on("n")
            .labels(&[("service", "securityscan")])
            .build();
        assert_eq!(
            assigned(&affine, None, Some(elsewhere)),
            QueueingHint::Queue
        );
    }

    /// `Test_isSchedulableAfterTargetPodUpdateLabel`.
    #[test]
    fn the_pods_own_label_change_queues_it() {
        let before = waiting(&[("foo", "bar")], &[], &[]);
        let after = waiting(&[("foo", "baz")], &[], &[]);
        let event = target_pod_updated(before, after.clone());
        assert_eq!(hint(&plugin(), &after, event), QueueingHint::Queue);
    }

    /// Cases of `Test_isSchedulableAfterNodeChange`.
    #[test]
    fn node_hints_follow_the_topology_keys() {
        let node = |labels: &[(&str, &str)]| {
            crate::objects::NodeInfo::new("node-a", labels.iter().copied())
        };
        let on = |p: &PodInfo, event| hint(&plugin(), p, event);
        let zone_affine = waiting(
            &[],
            &[term("service", "zone", &["securityscan", "value2"])],
            &[],
        );
        let region_affine = waiting(
            &[],
            &[term("service", "region", &["securityscan", "value2"])],
            &[],
        );
        let relabel = |b: &[(&str, &str)], a: &[(&str, &str)]| node_updated(node(b), node(a));
        let zone1 = [("zone", "zone1")];
        assert_eq!(
            on(&zone_affine, node_added(node(&zone1))),
            QueueingHint::Queue
        );
        assert_eq!(
            on(&region_affine, node_added(node(&zone1))),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&zone_affine, relabel(&[("aaa", "a")], &[("aaa", "b")])),
            QueueingHint::Skip
        );
        assert_eq!(
            on(
                &zone_affine,
                relabel(
                    &zone1,
                    &[("zone", "zone1"), ("unrelated-label", "unrelated")]
                )
            ),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&zone_affine, relabel(&zone1, &[("zone", "zone2")])),
            QueueingHint::Queue
        );
        assert_eq!(
            on(&zone_affine, relabel(&[("aaa", "a")], &zone1)),
            QueueingHint::Queue
        );

        let anti =
            json!({"labelSelector": {"matchLabels": {"another": "label"}}, "topologyKey": "zone"});
        let hostile = waiting(&[], &[], &[anti]);
        assert_eq!(on(&hostile, node_added(node(&zone1))), QueueingHint::Queue);
        assert_eq!(on(&hostile, node_added(node(&[]))), QueueingHint::Queue);
        assert_eq!(
            on(
                &hostile,
                relabel(
                    &zone1,
                    &[("zone", "zone1"), ("unrelated-label", "unrelated")]
                )
            ),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&hostile, relabel(&zone1, &[("zone", "zone2")])),
            QueueingHint::Queue
        );
        assert_eq!(
            on(&hostile, relabel(&[("aaa", "a")], &zone1)),
            QueueingHint::Skip
        );
        assert_eq!(
            on(&hostile, relabel(&zone1, &[("aaa", "a")])),
            QueueingHint::Queue
        );
    }
}
