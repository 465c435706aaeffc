//! Fixtures shared by the filter and score tests, and the args tests.

use std::sync::Arc;

use super::*;
use crate::framework::{Code, CycleState, Status};
use crate::framework::{FilterPlugin, PreFilterPlugin};
use crate::plugins::test_support::{Cluster, PodBuilder, raw_and_score, score};

/// A cluster under construction ([`Cluster`]) with the plugin under test.
#[derive(Default)]
pub(crate) struct Fixture {
    /// The plugin under test (default: no default constraints).
    pub(crate) plugin: PodTopologySpread,
    base: Cluster,
    seq: usize,
}

impl std::ops::Deref for Fixture {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.base
    }
}

impl std::ops::DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut Cluster {
        &mut self.base
    }
}

impl Fixture {
    /// Adds the taint `key:effect` to node `name`.
    pub(crate) fn taint(&mut self, name: &str, key: &str, effect: &str) {
        self.change_node(name, |n| {
            n.taints.push(k8s_openapi::api::core::v1::Taint {
                key: key.into(),
                effect: effect.into(),
                ..Default::default()
            });
        });
    }

    /// Adds `count` pods with `labels` in namespace `ns` on node `node`.
    pub(crate) fn pods(&mut self, ns: &str, node: &str, labels: &[(&str, &str)], count: usize) {
        for _ in 0..count {
            self.seq += 1;
            self.base.pod(
                PodBuilder::new(&format!("p{}", self.seq))
                    .namespace(ns)
                    .labels(labels)
                    .on(node)
                    .build(),
            );
        }
    }

    /// Runs PreFilter for `pod`.
    pub(crate) fn pre_filter(&self, pod: &PodInfo) -> (Status, CycleState) {
        let mut state = CycleState::new();
        let s = self.plugin.pre_filter(&mut state, pod, &self.cluster);
        (s, state)
    }

    /// PreFilter, then Filter on every node: `(node, code, reason)`.
    pub(crate) fn filter(&self, pod: &PodInfo) -> Vec<(&str, Code, &'static str)> {
        let (pre, state) = self.pre_filter(pod);
        assert_eq!(pre.code(), Code::Success, "{}", pre.message());
        self.nodes
            .iter()
            .map(|n| {
                let s = self.plugin.filter(&state, pod, n, &self.cluster);
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
        let (s, scores) = score(&self.plugin, pod, &nodes, &self.cluster);
        (s, raw_and_score(&scores))
    }
}

/// The incoming pod `ns/incoming`.
pub(crate) use crate::plugins::test_support::incoming as pod;

#[test]
fn args_default_to_system_and_follow_kube_scheduler_validation() {
    let a: PodTopologySpreadArgs = serde_yaml_ng::from_str("{}").unwrap();
    assert_eq!(a, PodTopologySpreadArgs::default());
    assert_eq!(a.defaulting_type, DefaultingType::System);
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::json!({"defaultingType": "System", "defaultConstraints": []})
    );
    let a: PodTopologySpreadArgs = serde_yaml_ng::from_str(
        "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
    )
    .unwrap();
    assert_eq!(a.default_constraints.len(), 1);
    for (bad, says) in [
        (
            "defaultingType: System\ndefaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
            "requires empty defaultConstraints",
        ),
        (
            "defaultingType: List\ndefaultConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
            "defaultConstraints[0].maxSkew: 0 must be greater than zero",
        ),
        (
            "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Maybe}]",
            "whenUnsatisfiable",
        ),
        (
            "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}]",
            "labelSelector: forbidden",
        ),
        (
            "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
            "defaultConstraints[1]: duplicate",
        ),
        ("defaultingTyp: List", "unknown field"),
        ("defaultingType: Sometimes", "unknown variant"),
    ] {
        let e = serde_yaml_ng::from_str::<PodTopologySpreadArgs>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
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
    let cs = constraints(&p, &p.spec.topology_spread_constraints, DO_NOT_SCHEDULE).unwrap();
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
    assert!(
        constraints(&p, &p.spec.topology_spread_constraints, SCHEDULE_ANYWAY)
            .unwrap()
            .is_empty()
    );
}

mod defaults {
    use super::*;
    use crate::objects::pod::ControllerRef;
    use crate::objects::workload::{
        Controller, ControllerSelector, ReplicaSetSelector, ServiceSelector,
    };

    fn service(ns: &str, name: &str, selector: Option<&[(&str, &str)]>) -> ServiceSelector {
        ServiceSelector {
            namespace: ns.into(),
            name: name.into(),
            selector: selector.map(|s| {
                s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
        }
    }

    fn replica_set(name: &str, selector: serde_json::Value) -> ReplicaSetSelector {
        Controller(ControllerSelector {
            namespace: "ns".into(),
            name: name.into(),
            selector: Some(serde_json::from_value(selector).unwrap()),
        })
    }

    /// A pod of ReplicaSet `rs` without constraints of its own.
    fn owned(labels: &[(&str, &str)], rs: &str) -> PodInfo {
        let mut p = pod("ns", labels, serde_json::json!({}));
        p.controller = Some(ControllerRef {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: rs.into(),
        });
        p
    }

    #[test]
    fn the_default_selector_merges_services_and_the_controller() {
        let mut c = ClusterState::default();
        let p = owned(&[("app", "web"), ("tier", "fe")], "web-123");
        assert_eq!(default_selector(&p, &c), None, "nothing selects the pod");
        let services = c.objects_mut::<ServiceSelector>();
        services.apply(service("ns", "web", Some(&[("app", "web")])));
        services.apply(service("ns", "headless", None));
        services.apply(service("ns", "api", Some(&[("app", "api")])));
        services.apply(service("other", "web", Some(&[("tier", "fe")])));
        c.objects_mut::<ReplicaSetSelector>().apply(replica_set(
            "web-123",
            serde_json::json!({"matchLabels": {"pod-template-hash": "123"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]}),
        ));
        let s = default_selector(&p, &c).expect("a selector");
        let labels: Vec<(&str, &str)> = s
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(labels, [("app", "web"), ("pod-template-hash", "123")]);
        assert_eq!(s.match_expressions.map(|e| e.len()), Some(1));
        // Only a controller of a known kind and apiVersion counts.
        let mut other = owned(&[("x", "y")], "web-123");
        if let Some(o) = other.controller.as_mut() {
            o.api_version = "extensions/v1beta1".into();
        }
        assert_eq!(default_selector(&other, &c), None);
    }

    #[test]
    fn system_defaults_spread_a_replica_set_by_host_and_zone() {
        let mut f = Fixture {
            plugin: PodTopologySpread::new(&PodTopologySpreadArgs::default()),
            ..Default::default()
        };
        for (n, zone) in [
            ("n1", Some("z1")),
            ("n2", Some("z1")),
            ("n3", Some("z2")),
            ("n4", None),
        ] {
            let mut labels = vec![(LABEL_HOSTNAME, n)];
            if let Some(z) = zone {
                labels.push(("topology.kubernetes.io/zone", z));
            }
            f.node(n, &labels);
        }
        f.pods("ns", "n1", &[("app", "web")], 2);
        f.pods("ns", "n3", &[("app", "web")], 1);
        f.pods("ns", "n2", &[("app", "db")], 5);
        f.cluster
            .objects_mut::<ReplicaSetSelector>()
            .apply(replica_set(
                "web-1",
                serde_json::json!({"matchLabels": {"app": "web"}}),
            ));
        let p = owned(&[("app", "web")], "web-1");
        let (status, scores) = f.score(&p, &["n1", "n2", "n3", "n4"]);
        assert_eq!(status.code(), Code::Success);
        // Hostname (maxSkew 3, 4 nodes, ln 6 = 1.79): n1 2 × 1.79 + 2 = 5.58, others 2
        // (n3: 1.79 + 2 = 3.79). Zone (maxSkew 5, domains z1, z2 and n4's "": ln 5 =
        // 1.61): z1 2 × 1.61 + 4 = 7.22, z2 1.61 + 4 = 5.61; n4 has no zone: nothing.
        // Raw: n1 12.8 → 13, n2 9.22 → 9, n3 9.4 → 9, n4 2. Normalized against
        // max 13, min 2: 100 × (15 − raw) / 13.
        assert_eq!(
            scores,
            [(Some(13), 15), (Some(9), 46), (Some(9), 46), (Some(2), 100)],
            "the node without a zone still scores (system defaults)"
        );
        // Without a controller or Service selecting it, the pod has no constraints.
        let loose = pod("ns", &[("app", "web")], serde_json::json!({}));
        assert_eq!(f.score(&loose, &["n1"]).0.code(), Code::Skip);
    }

    #[test]
    fn listed_defaults_can_be_hard() {
        let args: PodTopologySpreadArgs = serde_yaml_ng::from_str(
            "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
        )
        .unwrap();
        let mut f = Fixture {
            plugin: PodTopologySpread::new(&args),
            ..Default::default()
        };
        f.node("n1", &[("zone", "a")]);
        f.node("n2", &[("zone", "b")]);
        f.pods("ns", "n1", &[("app", "web")], 2);
        f.cluster.objects_mut::<ServiceSelector>().apply(service(
            "ns",
            "web",
            Some(&[("app", "web")]),
        ));
        let p = pod("ns", &[("app", "web")], serde_json::json!({}));
        assert_eq!(
            f.filter(&p),
            [
                ("n1", Code::Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH),
                ("n2", Code::Success, ""),
            ]
        );
    }
}
