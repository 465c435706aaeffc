//! The engine on small clusters: what the live loop would do, on simulated time.

use std::time::Duration;

use super::*;
use crate::cache::snapshot_file;
use crate::objects::PodInfo;

fn policy() -> Arc<CompiledPolicy> {
    let text = std::fs::read_to_string("policy.yaml").unwrap();
    Arc::new(CompiledPolicy::new(
        crate::policy::parse(&text, "policy.yaml").unwrap(),
    ))
}

fn nodes(n: usize, cpu: &str) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}, topology.kubernetes.io/zone: z{}}}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 8Gi, pods: '110'}}}}\n",
                i % 2
            )
        })
        .collect()
}

fn pod(name: &str, cpu: &str, priority: i32) -> PodInfo {
    let mut e = expand::Expander::new(0, "placer");
    let p: k8s_openapi::api::core::v1::Pod = serde_yaml_ng::from_str(&format!(
        "metadata: {{name: {name}, namespace: ns}}\nspec: {{priority: {priority}, containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}"
    ))
    .unwrap();
    e.pod(p).unwrap();
    e.take().pods.remove(0)
}

fn at(seconds: u64, runs_for: Option<u64>, pod: PodInfo) -> Arrival {
    Arrival {
        at: Duration::from_secs(seconds),
        runs_for: runs_for.map(Duration::from_secs),
        pod,
    }
}

fn run(cluster: &str, arrivals: Vec<Arrival>, seed: u64) -> Outcome {
    let policy = policy();
    let snapshot = snapshot_file::parse(cluster, "c.yaml").unwrap();
    let (cache, _) = cluster_cache(&policy, snapshot, &expand::Expanded::default());
    run_blocking(policy, cache, arrivals, seed).unwrap()
}

fn node_of<'a>(o: &'a Outcome, pod: &str) -> Option<&'a str> {
    o.pods
        .iter()
        .find(|p| p.pod == pod)
        .and_then(|p| p.node.as_deref())
}

#[test]
fn equal_nodes_are_chosen_by_the_seed_and_a_seed_repeats() {
    let pods = || {
        (0..20)
            .map(|i| at(0, None, pod(&format!("p{i}"), "100m", 0)))
            .collect()
    };
    let a = run(&nodes(8, "4"), pods(), 1);
    assert_eq!(a, run(&nodes(8, "4"), pods(), 1));
    let b = run(&nodes(8, "4"), pods(), 2);
    assert_eq!(a.summary.placed, 20);
    assert_ne!(a.pods, b.pods, "two seeds broke 20 ties the same way");
}

#[test]
fn higher_priority_goes_first_and_preempts_what_is_in_the_way() {
    // One node with room for one pod: the low-priority pod arrives first but
    // the queue is sorted when the run starts, then a later critical pod preempts.
    let arrivals = vec![
        at(0, None, pod("low", "3", 0)),
        at(0, None, pod("mid", "3", 10)),
        at(60, None, pod("high", "3", 100)),
    ];
    let o = run(&nodes(1, "4"), arrivals, 0);
    assert_eq!(node_of(&o, "ns/high"), Some("n0"));
    let state = |p: &str| o.pods.iter().find(|r| r.pod == p).unwrap().state;
    assert_eq!(state("ns/mid"), "Evicted");
    assert_eq!(state("ns/low"), "Pending");
    assert_eq!(o.summary.evicted, 1);
    let low = o.pods.iter().find(|r| r.pod == "ns/low").unwrap();
    assert!(
        low.reason
            .as_deref()
            .unwrap()
            .starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{low:?}"
    );
}

#[test]
fn a_departure_frees_room_for_a_pending_pod_in_simulated_time() {
    let arrivals = vec![
        at(0, Some(3600), pod("first", "3", 0)),
        at(10, None, pod("second", "3", 0)),
    ];
    let o = run(&nodes(1, "4"), arrivals, 0);
    assert_eq!(node_of(&o, "ns/second"), Some("n0"));
    assert_eq!(o.summary.departed, 1);
    // It waited for the hour to pass: simulated, not slept.
    assert!(
        o.summary.simulated_seconds >= 3600.0,
        "{}",
        o.summary.simulated_seconds
    );
}

#[test]
fn a_pod_naming_an_unknown_scheduler_stays_pending_with_the_reason() {
    let mut p = pod("lost", "1", 0);
    p.scheduler_name = "nobody".into();
    let o = run(&nodes(1, "4"), vec![at(0, None, p)], 0);
    assert_eq!(o.pods[0].state, "Pending");
    assert_eq!(
        o.pods[0].reason.as_deref(),
        Some("no profile for schedulerName \"nobody\"")
    );
}
