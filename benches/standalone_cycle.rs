//! One standalone scheduling attempt (`schedule_one`) with the shipped
//! `placer` profile of `policy.yaml`: a pod that fits, and a pod that fits
//! nowhere until DefaultPreemption evicts lower-priority pods (its dry run
//! removes and restores pods in place, updating a clone of the cycle state
//! with the PreFilter extensions, AddPod/RemovePod, per victim tried).
//!
//! Every node has 4 CPUs and holds `PODS_PER_NODE` pods of priority 0 with
//! 100m each; "fits" asks for 100m, "preempts" for 4 CPUs at priority 1000,
//! so every node is a candidate and every pod on it a possible victim.
//! Each case runs two ways: "locked" is `schedule_one` on the state itself
//! (what the loop ran under the cache's write lock before the replica),
//! "view" is the loop today: sync the replica with the one pod assumed since
//! the previous attempt, then attempt on it. "sync, 1 assume" is the only
//! time the loop now holds the cache's (read) lock.
//! Prints the median and p90 of `PLACER_BENCH_ITERS` attempts (default 20)
//! per case:
//!
//! ```text
//! cargo bench --bench standalone_cycle
//! ```

use std::time::Instant;

use placer::cache::{Cache, ClusterState};
use placer::framework::Nominating;
use placer::modes::standalone::cycle::{Nominated, TieRotation, schedule_on, schedule_one};
use placer::modes::standalone::sample::Search;
use placer::modes::standalone::view::CycleView;
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
    println!("case                   nodes    pods      p50         p90");
    for nodes in [500, 5_000] {
        let mut c = cluster(nodes);
        let cache = Cache::from_state(cluster(nodes));
        let view = CycleView::default();
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
            // schedule_one on a state it may mutate: what the loop ran under
            // the cache's write lock before the replica.
            let locked = sample(iters, || {
                let out = schedule_one(&framework, &p, &mut c, Nominated::default(), &rotation);
                let _ = std::hint::black_box(out);
            });
            report(&format!("{case} (locked)"), nodes, &locked);
            // The loop today: sync the replica (one pod assumed since the
            // previous attempt), then the attempt on it, no lock held.
            let mut n = 0;
            let viewed = sample(iters, || {
                n += 1;
                let out = view.attempt(&cache, |cluster, all| {
                    schedule_on(
                        &framework,
                        &p,
                        cluster,
                        all,
                        Nominated::default(),
                        &rotation,
                        Search::ALL,
                    )
                });
                if let Ok(placed) = &out {
                    let mut assumed = pod(&format!("assumed-{case}-{n}"), 0, "1m");
                    assumed.node_name = Some(placed.node.clone());
                    cache.write().apply_pod(assumed);
                }
                let _ = std::hint::black_box(out);
            });
            report(&format!("{case} (view)"), nodes, &viewed);
        }
        // The only time the cache is locked now: the sync after one assume.
        let mut n = 0;
        let synced = sample(iters, || {
            n += 1;
            let mut assumed = pod(&format!("sync-{n}"), 0, "1m");
            assumed.node_name = Some(format!("node-{}", n % nodes));
            cache.write().apply_pod(assumed);
            let started = Instant::now();
            view.attempt(&cache, |_, _| ());
            started.elapsed().as_secs_f64()
        });
        report("sync, 1 assume", nodes, &synced);
    }
}

/// Times `iters` runs of `f`; a closure returning a duration reports that instead.
fn sample<R: Timed>(iters: usize, mut f: impl FnMut() -> R) -> Vec<f64> {
    let mut times: Vec<f64> = (0..iters)
        .map(|_| {
            let start = Instant::now();
            let r = f();
            r.seconds().unwrap_or_else(|| start.elapsed().as_secs_f64())
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times
}

/// What a timed closure returns: nothing, or its own measurement.
trait Timed {
    fn seconds(&self) -> Option<f64>;
}

impl Timed for () {
    fn seconds(&self) -> Option<f64> {
        None
    }
}

impl Timed for f64 {
    fn seconds(&self) -> Option<f64> {
        Some(*self)
    }
}

fn report(case: &str, nodes: usize, times: &[f64]) {
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize] * 1e3;
    println!(
        "{case:<20} {nodes:>7} {:>7} {:>9.3} ms {:>9.3} ms",
        nodes * PODS_PER_NODE,
        at(0.5),
        at(0.9)
    );
}
