use super::*;
use crate::cache::snapshot_file;
use crate::simulate::expand::Expander;
use crate::simulate::timing;

fn policy() -> Arc<CompiledPolicy> {
    let text = std::fs::read_to_string("policy.yaml").unwrap();
    Arc::new(CompiledPolicy::new(
        crate::policy::parse(&text, "policy.yaml").unwrap(),
    ))
}

/// Two 4-cpu nodes in pools a and b, one 3-cpu pod on each, and a
/// workload of `pods` 2-cpu pods.
fn inputs(pods: usize) -> Inputs {
    let cluster = snapshot_file::parse(
        "
kind: Node
metadata: {name: a1, labels: {kubernetes.io/hostname: a1, pool: a}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
kind: Node
metadata: {name: b1, labels: {kubernetes.io/hostname: b1, pool: b}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}
---
kind: Pod
metadata: {name: on-a, namespace: x}
spec: {nodeName: a1, containers: [{name: c, resources: {requests: {cpu: '3'}}}]}
",
        "c.yaml",
    )
    .unwrap();
    let mut e = Expander::new(0, "placer");
    for i in 0..pods {
        let pod = serde_yaml_ng::from_str(&format!(
            "metadata: {{name: w{i}, namespace: x}}\nspec: {{containers: [{{name: c, resources: {{requests: {{cpu: '2'}}}}}}]}}"
        ))
        .unwrap();
        e.pod(pod).unwrap();
    }
    let workload = e.take();
    let arrivals = workload
        .pods
        .iter()
        .map(|p| timing::arrival(p.clone()).unwrap())
        .collect();
    Inputs {
        nodes: cluster.nodes,
        pods: cluster.pods,
        workload,
        arrivals,
        seed: 0,
        scheduler_name: "placer".into(),
    }
}

#[test]
fn selectors_parse_as_kubectl_writes_them() {
    let s: NodeSelector = "pool=a, zone!=z1,gpu,!spot".parse().unwrap();
    assert_eq!(s.0.len(), 4);
    assert!("a b=c".parse::<NodeSelector>().is_err());
    assert!("=x".parse::<NodeSelector>().is_err());
}

#[test]
fn a_drain_cordons_and_reschedules_what_the_nodes_held() {
    let mut i = inputs(1);
    let selector: NodeSelector = "pool=a".parse().unwrap();
    assert_eq!(drain(&mut i, &selector), (1, 1));
    let (o, _) = i.run(&policy()).unwrap();
    // on-a (3 cpu) moves to b1; w0 (2 cpu) no longer fits anywhere.
    let node = |p: &str| {
        o.pods
            .iter()
            .find(|r| r.pod == p)
            .and_then(|r| r.node.clone())
    };
    assert_eq!(node("x/on-a").as_deref(), Some("b1"));
    assert_eq!(o.summary.pending, 1);
    let w0 = o.pods.iter().find(|r| r.pod == "x/w0").unwrap();
    assert!(
        w0.reason
            .as_deref()
            .unwrap()
            .contains("1 node(s) were unschedulable"),
        "{w0:?}"
    );
}

#[test]
fn added_nodes_are_the_smallest_count_that_places_everything() {
    // Room for 2 (b1) of 7; each added 4-cpu node holds 2 more: 3 needed.
    let i = inputs(5);
    let template = i.nodes[1].clone();
    let a = add_nodes(&i, &policy(), &template).unwrap();
    assert_eq!(a.count, Some(2), "{a:?}");
    let none = add_nodes(&inputs(0), &policy(), &template).unwrap();
    assert_eq!(none.count, Some(0));
}

#[test]
fn a_comparison_lists_the_pods_that_end_differently() {
    let i = inputs(2);
    let (mine, _) = i.run(&policy()).unwrap();
    let mut other = mine.clone();
    other.pods[0].node = Some("elsewhere".into());
    let c = compare(&mine, &other, "other.yaml");
    assert_eq!(c.differences.len(), 1);
    assert_eq!(c.differences[0].other, "elsewhere");
    assert!(compare(&mine, &mine, "same").differences.is_empty());
}
