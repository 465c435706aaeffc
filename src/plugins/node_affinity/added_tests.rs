//! Tests of the `addedAffinity` argument: the cases of kube-scheduler's
//! `node_affinity_test.go` (`TestNodeAffinity`, `TestNodeAffinityPriority`,
//! `Test_isSchedulableAfterNodeChange`) and `validation_pluginargs_test.go`
//! (`TestValidateNodeAffinityArgs`) that set it.
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::framework::{Code, QueueingHint};
use crate::plugins::test_support::{self, node_added, pod_with_spec as pod};

fn args(added: Value) -> Result<NodeAffinityArgs, String> {
    serde_json::from_value::<NodeAffinityArgs>(json!({ "addedAffinity": added }))
        .map_err(|e| e.to_string())
}

fn plugin(added: Value) -> NodeAffinity {
    NodeAffinity::new(&args(added).unwrap())
}

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    NodeInfo::new(name, labels.iter().copied())
}

fn requirement(key: &str, value: &str) -> Value {
    json!({"key": key, "operator": "In", "values": [value]})
}

/// Added required affinity: one term with `field` (`matchExpressions` or
/// `matchFields`) holding `req`.
fn added_required(field: &str, req: Value) -> Value {
    json!({"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ field: [req] }]}})
}

fn pod_requiring(key: &str, value: &str) -> PodInfo {
    pod(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [requirement(key, value)]}]}}}}))
}

fn preferring(terms: &[(i32, &str, &str)]) -> Value {
    let terms: Vec<Value> = terms
        .iter()
        .map(|(w, k, v)| json!({"weight": w, "preference": {"matchExpressions": [requirement(k, v)]}}))
        .collect();
    json!({ "preferredDuringSchedulingIgnoredDuringExecution": terms })
}

fn filter(p: &NodeAffinity, pod: &PodInfo, node: &NodeInfo) -> Status {
    test_support::filter(p, pod, node, &ClusterState::default())
}

#[test]
fn args_are_validated_as_kube_scheduler_validates_them() {
    let empty = serde_json::from_value::<NodeAffinityArgs>(json!({})).unwrap();
    assert_eq!(empty, NodeAffinityArgs::default());
    // "valid added affinity"
    let valid = json!({
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [requirement("label-1", "label-1-val")]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}}]});
    let parsed = args(valid.clone()).unwrap();
    assert!(parsed.added.required.is_some() && parsed.added.preferred.is_some());
    assert_eq!(
        serde_json::to_value(&parsed).unwrap()["addedAffinity"],
        valid
    );
    // "invalid added affinity": both errors, under kube-scheduler's paths.
    let e = args(json!({
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [requirement("invalid/label/key", "label-1-val")]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
            "matchFields": [{"key": "metadata.name", "operator": "In",
                             "values": ["node-1", "node-2"]}]}}]}))
    .unwrap_err();
    for path in [
        "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value",
        "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values: Invalid value",
    ] {
        assert!(e.contains(path), "{path} in {e}");
    }
    // Strict at every level, as a KubeSchedulerConfiguration is decoded.
    for unknown in [
        json!({"nope": 1}),
        json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists", "value": "typo"}]}]}}),
        json!({"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preferences": {}}]}),
    ] {
        let e = args(unknown.clone()).unwrap_err();
        assert!(e.contains("unknown field"), "{unknown}: {e}");
    }
}

#[test]
fn filter_needs_the_added_required_terms_too() {
    let name_is_node2 = added_required(
        "matchFields",
        json!({"key": "metadata.name", "operator": "In", "values": ["node2"]}),
    );
    let node2 = node("node2", &[("zone", "foo")]);
    // "Matches added affinity and Pod's node affinity"
    let p = plugin(name_is_node2.clone());
    assert!(filter(&p, &pod_requiring("zone", "foo"), &node2).is_success());
    // "Matches added affinity but not Pod's node affinity"
    let s = filter(&p, &pod_requiring("zone", "bar"), &node2);
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_POD.to_string()
        )
    );
    // "Doesn't match added affinity": a pod without requirements of its
    // own no longer skips the plugin.
    let p = plugin(added_required(
        "matchExpressions",
        requirement("zone", "bar"),
    ));
    let s = filter(&p, &pod(json!({})), &node2);
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::UnschedulableAndUnresolvable,
            "node(s) didn't match scheduler-enforced node affinity".to_string()
        )
    );
    // The enforced reason comes first, whatever the pod asks.
    let s = filter(&p, &pod_requiring("zone", "bar"), &node2);
    assert_eq!(s.message(), ERR_REASON_ENFORCED);
    // Required with no term matches no node (`NewNodeSelector` of an empty list).
    let none = plugin(
        json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}),
    );
    assert_eq!(
        filter(&none, &pod(json!({})), &node2).message(),
        ERR_REASON_ENFORCED
    );
    // Only preferred terms added: the filter is still skipped.
    let pref = plugin(preferring(&[(3, "key", "value")]));
    assert_eq!(filter(&pref, &pod(json!({})), &node2).code(), Code::Skip);
}

#[test]
fn the_node_name_shortcut_reads_only_the_pods_terms() {
    // kube-scheduler's PreFilter result comes from the pod's own terms;
    // the added ones are checked by Filter on each node.
    let p = plugin(added_required(
        "matchFields",
        json!({"key": "metadata.name", "operator": "In", "values": ["node2"]}),
    ));
    assert_eq!(p.pre_filter_nodes(&pod(json!({}))), None);
    let named = pod(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node1"]}]}]}}}}));
    assert_eq!(
        p.pre_filter_nodes(&named),
        Some(HashSet::from(["node1".to_string()]))
    );
    assert_eq!(
        filter(&p, &named, &node("node1", &[])).message(),
        ERR_REASON_ENFORCED
    );
}

fn scores(p: &NodeAffinity, pod: &PodInfo, nodes: &[NodeInfo]) -> (Code, Vec<i64>) {
    let nodes: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
    let (s, list) = test_support::score(p, pod, &nodes, &ClusterState::default());
    (s.code(), list.iter().map(|n| n.score).collect())
}

#[test]
fn added_preferred_terms_add_to_every_pods_score() {
    let foo_bar = node("node1", &[("foo", "bar")]);
    let key_value = node("node2", &[("key", "value")]);
    let both = node("node3", &[("foo", "bar"), ("key", "value"), ("az", "az1")]);
    // "added affinity": a pod without preferences is scored.
    let p = plugin(preferring(&[(2, "foo", "bar")]));
    assert_eq!(
        scores(&p, &pod(json!({})), &[foo_bar.clone(), key_value.clone()]),
        (Code::Success, vec![100, 0])
    );
    // "added affinity and pod has default affinity"
    let p = plugin(preferring(&[(3, "key", "value")]));
    let own = pod(json!({"affinity": {"nodeAffinity": preferring(&[(2, "foo", "bar")])}}));
    assert_eq!(
        scores(&p, &own, &[foo_bar, key_value, both]),
        (Code::Success, vec![40, 60, 100])
    );
    // Only required terms added: a pod without preferences still skips.
    let p = plugin(added_required(
        "matchExpressions",
        requirement("foo", "bar"),
    ));
    assert_eq!(scores(&p, &pod(json!({})), &[]).0, Code::Skip);
}

#[test]
fn hints_skip_nodes_outside_the_added_affinity() {
    let p = plugin(added_required(
        "matchExpressions",
        requirement("foo", "bar"),
    ));
    let wants_foo = pod_requiring("foo", "bar");
    // "skip-queue-on-add-scheduler-enforced-node-affinity"
    assert_eq!(
        test_support::hint(&p, &wants_foo, node_added(node("n", &[]))),
        QueueingHint::Skip
    );
    // "queue-on-add-scheduler-enforced-node-affinity"
    assert_eq!(
        test_support::hint(&p, &wants_foo, node_added(node("n", &[("foo", "bar")]))),
        QueueingHint::Queue
    );
    // A pod without requirements of its own: only the added ones decide.
    let p = plugin(added_required("matchExpressions", requirement("zone", "a")));
    assert_eq!(
        test_support::hint(&p, &pod(json!({})), node_added(node("n", &[("zone", "b")]))),
        QueueingHint::Skip
    );
    assert_eq!(
        test_support::hint(&p, &pod(json!({})), node_added(node("n", &[("zone", "a")]))),
        QueueingHint::Queue
    );
}
