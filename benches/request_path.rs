//! The extender request path without the socket: what one scheduling cycle
//! costs placer (`/filter` then `/prioritize`, each decode → evaluate →
//! encode), for both request shapes, at 500 / 5,000 / 15,000 nodes, with 0 and
//! 150,000 pods in the cache. `scripts/bench.sh` runs everything below and
//! records the numbers in `docs/benchmarks.md`.
//!
//! Modes (environment variable `PLACER_BENCH`):
//!
//! - unset: the criterion benchmarks (`cargo bench --bench request_path`;
//!   criterion's own arguments, e.g. a name filter, work after `--`).
//! - `latency`: times every cycle on its own with `Instant` and prints the
//!   distribution (p50/p90/p99/max), the "p99 server time" of design §11.
//!   `PLACER_BENCH_ITERS` sets the number of timed cycles (default 1000).
//! - `loop`: runs the 5,000-name, 150,000-pod cycle `PLACER_BENCH_ITERS`
//!   times (default 2000) and nothing else, for `perf record` / callgrind
//!   (`PLACER_BENCH_NODES`, `PLACER_BENCH_PODS`, `PLACER_BENCH_SHAPE=full`
//!   change the case).
//! - `breakdown`: medians of each stage of the 5,000-name cycle (body
//!   decode, name resolution, plugins, result building, encode);
//!   `PLACER_BENCH_NAMES` asks for fewer names, `PLACER_BENCH_COLD=1` evicts
//!   the caches before each stage (kube-scheduler's pace: each request
//!   finds them filled by other processes).
//! - `probe`: per-node costs of the primitives the path is built from (name
//!   lookups, dedup set, label lookups, body decode variants).
//! - `fixtures`: writes the load-test inputs into `PLACER_BENCH_OUT`
//!   (a snapshot for `placer serve --snapshot` and request bodies, names and
//!   full nodes).
//! - `floor-serve`: serves the full-node floor (`support::floor`) over the
//!   fixtures' cluster on `PLACER_BENCH_ADDR` (default 127.0.0.1:18803), for
//!   the shared floor tool's `pair`/`same` against `placer serve`.
//!
//! The criterion group `floor/full-nodes` runs placer's full-node cycle and
//! the floor's side by side, so a regression shows as a ratio.

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};

use support::{NodeSpec, cycle, filter_once, prioritize_once};

const NODE_COUNTS: &[usize] = &[500, 5_000, 15_000];
const POD_COUNTS: &[usize] = &[0, 150_000];

/// Load-test fixtures: cluster size, pods, and the request size.
const LOAD_NODES: usize = 5_000;
const LOAD_PODS: usize = 150_000;
const LOAD_NAMES: usize = 500;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Names,
    Full,
}

impl Shape {
    fn label(self) -> &'static str {
        match self {
            Shape::Names => "names",
            Shape::Full => "full-nodes",
        }
    }
    fn body(self, pod: &serde_json::Value, nodes: &[NodeSpec]) -> Vec<u8> {
        match self {
            Shape::Names => support::names_body(pod, nodes),
            Shape::Full => support::full_body(pod, nodes),
        }
    }
}

fn main() {
    match std::env::var("PLACER_BENCH").as_deref() {
        Ok("latency") => latency(),
        Ok("fixtures") => fixtures(),
        Ok("loop") => run_loop(),
        Ok("breakdown") => breakdown(),
        Ok("probe") => probe(),
        Ok("floor-serve") => floor_serve(),
        Ok(other) => {
            eprintln!(
                "PLACER_BENCH={other:?}: expected unset, latency, loop, breakdown, probe, floor-serve or fixtures"
            );
            std::process::exit(2);
        }
        Err(_) => {
            let mut c = Criterion::default()
                .warm_up_time(Duration::from_secs(1))
                .measurement_time(Duration::from_secs(3))
                .configure_from_args();
            criterion_benches(&mut c);
            c.final_summary();
        }
    }
}

fn criterion_benches(c: &mut Criterion) {
    let pod = support::incoming_pod();
    for shape in [Shape::Names, Shape::Full] {
        let mut group = c.benchmark_group(format!("cycle/{}", shape.label()));
        if shape == Shape::Full {
            // 500 full nodes are a 3 MB body, 15,000 are 90 MB: a few samples
            // of a few iterations each keep the suite within minutes.
            group
                .sample_size(10)
                .sampling_mode(SamplingMode::Flat)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(4));
        }
        for &n in NODE_COUNTS {
            let nodes = support::nodes(n);
            let body = shape.body(&pod, &nodes);
            for &p in POD_COUNTS {
                let state = support::app_state(&nodes, support::pods(p, &nodes));
                support::sanity_check(&state, &body);
                group.throughput(Throughput::Elements(n as u64));
                group.bench_with_input(
                    BenchmarkId::new(format!("nodes={n}"), format!("pods={p}")),
                    &body,
                    |b, body| b.iter(|| black_box(cycle(&state, black_box(body)))),
                );
            }
        }
        group.finish();
    }

    // Full nodes against their floor (decode names and three labels, echo raw).
    let mut group = c.benchmark_group("floor/full-nodes");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    let all = support::nodes(LOAD_NODES);
    let pods = support::pods(LOAD_PODS, &all);
    let state = support::app_state(&all, pods.clone());
    let floor = support::full_floor(&all, &pods);
    for n in [LOAD_NAMES, LOAD_NODES] {
        let body = support::full_body(&pod, &picked(n));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("placer", n), &body, |b, body| {
            b.iter(|| black_box(cycle(&state, black_box(body))))
        });
        group.bench_with_input(BenchmarkId::new("floor", n), &body, |b, body| {
            b.iter(|| black_box((floor.filter(body).len(), floor.prioritize(body).len())))
        });
    }
    group.finish();

    // Where the time of the 5,000-name cycle goes: the body decode alone, then
    // each verb on its own (decode + evaluate + encode).
    let nodes = support::nodes(5_000);
    let body = support::names_body(&pod, &nodes);
    let state = support::app_state(&nodes, support::pods(150_000, &nodes));
    let mut group = c.benchmark_group("parts/names/nodes=5000/pods=150000");
    group.bench_function("decode-only", |b| {
        b.iter(|| {
            black_box(
                placer::protocol::from_slice::<placer::protocol::ExtenderArgs>(black_box(&body))
                    .expect("decode"),
            )
        })
    });
    group.bench_function("filter", |b| {
        b.iter(|| black_box(filter_once(&state, black_box(&body))))
    });
    group.bench_function("prioritize", |b| {
        b.iter(|| black_box(prioritize_once(&state, black_box(&body))))
    });
    group.finish();
}

/// The 5,000-name cycle in a loop, for profilers (`PLACER_BENCH_NODES`,
/// `PLACER_BENCH_PODS` and `PLACER_BENCH_SHAPE=full` change the case).
fn run_loop() {
    let iters = env("PLACER_BENCH_ITERS", 2000);
    let shape = match std::env::var("PLACER_BENCH_SHAPE").as_deref() {
        Ok("full") => Shape::Full,
        _ => Shape::Names,
    };
    let nodes = support::nodes(env("PLACER_BENCH_NODES", 5_000));
    let body = shape.body(&support::incoming_pod(), &nodes);
    let state = support::app_state(
        &nodes,
        support::pods(env("PLACER_BENCH_PODS", 150_000), &nodes),
    );
    let verb = std::env::var("PLACER_BENCH_VERB").unwrap_or_default();
    let t = Instant::now();
    for _ in 0..iters {
        match verb.as_str() {
            "filter" => drop(black_box(filter_once(&state, black_box(&body)))),
            "prioritize" => drop(black_box(prioritize_once(&state, black_box(&body)))),
            _ => drop(black_box(cycle(&state, black_box(&body)))),
        }
    }
    eprintln!("{iters} cycles, mean {}", fmt(t.elapsed() / iters as u32));
}

/// Median time of each stage of the 5,000-name, 150,000-pod cycle, so the
/// report can say where the time goes. Stages are timed one at a time on
/// copies of the decoded body; "evaluate" is the whole `evaluate` function
/// (resolution + plugins + result building).
fn breakdown() {
    use placer::framework::CycleState;
    use placer::modes::extender::{filter, prioritize, request};
    use placer::protocol::{self, ExtenderArgsRef};

    let iters: usize = std::env::var("PLACER_BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let nodes = support::nodes(5_000);
    let body = support::names_body(
        &support::incoming_pod(),
        &picked(env("PLACER_BENCH_NAMES", LOAD_NODES)),
    );
    let state = support::app_state(&nodes, support::pods(150_000, &nodes));
    // Between two requests kube-scheduler and the API server run on the
    // same cores: with `PLACER_BENCH_COLD=1` every timed stage starts with
    // the caches filled by something else.
    let evictor_on = env("PLACER_BENCH_COLD", 0) == 1;
    let mut evictor = evictor_on.then(|| vec![0u8; 64 << 20]);
    let mut evict = || {
        if let Some(buffer) = evictor.as_mut() {
            for line in buffer.chunks_mut(64) {
                line[0] = line[0].wrapping_add(1);
            }
            black_box(&buffer);
        }
    };
    let names = [
        "decode body (borrowed ExtenderArgsRef)",
        "request::decode (pod)",
        "resolve (names under the read lock)",
        "pre_filter + filter_nodes (plugins)",
        "score (plugins)",
        "filter::respond (decode + evaluate + encode)",
        "prioritize::respond (decode + evaluate + encode)",
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(iters); names.len()];
    let policy = state.policy.load();
    let decode = || -> ExtenderArgsRef<'_> { protocol::from_slice(&body).expect("decode") };
    for i in 0..iters + iters / 10 {
        let warm = i < iters / 10;
        let mut lap = |k: usize, t: Instant| {
            if !warm {
                samples[k].push(t.elapsed());
            }
        };
        evict();
        let t = Instant::now();
        let args = black_box(decode());
        lap(0, t);
        {
            let t = Instant::now();
            // A fresh memo: this stage times the decode itself.
            let req = request::decode(args, &Default::default()).expect("request");
            lap(1, t);
            let cluster = state.cache.read();
            evict();
            let t = Instant::now();
            let resolved = black_box(req.resolve(&cluster));
            lap(2, t);
            let known = &resolved.known;
            let fw = request::profile_for(&policy, &req.pod).expect("profile");
            evict();
            let t = Instant::now();
            let mut cycle = CycleState::new();
            let pre = fw.pre_filter(&mut cycle, &req.pod, &cluster);
            black_box(fw.filter_nodes(&cycle, &pre, &req.pod, known, &cluster));
            lap(3, t);
            evict();
            let t = Instant::now();
            black_box(
                fw.score_totals(&mut CycleState::new(), &req.pod, known, &cluster)
                    .expect("score"),
            );
            lap(4, t);
        }
        // The first verb of a pod's cycle decodes the pod; prioritize,
        // next, finds it decoded.
        state.last_pod.forget();
        evict();
        let t = Instant::now();
        black_box(filter::respond(&state, decode()).expect("filter"));
        lap(5, t);
        evict();
        let t = Instant::now();
        black_box(prioritize::respond(&state, decode()).expect("prioritize"));
        lap(6, t);
    }
    println!(
        "stage medians, {} names, 5,000 nodes, 150,000 pods, {iters} iterations{}:",
        env("PLACER_BENCH_NAMES", LOAD_NODES),
        if evictor_on {
            ", caches evicted before each stage"
        } else {
            ""
        }
    );
    for (name, mut v) in names.iter().zip(samples) {
        v.sort();
        println!("  {name:<52} {:>9}", fmt(pct(&v, 50.0)));
    }
}

/// Micro-costs of the primitives the request path is made of (per node).
fn probe() {
    let nodes = support::nodes(5_000);
    let state = support::app_state(&nodes, support::pods(150_000, &nodes));
    let cluster = state.cache.read();
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let arcs: Vec<_> = names
        .iter()
        .map(|n| cluster.node(n).expect("node").clone())
        .collect();
    let copies: Vec<placer::objects::NodeInfo> = arcs.iter().map(|a| (**a).clone()).collect();
    let time = |what: &str, f: &mut dyn FnMut() -> usize| {
        let mut best = Duration::MAX;
        let mut v = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            black_box(f());
            let d = t.elapsed();
            best = best.min(d);
            v.push(d);
        }
        v.sort();
        println!(
            "  {what:<48} median {:>7.1} ns/node  best {:>7.1} ns/node",
            pct(&v, 50.0).as_nanos() as f64 / 5000.0,
            best.as_nanos() as f64 / 5000.0
        );
    };
    let body = support::names_body(&support::incoming_pod(), &nodes);
    time("body decode: placer::protocol::from_slice", &mut || {
        placer::protocol::from_slice::<placer::protocol::ExtenderArgs>(&body)
            .expect("decode")
            .node_names
            .map_or(0, |v| v.len())
    });
    time("body decode: plain serde_json::from_slice", &mut || {
        serde_json::from_slice::<placer::protocol::ExtenderArgs>(&body)
            .expect("decode")
            .node_names
            .map_or(0, |v| v.len())
    });
    #[derive(serde::Deserialize)]
    struct Borrowed<'a> {
        #[serde(rename = "NodeNames", borrow)]
        names: Vec<&'a str>,
    }
    time("body decode: borrowed Vec<&str> (lower bound)", &mut || {
        serde_json::from_slice::<Borrowed>(&body)
            .expect("decode")
            .names
            .len()
    });
    time(
        "cluster.node(name) (HashMap<String,_>, SipHash)",
        &mut || names.iter().filter(|n| cluster.node(n).is_some()).count(),
    );
    time("cluster.node(name).cloned() (+ Arc inc/dec)", &mut || {
        names
            .iter()
            .filter_map(|n| cluster.node(n).cloned())
            .count()
    });
    time("HashSet<String> insert(name.clone())", &mut || {
        let mut seen = std::collections::HashSet::new();
        names.iter().filter(|n| seen.insert((*n).clone())).count()
    });
    time("label(zone) on cached nodes", &mut || {
        arcs.iter()
            .filter(|n| n.label("topology.kubernetes.io/zone").is_some())
            .count()
    });
    time(
        "label(zone)+label(net)+label(hw) on cached nodes",
        &mut || {
            arcs.iter()
                .filter(|n| {
                    n.label("topology.kubernetes.io/zone").is_some()
                        && n.label("net").is_some()
                        && n.label("node.kubernetes.io/hw-encrypt").is_some()
                })
                .count()
        },
    );
    time(
        "same 3 labels on fresh copies (better locality)",
        &mut || {
            copies
                .iter()
                .filter(|n| {
                    n.label("topology.kubernetes.io/zone").is_some()
                        && n.label("net").is_some()
                        && n.label("node.kubernetes.io/hw-encrypt").is_some()
                })
                .count()
        },
    );
}

/// Per-cycle timings with `Instant`: p50/p90/p99/max of filter + prioritize.
fn latency() {
    let iters: usize = std::env::var("PLACER_BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let pod = support::incoming_pod();
    let cases = [
        (Shape::Names, 5_000, 150_000, iters),
        (Shape::Names, 5_000, 0, iters),
        (Shape::Names, 500, 150_000, iters),
        (Shape::Names, 15_000, 150_000, iters),
        (Shape::Full, 5_000, 150_000, (iters / 10).max(20)),
    ];
    println!(
        "{:<11} {:>6} {:>7} {:>6}  {:>9} {:>9} {:>9} {:>9} {:>9}  {:>9} {:>9}  {:>9} {:>9}",
        "shape",
        "nodes",
        "pods",
        "iters",
        "p50",
        "p90",
        "p99",
        "max",
        "mean",
        "filt p50",
        "filt p99",
        "prio p50",
        "prio p99"
    );
    for (shape, n, p, iters) in cases {
        let nodes = support::nodes(n);
        let body = shape.body(&pod, &nodes);
        let state = support::app_state(&nodes, support::pods(p, &nodes));
        support::sanity_check(&state, &body);
        // Warm-up: caches, allocator, rayon's threads.
        for _ in 0..(iters / 10).max(5) {
            black_box(cycle(&state, &body));
        }
        let mut total = Vec::with_capacity(iters);
        let mut filt = Vec::with_capacity(iters);
        let mut prio = Vec::with_capacity(iters);
        for _ in 0..iters {
            let t0 = Instant::now();
            black_box(filter_once(&state, black_box(&body)));
            let t1 = Instant::now();
            black_box(prioritize_once(&state, black_box(&body)));
            let t2 = Instant::now();
            filt.push(t1 - t0);
            prio.push(t2 - t1);
            total.push(t2 - t0);
        }
        let mean = total.iter().sum::<Duration>() / iters as u32;
        total.sort();
        filt.sort();
        prio.sort();
        println!(
            "{:<11} {:>6} {:>7} {:>6}  {:>9} {:>9} {:>9} {:>9} {:>9}  {:>9} {:>9}  {:>9} {:>9}",
            shape.label(),
            n,
            p,
            iters,
            fmt(pct(&total, 50.0)),
            fmt(pct(&total, 90.0)),
            fmt(pct(&total, 99.0)),
            fmt(*total.last().expect("iters > 0")),
            fmt(mean),
            fmt(pct(&filt, 50.0)),
            fmt(pct(&filt, 99.0)),
            fmt(pct(&prio, 50.0)),
            fmt(pct(&prio, 99.0)),
        );
    }
}

/// The `q`-th percentile (nearest rank) of sorted `v`.
fn pct(v: &[Duration], q: f64) -> Duration {
    let rank = ((q / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The number in environment variable `k`, else `d`.
fn env(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(d)
}

/// Writes the load-test inputs: `snapshot.json` (5,000 nodes, 150,000 pods)
/// and `names-500.json` (500 names spread over all zones), plus
/// `names-5000.json` for a full-size request.
fn fixtures() {
    let out = std::path::PathBuf::from(
        std::env::var("PLACER_BENCH_OUT").unwrap_or_else(|_| "target/bench-fixtures".into()),
    );
    std::fs::create_dir_all(&out).expect("create fixture dir");
    // Flat-cost variants: `PLACER_BENCH_PODS` pods instead of 150,000, and
    // `PLACER_BENCH_EXTRA_LABELS` more labels per node than the 13-15 usual.
    let pod_count = env("PLACER_BENCH_PODS", LOAD_PODS);
    let extra = env("PLACER_BENCH_EXTRA_LABELS", 0);
    let nodes = support::with_extra_labels(support::nodes(LOAD_NODES), extra);
    let pods = support::pods(pod_count, &nodes);
    let pod = support::incoming_pod();
    let picked: Vec<NodeSpec> = support::with_extra_labels(picked(LOAD_NAMES), extra);
    // The same cluster in-process, to check the bodies before the server sees them.
    let state = support::app_state(&nodes, pods.clone());
    let small = support::names_body(&pod, &picked);
    let large = support::names_body(&pod, &nodes);
    support::sanity_check(&state, &small);
    support::sanity_check(&state, &large);
    let write = |name: &str, bytes: &[u8]| {
        let path = out.join(name);
        std::fs::write(&path, bytes).expect("write fixture");
        println!("{} ({} bytes)", path.display(), bytes.len());
    };
    write("snapshot.json", &support::snapshot_json(&nodes, &pods));
    write(&format!("names-{LOAD_NAMES}.json"), &small);
    write(&format!("names-{LOAD_NODES}.json"), &large);
    let full_small = support::full_body(&pod, &picked);
    support::sanity_check(&state, &full_small);
    write(&format!("full-{LOAD_NAMES}.json"), &full_small);
    write(
        &format!("full-{LOAD_NODES}.json"),
        &support::full_body(&pod, &nodes),
    );
}

/// The nodes of a request of `n` names out of the load-test cluster: every
/// 7th node (7 ≡ 1 mod 6 zones, so all zones are requested), wrapping to the
/// whole cluster at `LOAD_NODES`.
fn picked(n: usize) -> Vec<NodeSpec> {
    let all = support::nodes(LOAD_NODES);
    if n >= all.len() {
        return all;
    }
    all.into_iter().step_by(7).take(n).collect()
}

/// Serves the full-node floor over the fixtures' cluster.
fn floor_serve() {
    use std::sync::Arc;
    let addr = std::env::var("PLACER_BENCH_ADDR").unwrap_or_else(|_| "127.0.0.1:18803".into());
    let nodes = support::nodes(LOAD_NODES);
    let pods = support::pods(LOAD_PODS, &nodes);
    let floor = Arc::new(support::full_floor(&nodes, &pods));
    drop((nodes, pods));
    let (f1, f2) = (floor.clone(), floor);
    let app = axum::Router::new()
        .route(
            "/filter",
            axum::routing::post(move |b: axum::body::Bytes| {
                let f = f1.clone();
                async move { f.filter(&b) }
            }),
        )
        .route(
            "/prioritize",
            axum::routing::post(move |b: axum::body::Bytes| {
                let f = f2.clone();
                async move { f.prioritize(&b) }
            }),
        )
        .layer(axum::extract::DefaultBodyLimit::max(64 << 20));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
        eprintln!("full-node floor serving on {addr}");
        axum::serve(listener, app).await.expect("serve");
    });
}
