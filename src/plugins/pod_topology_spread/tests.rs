//! Fixtures shared by the filter and score tests, and the args tests.

use std::sync::Arc;

use super::*;
use crate::framework::{Code, CycleState, NodeScore, Status};
use crate::framework::{FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin};

/// A cluster under construction, with its nodes in insertion order.
#[derive(Default)]
pub(crate) struct Fixture {
    pub(crate) cluster: ClusterState,
    pub(crate) nodes: Vec<Arc<NodeInfo>>,
    seq: usize,
}

impl Fixture {
    /// Adds node `name` with `labels`.
    pub(crate) fn node(&mut self, name: &str, labels: &[(&str, &str)]) {
        let n = NodeInfo::new(name, labels.iter().copied());
        self.cluster.apply_node(n.clone());
        self.nodes.push(Arc::new(n));
    }

    /// Adds the taint `key:effect` to node `name`.
    pub(crate) fn taint(&mut self, name: &str, key: &str, effect: &str) {
        let Some(slot) = self.nodes.iter_mut().find(|n| n.name == name) else {
            panic!("no node {name}");
        };
        let mut n = (**slot).clone();
        n.taints.push(k8s_openapi::api::core::v1::Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        });
        self.cluster.apply_node(n.clone());
        *slot = Arc::new(n);
    }

    /// Adds `count` pods with `labels` in namespace `ns` on node `node`.
    pub(crate) fn pods(&mut self, ns: &str, node: &str, labels: &[(&str, &str)], count: usize) {
        for _ in 0..count {
            self.seq += 1;
            self.cluster.apply_pod(PodInfo {
                name: format!("p{}", self.seq),
                namespace: ns.into(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                node_name: Some(node.into()),
                ..Default::default()
            });
        }
    }

    /// Runs PreFilter for `pod`.
    pub(crate) fn pre_filter(&self, pod: &PodInfo) -> (Status, CycleState) {
        let mut state = CycleState::new();
        let s = PodTopologySpread.pre_filter(&mut state, pod, &self.cluster);
        (s, state)
    }

    /// PreFilter, then Filter on every node: `(node, code, reason)`.
    pub(crate) fn filter(&self, pod: &PodInfo) -> Vec<(&str, Code, &'static str)> {
        let (pre, state) = self.pre_filter(pod);
        assert_eq!(pre.code(), Code::Success, "{}", pre.message());
        self.nodes
            .iter()
            .map(|n| {
                let s = PodTopologySpread.filter(&state, pod, n, &self.cluster);
                let reason = match s.message().as_str() {
                    "" => "",
                    ERR_REASON_CONSTRAINTS_NOT_MATCH => ERR_REASON_CONSTRAINTS_NOT_MATCH,
                    ERR_REASON_NODE_LABEL_NOT_MATCH => ERR_REASON_NODE_LABEL_NOT_MATCH,
                    other => panic!("unexpected reason {other:?}"),
                };
                (n.name.as_str(), s.code(), reason)
            })
            .collect()
    }

    /// PreScore with the nodes `candidates`, then Score and NormalizeScore:
    /// `(raw, score)` per candidate (empty when PreScore did not succeed).
    pub(crate) fn score(
        &self,
        pod: &PodInfo,
        candidates: &[&str],
    ) -> (Status, Vec<(Option<i64>, i64)>) {
        let nodes: Vec<Arc<NodeInfo>> = candidates
            .iter()
            .filter_map(|c| self.nodes.iter().find(|n| n.name == *c).cloned())
            .collect();
        let mut state = CycleState::new();
        let s = PodTopologySpread.pre_score(&mut state, pod, &nodes, &self.cluster);
        if s.code() != Code::Success {
            return (s, Vec::new());
        }
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| {
                PodTopologySpread
                    .score(&state, pod, n, &self.cluster)
                    .unwrap()
            })
            .collect();
        assert!(
            PodTopologySpread
                .normalize(&state, pod, &mut scores)
                .is_success()
        );
        (s, scores.into_iter().map(|s| (s.raw, s.score)).collect())
    }
}

/// The incoming pod: namespace `ns`, `labels`, and `spec` in its JSON form.
pub(crate) fn pod(ns: &str, labels: &[(&str, &str)], spec: serde_json::Value) -> PodInfo {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "incoming", "namespace": ns, "labels": labels},
        "spec": spec
    }))
    .unwrap()
}

#[test]
fn args_default_to_an_empty_list_and_reject_system_defaults() {
    let a: PodTopologySpreadArgs = serde_yaml_ng::from_str("{}").unwrap();
    assert_eq!(a, PodTopologySpreadArgs::default());
    assert_eq!(a.defaulting_type, DefaultingType::List);
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::json!({"defaultingType": "List", "defaultConstraints": []})
    );
    let a: PodTopologySpreadArgs =
        serde_yaml_ng::from_str("defaultingType: List\ndefaultConstraints: []").unwrap();
    assert_eq!(a, PodTopologySpreadArgs::default());
    let e = serde_yaml_ng::from_str::<PodTopologySpreadArgs>("defaultingType: System").unwrap_err();
    assert!(e.to_string().contains("System is not supported"), "{e}");
    let e = serde_yaml_ng::from_str::<PodTopologySpreadArgs>(
        "defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("defaultConstraints: must be empty"),
        "{e}"
    );
    assert!(serde_yaml_ng::from_str::<PodTopologySpreadArgs>("defaultingTyp: List").is_err());
    assert!(serde_yaml_ng::from_str::<PodTopologySpreadArgs>("defaultingType: Sometimes").is_err());
}

#[test]
fn constraint_defaults_follow_kube_scheduler() {
    let p = pod(
        "ns",
        &[("app", "a")],
        serde_json::json!({"topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "matchLabelKeys": ["app", "missing"]},
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}
        ]}),
    );
    let cs = constraints(&p, DO_NOT_SCHEDULE).unwrap();
    assert_eq!(
        (
            cs[0].min_domains,
            cs[0].honor_node_affinity,
            cs[0].honor_node_taints
        ),
        (1, true, false)
    );
    assert_eq!(cs[0].match_labels, [("app".to_string(), "a".to_string())]);
    assert!(cs[0].selects(&p.labels));
    assert_eq!(
        (
            cs[1].min_domains,
            cs[1].honor_node_affinity,
            cs[1].honor_node_taints
        ),
        (3, false, true)
    );
    assert!(!cs[1].selects(&p.labels), "no selector selects nothing");
    assert!(constraints(&p, SCHEDULE_ANYWAY).unwrap().is_empty());
}
