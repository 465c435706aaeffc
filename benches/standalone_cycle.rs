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
//! "fits, 2 WFFC claims" is "fits" for a pod with two unbound claims of a
//! `WaitForFirstConsumer` class that provisions (VolumeBinding checks the
//! class on every node and keeps each node's plan for Reserve). "fits, 1
//! DRA claim" is "fits" for a pod with one unallocated ResourceClaim of one
//! device, on nodes that publish 8 devices each (DynamicResources runs the
//! allocator on every node's slice, found by the cache's per-node index).
//! "fits, 1 DRA-backed gpu" asks for `example.com/gpu: 1` in its container,
//! which the same class serves (DRAExtendedResource): DynamicResources
//! builds the pod's claim for it and allocates it on every node.
//! Prints the median and p90 of `PLACER_BENCH_ITERS` attempts (default 20)
//! per case.
//!
//! "scale" is shaped like the scale harness (`tests/e2e/scale/workload.rs`)
//! at 5,000 nodes (`PLACER_BENCH_SCALE_NODES` sets another size, with twice
//! as many pods bound): nodes of 32 CPUs and 110 pods with its labels (three
//! zones, `net` high / low / unset, hw-encrypt on every other node, the
//! run label), 10,000 pods bound, the state set up as `serve` sets it up
//! (zone dimensions, inline label slots), and the measured pods in turn:
//! a `nodeSelector` on the run label, 100m / 128 MiB, every fourth
//! latency-sensitive, every fifth asking for hardware encryption. Each
//! attempt is the loop's: sync the view, schedule, assume the pod in the
//! cache. "scale + heartbeats" first re-applies every node's record
//! unchanged, as a status-only update (kwok's heartbeat, every 40-120 s per
//! node) does: a minute into a run every node has had one since the view
//! last copied it. Both
//! print wall-clock p50 / p90 and the process's CPU time per attempt (all
//! threads, rayon's included), over `PLACER_BENCH_SCALE_ITERS` attempts
//! (default 400). "scale, side by side" then runs the same workload, on
//! nodes that also report 20 images each (from a pool of 100, 50-500 MB;
//! every measured pod runs one of them), with two profiles interleaved
//! round by round on one cache: the shipped `placer` profile and
//! `examples/default-profile.yaml`'s (kube-scheduler's default plugins,
//! NodeResourcesBalancedAllocation, ImageLocality and NodeDeclaredFeatures
//! included), each with its own view, so both see the same cluster and the
//! same machine load; it prints both and the ratio of their CPU per attempt.
//! `PLACER_BENCH_ONLY=scale` runs only the scale cases, `cycle` only the
//! others:
//!
//! ```text
//! cargo bench --bench standalone_cycle
//! PLACER_BENCH_ONLY=scale cargo bench --bench standalone_cycle
//! PLACER_BENCH_ONLY=cycle cargo bench --bench standalone_cycle
//! ```

use std::time::Instant;

use std::sync::Arc;

use placer::cache::{Cache, ClusterState};
use placer::framework::Framework;
use placer::framework::Nominating;
use placer::modes::standalone::cycle::{Nominated, TieBreak, schedule_on, schedule_one};
use placer::modes::standalone::sample::Search;
use placer::modes::standalone::view::{CycleView, slot_selector_labels};
use placer::objects::images::NodeImages;
use placer::objects::volume::{ClaimInfo, StorageClassInfo};
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
    c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
        name: "wffc".into(),
        wait_for_first_consumer: Some(true),
        provisioner: "csi.bench".into(),
        ..Default::default()
    });
    for claim in ["data-0", "data-1"] {
        c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
            namespace: "bench".into(),
            name: claim.into(),
            storage_class: "wffc".into(),
            request: Some(1 << 30),
            ..Default::default()
        });
    }
    dra_devices(&mut c, nodes);
    c
}

/// DRA devices per node in the "1 DRA claim" case.
const DEVICES_PER_NODE: usize = 8;

/// One ResourceSlice of `DEVICES_PER_NODE` devices per node, a DeviceClass
/// of the driver's devices (a CEL selector) and one unallocated claim
/// asking for one device.
fn dra_devices(c: &mut ClusterState, nodes: usize) {
    let slices = (0..nodes)
        .map(|n| {
            let node = format!("node-{n}");
            let devices: Vec<_> = (0..DEVICES_PER_NODE)
                .map(|d| {
                    serde_json::json!({"name": format!("gpu-{d}"),
                    "attributes": {"model": {"string": "a100"}}})
                })
                .collect();
            let slice = serde_json::json!({
                "metadata": {"name": format!("{node}-gpus")},
                "spec": {"driver": "gpu.bench", "nodeName": node, "devices": devices,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}
            });
            Arc::new(serde_json::from_value(slice).unwrap_or_default())
        })
        .collect();
    let class = serde_json::json!({"metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.bench'"}}],
                 "extendedResourceName": "example.com/gpu"}});
    let claim = serde_json::json!({"metadata": {"name": "gpu", "namespace": "bench", "uid": "gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}});
    let dra = c.dra_mut();
    dra.set_watched();
    dra.replace_slices(slices);
    dra.replace_classes(vec![Arc::new(
        serde_json::from_value(class).unwrap_or_default(),
    )]);
    dra.replace_claims(vec![Arc::new(
        serde_json::from_value(claim).unwrap_or_default(),
    )]);
}

/// "fits" with one ResourceClaim of one device.
fn pod_with_dra_claim(name: &str) -> PodInfo {
    let json = serde_json::json!({
        "metadata": {"name": name, "namespace": "bench", "uid": name, "labels": {"app": "bench"}},
        "spec": {"schedulerName": "placer",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}
    });
    serde_json::from_value(json).unwrap_or_default()
}

/// "fits" with `example.com/gpu: 1`, which the DeviceClass serves.
fn pod_with_dra_backed_gpu(name: &str) -> PodInfo {
    let json = serde_json::json!({
        "metadata": {"name": name, "namespace": "bench", "uid": name, "labels": {"app": "bench"}},
        "spec": {"schedulerName": "placer",
                 "containers": [{"name": "c", "resources": {
                     "requests": {"cpu": "100m", "example.com/gpu": "1"},
                     "limits": {"example.com/gpu": "1"}}}]}
    });
    serde_json::from_value(json).unwrap_or_default()
}

/// "fits" with two `WaitForFirstConsumer` claims.
fn pod_with_claims(name: &str) -> PodInfo {
    let json = serde_json::json!({
        "metadata": {"name": name, "namespace": "bench", "uid": name, "labels": {"app": "bench"}},
        "spec": {"schedulerName": "placer",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                 "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data-0"}},
                             {"name": "b", "persistentVolumeClaim": {"claimName": "data-1"}}]}
    });
    serde_json::from_value(json).unwrap_or_default()
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
    let tie_break = TieBreak::default();
    let only = std::env::var("PLACER_BENCH_ONLY").ok();
    println!("case                   nodes    pods      p50         p90");
    if only.as_deref() == Some("scale") {
        scale(&policy, &framework);
        side_by_side(&policy, &framework);
        return;
    }
    for nodes in [500, 5_000] {
        let mut c = cluster(nodes);
        let cache = Cache::from_state(cluster(nodes));
        let view = CycleView::default();
        for (case, p) in [
            ("fits", pod("incoming", 0, "100m")),
            ("fits, 2 WFFC claims", pod_with_claims("incoming")),
            ("fits, 1 DRA claim", pod_with_dra_claim("incoming")),
            (
                "fits, 1 DRA-backed gpu",
                pod_with_dra_backed_gpu("incoming"),
            ),
            ("preempts", pod("incoming", 1000, "4")),
        ] {
            // The case does what it says: a placement, or a nomination with victims.
            let outcome = schedule_one(&framework, &p, &mut c, Nominated::default(), &tie_break);
            let as_expected = match (case, &outcome) {
                (
                    "fits" | "fits, 2 WFFC claims" | "fits, 1 DRA claim" | "fits, 1 DRA-backed gpu",
                    Ok(_),
                ) => true,
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
                let out = schedule_one(&framework, &p, &mut c, Nominated::default(), &tie_break);
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
                        &tie_break,
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
    if only.as_deref() == Some("cycle") {
        return;
    }
    scale(&policy, &framework);
    side_by_side(&policy, &framework);
}

/// Nodes of the "scale" cases (`PLACER_BENCH_SCALE_NODES`, default 5,000),
/// with twice as many pods bound, as the harness's sizes have.
fn scale_nodes() -> usize {
    std::env::var("PLACER_BENCH_SCALE_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000)
}
/// The run label's value (the harness's run id).
const RUN_ID: &str = "e2e-0123abcd";

/// Images in the pool the "side by side" nodes and pods draw from, and
/// how many of them each node reports.
const IMAGE_POOL: usize = 100;
const IMAGES_PER_NODE: usize = 20;

/// Image `k` of the pool: its name and a size between 50 and 500 MB.
fn pool_image(k: usize) -> (String, i64) {
    let k = k % IMAGE_POOL;
    let mb = 50 + (k * 4547) % 451;
    (
        format!("registry.example.com/team/app-{k}:1.{k}"),
        (mb * 1_000_000) as i64,
    )
}

/// Node `i` of the scale harness reporting 20 images of the pool, a
/// different mix per node (each image on a fifth of the nodes).
fn imaged_node(i: usize) -> NodeInfo {
    let first = i * 37;
    let entries: Vec<(Vec<String>, i64)> = (0..IMAGES_PER_NODE)
        .map(|j| {
            let (name, size) = pool_image(first + j * (IMAGE_POOL / IMAGES_PER_NODE));
            (vec![name], size)
        })
        .collect();
    NodeInfo {
        images: NodeImages::from_entries(entries.iter().map(|(n, s)| (n.as_slice(), *s))),
        ..scale_node(i)
    }
}

/// Node `i` of the scale harness, as `workload::node` labels it.
fn scale_node(i: usize) -> NodeInfo {
    let name = format!("{RUN_ID}-n{i:05}");
    let zone = format!("{RUN_ID}-z{}", i % 3);
    let mut labels = vec![
        ("kubernetes.io/hostname", name.clone()),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", "amd64".into()),
        ("e2e.placer.io/run", RUN_ID.into()),
        ("topology.kubernetes.io/zone", zone),
    ];
    match i % 3 {
        0 => labels.push(("net", "high".into())),
        1 => labels.push(("net", "low".into())),
        _ => {}
    }
    if i.is_multiple_of(2) {
        labels.push(("node.kubernetes.io/hw-encrypt", "true".into()));
    }
    NodeInfo {
        allocatable: Resources::from_list([("cpu", "32"), ("memory", "256Gi"), ("pods", "110")])
            .unwrap_or_default(),
        ..NodeInfo::new(&name, labels)
    }
}

/// Measured pod `i` of the scale harness (`workload::pod`).
fn scale_pod(i: usize) -> PodInfo {
    scale_pod_with(i, None)
}

/// [`scale_pod`], its container running `image` when given.
fn scale_pod_with(i: usize, image: Option<&str>) -> PodInfo {
    let name = format!("p-{i:05}");
    let mut labels = serde_json::Map::new();
    if i.is_multiple_of(4) {
        labels.insert("qos".into(), "latency-sensitive".into());
    }
    let mut annotations = serde_json::Map::new();
    if i.is_multiple_of(5) {
        annotations.insert("myorg.io/require-hw-encrypt".into(), "true".into());
    }
    let mut container = serde_json::json!({"name": "c", "resources": {"requests":
                     {"cpu": "100m", "memory": "128Mi"}}});
    if let Some(image) = image {
        container["image"] = image.into();
    }
    let json = serde_json::json!({
        "metadata": {"name": name, "namespace": RUN_ID, "uid": name,
                     "labels": labels, "annotations": annotations},
        "spec": {"schedulerName": "placer", "nodeSelector": {"e2e.placer.io/run": RUN_ID},
                 "containers": [container]}
    });
    serde_json::from_value(json).unwrap_or_default()
}

/// The "scale" cases: the loop's attempt (sync, schedule, assume) on a
/// cluster shaped like the scale harness's, without and with a heartbeat.
fn scale(policy: &CompiledPolicy, framework: &Arc<Framework>) {
    let iters: usize = std::env::var("PLACER_BENCH_SCALE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let cache = scale_cache(policy, &[], scale_node, scale_pod);
    let tie_break = TieBreak::default();
    let mut next_pod = 0;
    for (case, heartbeats) in [("scale", false), ("scale + heartbeats", true)] {
        let view = CycleView::default();
        // The first attempt copies the whole state into the view.
        view.attempt(&cache, |_, _| ());
        if heartbeats {
            let mut state = cache.write();
            for i in 0..scale_nodes() {
                // Same record, new allocation: what a status-only update applies.
                let _ = state.apply_node(scale_node(i));
            }
        }
        // Decoded before the clock starts: the loop gets them from the watch.
        let decoded: Vec<PodInfo> = (next_pod..next_pod + iters).map(scale_pod).collect();
        let mut pods = decoded.into_iter();
        next_pod += iters;
        let cpu_before = process_cpu_seconds();
        let wall_before = Instant::now();
        let times = sample(iters, || {
            let Some(p) = pods.next() else { return };
            slot_selector_labels(&cache, &p);
            let out = view.attempt(&cache, |cluster, all| {
                schedule_on(
                    framework,
                    &p,
                    cluster,
                    all,
                    Nominated::default(),
                    &tie_break,
                    Search::ALL,
                )
            });
            match out {
                Ok(placed) => {
                    let mut assumed = p;
                    assumed.node_name = Some(placed.node);
                    cache.write().apply_pod(assumed);
                }
                Err(f) => {
                    eprintln!("{case}: pod {} did not fit: {}", p.name, f.message());
                    std::process::exit(1);
                }
            }
        });
        let cpu = (process_cpu_seconds() - cpu_before) / iters as f64;
        let wall = wall_before.elapsed().as_secs_f64() / iters as f64;
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize] * 1e3;
        println!(
            "{case:<20} {:>7} {:>7} {:>9.3} ms {:>9.3} ms   \
             CPU {:.3} ms / attempt (wall {:.3} ms, {iters} attempts)",
            scale_nodes(),
            2 * scale_nodes(),
            at(0.5),
            at(0.9),
            cpu * 1e3,
            wall * 1e3,
        );
    }
}

/// The scale harness's cluster, set up as `serve` sets it up for `policy`
/// (and for the label keys `more` reads): [`scale_nodes`] nodes and twice as
/// many bound pods.
fn scale_cache(
    policy: &CompiledPolicy,
    more: &[String],
    node: fn(usize) -> NodeInfo,
    pod: fn(usize) -> PodInfo,
) -> Cache {
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    let keys = policy.node_label_keys();
    state.watch_labels(keys.iter().chain(more).map(String::as_str));
    let nodes = scale_nodes();
    for i in 0..nodes {
        state.apply_node(node(i));
    }
    for i in 0..2 * nodes {
        let mut p = pod(100_000 + i);
        p.node_name = Some(scale_node(i % nodes).name);
        state.apply_pod(p);
    }
    Cache::from_state(state)
}

/// Measured pod `i` of "side by side": the scale pod running pool image `i`.
fn imaged_pod(i: usize) -> PodInfo {
    scale_pod_with(i, Some(&pool_image(i).0))
}

/// "scale, side by side": the shipped `placer` profile and the default
/// profile, attempt for attempt on one cache (see the module doc).
fn side_by_side(policy: &CompiledPolicy, placer: &Arc<Framework>) {
    let iters: usize = std::env::var("PLACER_BENCH_SCALE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/default-profile.yaml");
    let default = match load(&path) {
        Ok(p) => CompiledPolicy::new(p),
        Err(e) => {
            eprintln!("cannot load {}: {e}", path.display());
            std::process::exit(1);
        }
    };
    let Some(default_framework) = default.profile("placer-default").cloned() else {
        eprintln!("no placer-default profile in {}", path.display());
        std::process::exit(1);
    };
    let cache = scale_cache(policy, &default.node_label_keys(), imaged_node, imaged_pod);
    let tie_break = TieBreak::default();
    let profiles = [("placer", placer), ("default profile", &default_framework)];
    let views = [CycleView::default(), CycleView::default()];
    for view in &views {
        // The first attempt copies the whole state into the view.
        view.attempt(&cache, |_, _| ());
    }
    // Decoded before the clock starts: the loop gets them from the watch.
    // Round `r` gives both profiles the same pod (labels, annotation,
    // image); the default profile's copy is numbered `SECOND_COPY` higher,
    // a multiple of 4, 5 and the pool, so only its name differs.
    const SECOND_COPY: usize = 1_000_000;
    let rounds: Vec<[PodInfo; 2]> = (0..iters)
        .map(|r| [imaged_pod(r), imaged_pod(SECOND_COPY + r)])
        .collect();
    let mut times = [Vec::with_capacity(iters), Vec::with_capacity(iters)];
    let mut cpu = [0.0; 2];
    for round in rounds {
        // One attempt of each profile per round, in turn.
        for (k, p) in round.into_iter().enumerate() {
            let (name, framework) = profiles[k];
            let cpu_before = process_cpu_seconds();
            let started = Instant::now();
            slot_selector_labels(&cache, &p);
            let out = views[k].attempt(&cache, |cluster, all| {
                schedule_on(
                    framework,
                    &p,
                    cluster,
                    all,
                    Nominated::default(),
                    &tie_break,
                    Search::ALL,
                )
            });
            match out {
                Ok(placed) => {
                    let mut assumed = p;
                    assumed.node_name = Some(placed.node);
                    cache.write().apply_pod(assumed);
                }
                Err(f) => {
                    eprintln!(
                        "side by side, {name}: pod {} did not fit: {}",
                        p.name,
                        f.message()
                    );
                    std::process::exit(1);
                }
            }
            times[k].push(started.elapsed().as_secs_f64());
            cpu[k] += process_cpu_seconds() - cpu_before;
        }
    }
    for (k, (name, _)) in profiles.iter().enumerate() {
        times[k].sort_by(f64::total_cmp);
        let at = |q: f64| times[k][((times[k].len() - 1) as f64 * q) as usize] * 1e3;
        println!(
            "{:<20} {:>7} {:>7} {:>9.3} ms {:>9.3} ms   \
             CPU {:.3} ms / attempt ({iters} attempts, interleaved)",
            format!("side by side, {name}"),
            scale_nodes(),
            2 * scale_nodes(),
            at(0.5),
            at(0.9),
            cpu[k] / iters as f64 * 1e3,
        );
    }
    println!(
        "side by side: default profile / placer, CPU per attempt {:.2}x, p50 {:.2}x",
        cpu[1] / cpu[0],
        times[1][(times[1].len() - 1) / 2] / times[0][(times[0].len() - 1) / 2],
    );
}

/// CPU time of the whole process so far (every thread), in seconds.
fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is handed, which we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
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
