//! Hard constraints (`whenUnsatisfiable: DoNotSchedule`): PreFilter counts
//! matching pods per topology domain once; Filter compares one node's domain
//! with the global minimum (kube-scheduler `filtering.go`).

use std::collections::HashMap;

use super::{
    Constraint, DO_NOT_SCHEDULE, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread, for_each_selected, has_all_keys,
};
use crate::cache::ClusterState;
use crate::framework::{CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, Status};
use crate::k8s::node_affinity::RequiredNodeAffinity;
use crate::objects::{NodeInfo, PodInfo};

/// What Filter needs, per hard constraint of the pod (kube-scheduler's
/// `preFilterState`, with the minimum already resolved).
#[derive(Debug, Clone, PartialEq)]
struct PreFilterState {
    constraints: Vec<Constraint>,
    /// Domain (topology value) → matching pods. Every domain of an eligible
    /// node has an entry, even with no pods.
    counts: Vec<HashMap<String, i64>>,
    /// The global minimum skews are measured against: the smallest count, or
    /// 0 while there are fewer domains than `minDomains`.
    min_match: Vec<i64>,
    /// 1 when the incoming pod is selected by its own constraint.
    self_match: Vec<i64>,
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        let constraints = match self.constraints(pod, DO_NOT_SCHEDULE, cluster) {
            Ok(c) => c,
            Err(e) => return Status::error(format!("get constraints from pod: {e}")),
        };
        if constraints.is_empty() {
            return Status::skip("pod has no DoNotSchedule topology spread constraints");
        }
        let k = constraints.len();
        let required = RequiredNodeAffinity::new(pod).with_label_ids(cluster.label_slots());
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); k];
        // Nodes with every topology key; per node and constraint, the domain
        // its pods count in (`None`: excluded by the inclusion policies).
        let mut rows: HashMap<&str, usize> = HashMap::new();
        let mut domains: Vec<Option<&str>> = Vec::new();
        for node in cluster.nodes() {
            if !has_all_keys(node, &constraints) || rows.contains_key(node.name.as_str()) {
                continue;
            }
            rows.insert(&node.name, rows.len());
            for (i, c) in constraints.iter().enumerate() {
                let domain = if c.includes(pod, &required, node) {
                    node.label(&c.topology_key)
                } else {
                    None
                };
                if let Some(v) = domain
                    && !counts[i].contains_key(v)
                {
                    counts[i].insert(v.to_string(), 0);
                }
                domains.push(domain);
            }
        }
        for_each_selected(cluster, pod, &constraints, &rows, |row, i| {
            if let Some(n) = domains[row * k + i].and_then(|v| counts[i].get_mut(v)) {
                *n += 1;
            }
        });
        let min_match = min_matches(&constraints, &counts);
        let self_match = constraints
            .iter()
            .map(|c| i64::from(c.selects(&pod.labels)))
            .collect();
        state.write(PreFilterState {
            constraints,
            counts,
            min_match,
            self_match,
        });
        Status::success()
    }
}

/// Per constraint, the global minimum skews are measured against.
fn min_matches(constraints: &[Constraint], counts: &[HashMap<String, i64>]) -> Vec<i64> {
    constraints
        .iter()
        .zip(counts)
        .map(|(c, counts)| {
            if counts.len() < c.min_domains {
                0
            } else {
                // No domain at all (only with minDomains 0, which the API
                // server rejects): kube-scheduler's critical path stays at
                // MaxInt32, so nothing is rejected for skew.
                counts
                    .values()
                    .copied()
                    .min()
                    .unwrap_or(i64::from(i32::MAX))
            }
        })
        .collect()
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        update(state, pod, to_add, node, 1)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Status {
        update(state, pod, to_remove, node, -1)
    }
}

/// kube-scheduler's `updateWithPod`: `other`, on `node`, counts `delta`
/// more in the domains PreFilter counted it in (same namespace, not
/// terminating, an eligible node with every key, selected), then the
/// minimums are resolved again.
fn update(
    state: &mut CycleState,
    pod: &PodInfo,
    other: &PodInfo,
    node: &NodeInfo,
    delta: i64,
) -> Status {
    let Some(s) = state.modify::<PreFilterState>() else {
        return Status::error("PreFilter state missing");
    };
    if other.namespace != pod.namespace || other.deleting || !has_all_keys(node, &s.constraints) {
        return Status::success();
    }
    let required = RequiredNodeAffinity::new(pod);
    for (c, counts) in s.constraints.iter().zip(s.counts.iter_mut()) {
        if !c.selects(&other.labels) || !c.includes(pod, &required, node) {
            continue;
        }
        if let Some(n) = node.label(&c.topology_key).and_then(|v| counts.get_mut(v)) {
            *n += delta;
        }
    }
    s.min_match = min_matches(&s.constraints, &s.counts);
    Status::success()
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let s = match state.from_pre_filter::<PreFilterState>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.label(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let match_num = s.counts[i].get(value).copied().unwrap_or(0);
            if match_num + s.self_match[i] - s.min_match[i] > c.max_skew {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{Fixture, pod};
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{HOSTNAME, ZONE};

    /// zone1 = {n1, n2}, zone2 = {n3, n4}; `foo` pods: n1 2, n2 1, n3 1.
    fn two_zones() -> Fixture {
        let mut f = Fixture::default();
        f.zoned_nodes(&[
            ("n1", "zone1"),
            ("n2", "zone1"),
            ("n3", "zone2"),
            ("n4", "zone2"),
        ]);
        f.pods("ns", "n1", &[("foo", "")], 2);
        f.pods("ns", "n2", &[("foo", "")], 1);
        f.pods("ns", "n3", &[("foo", "")], 1);
        f
    }

    fn zone_constraint(max_skew: i32, extra: serde_json::Value) -> serde_json::Value {
        let mut c = json!({
            "maxSkew": max_skew, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
        });
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        c
    }

    #[test]
    fn add_and_remove_pod_match_a_fresh_pre_filter() {
        let mut f = two_zones();
        f.pods("other", "n4", &[("foo", "")], 1);
        f.pods("ns", "n4", &[("bar", "")], 1);
        let spec = json!({"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}},
            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}}
        ]});
        let p = pod("ns", &[("foo", "")], spec);
        // Removing n3's one pod moves the hostname minimum; the pods in
        // another namespace or not selected count nowhere.
        let plugin = std::mem::take(&mut f.plugin);
        crate::plugins::test_support::check_extensions(&plugin, &mut f, &p, |s| {
            s.read::<PreFilterState>().cloned()
        });
    }

    #[test]
    fn skew_is_measured_against_the_emptiest_domain() {
        let f = two_zones();
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [zone_constraint(1, json!({}))]}),
        );
        // zone1 = 3, zone2 = 1, min 1: zone1 3 + 1 - 1 = 3 > 1; zone2 1 + 1 - 1 = 1.
        assert_eq!(
            f.filter(&p),
            [
                ("n1", Code::Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH),
                ("n2", Code::Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH),
                ("n3", Code::Success, ""),
                ("n4", Code::Success, ""),
            ]
        );
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [zone_constraint(3, json!({}))]}),
        );
        assert!(
            f.filter(&p).iter().all(|r| r.1 == Code::Success),
            "3 <= maxSkew 3"
        );
    }

    #[test]
    fn pods_being_deleted_do_not_count() {
        let mut f = two_zones();
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [zone_constraint(1, json!({}))]}),
        );
        // Mark zone1's pods as terminating: zone1 counts 0 and zone2 (1 pod)
        // becomes the fuller zone: 1 + 1 - 0 = 2 > 1.
        let leaving: Vec<PodInfo> = f
            .cluster
            .pods()
            .filter(|q| matches!(q.node_name.as_deref(), Some("n1" | "n2")))
            .cloned()
            .collect();
        for mut q in leaving {
            q.deleting = true;
            f.cluster.apply_pod(q);
        }
        assert_eq!(
            f.filter(&p),
            [
                ("n1", Code::Success, ""),
                ("n2", Code::Success, ""),
                ("n3", Code::Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH),
                ("n4", Code::Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH),
            ]
        );
    }

    #[test]
    fn a_pod_outside_its_own_selector_adds_no_skew() {
        let f = two_zones();
        let c = zone_constraint(2, json!({}));
        // zone1: 3 + 0 - 1 = 2 <= 2.
        let p = pod(
            "ns",
            &[("bar", "")],
            json!({"topologySpreadConstraints": [c.clone()]}),
        );
        assert!(f.filter(&p).iter().all(|r| r.1 == Code::Success));
        // zone1: 3 + 1 - 1 = 3 > 2.
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [c]}),
        );
        assert_eq!(f.filter(&p)[0].1, Code::Unschedulable);
    }

    #[test]
    fn missing_topology_key_is_unresolvable() {
        let mut f = two_zones();
        f.node("bare", &[("kubernetes.io/hostname", "bare")]);
        let host = json!({"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}});
        let p = pod(
            "ns",
            &[],
            json!({"topologySpreadConstraints": [host, zone_constraint(5, json!({}))]}),
        );
        let out = f.filter(&p);
        assert_eq!(
            out.last().unwrap(),
            &(
                "bare",
                Code::UnschedulableAndUnresolvable,
                ERR_REASON_NODE_LABEL_NOT_MATCH
            )
        );
        assert_eq!(
            ERR_REASON_NODE_LABEL_NOT_MATCH,
            "node(s) didn't match pod topology spread constraints (missing required label)"
        );
        // Hostname with `{}` selects every pod of the namespace, the incoming
        // one too; only nodes with both keys are domains (bare is not):
        // n1 2, n2 1, n3 1, n4 0, min 0.
        // n1: 2 + 1 - 0 = 3 > 1; n2, n3: 1 + 1 = 2 > 1; n4: 0 + 1 = 1.
        // bare passes the hostname constraint (0 + 1) and fails on the zone key.
        let codes: Vec<Code> = out.iter().map(|r| r.1).collect();
        assert_eq!(
            codes[..4],
            [
                Code::Unschedulable,
                Code::Unschedulable,
                Code::Unschedulable,
                Code::Success
            ]
        );
    }

    #[test]
    fn min_domains_zeroes_the_global_minimum() {
        let f = two_zones();
        // 2 domains < minDomains 3: min 0, zone2 1 + 1 - 0 = 2 > 1.
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [zone_constraint(1, json!({"minDomains": 3}))]}),
        );
        assert!(f.filter(&p).iter().all(|r| r.1 == Code::Unschedulable));
        // minDomains 2 is met: back to min 1.
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [zone_constraint(1, json!({"minDomains": 2}))]}),
        );
        assert_eq!(f.filter(&p)[2].1, Code::Success);
    }

    #[test]
    fn only_the_pods_namespace_counts() {
        let mut f = two_zones();
        f.pods("other", "n3", &[("foo", "")], 5);
        let p = pod(
            "ns",
            &[("foo", "")],
            json!({"topologySpreadConstraints": [zone_constraint(1, json!({}))]}),
        );
        assert_eq!(f.filter(&p)[2].1, Code::Success, "zone2 still counts 1");
    }

    #[test]
    fn match_label_keys_narrow_the_selector() {
        let mut f = Fixture::default();
        f.node("a", &[(ZONE, "z1")]);
        f.node("b", &[(ZONE, "z2")]);
        f.pods("ns", "a", &[("app", "x"), ("rev", "1")], 3);
        f.pods("ns", "b", &[("app", "x"), ("rev", "2")], 1);
        let c = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["rev"]});
        // rev=2 only: z1 0, z2 1, min 0: z1 0 + 1 = 1 ok, z2 1 + 1 = 2 > 1.
        let p = pod(
            "ns",
            &[("app", "x"), ("rev", "2")],
            json!({"topologySpreadConstraints": [c.clone()]}),
        );
        assert_eq!(
            f.filter(&p),
            [
                ("a", Code::Success, ""),
                ("b", Code::Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH)
            ]
        );
        // Without the selector, matchLabelKeys alone select (a nil selector merged
        // with a label set is that set): same counts.
        let mut c2 = c;
        c2.as_object_mut().unwrap().remove("labelSelector");
        let p = pod(
            "ns",
            &[("app", "x"), ("rev", "2")],
            json!({"topologySpreadConstraints": [c2.clone()]}),
        );
        assert_eq!(f.filter(&p)[1].1, Code::Unschedulable);
        // No selector and no matching key: selects nothing, everything passes.
        let p = pod(
            "ns",
            &[("app", "x")],
            json!({"topologySpreadConstraints": [c2]}),
        );
        assert!(f.filter(&p).iter().all(|r| r.1 == Code::Success));
    }

    /// z1 = {plain (no ssd)}, z2 = {s2 (ssd), 2 pods}, z3 = {s3 (ssd, tainted), 1 pod}.
    fn inclusion_fixture() -> Fixture {
        let mut f = Fixture::default();
        f.node("plain", &[(ZONE, "z1")]);
        f.node("s2", &[(ZONE, "z2"), ("disk", "ssd")]);
        f.node("s3", &[(ZONE, "z3"), ("disk", "ssd")]);
        f.taint("s3", "dedicated", "NoSchedule");
        f.pods("ns", "s2", &[("foo", "")], 2);
        f.pods("ns", "s3", &[("foo", "")], 1);
        f
    }

    #[test]
    fn node_affinity_policy_honor_by_default_and_ignore() {
        let f = inclusion_fixture();
        let spec = |policy: serde_json::Value| {
            json!({"nodeSelector": {"disk": "ssd"}, "tolerations": [{"operator": "Exists"}],
                   "topologySpreadConstraints": [zone_constraint(1, policy)]})
        };
        // Honor: z1 is no domain; z2 2, z3 1, min 1: s2 2 + 1 - 1 = 2 > 1, s3 1.
        let honor = f.filter(&pod("ns", &[("foo", "")], spec(json!({}))));
        assert_eq!(
            honor.iter().map(|r| r.1).collect::<Vec<_>>(),
            [Code::Success, Code::Unschedulable, Code::Success]
        );
        // Ignore: z1 counts with 0, min 0: s3 1 + 1 - 0 = 2 > 1.
        let ignore = f.filter(&pod(
            "ns",
            &[("foo", "")],
            spec(json!({"nodeAffinityPolicy": "Ignore"})),
        ));
        assert_eq!(
            ignore.iter().map(|r| r.1).collect::<Vec<_>>(),
            [Code::Success, Code::Unschedulable, Code::Unschedulable]
        );
    }

    #[test]
    fn node_taints_policy_honor_excludes_untolerated_nodes() {
        let f = inclusion_fixture();
        let spec = |policy: serde_json::Value| json!({"topologySpreadConstraints": [zone_constraint(1, policy)]});
        // Ignore (default): z1 0, z2 2, z3 1, min 0: only plain passes (0 + 1).
        let ignore = f.filter(&pod("ns", &[("foo", "")], spec(json!({}))));
        assert_eq!(
            ignore.iter().map(|r| r.1).collect::<Vec<_>>(),
            [Code::Success, Code::Unschedulable, Code::Unschedulable]
        );
        // Honor without a toleration: z3 is no domain, same minimum 0; z3's
        // own count is then 0, so s3 passes (TaintToleration rejects it).
        let honor = f.filter(&pod(
            "ns",
            &[("foo", "")],
            spec(json!({"nodeTaintsPolicy": "Honor"})),
        ));
        assert_eq!(
            honor.iter().map(|r| r.1).collect::<Vec<_>>(),
            [Code::Success, Code::Unschedulable, Code::Success]
        );
    }

    #[test]
    fn pods_without_hard_constraints_skip_and_bad_selectors_error() {
        let f = two_zones();
        let soft =
            json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"});
        let (pre, _) = f.pre_filter(&pod(
            "ns",
            &[],
            json!({"topologySpreadConstraints": [soft]}),
        ));
        assert_eq!(pre.code(), Code::Skip);
        let (pre, _) = f.pre_filter(&pod("ns", &[], json!({})));
        assert_eq!(pre.code(), Code::Skip);
        let bad = zone_constraint(
            1,
            json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
        );
        let (pre, _) = f.pre_filter(&pod("ns", &[], json!({"topologySpreadConstraints": [bad]})));
        assert_eq!(pre.code(), Code::Error);
        assert!(
            pre.message()
                .starts_with("get constraints from pod: values"),
            "{}",
            pre.message()
        );
    }

    #[test]
    fn missing_state_is_an_error() {
        let f = two_zones();
        let s = PodTopologySpread::default().filter(
            &CycleState::new(),
            &pod("ns", &[], json!({})),
            &f.nodes[0],
            &f.cluster,
        );
        assert_eq!(s.code(), Code::Error);
    }
}
