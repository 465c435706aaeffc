//! Fixtures shared by the filter and score tests, and the args and term tests.

use super::*;
use crate::framework::{Code, CycleState, Status};
use crate::framework::{FilterPlugin, PreFilterPlugin};
use crate::plugins::test_support::{Cluster, raw_and_score, score};

/// A cluster under construction ([`Cluster`]) with this plugin's runners.
#[derive(Default)]
pub(crate) struct Fixture(Cluster);

impl std::ops::Deref for Fixture {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.0
    }
}

impl std::ops::DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut Cluster {
        &mut self.0
    }
}

impl Fixture {
    /// Adds the existing pod `ns/name` on `node`, with `labels` and `spec` (JSON).
    pub(crate) fn pod(
        &mut self,
        name: &str,
        ns: &str,
        node: &str,
        labels: &[(&str, &str)],
        spec: serde_json::Value,
    ) {
        let mut p = pod(ns, labels, spec);
        p.name = name.into();
        p.node_name = Some(node.into());
        self.0.pod(p);
    }

    /// Runs PreFilter for `pod` with default args.
    pub(crate) fn pre_filter(&self, pod: &PodInfo) -> (Status, CycleState) {
        let mut state = CycleState::new();
        let s =
            InterPodAffinity::new(&Default::default()).pre_filter(&mut state, pod, &self.cluster);
        (s, state)
    }

    /// PreFilter, then Filter on every node: `(code, reason)` per node.
    pub(crate) fn filter(&self, pod: &PodInfo) -> Vec<(Code, &'static str)> {
        let (pre, state) = self.pre_filter(pod);
        assert_eq!(pre.code(), Code::Success, "{}", pre.message());
        let plugin = InterPodAffinity::new(&Default::default());
        self.nodes
            .iter()
            .map(|n| {
                let s = plugin.filter(&state, pod, n, &self.cluster);
                let reason = match s.message().as_str() {
                    "" => "",
                    ERR_REASON_AFFINITY_RULES_NOT_MATCH => ERR_REASON_AFFINITY_RULES_NOT_MATCH,
                    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH => {
                        ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
                    }
                    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH => {
                        ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
                    }
                    other => panic!("unexpected reason {other:?}"),
                };
                (s.code(), reason)
            })
            .collect()
    }

    /// PreScore, Score and NormalizeScore over every node with `args`:
    /// `(raw, score)` per node (empty when PreScore did not succeed).
    pub(crate) fn score(
        &self,
        pod: &PodInfo,
        args: &InterPodAffinityArgs,
    ) -> (Status, Vec<(Option<i64>, i64)>) {
        let (s, scores) = score(
            &InterPodAffinity::new(args),
            pod,
            &self.nodes,
            &self.cluster,
        );
        (s, raw_and_score(&scores))
    }
}

/// The incoming pod `ns/incoming`.
pub(crate) use crate::plugins::test_support::incoming as pod;

/// A `PodAffinityTerm` (JSON) on `key` selecting `matchLabels`.
pub(crate) fn term(key: &str, match_labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"topologyKey": key, "labelSelector": {"matchLabels": match_labels}})
}

#[test]
fn args_defaults_and_range() {
    let a: InterPodAffinityArgs = serde_yaml_ng::from_str("{}").unwrap();
    assert_eq!(a, InterPodAffinityArgs::default());
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::json!({"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": false})
    );
    let a: InterPodAffinityArgs = serde_yaml_ng::from_str(
        "hardPodAffinityWeight: 0\nignorePreferredTermsOfExistingPods: true",
    )
    .unwrap();
    assert_eq!(
        (
            a.hard_pod_affinity_weight,
            a.ignore_preferred_terms_of_existing_pods
        ),
        (0, true)
    );
    let e =
        serde_yaml_ng::from_str::<InterPodAffinityArgs>("hardPodAffinityWeight: 101").unwrap_err();
    assert!(
        e.to_string()
            .contains("hardPodAffinityWeight: Invalid value: 101: not in valid range [0-100]"),
        "{e}"
    );
    assert!(serde_yaml_ng::from_str::<InterPodAffinityArgs>("hardPodAffinityWeight: -1").is_err());
    assert!(serde_yaml_ng::from_str::<InterPodAffinityArgs>("hardPodAfinityWeight: 1").is_err());
}

#[test]
fn term_namespace_rules() {
    let t = |json: serde_json::Value| -> PodAffinityTerm { serde_json::from_value(json).unwrap() };
    let target = pod("b", &[("app", "x")], serde_json::json!({}));
    // Namespace labels not watched (extender mode).
    let unknown = Objects::<NamespaceInfo>::default();
    let base =
        serde_json::json!({"topologyKey": "k", "labelSelector": {"matchLabels": {"app": "x"}}});
    let with = |extra: serde_json::Value| {
        let mut v = base.clone();
        if let (Some(v), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(e.clone());
        }
        t(v)
    };
    assert_eq!(
        term_matches(&with(serde_json::json!({})), "b", &target, &unknown),
        TermMatch::Yes
    );
    assert_eq!(
        term_matches(&with(serde_json::json!({})), "a", &target, &unknown),
        TermMatch::No,
        "owner's namespace"
    );
    assert_eq!(
        term_matches(
            &with(serde_json::json!({"namespaces": ["a", "b"]})),
            "a",
            &target,
            &unknown
        ),
        TermMatch::Yes
    );
    assert_eq!(
        term_matches(
            &with(serde_json::json!({"namespaceSelector": {}})),
            "a",
            &target,
            &unknown
        ),
        TermMatch::Yes
    );
    let sel = serde_json::json!({"namespaceSelector": {"matchLabels": {"t": "1"}}});
    assert_eq!(
        term_matches(&with(sel.clone()), "b", &target, &unknown),
        TermMatch::Unknown,
        "owner's namespace is not implied"
    );
    let mut listed = sel;
    listed["namespaces"] = serde_json::json!(["b"]);
    assert_eq!(
        term_matches(&with(listed), "a", &target, &unknown),
        TermMatch::Yes
    );
    let other = pod("b", &[("app", "y")], serde_json::json!({}));
    assert_eq!(
        term_matches(
            &with(serde_json::json!({"namespaceSelector": {"matchLabels": {"t": "1"}}})),
            "a",
            &other,
            &unknown
        ),
        TermMatch::No
    );
    assert_eq!(
        term_matches(
            &t(serde_json::json!({"topologyKey": "k"})),
            "b",
            &target,
            &unknown
        ),
        TermMatch::No,
        "no selector"
    );
}

#[test]
fn namespace_selectors_are_decided_from_cached_labels() {
    let t: PodAffinityTerm = serde_json::from_value(serde_json::json!({
        "topologyKey": "k", "labelSelector": {"matchLabels": {"app": "x"}},
        "namespaceSelector": {"matchLabels": {"team": "blue"}}
    }))
    .unwrap();
    let mut known = Objects::<NamespaceInfo>::default();
    known.replace(vec![
        NamespaceInfo {
            name: "blue-ns".into(),
            labels: [("team".to_string(), "blue".to_string())].into(),
        },
        NamespaceInfo {
            name: "red-ns".into(),
            labels: [("team".to_string(), "red".to_string())].into(),
        },
    ]);
    let in_ns = |ns: &str| pod(ns, &[("app", "x")], serde_json::json!({}));
    assert_eq!(
        term_matches(&t, "a", &in_ns("blue-ns"), &known),
        TermMatch::Yes
    );
    assert_eq!(
        term_matches(&t, "a", &in_ns("red-ns"), &known),
        TermMatch::No
    );
    assert_eq!(
        term_matches(&t, "a", &in_ns("gone"), &known),
        TermMatch::No,
        "an unknown namespace has no labels"
    );
    let unknown = Objects::<NamespaceInfo>::default();
    assert_eq!(
        term_matches(&t, "a", &in_ns("blue-ns"), &unknown),
        TermMatch::Unknown
    );
}
