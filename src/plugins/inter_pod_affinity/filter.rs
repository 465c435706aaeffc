//! Required terms: PreFilter counts, per topology pair, the existing pods the
//! incoming pod's terms select and the existing pods whose anti-affinity
//! selects the incoming pod (one pass over the cluster's pods); Filter looks
//! up the node's pairs (kube-scheduler `filtering.go`).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PodAffinityTerm;

use super::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, InterPodAffinity, TermMatch, Terms,
    TopologyCounts, reject_namespace_selectors, term_matches,
};
use crate::cache::{ClusterState, Objects};
use crate::framework::{CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, Status};
use crate::objects::namespace::NamespaceInfo;
use crate::objects::{NodeInfo, PodInfo};

/// kube-scheduler's `preFilterState`.
#[derive(Debug, Clone, PartialEq)]
struct PreFilterState {
    /// Pairs → existing pods that match *all* the incoming pod's required
    /// affinity terms (counted once per term's topology key).
    affinity: TopologyCounts,
    /// Pairs → existing pods matching one of the incoming pod's required
    /// anti-affinity terms (once per matching term).
    anti: TopologyCounts,
    /// Pairs → existing pods' required anti-affinity terms that select the
    /// incoming pod.
    existing_anti: TopologyCounts,
    /// Pairs (key → value → message) where an existing pod's required
    /// anti-affinity term may select the incoming pod, depending on namespace
    /// labels placer does not have.
    undecidable: HashMap<String, HashMap<String, String>>,
    /// The incoming pod matches all its own required affinity terms.
    self_match: bool,
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let terms = Terms::of(pod);
        if let Err(e) = terms.validate() {
            return Status::unresolvable(format!("parsing pod: {e}"));
        }
        let (affinity, anti) = (terms.required_affinity, terms.required_anti);
        let namespaces = cluster.objects::<NamespaceInfo>();
        if let Err(e) = reject_namespace_selectors(
            pod,
            "podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            affinity,
            namespaces,
        )
        .and_then(|()| {
            reject_namespace_selectors(
                pod,
                "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                anti,
                namespaces,
            )
        }) {
            return Status::error(e);
        }
        let ns = pod.namespace.as_str();
        let mut s = PreFilterState {
            affinity: TopologyCounts::default(),
            anti: TopologyCounts::default(),
            existing_anti: TopologyCounts::default(),
            undecidable: HashMap::new(),
            self_match: !affinity.is_empty()
                && affinity
                    .iter()
                    .all(|t| term_matches(t, ns, pod, namespaces) == TermMatch::Yes),
        };
        // Without terms of its own, only existing pods' required
        // anti-affinity can reject the pod (kube-scheduler walks
        // `PodsWithRequiredAntiAffinity` then, not every pod).
        let existing_pods: Box<dyn Iterator<Item = &PodInfo>> =
            if affinity.is_empty() && anti.is_empty() {
                Box::new(cluster.pods_with_required_anti_affinity())
            } else {
                Box::new(cluster.pods())
            };
        for existing in existing_pods {
            let Some(node) = existing.node_name.as_deref().and_then(|n| cluster.node(n)) else {
                continue;
            };
            s.count(pod, existing, node, namespaces, 1);
        }
        if s.existing_anti.is_empty()
            && s.undecidable.is_empty()
            && affinity.is_empty()
            && anti.is_empty()
        {
            return Status::skip(
                "pod has no required pod (anti-)affinity and no existing pod's required \
                 anti-affinity selects it",
            );
        }
        state.write(s);
        Status::success()
    }
}

impl PreFilterState {
    /// Counts `existing`, on `node`, `delta` times (1 in PreFilter, ±1 in
    /// the extensions). A removed pod's undecidable anti-affinity pairs stay:
    /// placer does not know whether other pods share them, and keeping
    /// them errs toward "does not fit" (the Filter error) in a dry run.
    fn count(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        namespaces: &Objects<NamespaceInfo>,
        delta: i64,
    ) {
        let terms = Terms::of(pod);
        let (affinity, anti) = (terms.required_affinity, terms.required_anti);
        let ns = pod.namespace.as_str();
        if !affinity.is_empty()
            && affinity
                .iter()
                .all(|t| term_matches(t, ns, existing, namespaces) == TermMatch::Yes)
        {
            for t in affinity {
                self.affinity.add(node, &t.topology_key, delta);
            }
        }
        for t in anti {
            if term_matches(t, ns, existing, namespaces) == TermMatch::Yes {
                self.anti.add(node, &t.topology_key, delta);
            }
        }
        for t in Terms::of(existing).required_anti {
            match term_matches(t, &existing.namespace, pod, namespaces) {
                TermMatch::Yes => self.existing_anti.add(node, &t.topology_key, delta),
                TermMatch::No => {}
                TermMatch::Unknown if delta > 0 => {
                    if let Some(value) = node.label(&t.topology_key) {
                        self.undecidable
                            .entry(t.topology_key.clone())
                            .or_default()
                            .entry(value.to_string())
                            .or_insert_with(|| {
                                format!(
                                    "cannot tell whether the required anti-affinity of \
                                     pod {} applies: its term has a non-empty namespaceSelector \
                                     and placer does not cache namespace labels",
                                    existing.key()
                                )
                            });
                    }
                }
                TermMatch::Unknown => {}
            }
        }
    }
}

impl PreFilterExtensions for InterPodAffinity {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        update(state, pod, to_add, node, cluster, 1)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        update(state, pod, to_remove, node, cluster, -1)
    }
}

fn update(
    state: &mut CycleState,
    pod: &PodInfo,
    other: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
    delta: i64,
) -> Status {
    let Some(s) = state.modify::<PreFilterState>() else {
        return Status::error("PreFilter state missing");
    };
    s.count(pod, other, node, cluster.objects::<NamespaceInfo>(), delta);
    Status::success()
}

impl FilterPlugin for InterPodAffinity {
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        let s = match state.from_pre_filter::<PreFilterState>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        let terms = Terms::of(pod);
        if !satisfies_pod_affinity(s, terms.required_affinity, node) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.anti.is_empty()
            && terms.required_anti.iter().any(|t| {
                node.label(&t.topology_key)
                    .is_some_and(|v| s.anti.get(&t.topology_key, v) > 0)
            })
        {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if s.existing_anti.of_node(node).any(|n| n > 0) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        let undecided = s
            .undecidable
            .iter()
            .find_map(|(key, values)| node.label(key).and_then(|v| values.get(v)));
        if let Some(message) = undecided {
            return Status::error(message.clone());
        }
        Status::success()
    }
}

/// `satisfyPodAffinity`: the node has every term's topology key, and some
/// pod matching all terms shares each of its domains, or no pod anywhere
/// matches and the incoming pod matches its own terms (first of its group).
fn satisfies_pod_affinity(s: &PreFilterState, terms: &[PodAffinityTerm], node: &NodeInfo) -> bool {
    let mut pods_exist = true;
    for t in terms {
        let Some(value) = node.label(&t.topology_key) else {
            return false;
        };
        if s.affinity.get(&t.topology_key, value) <= 0 {
            pods_exist = false;
        }
    }
    pods_exist || (s.affinity.is_empty() && s.self_match)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{Fixture, pod, term};
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{HOSTNAME as HOST, ZONE};

    /// n1, n2 in zone1; n3, n4 in zone2; `bare` has only a hostname.
    fn cluster() -> Fixture {
        let mut f = Fixture::default();
        f.zoned_nodes(&[
            ("n1", "zone1"),
            ("n2", "zone1"),
            ("n3", "zone2"),
            ("n4", "zone2"),
        ]);
        f.node("bare", &[(HOST, "bare")]);
        f
    }

    fn affinity(required: serde_json::Value) -> serde_json::Value {
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}})
    }

    fn anti_affinity(required: serde_json::Value) -> serde_json::Value {
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}})
    }

    const AFF: (Code, &str) = (
        Code::UnschedulableAndUnresolvable,
        ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    );
    const ANTI: (Code, &str) = (
        Code::Unschedulable,
        ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    );
    const EXISTING: (Code, &str) = (
        Code::Unschedulable,
        ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    );
    const OK: (Code, &str) = (Code::Success, "");

    #[test]
    fn required_affinity_needs_a_matching_pod_in_the_domain() {
        let mut f = cluster();
        f.pod("db", "ns", "n1", &[("app", "db")], json!({}));
        let p = pod(
            "ns",
            &[("app", "web")],
            affinity(json!([term(ZONE, json!({"app": "db"}))])),
        );
        assert_eq!(
            f.filter(&p),
            [OK, OK, AFF, AFF, AFF],
            "zone1 has the db pod; bare has no zone"
        );
        assert_eq!(
            ERR_REASON_AFFINITY_RULES_NOT_MATCH,
            "node(s) didn't match pod affinity rules"
        );
    }

    #[test]
    fn first_pod_of_a_self_affine_group_goes_anywhere_the_keys_exist() {
        let f = cluster();
        let p = pod(
            "ns",
            &[("app", "web")],
            affinity(json!([term(ZONE, json!({"app": "web"}))])),
        );
        assert_eq!(f.filter(&p), [OK, OK, OK, OK, AFF]);
        // A pod that does not match its own term has no such exception.
        let p = pod(
            "ns",
            &[("app", "api")],
            affinity(json!([term(ZONE, json!({"app": "web"}))])),
        );
        assert_eq!(f.filter(&p), [AFF, AFF, AFF, AFF, AFF]);
        // Once one matching pod exists anywhere, only its domain is allowed.
        let mut f = cluster();
        f.pod("w", "ns", "n3", &[("app", "web")], json!({}));
        let p = pod(
            "ns",
            &[("app", "web")],
            affinity(json!([term(ZONE, json!({"app": "web"}))])),
        );
        assert_eq!(f.filter(&p), [AFF, AFF, OK, OK, AFF]);
    }

    #[test]
    fn one_pod_must_match_all_affinity_terms() {
        let mut f = cluster();
        f.pod("a", "ns", "n1", &[("app", "db")], json!({}));
        let terms = json!([
            term(ZONE, json!({"app": "db"})),
            term(HOST, json!({"tier": "1"}))
        ]);
        let p = pod("ns", &[], affinity(terms.clone()));
        assert_eq!(
            f.filter(&p),
            [AFF, AFF, AFF, AFF, AFF],
            "a matches one term only"
        );
        f.pod("b", "ns", "n3", &[("app", "db"), ("tier", "1")], json!({}));
        // b counts for (zone, zone2) and (hostname, n3): only n3 has both.
        assert_eq!(
            f.filter(&pod("ns", &[], affinity(terms))),
            [AFF, AFF, OK, AFF, AFF]
        );
    }

    #[test]
    fn term_namespaces() {
        let mut f = cluster();
        f.pod("db", "other", "n1", &[("app", "db")], json!({}));
        let own = pod(
            "ns",
            &[],
            affinity(json!([term(ZONE, json!({"app": "db"}))])),
        );
        assert_eq!(
            f.filter(&own)[0],
            AFF,
            "by default only the pod's namespace"
        );
        let mut t = term(ZONE, json!({"app": "db"}));
        t["namespaces"] = json!(["other"]);
        assert_eq!(
            f.filter(&pod("ns", &[], affinity(json!([t]))))[..3],
            [OK, OK, AFF]
        );
        let mut t = term(ZONE, json!({"app": "db"}));
        t["namespaceSelector"] = json!({});
        assert_eq!(
            f.filter(&pod("ns", &[], affinity(json!([t]))))[..3],
            [OK, OK, AFF],
            "{{}} = all namespaces"
        );
    }

    #[test]
    fn non_empty_namespace_selector_on_the_pod_is_an_error() {
        let f = cluster();
        let mut t = term(ZONE, json!({"app": "db"}));
        t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
        let (s, _) = f.pre_filter(&pod("ns", &[], anti_affinity(json!([t]))));
        assert_eq!(s.code(), Code::Error);
        assert_eq!(
            s.message(),
            "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0] \
             of pod ns/incoming has a non-empty namespaceSelector; placer does not cache \
             namespace labels, so only an empty namespaceSelector (all namespaces) is supported"
        );
    }

    #[test]
    fn invalid_selectors_make_the_pod_unresolvable() {
        let f = cluster();
        let t = json!({"topologyKey": ZONE, "labelSelector":
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}});
        let (s, _) = f.pre_filter(&pod("ns", &[], affinity(json!([t]))));
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert!(
            s.message().starts_with("parsing pod: values"),
            "{}",
            s.message()
        );
    }

    #[test]
    fn required_anti_affinity_rejects_the_domain_of_matching_pods() {
        let mut f = cluster();
        f.pod("w", "ns", "n1", &[("app", "web")], json!({}));
        let p = pod(
            "ns",
            &[("app", "web")],
            anti_affinity(json!([term(ZONE, json!({"app": "web"}))])),
        );
        assert_eq!(
            f.filter(&p),
            [ANTI, ANTI, OK, OK, OK],
            "bare has no zone: the term does not apply"
        );
        let p = pod(
            "ns",
            &[],
            anti_affinity(json!([term(HOST, json!({"app": "web"}))])),
        );
        assert_eq!(f.filter(&p), [ANTI, OK, OK, OK, OK]);
        assert_eq!(
            ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
            "node(s) didn't match pod anti-affinity rules"
        );
    }

    #[test]
    fn affinity_is_checked_before_anti_affinity() {
        let mut f = cluster();
        f.pod("w", "ns", "n1", &[("app", "web")], json!({}));
        let spec = json!({"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, json!({"app": "db"}))]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST, json!({"app": "web"}))]}
        }});
        assert_eq!(f.filter(&pod("ns", &[], spec))[0], AFF);
    }

    #[test]
    fn existing_pods_anti_affinity_rejects_their_domain() {
        let mut f = cluster();
        f.pod(
            "guard",
            "ns",
            "n1",
            &[],
            anti_affinity(json!([term(ZONE, json!({"app": "web"}))])),
        );
        assert_eq!(
            f.filter(&pod("ns", &[("app", "web")], json!({}))),
            [EXISTING, EXISTING, OK, OK, OK]
        );
        assert_eq!(
            ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
            "node(s) didn't satisfy existing pods anti-affinity rules"
        );
        // Another namespace is not covered by the term's default namespace,
        // and a pod it does not select has nothing to check.
        let (s, _) = f.pre_filter(&pod("other", &[("app", "web")], json!({})));
        assert_eq!(s.code(), Code::Skip);
        let (s, _) = f.pre_filter(&pod("ns", &[("app", "api")], json!({})));
        assert_eq!(s.code(), Code::Skip);
    }

    #[test]
    fn existing_anti_affinity_with_a_namespace_selector_is_an_error_in_its_domain() {
        let mut f = cluster();
        let mut t = term(ZONE, json!({"app": "web"}));
        t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
        f.pod("guard", "ns", "n3", &[], anti_affinity(json!([t.clone()])));
        let (s, state) = f.pre_filter(&pod("other", &[("app", "web")], json!({})));
        assert_eq!(s.code(), Code::Success);
        let out: Vec<Status> = f
            .nodes
            .iter()
            .map(|n| {
                InterPodAffinity::new(&Default::default()).filter(
                    &state,
                    &pod("other", &[("app", "web")], json!({})),
                    n,
                    &f.cluster,
                )
            })
            .collect();
        assert_eq!(
            out.iter().map(Status::code).collect::<Vec<_>>(),
            [
                Code::Success,
                Code::Success,
                Code::Error,
                Code::Error,
                Code::Success
            ]
        );
        assert_eq!(
            out[2].message(),
            "cannot tell whether the required anti-affinity of pod ns/guard \
             applies: its term has a non-empty namespaceSelector and placer does not cache \
             namespace labels"
        );
        // The guard's own namespace is listed: decided without namespace labels.
        t["namespaces"] = json!(["other"]);
        let mut f = cluster();
        f.pod("guard", "ns", "n3", &[], anti_affinity(json!([t])));
        assert_eq!(
            f.filter(&pod("other", &[("app", "web")], json!({})))[2],
            EXISTING
        );
    }

    #[test]
    fn add_and_remove_pod_match_a_fresh_pre_filter() {
        let mut f = cluster();
        f.pod("db", "ns", "n1", &[("app", "db")], json!({}));
        f.pod("db2", "ns", "n3", &[("app", "db")], json!({}));
        f.pod("w", "ns", "n2", &[("app", "web")], json!({}));
        f.pod(
            "guard",
            "ns",
            "n4",
            &[("app", "cache")],
            anti_affinity(json!([term(ZONE, json!({"app": "web"}))])),
        );
        let spec = json!({"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, json!({"app": "db"}))]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST, json!({"app": "web"}))]}
        }});
        let p = pod("ns", &[("app", "web")], spec);
        let plugin = InterPodAffinity::new(&Default::default());
        // Removing "db" alone leaves db2: the zone1 pair must disappear, not
        // stay at 0, or the self-affinity exception would differ.
        crate::plugins::test_support::check_extensions(&plugin, &mut f, &p, |s| {
            s.read::<PreFilterState>().cloned()
        });
    }

    #[test]
    fn nothing_to_check_skips_and_missing_state_errors() {
        let mut f = cluster();
        f.pod("x", "ns", "n1", &[("app", "web")], json!({}));
        let (s, _) = f.pre_filter(&pod("ns", &[("app", "web")], json!({})));
        assert_eq!(s.code(), Code::Skip);
        let s = InterPodAffinity::new(&Default::default()).filter(
            &CycleState::new(),
            &pod("ns", &[], json!({})),
            &f.nodes[0],
            &f.cluster,
        );
        assert_eq!(s.code(), Code::Error);
    }
}
