//! Unit tests of DefaultPreemption on a real profile (NodeAffinity and
//! NodeResourcesFit decide what fits), kept apart from the plugin.
use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::framework::CycleState;
use crate::objects::Resources;
use crate::plugins::test_support::PodBuilder;
use crate::policy::{CompiledPolicy, parse};

const POLICY: &str = "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n  - name: NodeAffinity\n  - name: NodeResourcesFit\n  - name: DefaultPreemption\n";

fn framework() -> Arc<Framework> {
    let p = CompiledPolicy::new(parse(POLICY, "t").unwrap());
    p.profile("s").unwrap().clone()
}

fn pod(name: &str, priority: i32, cpu: &str) -> PodInfo {
    PodBuilder::new(name)
        .uid(&format!("uid-{name}"))
        .priority(priority)
        .labels(&[("app", name)])
        .requests(&[("cpu", cpu)])
        .build()
}

fn on(node: &str, mut p: PodInfo) -> PodInfo {
    p.node_name = Some(node.into());
    p
}

/// Nodes `(name, cpu, zone label)` and pods already placed.
fn cluster(nodes: &[(&str, &str)], pods: Vec<PodInfo>) -> ClusterState {
    let mut c = ClusterState::default();
    for (name, cpu) in nodes {
        c.apply_node(NodeInfo {
            allocatable: Resources::from_list([("cpu", *cpu), ("pods", "110")]).unwrap(),
            ..NodeInfo::new(name, [("name", *name)])
        });
    }
    for p in pods {
        c.apply_pod(p);
    }
    c
}

/// Filters `pod` everywhere (it must fit nowhere) and runs PostFilter.
fn post_filter(pod: &PodInfo, c: &mut ClusterState) -> PostFilterResult {
    let f = framework();
    let mut nodes: Vec<Arc<NodeInfo>> = c.nodes().cloned().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut state = CycleState::new();
    let pre = f.pre_filter(&mut state, pod, c);
    let verdicts = f.filter_nodes(&state, &pre, pod, &nodes, &*c);
    let failed: Vec<(Arc<NodeInfo>, Status)> = nodes
        .into_iter()
        .zip(verdicts)
        .map(|(n, v)| (n, v.expect("the pod must fit nowhere")))
        .collect();
    let diagnosis = Diagnosis {
        total: failed.len(),
        failed: &failed,
        state: None,
    };
    f.post_filter(pod, &diagnosis, c)
}

fn nominated(r: &PostFilterResult) -> (String, Vec<String>) {
    match &r.nominating {
        Nominating::Nominate(n) => (
            n.node.clone(),
            n.victims.iter().map(|v| v.name.clone()).collect(),
        ),
        other => panic!("expected a nomination, got {other:?} ({:?})", r.status),
    }
}

#[test]
fn evicts_the_least_important_pods_that_make_room() {
    let mut c = cluster(
        &[("n1", "4")],
        vec![on("n1", pod("low", 1, "2")), on("n1", pod("mid", 5, "2"))],
    );
    let r = post_filter(&pod("p", 10, "2"), &mut c);
    assert_eq!(r.status.code(), Code::Success);
    assert_eq!(
        r.status.message(),
        "preemption: found a potential placement for pod on node n1, preempting 1 victims"
    );
    assert_eq!(nominated(&r), ("n1".into(), vec!["low".into()]));
    // The dry run put every pod back.
    assert_eq!(c.pods_on("n1").count(), 2);
    assert_eq!(
        c.usage("n1").unwrap().requested,
        Resources::from_list([("cpu", "4")]).unwrap()
    );
}

#[test]
fn equal_or_higher_priority_pods_are_never_victims() {
    let mut c = cluster(&[("n1", "2")], vec![on("n1", pod("peer", 10, "2"))]);
    let r = post_filter(&pod("p", 10, "1"), &mut c);
    assert_eq!(r.status.code(), Code::Unschedulable);
    assert_eq!(
        r.status.message(),
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    assert_eq!(r.nominating, Nominating::Clear);
}

#[test]
fn unresolvable_nodes_are_not_candidates_and_misfits_keep_their_reason() {
    let mut p = pod("p", 10, "3");
    Arc::make_mut(&mut p.spec).node_selector =
        BTreeMap::from([("name".to_string(), "n1".to_string())]);
    // n1 stays full of a more important pod even without "low"; n2 is the
    // wrong node whatever leaves it.
    let mut c = cluster(
        &[("n1", "4"), ("n2", "8")],
        vec![
            on("n1", pod("low", 1, "1")),
            on("n1", pod("high", 20, "2")),
            on("n2", pod("low2", 1, "8")),
        ],
    );
    let r = post_filter(&p, &mut c);
    assert_eq!(
        r.status.message(),
        "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling."
    );
    assert_eq!(r.nominating, Nominating::Clear);
}

#[test]
fn preemption_policy_never_and_terminating_victims_keep_the_pod_waiting() {
    let mut c = cluster(&[("n1", "2")], vec![on("n1", pod("low", 1, "2"))]);
    let mut never = pod("p", 10, "1");
    never.preemption.never = true;
    let r = post_filter(&never, &mut c);
    assert_eq!(
        r.status.message(),
        "preemption: not eligible due to preemptionPolicy=Never."
    );
    assert_eq!(r.nominating, Nominating::Unchanged);

    let mut going = on("n1", pod("low", 1, "2"));
    going.deleting = true;
    going.preemption.preempted = true;
    let mut c = cluster(&[("n1", "2")], vec![going]);
    let mut waiting = pod("p", 10, "1");
    waiting.preemption.nominated_node = Some("n1".into());
    let r = post_filter(&waiting, &mut c);
    assert_eq!(
        r.status.message(),
        "preemption: not eligible due to a terminating pod on the nominated node."
    );
    assert_eq!(r.nominating, Nominating::Unchanged);
}

#[test]
fn the_cheapest_node_wins() {
    // Lowest highest-victim priority first ...
    let mut c = cluster(
        &[("n1", "2"), ("n2", "2")],
        vec![on("n1", pod("a", 5, "2")), on("n2", pod("b", 1, "2"))],
    );
    assert_eq!(nominated(&post_filter(&pod("p", 10, "2"), &mut c)).0, "n2");
    // ... then the smaller priority sum, then fewer victims.
    let mut c = cluster(
        &[("n1", "2"), ("n2", "2")],
        vec![
            on("n1", pod("a1", 1, "1")),
            on("n1", pod("a2", 1, "1")),
            on("n2", pod("b", 1, "2")),
        ],
    );
    assert_eq!(
        nominated(&post_filter(&pod("p", 10, "2"), &mut c)),
        ("n2".into(), vec!["b".into()])
    );
}

#[test]
fn budgets_steer_victims_and_nodes() {
    let budget = |app: &str, allowed: i32| DisruptionBudget {
        namespace: "ns".into(),
        name: format!("pdb-{app}"),
        selector: Some(
            serde_json::from_value(serde_json::json!({"matchLabels": {"app": app}})).unwrap(),
        ),
        disruptions_allowed: allowed,
        ..Default::default()
    };
    // Same priorities everywhere; n1's victim is protected, n2's is not.
    let mut c = cluster(
        &[("n1", "2"), ("n2", "2")],
        vec![
            on("n1", pod("guarded", 1, "2")),
            on("n2", pod("free", 1, "2")),
        ],
    );
    c.objects_mut::<DisruptionBudget>()
        .apply(budget("guarded", 0));
    assert_eq!(nominated(&post_filter(&pod("p", 10, "2"), &mut c)).0, "n2");
    // One node: the protected pod is reprieved first, so the other one goes.
    let mut c = cluster(
        &[("n1", "2")],
        vec![
            on("n1", pod("guarded", 1, "1")),
            on("n1", pod("free", 1, "1")),
        ],
    );
    c.objects_mut::<DisruptionBudget>()
        .apply(budget("guarded", 0));
    assert_eq!(
        nominated(&post_filter(&pod("p", 10, "1"), &mut c)).1,
        vec!["free".to_string()]
    );
}

#[test]
fn args_follow_kube_scheduler_validation() {
    let parse = |y: &str| serde_yaml_ng::from_str::<DefaultPreemptionArgs>(y);
    assert_eq!(parse("{}").unwrap(), DefaultPreemptionArgs::default());
    let a = parse("{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 5}").unwrap();
    assert_eq!(DefaultPreemption::new(&a).candidates_wanted(100), 5);
    assert_eq!(
        DefaultPreemption::new(&DefaultPreemptionArgs::default()).candidates_wanted(3),
        3
    );
    for (bad, says) in [
        (
            "{minCandidateNodesPercentage: 101}",
            "not in valid range [0, 100]",
        ),
        ("{minCandidateNodesAbsolute: -1}", "must be 0 or more"),
        (
            "{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}",
            "cannot be zero",
        ),
        ("{minCandidates: 1}", "unknown field"),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn candidates_are_tried_from_an_offset_not_from_the_first_name() {
    // 200 equal nodes, each full with one low-priority pod: every node is an
    // equally good candidate, and the first one tried wins the tie.
    let names: Vec<String> = (0..200).map(|i| format!("n{i:03}")).collect();
    let nodes: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    let low: Vec<PodInfo> = names
        .iter()
        .map(|n| on(n, pod(&format!("low-{n}"), 0, "1")))
        .collect();
    let mut c = cluster(&nodes, low);
    let chosen: std::collections::BTreeSet<String> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|p| nominated(&post_filter(&pod(p, 10, "1"), &mut c)).0)
        .collect();
    assert!(
        chosen.len() > 1 && !chosen.iter().all(|n| n == "n000"),
        "preemptors spread over the candidates: {chosen:?}"
    );
    let again = nominated(&post_filter(&pod("a", 10, "1"), &mut c)).0;
    assert_eq!(
        again,
        nominated(&post_filter(&pod("a", 10, "1"), &mut c)).0,
        "one pod's outcome is reproducible"
    );
}

#[test]
fn victims_that_count_in_pre_filter_state_are_removed_from_it() {
    // With InterPodAffinity: "guard"'s anti-affinity is what keeps p off n1,
    // so the dry run must take it out of the PreFilter state (RemovePod) to
    // see p fit, and put it back (AddPod) to see it is needed; "idle" is
    // reprieved.
    let policy = POLICY.replace(
        "  - name: DefaultPreemption\n",
        "  - name: InterPodAffinity\n  - name: DefaultPreemption\n",
    );
    let compiled = CompiledPolicy::new(parse(&policy, "t").unwrap());
    let f = compiled.profile("s").unwrap().clone();
    let mut guard = pod("guard", 1, "1");
    let anti: k8s_openapi::api::core::v1::Affinity = serde_json::from_value(serde_json::json!({
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "name", "labelSelector": {"matchLabels": {"app": "p"}}}
        ]}
    }))
    .unwrap();
    Arc::make_mut(&mut guard.spec).affinity = Some(anti);
    let mut c = cluster(
        &[("n1", "4")],
        vec![on("n1", guard), on("n1", pod("idle", 1, "1"))],
    );
    let p = pod("p", 10, "1");
    let nodes: Vec<Arc<NodeInfo>> = c.nodes().cloned().collect();
    let mut state = CycleState::new();
    let pre = f.pre_filter(&mut state, &p, &c);
    let verdicts = f.filter_nodes(&state, &pre, &p, &nodes, &c);
    let failed: Vec<(Arc<NodeInfo>, Status)> = nodes
        .into_iter()
        .zip(verdicts)
        .map(|(n, v)| (n, v.expect("anti-affinity keeps p off n1")))
        .collect();
    assert_eq!(failed[0].1.code(), Code::Unschedulable);
    let diagnosis = Diagnosis {
        total: 1,
        failed: &failed,
        state: None,
    };
    let r = f.post_filter(&p, &diagnosis, &mut c);
    assert_eq!(nominated(&r), ("n1".into(), vec!["guard".into()]));
    assert_eq!(c.pods_on("n1").count(), 2, "every pod is back");
}
