//! Unit tests of the plugin, kept apart to keep the plugin file readable.
use super::*;
use crate::framework::Code;
use serde_json::{Value, json};

use crate::framework::QueueingHint;
use crate::plugins::test_support::{self, node_added, node_updated, pod_with_spec as pod};

/// A pod whose required affinity has these terms.
fn required(terms: Value) -> PodInfo {
    pod(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
}

/// A pod whose required affinity is one term with these expressions.
fn exprs(e: Value) -> PodInfo {
    required(json!([{ "matchExpressions": e }]))
}

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    NodeInfo::new(name, labels.iter().copied())
}

fn filter(pod: &PodInfo, node: &NodeInfo) -> Status {
    test_support::filter(
        &NodeAffinity::default(),
        pod,
        node,
        &ClusterState::default(),
    )
}

fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    let s = filter(pod, node);
    assert!(
        s.is_success() || s.message() == ERR_REASON_POD,
        "unexpected {s:?}"
    );
    s.is_success()
}

#[test]
fn node_selector_needs_every_label() {
    let p = pod(json!({"nodeSelector": {"disk": "ssd", "zone": "a"}}));
    assert!(fits(
        &p,
        &node("n", &[("disk", "ssd"), ("zone", "a"), ("x", "y")])
    ));
    let s = filter(&p, &node("n", &[("disk", "ssd")]));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        s.message(),
        "node(s) didn't match Pod's node affinity/selector"
    );
    assert!(!fits(&p, &node("n", &[("disk", "SSD"), ("zone", "a")])));
}

#[test]
fn pods_without_requirements_skip_the_filter() {
    assert_eq!(filter(&pod(json!({})), &node("n", &[])).code(), Code::Skip);
    let only_preferred = pod(json!({"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": []}}}));
    assert_eq!(filter(&only_preferred, &node("n", &[])).code(), Code::Skip);
}

#[test]
fn node_selector_and_affinity_must_both_match() {
    let p = pod(
        json!({"nodeSelector": {"disk": "ssd"}, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}),
    );
    assert!(fits(&p, &node("n", &[("disk", "ssd"), ("zone", "a")])));
    assert!(!fits(&p, &node("n", &[("disk", "ssd"), ("zone", "b")])));
    assert!(!fits(&p, &node("n", &[("zone", "a")])));
}

#[test]
fn in_and_not_in() {
    let p = exprs(json!([{"key": "zone", "operator": "In", "values": ["a", "b"]}]));
    assert!(fits(&p, &node("n", &[("zone", "b")])));
    assert!(!fits(&p, &node("n", &[("zone", "c")])));
    assert!(!fits(&p, &node("n", &[])), "In needs the label");
    let p = exprs(json!([{"key": "zone", "operator": "NotIn", "values": ["a"]}]));
    assert!(!fits(&p, &node("n", &[("zone", "a")])));
    assert!(fits(&p, &node("n", &[("zone", "b")])));
    assert!(fits(&p, &node("n", &[])), "NotIn matches a missing label");
}

#[test]
fn exists_and_does_not_exist() {
    let p = exprs(json!([{"key": "gpu", "operator": "Exists"}]));
    assert!(fits(&p, &node("n", &[("gpu", "")])));
    assert!(!fits(&p, &node("n", &[])));
    let p = exprs(json!([{"key": "gpu", "operator": "DoesNotExist"}]));
    assert!(!fits(&p, &node("n", &[("gpu", "x")])));
    assert!(fits(&p, &node("n", &[])));
    let p = exprs(json!([{"key": "gpu", "operator": "Exists", "values": ["x"]}]));
    assert!(
        !fits(&p, &node("n", &[("gpu", "x")])),
        "values with Exists do not parse"
    );
}

#[test]
fn gt_and_lt_compare_integers() {
    let gt = exprs(json!([{"key": "cores", "operator": "Gt", "values": ["8"]}]));
    assert!(fits(&gt, &node("n", &[("cores", "16")])));
    assert!(!fits(&gt, &node("n", &[("cores", "8")])));
    assert!(
        !fits(&gt, &node("n", &[("cores", "many")])),
        "non-integer label"
    );
    assert!(!fits(&gt, &node("n", &[])), "missing label");
    assert!(
        fits(&gt, &node("n", &[("cores", "+9")])),
        "ParseInt accepts a sign"
    );
    assert!(
        fits(&gt, &node("n", &[("cores", "010")])),
        "and leading zeros"
    );
    let lt = exprs(json!([{"key": "cores", "operator": "Lt", "values": ["8"]}]));
    assert!(fits(&lt, &node("n", &[("cores", "-3")])));
    assert!(!fits(&lt, &node("n", &[("cores", "8")])));
}

#[test]
fn gt_and_lt_values_that_do_not_parse_match_nothing() {
    for values in [
        json!(["abc"]),
        json!(["1.5"]),
        json!(["1", "2"]),
        json!([]),
        json!(null),
        // Parses as an integer but is not a valid label value.
        json!(["-1"]),
    ] {
        let p = exprs(json!([{"key": "cores", "operator": "Gt", "values": values}]));
        assert!(!fits(&p, &node("n", &[("cores", "100")])), "{values}");
    }
}

#[test]
fn bad_requirements_fail_only_their_term() {
    for bad in [
        json!({"key": "zone", "operator": "Equals", "values": ["a"]}),
        json!({"key": "zone", "operator": "in", "values": ["a"]}),
        json!({"key": "zone", "operator": "In", "values": []}),
        json!({"key": "zone", "operator": "In", "values": ["not valid"]}),
        json!({"key": "bad key", "operator": "Exists"}),
        json!({"key": "a/b/c", "operator": "Exists"}),
        json!({"key": "Example.com/zone", "operator": "Exists"}),
    ] {
        let alone = required(json!([{"matchExpressions": [bad.clone()]}]));
        assert!(!fits(&alone, &node("n", &[("zone", "a")])), "{bad}");
        let with_good = required(json!([
            {"matchExpressions": [bad.clone()]},
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
        ]));
        assert!(fits(&with_good, &node("n", &[("zone", "a")])), "{bad}");
    }
}

#[test]
fn expressions_are_anded_and_terms_ored() {
    let and = exprs(json!([
        {"key": "a", "operator": "Exists"},
        {"key": "b", "operator": "In", "values": ["1"]}
    ]));
    assert!(fits(&and, &node("n", &[("a", "x"), ("b", "1")])));
    assert!(!fits(&and, &node("n", &[("a", "x")])));
    let or = required(json!([
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}]}
    ]));
    assert!(fits(&or, &node("n", &[("b", "")])));
    assert!(!fits(&or, &node("n", &[("c", "")])));
}

#[test]
fn empty_terms_match_nothing() {
    assert!(!fits(&required(json!([])), &node("n", &[])));
    assert!(!fits(&required(json!([{}])), &node("n", &[])));
    assert!(!fits(
        &required(json!([{"matchExpressions": [], "matchFields": []}])),
        &node("n", &[])
    ));
    let with_good =
        required(json!([{}, {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}]));
    assert!(fits(&with_good, &node("n", &[])));
}

#[test]
fn match_fields_select_on_the_node_name() {
    let p = required(json!([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a"]}]}]));
    assert!(fits(&p, &node("a", &[])));
    assert!(!fits(&p, &node("b", &[])));
    let p = required(json!([{"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}]));
    assert!(!fits(&p, &node("a", &[])));
    assert!(fits(&p, &node("b", &[])));
    // Fields and labels in one term are ANDed.
    let p = required(json!([{
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}],
        "matchExpressions": [{"key": "zone", "operator": "Exists"}]}]));
    assert!(fits(&p, &node("a", &[("zone", "z")])));
    assert!(!fits(&p, &node("a", &[])));
}

#[test]
fn match_fields_edge_cases() {
    // Exactly one value, and only In/NotIn.
    for bad in [
        json!({"key": "metadata.name", "operator": "In", "values": ["a", "b"]}),
        json!({"key": "metadata.name", "operator": "NotIn", "values": []}),
        json!({"key": "metadata.name", "operator": "Exists"}),
    ] {
        let p = required(json!([{"matchFields": [bad.clone()]}]));
        assert!(!fits(&p, &node("a", &[])), "{bad}");
    }
    // Any other field reads as "".
    let p =
        required(json!([{"matchFields": [{"key": "spec.x", "operator": "In", "values": [""]}]}]));
    assert!(fits(&p, &node("a", &[])));
    let p = required(
        json!([{"matchFields": [{"key": "spec.x", "operator": "NotIn", "values": [""]}]}]),
    );
    assert!(!fits(&p, &node("a", &[])));
    // A node without a name has no fields: field requirements are not checked.
    let p = required(
        json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]),
    );
    assert!(fits(&p, &node("", &[])));
}

#[test]
fn conflicting_node_names_reject_in_pre_filter() {
    let conflict = required(json!([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a"]},
        {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]));
    let s = filter(&conflict, &node("a", &[]));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), "pod affinity terms conflict");
    // Another term naming a node, or a term without names, lifts the conflict.
    let named = required(json!([
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]},
                         {"key": "metadata.name", "operator": "In", "values": ["b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]));
    assert_eq!(filter(&named, &node("c", &[])).code(), Code::Success);
    let unnamed = required(json!([
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "x", "operator": "Exists"}]}]));
    assert_eq!(
        filter(&unnamed, &node("c", &[])).message(),
        "node(s) didn't match Pod's node affinity/selector"
    );
    let empty_in = required(json!([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": []}]}]));
    assert_eq!(
        filter(&empty_in, &node("c", &[])).message(),
        "pod affinity terms conflict"
    );
}

fn preferred(terms: Value) -> PodInfo {
    pod(json!({"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": terms}}}))
}

fn scores(pod: &PodInfo, nodes: &[NodeInfo]) -> Result<Vec<(i64, i64)>, Status> {
    let cluster = ClusterState::default();
    let mut state = CycleState::new();
    let pre = NodeAffinity::default().pre_score(&mut state, pod, &[], &cluster);
    if pre.code() != Code::Success {
        return Err(pre);
    }
    let mut out: Vec<NodeScore> = nodes
        .iter()
        .map(|n| {
            NodeAffinity::default()
                .score(&state, pod, n, &cluster)
                .unwrap()
        })
        .collect();
    assert!(
        NodeAffinity::default()
            .normalize(&state, pod, &mut out)
            .is_success()
    );
    Ok(out.iter().map(|s| (s.raw.unwrap(), s.score)).collect())
}

#[test]
fn score_sums_matching_weights_and_normalizes() {
    let p = preferred(json!([
        {"weight": 20, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
        {"weight": 60, "preference": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}},
        {"weight": 0, "preference": {"matchExpressions": [{"key": "c", "operator": "Exists"}]}},
        {"weight": 50, "preference": {}},
        {"weight": 10, "preference": {"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n3"]}]}}
    ]));
    let nodes = [
        node("n0", &[]),
        node("n1", &[("a", ""), ("c", "")]),
        node("n2", &[("a", ""), ("b", "")]),
        node("n3", &[("b", "")]),
    ];
    assert_eq!(
        scores(&p, &nodes).unwrap(),
        [(0, 0), (20, 25), (80, 100), (70, 87)]
    );
}

#[test]
fn score_skips_pods_without_preferences_and_keeps_zeros() {
    let s = scores(&pod(json!({})), &[node("n", &[])]).unwrap_err();
    assert_eq!(s.code(), Code::Skip);
    // An empty list is not skipped: every node scores 0.
    assert_eq!(
        scores(&preferred(json!([])), &[node("n", &[])]).unwrap(),
        [(0, 0)]
    );
}

#[test]
fn unparsable_preferred_terms_fail_pre_score_with_kube_messages() {
    let p = preferred(json!([{"weight": 1, "preference": {"matchExpressions": [
        {"key": "a", "operator": "Foo"}]}}]));
    let s = scores(&p, &[]).unwrap_err();
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        r#"[0].matchExpressions[0].operator: Unsupported value: "Foo": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt""#
    );
    let p = preferred(json!([
        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
        {"weight": 1, "preference": {
            "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}}]));
    assert_eq!(
        scores(&p, &[]).unwrap_err().message(),
        r#"[[1].matchExpressions[0].values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer, [1].matchFields[0].values: Invalid value: ["a","b"]: must have one element]"#
    );
    // A zero-weight term is not even parsed.
    let p = preferred(json!([{"weight": 0, "preference": {"matchExpressions": [
        {"key": "a", "operator": "Foo"}]}}]));
    assert!(scores(&p, &[]).is_ok());
}

#[test]
fn required_affinity_is_reusable() {
    let p = pod(json!({"nodeSelector": {"a": "1"}}));
    let r = RequiredNodeAffinity::new(&p);
    assert!(r.matches(&node("n", &[("a", "1")])));
    assert!(!r.matches(&node("n", &[])));
    assert!(RequiredNodeAffinity::new(&pod(json!({}))).matches(&node("n", &[])));
}

#[test]
fn node_selector_by_inline_ids_gives_the_string_verdicts() {
    let mut c = ClusterState::default();
    c.watch_labels(["zone"]);
    c.watch_selector_labels(["run"]);
    let labelled: [&[(&str, &str)]; 5] = [
        &[("run", "r1"), ("zone", "a")],
        &[("run", "r2"), ("zone", "a")],
        &[("zone", "a")],
        &[("run", "r1"), ("zone", "b"), ("disk", "ssd")],
        &[],
    ];
    for (i, labels) in labelled.iter().enumerate() {
        c.apply_node(node(&format!("n{i}"), labels));
    }
    let mut nodes: Vec<NodeInfo> = (0..labelled.len())
        .map(|i| (**c.node(&format!("n{i}")).unwrap()).clone())
        .collect();
    // Nodes the cache did not fill (a request's own `Nodes`) read by string.
    nodes.extend(labelled.iter().map(|l| node("uncached", l)));
    let selectors = [
        json!({"run": "r1"}),
        json!({"run": "r1", "zone": "a"}),
        json!({"run": "r9"}),
        json!({"zone": "b", "disk": "ssd"}),
        json!({"disk": "hdd", "run": "r1"}),
    ];
    let mut answers = std::collections::HashSet::new();
    for selector in selectors {
        let p = pod(json!({ "nodeSelector": selector }));
        let by_string = RequiredNodeAffinity::new(&p);
        let by_id = RequiredNodeAffinity::new(&p).with_label_ids(c.label_slots());
        assert_ne!(by_id, by_string, "{selector}: some pair read by id");
        for n in &nodes {
            let verdict = by_string.matches(n);
            assert_eq!(by_id.matches(n), verdict, "{selector} on {n:?}");
            assert_eq!(
                fits_in(&p, n, &c),
                verdict,
                "{selector} on {n:?}: the plugin"
            );
            answers.insert(verdict);
        }
    }
    assert_eq!(answers.len(), 2, "both verdicts occur");
}

/// [`fits`] in cluster `c` (PreFilter reads its label slots).
fn fits_in(pod: &PodInfo, node: &NodeInfo, c: &ClusterState) -> bool {
    test_support::filter(&NodeAffinity::default(), pod, node, c).is_success()
}

/// Cases of kube-scheduler's `Test_isSchedulableAfterNodeChange`
/// (`node_affinity_test.go`; its `addedAffinity` cases are in `added_tests.rs`).
#[test]
fn hints_queue_the_pod_when_a_node_starts_matching() {
    let p = exprs(json!([{"key": "foo", "operator": "In", "values": ["bar"]}]));
    let hint = |event| test_support::hint(&NodeAffinity::default(), &p, event);
    let plain = node("n", &[]);
    let foo_bar = node("n", &[("foo", "bar")]);
    assert_eq!(hint(node_added(plain.clone())), QueueingHint::Skip);
    assert_eq!(hint(node_added(foo_bar.clone())), QueueingHint::Queue);
    let mut resized = plain.clone();
    resized.allocatable.pods = 10;
    assert_eq!(
        hint(node_updated(plain.clone(), resized)),
        QueueingHint::Skip,
        "not a label change"
    );
    assert_eq!(
        hint(node_updated(plain.clone(), node("n", &[("k", "v")]))),
        QueueingHint::Skip,
        "unrelated label"
    );
    assert_eq!(
        hint(node_updated(foo_bar.clone(), node("n", &[("k", "v")]))),
        QueueingHint::Skip,
        "from suitable to unsuitable"
    );
    assert_eq!(
        hint(node_updated(plain.clone(), foo_bar.clone())),
        QueueingHint::Queue
    );
    assert_eq!(
        hint(node_updated(
            foo_bar.clone(),
            node("n", &[("foo", "bar"), ("k", "v")])
        )),
        QueueingHint::Skip,
        "suitable before and after"
    );
    // The node selector counts as well.
    let selector = pod(json!({"nodeSelector": {"disk": "ssd"}}));
    let event = node_updated(plain.clone(), node("n", &[("disk", "ssd")]));
    assert_eq!(
        test_support::hint(&NodeAffinity::default(), &selector, event),
        QueueingHint::Queue
    );
    // A node name requirement (`matchFields`) on an added node.
    let named = required(json!([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["m"]}]}]));
    assert_eq!(
        test_support::hint(&NodeAffinity::default(), &named, node_added(node("n", &[]))),
        QueueingHint::Skip
    );
    assert_eq!(
        test_support::hint(&NodeAffinity::default(), &named, node_added(node("m", &[]))),
        QueueingHint::Queue
    );
}
