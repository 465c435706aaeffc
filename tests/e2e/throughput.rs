//! Throughput of standalone placer and of stock kube-scheduler on the same control plane, nodes
//! and workload, measured in one test run.
//!
//! 100 kubelet-less nodes (4 CPU, 16 GiB, 110 pods, Ready, three zones); then, for each
//! scheduler in turn (placer first, then kube-scheduler, each in its own fresh namespace, the
//! previous run's pods deleted so both start on empty nodes), 1,000 pods requesting 10m CPU and
//! 16 MiB, created 32 at a time. The time runs from the first create to the last binding seen by a
//! watch; the rate is pods per second of that. Both schedulers run the same plugins
//! ([`comparable_plugins`]: kube-scheduler's defaults that placer implements, same weights and
//! args; every pod fits, so preemption never runs); kube-scheduler's client rate limit is raised from qps 50 / burst 100 to
//! qps 1000 / burst 1000 so it is not throttled on the client side (placer's kube-rs client has no
//! client-side limit; placer binds with at most 16 binds in flight, kube-scheduler in one
//! goroutine per pod). Both processes run during both measurements, so each also pays for
//! watching the other's pods.
//!
//! The test asserts correctness, not speed (performance is measured, not asserted, design §11):
//! every pod is bound to one of the test's nodes, never moved, and bound exactly once — one
//! binding log line (placer's `bound pod`, kube-scheduler's `Successfully bound pod to node`)
//! and one `Scheduled` event per pod. It prints the rates as
//! `placer: N pods/s, kube-scheduler: M pods/s`.
//!
//! By default placer is cargo's debug build of this test target; for numbers worth quoting run it
//! alone with a release build:
//!
//! ```text
//! cargo build --release
//! PLACER_E2E_PLACER_BIN=$PWD/target/release/placer cargo test --test e2e throughput -- --nocapture
//! ```

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

use crate::harness::bind_watch::BindWatch;
use crate::harness::bound_once::{KUBE_SCHEDULER_BOUND_LINE, PLACER_BOUND_LINE};
use crate::harness::compare::{KubeSchedulerYaml, comparable_plugins, placer_policy};
use crate::harness::{Placer, PodBuilder, RUN_LABEL, Scheduler, TestEnv, ZONE_LABEL};

const NODES: usize = 100;
const ZONES: usize = 3;
const PODS: usize = 1000;
/// Pod creates in flight at once.
const CREATES_IN_FLIGHT: usize = 32;
/// Node creates in flight at once.
const NODE_CREATES_IN_FLIGHT: usize = 16;
/// How long one run may take to bind every pod.
const RUN_TIMEOUT: Duration = Duration::from_secs(75);
/// kube-scheduler's `clientConnection` rate limit for the run.
const KUBE_QPS: f64 = 1000.0;
const KUBE_BURST: u32 = 1000;

/// What one scheduler's run measured.
struct RunResult {
    /// First create to last create returned.
    created: Duration,
    /// First create to last binding seen.
    wall: Duration,
}

impl RunResult {
    fn pods_per_second(&self) -> f64 {
        PODS as f64 / self.wall.as_secs_f64()
    }
}

/// Which scheduler a run measures, and how its binding log lines read.
struct Contender<'a> {
    label: &'static str,
    scheduler_name: String,
    log: &'a std::path::Path,
    /// Text of the line it logs per binding; the line's `pod` field is `ns/name`.
    bound_line: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_placer_and_kube_scheduler_bind_1000_pods() -> anyhow::Result<()> {
    let env = TestEnv::new("throughput").await?;
    create_nodes(&env).await?;

    let placer_name = env.name("placer");
    let kube_name = env.scheduler_name();
    let plugins = comparable_plugins();
    let placer = Placer::start_with(
        &env,
        &placer_policy(&placer_name, &plugins),
        "placer",
        "standalone",
        &[],
    )
    .await?;
    let yaml = KubeSchedulerYaml::new()
        .profile(&kube_name, &plugins)
        .client_rate(KUBE_QPS, KUBE_BURST)
        .render(&env);
    let kube = Scheduler::start_with_yaml(&env, &yaml).await?;

    let placer_run = measure(
        &env,
        env.namespace(),
        &Contender {
            label: "placer",
            scheduler_name: placer_name,
            log: placer.log_path(),
            bound_line: PLACER_BOUND_LINE,
        },
    )
    .await?;
    env.delete_all_pods(env.namespace(), 0, Duration::from_secs(60))
        .await?;
    // Let both schedulers' caches take the deletions in before the next run.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let kube_ns = env.name("kube");
    env.create_namespace(&kube_ns).await?;
    let kube_run = measure(
        &env,
        &kube_ns,
        &Contender {
            label: "kube-scheduler",
            scheduler_name: kube_name,
            log: kube.log_path(),
            bound_line: KUBE_SCHEDULER_BOUND_LINE,
        },
    )
    .await?;

    let binary = std::env::var("PLACER_E2E_PLACER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_placer").to_owned());
    eprintln!(
        "throughput, {PODS} pods on {NODES} nodes (placer binary {binary}; kube-scheduler qps \
         {KUBE_QPS}, burst {KUBE_BURST}):\n  placer: creates done in {:.2?}, all bound in {:.2?}\n  \
         kube-scheduler: creates done in {:.2?}, all bound in {:.2?}\n\
         placer: {:.0} pods/s, kube-scheduler: {:.0} pods/s",
        placer_run.created,
        placer_run.wall,
        kube_run.created,
        kube_run.wall,
        placer_run.pods_per_second(),
        kube_run.pods_per_second(),
    );
    Ok(())
}

/// `NODES` nodes `n000`.. of 4 CPU / 16 GiB / 110 pods, round-robin over `ZONES` test zones.
async fn create_nodes(env: &TestEnv) -> anyhow::Result<()> {
    let api = Api::<k8s_openapi::api::core::v1::Node>::all(env.client().clone());
    let nodes: Vec<_> = (0..NODES)
        .map(|i| {
            env.node(&format!("n{i:03}"))
                .cpu("4")
                .memory("16Gi")
                .label(ZONE_LABEL, &env.name(&format!("z{}", i % ZONES)))
                .build()
        })
        .collect();
    futures::stream::iter(nodes)
        .map(|node| {
            let api = api.clone();
            async move {
                let name = node.metadata.name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("create node {name}"))
            }
        })
        .buffer_unordered(NODE_CREATES_IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Creates the workload in `namespace` for `who`, waits until every pod is bound and checks
/// that each was bound exactly once.
async fn measure(env: &TestEnv, namespace: &str, who: &Contender<'_>) -> anyhow::Result<RunResult> {
    let api: Api<Pod> = Api::namespaced(env.client().clone(), namespace);
    let pods: Vec<Pod> = (0..PODS)
        .map(|i| {
            PodBuilder::new(&format!("p-{i:04}"))
                .scheduler(&who.scheduler_name)
                .node_selector(RUN_LABEL, env.run_id())
                .request("cpu", "10m")
                .request("memory", "16Mi")
                .build()
        })
        .collect();
    let mut watch = BindWatch::start(env.client(), namespace).await?;

    let start = Instant::now();
    futures::stream::iter(pods)
        .map(|pod| {
            let api = api.clone();
            async move {
                let name = pod.metadata.name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &pod)
                    .await
                    .with_context(|| format!("create pod {name}"))
            }
        })
        .buffer_unordered(CREATES_IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    let created = start.elapsed();

    let bindings = match watch.wait_for(PODS, RUN_TIMEOUT).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}: recent logs:\n{}", who.label, env.log_tails(40));
            return Err(e.context(format!("{} run", who.label)));
        }
    };
    let last = bindings
        .values()
        .map(|b| b.at)
        .max()
        .context("no bindings")?;
    let wall = last.duration_since(start);

    let prefix = format!("{}-n", env.run_id());
    let foreign: Vec<_> = bindings
        .iter()
        .filter(|(_, b)| !b.node.starts_with(&prefix))
        .collect();
    ensure!(
        foreign.is_empty(),
        "{}: pods bound to foreign nodes: {foreign:?}",
        who.label
    );
    ensure!(
        watch.moved().is_empty(),
        "{}: pods moved: {:?}",
        who.label,
        watch.moved()
    );
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for b in bindings.values() {
        *per_node.entry(b.node.as_str()).or_default() += 1;
    }
    eprintln!(
        "{}: {} pods on {} nodes ({}..={} per node), creates done in {created:.2?}, all bound in \
         {wall:.2?}",
        who.label,
        bindings.len(),
        per_node.len(),
        per_node.values().min().unwrap_or(&0),
        per_node.values().max().unwrap_or(&0),
    );

    env.check_bound_once_in_log(namespace, PODS, who.log, who.bound_line)
        .await?;
    env.check_one_scheduled_event_each(namespace, PODS, who.label)
        .await?;
    Ok(RunResult { created, wall })
}
