//! One standalone scheduling attempt (`schedule_one`) with the shipped
//! `placer` profile of `policy.yaml`: a pod that fits, and a pod that fits
//! nowhere until DefaultPreemption evicts lower-priority pods (its dry run
//! removes and restores pods in place, re-running PreFilter per victim tried).
//!
//! Every node has 4 CPUs and holds `PODS_PER_NODE` pods of priority 0 with
//! 100m each; "fits" asks for 100m, "preempts" for 4 CPUs at priority 1000,
//! so every node is a candidate and every pod on it a possible victim.
//! Prints the median and p90 of `PLACER_BENCH_ITERS` attempts (default 20)
//! per case:
//!
//! ```text
//! cargo bench --bench standalone_cycle
//! ```

use std::time::Instant;

use placer::cache::ClusterState;
use placer::framework::Nominating;
use placer::modes::standalone::cycle::{Nominated, TieRotation, schedule_one};
use placer::objects::{NodeInfo, PodInfo, Resources};
use placer::policy::{CompiledPolicy, load};

const PODS_PER_NODE: usize = 30;

fn cluster(nodes: usize) -> ClusterState {
    let mut c = ClusterState::default();
    let allocatable = Resources::from_list([("cpu", "4"), ("memory", "16Gi"), ("pods", "110")])
        .unwrap_or_default();
    for n in 0..nodes {
        let name = format!("node-{n}");
        let zone = format!("zone-{}", n % 3);
        c.apply_node(NodeInfo {
            allocatable: allocatable.clone(),
            ..NodeInfo::new(
                &name,
                [
                    ("kubernetes.io/hostname", name.as_str()),
                    ("topology.kubernetes.io/zone", zone.as_str()),
                ],
            )
        });
        for p in 0..PODS_PER_NODE {
            let mut pod = pod(&format!("p-{n}-{p}"), 0, "100m");
            pod.node_name = Some(name.clone());
            c.apply_pod(pod);
        }
    }
    c
}

fn pod(name: &str, priority: i32, cpu: &str) -> PodInfo {
    let json = serde_json::json!({
        "metadata": {"name": name, "namespace": "bench", "uid": name, "labels": {"app": "bench"}},
        "spec": {"priority": priority, "schedulerName": "placer",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    });
    serde_json::from_value(json).unwrap_or_default()
}

fn main() {
    let iters: usize = std::env::var("PLACER_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policy.yaml");
    let Ok(policy) = load(&path) else {
        eprintln!("cannot load {}", path.display());
        std::process::exit(1);
    };
    let policy = CompiledPolicy::new(policy);
    let Some(framework) = policy.profile("placer").cloned() else {
        eprintln!("no placer profile in policy.yaml");
        std::process::exit(1);
    };
    let rotation = TieRotation::default();
    println!("case           nodes   pods      p50         p90");
    for nodes in [500, 5_000] {
        let mut c = cluster(nodes);
        for (case, p) in [
            ("fits", pod("incoming", 0, "100m")),
            ("preempts", pod("incoming", 1000, "4")),
        ] {
            // The case does what it says: a placement, or a nomination with victims.
            let outcome = schedule_one(&framework, &p, &mut c, Nominated::default(), &rotation);
            let as_expected = match (case, &outcome) {
                ("fits", Ok(_)) => true,
                ("preempts", Err(f)) => matches!(f.nominating(), Nominating::Nominate(_)),
                _ => false,
            };
            if !as_expected {
                eprintln!("{case} at {nodes} nodes: unexpected outcome {outcome:?}");
                std::process::exit(1);
            }
            let mut times: Vec<f64> = (0..iters)
                .map(|_| {
                    let start = Instant::now();
                    let out = schedule_one(&framework, &p, &mut c, Nominated::default(), &rotation);
                    let elapsed = start.elapsed().as_secs_f64();
                    let _ = std::hint::black_box(out);
                    elapsed
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize] * 1e3;
            println!(
                "{case:<12} {nodes:>7} {:>7} {:>9.2} ms {:>9.2} ms",
                nodes * PODS_PER_NODE,
                at(0.5),
                at(0.9)
            );
        }
    }
}
