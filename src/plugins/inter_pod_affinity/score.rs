//! Preferred terms: PreScore sums, per topology pair, the weights of every
//! term that links the incoming pod with an existing pod (one pass over the
//! cluster's pods); Score adds up the node's pairs; NormalizeScore maps the
//! lowest node to 0 and the highest to 100 (kube-scheduler `scoring.go`).

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::{
    InterPodAffinity, TermMatch, Terms, TopologyCounts, reject_namespace_selectors, term_matches,
};
use crate::cache::ClusterState;
use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin, Status,
};
use crate::objects::namespace::NamespaceInfo;
use crate::objects::{NodeInfo, PodInfo};

/// kube-scheduler's `preScoreState`: topology pair → summed weight.
struct PreScoreState(TopologyCounts);

/// A node's raw score: the summed weights of its topology pairs.
fn affinity_score(
    PreScoreState(counts): &PreScoreState,
    node: &NodeInfo,
    _: &ClusterState,
) -> NodeScore {
    NodeScore::value(counts.of_node(node).sum())
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status {
        let terms = Terms::of(pod);
        let has_constraints =
            !terms.preferred_affinity.is_empty() || !terms.preferred_anti.is_empty();
        if self.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip("pod has no preferred pod (anti-)affinity");
        }
        if let Err(e) = terms.validate() {
            return Status::error(format!("failed to parse pod: {e}"));
        }
        let namespaces = cluster.objects::<NamespaceInfo>();
        if let Err(e) = reject_namespace_selectors(
            pod,
            "podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            terms
                .preferred_affinity
                .iter()
                .map(|w| &w.pod_affinity_term),
            namespaces,
        )
        .and_then(|()| {
            reject_namespace_selectors(
                pod,
                "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
                terms.preferred_anti.iter().map(|w| &w.pod_affinity_term),
                namespaces,
            )
        }) {
            return Status::error(e);
        }
        let ns = pod.namespace.as_str();
        let mut scores = TopologyCounts::default();
        // Without preferences of its own, only existing pods' terms can score
        // the pod (kube-scheduler walks `PodsWithAffinity` then).
        let existing_pods: Box<dyn Iterator<Item = &PodInfo>> = if has_constraints {
            Box::new(cluster.pods())
        } else {
            Box::new(cluster.pods_with_affinity())
        };
        for existing in existing_pods {
            let Some(node) = existing.node_name.as_deref().and_then(|n| cluster.node(n)) else {
                continue;
            };
            if node.labels.is_empty() {
                continue;
            }
            // The incoming pod's preferences for pods like `existing`.
            for (list, sign) in [(terms.preferred_affinity, 1), (terms.preferred_anti, -1)] {
                for w in list {
                    let t = &w.pod_affinity_term;
                    if term_matches(t, ns, existing, namespaces) == TermMatch::Yes {
                        scores.add(node, &t.topology_key, sign * i64::from(w.weight));
                    }
                }
            }
            // `existing`'s rules about pods like the incoming one (a term
            // that needs namespace labels placer lacks is left out).
            let theirs = Terms::of(existing);
            let selects = |t: &PodAffinityTerm| {
                term_matches(t, &existing.namespace, pod, namespaces) == TermMatch::Yes
            };
            if self.hard_pod_affinity_weight > 0 {
                for t in theirs.required_affinity {
                    if selects(t) {
                        scores.add(node, &t.topology_key, self.hard_pod_affinity_weight);
                    }
                }
            }
            for (list, sign) in [(theirs.preferred_affinity, 1), (theirs.preferred_anti, -1)] {
                for w in list {
                    if selects(&w.pod_affinity_term) {
                        scores.add(
                            node,
                            &w.pod_affinity_term.topology_key,
                            sign * i64::from(w.weight),
                        );
                    }
                }
            }
        }
        if scores.is_empty() {
            return Status::skip("no pod affinity preference links this pod with an existing pod");
        }
        state.write(PreScoreState(scores));
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    crate::score_from_pre_score!(PreScoreState, fn affinity_score);

    /// `MaxNodeScore × (score − min) / (max − min)`, truncated; all 0 when
    /// every node has the same score.
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let raws = || scores.iter().filter_map(|s| s.raw);
        let (Some(min), Some(max)) = (raws().min(), raws().max()) else {
            return Status::success();
        };
        let diff = max - min;
        for s in scores.iter_mut() {
            let Some(raw) = s.raw else { continue };
            s.score = if diff > 0 {
                // kube-scheduler computes in float64 and truncates.
                let f = MAX_NODE_SCORE as f64 * ((raw - min) as f64 / diff as f64);
                f as i64
            } else {
                0
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::InterPodAffinityArgs;
    use super::super::tests::{Fixture, pod, term};
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{HOSTNAME as HOST, ZONE, score_without_pre_score};

    /// n1, n2 in zone1; n3 in zone2.
    fn cluster() -> Fixture {
        let mut f = Fixture::default();
        f.zoned_nodes(&[("n1", "zone1"), ("n2", "zone1"), ("n3", "zone2")]);
        f
    }

    fn weighted(weight: i32, t: serde_json::Value) -> serde_json::Value {
        json!({"weight": weight, "podAffinityTerm": t})
    }

    #[test]
    fn incoming_preferences_add_and_subtract_weights() {
        let mut f = cluster();
        f.pod("db", "ns", "n1", &[("app", "db")], json!({}));
        f.pod("web", "ns", "n2", &[("app", "web")], json!({}));
        let p = pod(
            "ns",
            &[],
            json!({"affinity": {
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                    [weighted(5, term(ZONE, json!({"app": "db"})))]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                    [weighted(3, term(HOST, json!({"app": "web"})))]}
            }}),
        );
        // (zone, zone1) +5, (hostname, n2) -3: n1 5, n2 2, n3 0.
        // min 0, max 5: n1 100, n2 100 × 2 / 5 = 40, n3 0.
        let (s, scores) = f.score(&p, &Default::default());
        assert_eq!(s.code(), Code::Success);
        assert_eq!(scores, [(Some(5), 100), (Some(2), 40), (Some(0), 0)]);
    }

    #[test]
    fn existing_pods_preferences_and_required_affinity_count() {
        let mut f = cluster();
        f.pod("fan", "ns", "n3", &[], json!({"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, json!({"app": "web"}))],
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(10, term(ZONE, json!({"app": "web"})))]
        }}}));
        f.pod("hater", "ns", "n1", &[], json!({"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(4, term(HOST, json!({"app": "web"})))]
        }}}));
        let p = pod("ns", &[("app", "web")], json!({}));
        // (zone, zone2) 10 + hardPodAffinityWeight 1 = 11; (hostname, n1) -4.
        // n1 -4, n2 0, n3 11; min -4, max 11: n2 100 × 4 / 15 = 26.67 → 26.
        assert_eq!(
            f.score(&p, &Default::default()).1,
            [(Some(-4), 0), (Some(0), 26), (Some(11), 100)]
        );
        // Without the hard weight: n3 10, n2 100 × 4 / 14 = 28.57 → 28.
        let args = InterPodAffinityArgs {
            hard_pod_affinity_weight: 0,
            ..Default::default()
        };
        assert_eq!(
            f.score(&p, &args).1,
            [(Some(-4), 0), (Some(0), 28), (Some(10), 100)]
        );
        // Ignoring existing pods' preferences: the pod has none of its own.
        let args = InterPodAffinityArgs {
            ignore_preferred_terms_of_existing_pods: true,
            ..Default::default()
        };
        assert_eq!(f.score(&p, &args).0.code(), Code::Skip);
        // Another namespace: the existing pods' terms default to their own.
        assert_eq!(
            f.score(
                &pod("other", &[("app", "web")], json!({})),
                &Default::default()
            )
            .0
            .code(),
            Code::Skip
        );
    }

    #[test]
    fn equal_scores_normalize_to_zero() {
        let mut f = Fixture::default();
        f.node("a", &[(ZONE, "z")]);
        f.node("b", &[(ZONE, "z")]);
        f.pod("db", "ns", "a", &[("app", "db")], json!({}));
        let p = pod(
            "ns",
            &[],
            json!({"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(7, term(ZONE, json!({"app": "db"})))]}}}),
        );
        assert_eq!(
            f.score(&p, &Default::default()).1,
            [(Some(7), 0), (Some(7), 0)]
        );
    }

    #[test]
    fn nothing_linked_skips() {
        let mut f = cluster();
        f.pod("db", "ns", "n1", &[("app", "db")], json!({}));
        assert_eq!(
            f.score(&pod("ns", &[], json!({})), &Default::default())
                .0
                .code(),
            Code::Skip
        );
        let p = pod(
            "ns",
            &[],
            json!({"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(7, term(ZONE, json!({"app": "cache"})))]}}}),
        );
        assert_eq!(f.score(&p, &Default::default()).0.code(), Code::Skip);
    }

    #[test]
    fn namespace_selectors_in_scoring() {
        let mut f = cluster();
        let mut t = term(ZONE, json!({"app": "web"}));
        t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
        // An existing pod's undecidable preference is left out.
        f.pod(
            "fan",
            "ns",
            "n3",
            &[],
            json!({"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(10, t.clone())]}}}),
        );
        assert_eq!(
            f.score(
                &pod("other", &[("app", "web")], json!({})),
                &Default::default()
            )
            .0
            .code(),
            Code::Skip
        );
        // The incoming pod's own is an error.
        let p = pod(
            "ns",
            &[],
            json!({"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(1, t)]}}}),
        );
        let (s, _) = f.score(&p, &Default::default());
        assert_eq!(s.code(), Code::Error);
        assert!(s.message().contains("podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0] of pod ns/incoming has a non-empty namespaceSelector"), "{}", s.message());
        // An empty one means every namespace.
        let mut t = term(ZONE, json!({"app": "web"}));
        t["namespaceSelector"] = json!({});
        let mut f = cluster();
        f.pod(
            "fan",
            "ns",
            "n3",
            &[],
            json!({"affinity": {"podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted(10, t)]}}}),
        );
        assert_eq!(
            f.score(
                &pod("other", &[("app", "web")], json!({})),
                &Default::default()
            )
            .1,
            [(Some(0), 0), (Some(0), 0), (Some(10), 100)]
        );
    }

    #[test]
    fn missing_state_is_an_error() {
        let s = score_without_pre_score(&InterPodAffinity::new(&Default::default()));
        assert_eq!(s.code(), Code::Error);
    }
}
