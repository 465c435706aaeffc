//! Soft constraints (`whenUnsatisfiable: ScheduleAnyway`): PreScore counts
//! matching pods per candidate domain once; Score sums weighted counts per
//! node; NormalizeScore turns "fewer pods" into "higher score"
//! (kube-scheduler `scoring.go`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{
    Constraint, LABEL_HOSTNAME, PodTopologySpread, SCHEDULE_ANYWAY, for_each_selected, has_all_keys,
};
use crate::cache::ClusterState;
use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin, Status,
};
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::{NodeInfo, PodInfo};

/// Shown by `/explain` for candidate nodes without every topology key
/// (kube-scheduler's `IgnoredNodes`).
const IGNORED_NOTE: &str =
    "node lacks a topology key of the pod's soft spread constraints: scores 0";

/// What Score needs, per soft constraint of the pod (kube-scheduler's
/// `preScoreState`).
struct PreScoreState {
    /// Nodes without every topology key score nothing (`IgnoredNodes`).
    require_all: bool,
    constraints: Vec<Constraint>,
    /// Constraints on other keys than the hostname: domain → matching pods,
    /// for the domains of the candidate nodes only.
    counts: Vec<HashMap<String, i64>>,
    /// Constraints on `kubernetes.io/hostname`: candidate node → matching
    /// pods on it (absent: 0).
    host_counts: Vec<HashMap<String, i64>>,
    /// `ln(domains + 2)`: counts in a topology with few domains weigh less.
    weights: Vec<f64>,
    ignored_note: Arc<str>,
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status {
        if cluster.node_count() == 0 {
            return Status::skip("no nodes in the cluster");
        }
        let constraints = match self.constraints(pod, SCHEDULE_ANYWAY, cluster) {
            Ok(c) => c,
            Err(e) => {
                return Status::error(format!(
                    "calculating preScoreState: obtaining pod's soft topology spread constraints: {e}"
                ));
            }
        };
        if constraints.is_empty() {
            return Status::skip("pod has no ScheduleAnyway topology spread constraints");
        }
        let k = constraints.len();
        let is_host: Vec<bool> = constraints
            .iter()
            .map(|c| c.topology_key == LABEL_HOSTNAME)
            .collect();

        // Candidate domains come from the nodes that passed filtering and
        // carry every topology key (the others are ignored when scoring),
        // unless the constraints are system defaults: then a node without a
        // key is in that key's "" domain.
        let require_all = self.requires_all_topologies(pod);
        let considered = |n: &NodeInfo| !require_all || has_all_keys(n, &constraints);
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); k];
        let mut candidates: HashSet<&str> = HashSet::new();
        for node in nodes.iter().filter(|n| considered(n)) {
            candidates.insert(&node.name);
            for (i, c) in constraints.iter().enumerate() {
                let v = node.label(&c.topology_key).unwrap_or("");
                if !is_host[i] && !counts[i].contains_key(v) {
                    counts[i].insert(v.to_string(), 0);
                }
            }
        }
        let weights = (0..k)
            .map(|i| {
                let size = if is_host[i] {
                    candidates.len()
                } else {
                    counts[i].len()
                };
                topology_normalizing_weight(size)
            })
            .collect();

        // Every node with every key (plus candidates the cache does not know)
        // contributes its pods to its domain, if the inclusion policies let it.
        let required = RequiredNodeAffinity::new(pod).with_label_ids(cluster.label_slots());
        let mut rows: HashMap<&str, usize> = HashMap::new();
        let mut names: Vec<&str> = Vec::new();
        let mut domains: Vec<Option<&str>> = Vec::new();
        let known = cluster.nodes().map(|n| &**n);
        for node in known.chain(nodes.iter().copied()) {
            if !considered(node) || rows.contains_key(node.name.as_str()) {
                continue;
            }
            rows.insert(&node.name, names.len());
            names.push(&node.name);
            for (i, c) in constraints.iter().enumerate() {
                let included = !is_host[i] && c.includes(pod, &required, node);
                domains.push(included.then(|| node.label(&c.topology_key).unwrap_or("")));
            }
        }
        let mut host_counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); k];
        for_each_selected(cluster, pod, &constraints, &rows, |row, i| {
            if is_host[i] {
                // Counted in Score by kube-scheduler, without inclusion policies.
                let name = names[row];
                if candidates.contains(name) {
                    match host_counts[i].get_mut(name) {
                        Some(n) => *n += 1,
                        None => {
                            host_counts[i].insert(name.to_string(), 1);
                        }
                    }
                }
            } else if let Some(n) = domains[row * k + i].and_then(|v| counts[i].get_mut(v)) {
                *n += 1;
            }
        });
        state.write(PreScoreState {
            require_all,
            constraints,
            counts,
            host_counts,
            weights,
            ignored_note: Arc::from(IGNORED_NOTE),
        });
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    crate::score_from_pre_score!(PreScoreState, fn spread_score);

    /// `MaxNodeScore * (max + min - score) / max` over the scored nodes; all
    /// 100 when every count is 0. Ignored nodes stay at 0.
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let raws = || scores.iter().filter_map(|s| s.raw);
        let Some(min) = raws().min() else {
            return Status::success();
        };
        let max = raws().fold(0, i64::max);
        for s in scores.iter_mut() {
            let Some(raw) = s.raw else { continue };
            s.score = if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - raw) / max
            };
        }
        Status::success()
    }
}

/// `topologyNormalizingWeight`: `ln(size + 2)`.
fn topology_normalizing_weight(size: usize) -> f64 {
    // Topology sizes are far below 2^53: the conversion is exact.
    (size as f64 + 2.0).ln()
}

/// `scoreForCount`: `count × weight + (maxSkew − 1)`; a larger maxSkew
/// waters down the differences between domains.
fn score_for_count(count: i64, max_skew: i64, weight: f64) -> f64 {
    // Pod counts and maxSkew are far below 2^53: the conversions are exact.
    let (count, max_skew) = (count as f64, max_skew as f64);
    count * weight + (max_skew - 1.0)
}

/// A node's score: the weighted spread of the pod's constraints over the
/// counts PreScore took; no value on a node without every topology key when
/// the constraints ask for all of them.
fn spread_score(s: &PreScoreState, node: &NodeInfo, _: &ClusterState) -> NodeScore {
    if s.require_all && !has_all_keys(node, &s.constraints) {
        return NodeScore::none(s.ignored_note.clone());
    }
    let mut score = 0.0;
    for (i, c) in s.constraints.iter().enumerate() {
        let Some(value) = node.label(&c.topology_key) else {
            continue;
        };
        let count = if c.topology_key == LABEL_HOSTNAME {
            s.host_counts[i].get(node.name.as_str())
        } else {
            s.counts[i].get(value)
        };
        score += score_for_count(count.copied().unwrap_or(0), c.max_skew, s.weights[i]);
    }
    // Counts are far below 2^53: the conversion is exact.
    NodeScore::value(score.round() as i64)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{Fixture, pod};
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{ZONE, score_without_pre_score};

    fn soft(key: &str, max_skew: i32) -> serde_json::Value {
        json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"foo": ""}}})
    }

    #[test]
    fn fewer_pods_in_the_zone_scores_higher_and_unlabelled_nodes_are_ignored() {
        let mut f = Fixture::default();
        for (n, z) in [("n1", "zone1"), ("n2", "zone1"), ("n3", "zone2")] {
            f.node(n, &[(ZONE, z)]);
        }
        f.node("n4", &[]);
        f.pods("ns", "n1", &[("foo", "")], 2);
        f.pods("ns", "n2", &[("foo", "")], 1);
        f.pods("other", "n3", &[("foo", "")], 4);
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [soft(ZONE, 1)]}),
        );
        // 2 zones: weight ln 4 = 1.386; zone1 3 × 1.386 = 4.16 → 4, zone2 0.
        // max 4, min 0: zone1 100 × (4 + 0 - 4) / 4 = 0, zone2 100 × 4 / 4 = 100.
        let (status, scores) = f.score(&p, &["n1", "n2", "n3", "n4"]);
        assert_eq!(status.code(), Code::Success);
        assert_eq!(
            scores,
            [(Some(4), 0), (Some(4), 0), (Some(0), 100), (None, 0)]
        );
    }

    #[test]
    fn hostname_counts_per_node_with_max_skew_added() {
        let mut f = Fixture::default();
        for n in ["n1", "n2", "n3"] {
            f.node(n, &[(LABEL_HOSTNAME, n)]);
        }
        f.pods("ns", "n1", &[("foo", "")], 3);
        f.pods("ns", "n2", &[("foo", "")], 1);
        f.pods("ns", "n2", &[("bar", "")], 7);
        let p = pod(
            "ns",
            &[],
            json!({"topologySpreadConstraints": [soft(LABEL_HOSTNAME, 2)]}),
        );
        // 3 nodes: weight ln 5 = 1.609; + (maxSkew - 1) = 1.
        // n1 3 × 1.609 + 1 = 5.83 → 6; n2 1.609 + 1 = 2.61 → 3; n3 1.
        // max 6, min 1: n1 100 × 1 / 6 = 16, n2 100 × 4 / 6 = 66, n3 100.
        let (_, scores) = f.score(&p, &["n1", "n2", "n3"]);
        assert_eq!(scores, [(Some(6), 16), (Some(3), 66), (Some(1), 100)]);
    }

    #[test]
    fn domains_come_from_candidates_and_counts_from_every_node() {
        let mut f = Fixture::default();
        for (n, z) in [
            ("n1", "zone1"),
            ("n2", "zone1"),
            ("n3", "zone2"),
            ("n5", "zone3"),
        ] {
            f.node(n, &[(ZONE, z)]);
        }
        f.pods("ns", "n2", &[("foo", "")], 2);
        f.pods("ns", "n5", &[("foo", "")], 5);
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [soft(ZONE, 1)]}),
        );
        // Candidates n1, n3: domains zone1, zone2 (weight ln 4). n2 is filtered
        // out but its 2 pods count for zone1; zone3 is no candidate domain.
        // n1 2 × 1.386 = 2.77 → 3, n3 0; normalized 0 and 100.
        let (_, scores) = f.score(&p, &["n1", "n3"]);
        assert_eq!(scores, [(Some(3), 0), (Some(0), 100)]);
    }

    #[test]
    fn constraints_add_up_and_no_pods_means_all_max() {
        let mut f = Fixture::default();
        f.node("a", &[(ZONE, "z1"), (LABEL_HOSTNAME, "a")]);
        f.node("b", &[(ZONE, "z2"), (LABEL_HOSTNAME, "b")]);
        let p = pod(
            "ns",
            &[],
            json!({"topologySpreadConstraints": [soft(ZONE, 1), soft(LABEL_HOSTNAME, 1)]}),
        );
        assert_eq!(f.score(&p, &["a", "b"]).1, [(Some(0), 100), (Some(0), 100)]);
        f.pods("ns", "a", &[("foo", "")], 1);
        // a: zone 1 × ln 4 + host 1 × ln 4 = 2.77 → 3; b 0. Normalized 0, 100.
        assert_eq!(f.score(&p, &["a", "b"]).1, [(Some(3), 0), (Some(0), 100)]);
    }

    #[test]
    fn node_affinity_policy_applies_to_counting() {
        let mut f = Fixture::default();
        f.node("a", &[(ZONE, "z1"), ("disk", "ssd")]);
        f.node("b", &[(ZONE, "z1")]);
        f.node("c", &[(ZONE, "z2"), ("disk", "ssd")]);
        f.pods("ns", "b", &[("foo", "")], 3);
        f.pods("ns", "c", &[("foo", "")], 1);
        let spec = |policy: &str| {
            let mut c = soft(ZONE, 1);
            c["nodeAffinityPolicy"] = json!(policy);
            json!({"nodeSelector": {"disk": "ssd"}, "topologySpreadConstraints": [c]})
        };
        // Honor: b's pods do not count: z1 0, z2 1 × ln 4 = 1.39 → 1.
        assert_eq!(
            f.score(&pod("ns", &[], spec("Honor")), &["a", "c"]).1,
            [(Some(0), 100), (Some(1), 0)]
        );
        // Ignore: z1 3 × 1.386 = 4.16 → 4, z2 1; 100 × (5 - 4) / 4 = 25, 100 × 4 / 4.
        assert_eq!(
            f.score(&pod("ns", &[], spec("Ignore")), &["a", "c"]).1,
            [(Some(4), 25), (Some(1), 100)]
        );
    }

    #[test]
    fn pods_without_soft_constraints_skip() {
        let mut f = Fixture::default();
        f.node("a", &[(ZONE, "z1")]);
        let hard = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"});
        let (s, _) = f.score(
            &pod("ns", &[], json!({"topologySpreadConstraints": [hard]})),
            &["a"],
        );
        assert_eq!(s.code(), Code::Skip);
        let (s, _) = f.score(&pod("ns", &[], json!({})), &["a"]);
        assert_eq!(s.code(), Code::Skip);
        let (s, _) = Fixture::default().score(
            &pod(
                "ns",
                &[],
                json!({"topologySpreadConstraints": [soft(ZONE, 1)]}),
            ),
            &[],
        );
        assert_eq!(s.code(), Code::Skip, "no nodes");
    }

    #[test]
    fn weights_and_counts_match_kube_scheduler() {
        assert!((topology_normalizing_weight(2) - 4f64.ln()).abs() < 1e-12);
        assert!((score_for_count(3, 2, 4f64.ln()) - (3.0 * 4f64.ln() + 1.0)).abs() < 1e-12);
    }

    #[test]
    fn missing_state_is_an_error() {
        let s = score_without_pre_score(&PodTopologySpread::default());
        assert_eq!(s.code(), Code::Error);
    }
}
