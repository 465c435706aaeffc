use super::*;
use crate::cache::snapshot_file;
use crate::simulate::{cluster_cache, expand};

fn policy() -> Arc<CompiledPolicy> {
    let text = std::fs::read_to_string("policy.yaml").unwrap();
    Arc::new(CompiledPolicy::new(
        crate::policy::parse(&text, "policy.yaml").unwrap(),
    ))
}

const CLUSTER: &str = "
kind: Node
metadata: {name: a, labels: {kubernetes.io/hostname: a}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
kind: Node
metadata: {name: b, labels: {kubernetes.io/hostname: b}}
status: {allocatable: {cpu: '8', memory: 4Gi, pods: '3'}}
---
kind: Node
metadata: {name: c, labels: {kubernetes.io/hostname: c}}
spec: {taints: [{key: k, effect: NoSchedule}]}
status: {allocatable: {cpu: '64', memory: 64Gi, pods: '110'}}
---
kind: Pod
metadata: {name: old, namespace: x}
spec: {nodeName: a, containers: [{name: c, resources: {requests: {cpu: 1500m}}}]}
";

fn cache() -> Arc<Cache> {
    let snapshot = snapshot_file::parse(CLUSTER, "c.yaml").unwrap();
    cluster_cache(&policy(), snapshot, &expand::Expanded::default()).0
}

fn template(extra: &str) -> PodInfo {
    let mut e = expand::Expander::new(0, "placer");
    let pod = serde_yaml_ng::from_str(&format!(
        "metadata: {{name: t, namespace: x, labels: {{app: t}}}}\nspec: {{containers: [{{name: c, resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}}}]{extra}}}"
    ))
    .unwrap();
    e.pod(pod).unwrap();
    e.take().pods.remove(0)
}

#[test]
fn arithmetic_counts_free_room_on_the_nodes_filter_passes() {
    let m = max_of(&policy(), &cache(), &template(""), 0).unwrap();
    // a: 2.5 cpu free → 5 (memory 8); b: pods 3 (cpu 16, memory 4); c: tainted.
    assert_eq!(m.method, "resources");
    assert_eq!(m.count, 8);
    let nodes: Vec<(&str, usize)> = m.nodes.iter().map(|n| (n.node.as_str(), n.count)).collect();
    assert_eq!(nodes, [("a", 5), ("b", 3)]);
}

#[test]
fn arithmetic_agrees_with_scheduling_copy_after_copy() {
    let (policy, cache) = (policy(), cache());
    let fast = max_of(&policy, &cache, &template(""), 0).unwrap();
    let slow = scheduled(&policy, &cache, &template(""), 0).unwrap();
    assert_eq!(
        (slow.method, slow.count, slow.at_least),
        ("scheduled", fast.count, false)
    );
    let mut by_node = slow.nodes.clone();
    by_node.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.node.cmp(&b.node)));
    assert_eq!(by_node, fast.nodes);
}

#[test]
fn copies_that_repel_each_other_are_scheduled_one_by_one() {
    let anti = ", affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {app: t}}, topologyKey: kubernetes.io/hostname}]}}";
    let m = max_of(&policy(), &cache(), &template(anti), 0).unwrap();
    assert_eq!((m.method, m.count), ("scheduled", 2));
}
