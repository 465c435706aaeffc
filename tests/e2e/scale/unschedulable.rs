//! The unschedulable workload: what a scheduler spends on pods that stay pending while the nodes
//! heartbeat.
//!
//! [`PODS`] pods select a node label no node has, so every scheduler fails them all. Once each has
//! been attempted (its `PodScheduled` condition is `False`, reason `Unschedulable`), the test
//! leaves the scheduler alone for a window ([`window`], 120 s by default) and reads the CPU each
//! process used in it. Meanwhile kwok heartbeats every node (`tests/cluster/kwok/stages.yaml`: a
//! node status update every 40–80 s per node, and a Lease renewal every 10 s): a scheduler that
//! retried its pods on each node update, or re-read what did not change, pays for it here. The
//! window stays below kube-scheduler's 5-minute flush of long-unschedulable pods
//! (`podMaxInUnschedulablePodsDuration`) and placer's, so neither retries by the clock.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use super::contenders::{Config, Running};
use super::measure::{Memory, RssSampler, Setup, cpu_of, delta};
use super::workload;
use crate::harness::bind_watch::BindWatch;
use crate::harness::prom::counter;

/// How many pods stay unschedulable.
pub const PODS: usize = 1000;
/// The node label the pods select and no node has.
const NOWHERE_LABEL: &str = "scale.placer.e2e/nowhere";

/// The window after every pod was attempted: `PLACER_SCALE_WINDOW` seconds, 120 by default.
pub fn window() -> anyhow::Result<Duration> {
    match std::env::var("PLACER_SCALE_WINDOW") {
        Ok(s) => Ok(Duration::from_secs(s.trim().parse().with_context(
            || format!("PLACER_SCALE_WINDOW {s:?} is not whole seconds"),
        )?)),
        Err(_) => Ok(Duration::from_secs(120)),
    }
}

/// The configurations the workload runs under: those of `PLACER_SCALE_UNSCHEDULABLE_CONFIGS`
/// (letters) among `configs`, or all of `configs` without it. Each run lasts the window and
/// more, so a large size may measure the binding workloads on more configurations than this one.
pub fn configs(configs: &[Config]) -> anyhow::Result<Vec<Config>> {
    let Ok(letters) = std::env::var("PLACER_SCALE_UNSCHEDULABLE_CONFIGS") else {
        return Ok(configs.to_vec());
    };
    letters
        .chars()
        .filter(|c| c.is_ascii_alphabetic())
        .map(|c| {
            configs
                .iter()
                .copied()
                .find(|k| k.letter() == c)
                .with_context(|| {
                    format!(
                        "PLACER_SCALE_UNSCHEDULABLE_CONFIGS: {c:?} is not among PLACER_SCALE_CONFIGS"
                    )
                })
        })
        .collect()
}

/// What one configuration spent on [`PODS`] pods it cannot place.
pub struct Outcome {
    pub config: Config,
    /// From the first create to every pod attempted once, and each scheduler process's CPU-s.
    pub first_pass: Duration,
    pub first_pass_cpu: Vec<(&'static str, f64)>,
    /// The quiet window and each scheduler process's CPU-s in it.
    pub window: Duration,
    pub window_cpu: Vec<(&'static str, f64)>,
    /// kube-apiserver, etcd and kwok over the window.
    pub infra_cpu: Vec<(&'static str, f64)>,
    /// Attempts that ended unschedulable, in the first pass and in the window, from the
    /// scheduler's own counter (`scheduler_schedule_attempts_total`,
    /// `placer_schedule_attempts_total`).
    pub attempts: (f64, f64),
    pub memory: Vec<Memory>,
}

/// Runs the workload under `config`: creates the pods, waits for their first attempts, measures
/// the window, checks no pod was bound, deletes the pods.
pub async fn run(setup: &Setup<'_>, config: Config, window: Duration) -> anyhow::Result<Outcome> {
    let env = setup.env;
    let ns = env.name(&format!("{}-unsched", config.letter()));
    let scheduler_name = format!("sched-{ns}");
    env.create_namespace(&ns).await?;
    let api: Api<Pod> = Api::namespaced(env.client().clone(), &ns);
    let pods: Vec<Pod> = (0..PODS)
        .map(|i| {
            let mut pod = workload::pod(env, &scheduler_name, i);
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_selector
                    .get_or_insert_default()
                    .insert(NOWHERE_LABEL.to_owned(), "true".to_owned());
            }
            pod
        })
        .collect();
    let watch = BindWatch::start(env.client(), &ns).await?;
    let running = Running::start(env, config, &scheduler_name, setup.snapshot.as_deref()).await?;
    let sampler = RssSampler::start(&running.processes());
    let procs = running.processes();

    let cpu_start = cpu_of(&procs)?;
    let metrics_start = running.scrape().await?;
    let began = Instant::now();
    workload::create_all(&api, pods).await?;
    wait_all_attempted(setup, &api, &ns).await?;
    let first_pass = began.elapsed();

    let cpu_quiet = cpu_of(&procs)?;
    let infra_quiet = cpu_of(&setup.infra)?;
    let metrics_quiet = running.scrape().await?;
    tokio::time::sleep(window).await;
    let cpu_end = cpu_of(&procs)?;
    let infra_end = cpu_of(&setup.infra)?;
    let metrics_end = running.scrape().await?;
    let memory = sampler.finish()?;

    ensure!(
        watch.count() == 0,
        "{config:?}: {} pods that no node can take were bound: {:?}",
        watch.count(),
        watch.bindings().keys().take(5).collect::<Vec<_>>()
    );
    drop(running);
    env.delete_all_pods(&ns, 1, setup.size.run_timeout())
        .await?;

    Ok(Outcome {
        config,
        first_pass,
        first_pass_cpu: delta(&cpu_start, &cpu_quiet),
        window,
        window_cpu: delta(&cpu_quiet, &cpu_end),
        infra_cpu: delta(&infra_quiet, &infra_end),
        attempts: (
            unschedulable_attempts(&metrics_quiet) - unschedulable_attempts(&metrics_start),
            unschedulable_attempts(&metrics_end) - unschedulable_attempts(&metrics_quiet),
        ),
        memory,
    })
}

/// Unschedulable attempts counted by whichever scheduler runs (kube-scheduler's and placer's
/// `/metrics` as [`Running::scrape`] returns them).
fn unschedulable_attempts((kube, placer): &(String, String)) -> f64 {
    counter(
        kube,
        "scheduler_schedule_attempts_total",
        &[("result", "unschedulable")],
    ) + counter(
        placer,
        "placer_schedule_attempts_total",
        &[("result", "unschedulable")],
    )
}

/// Waits until every pod of `ns` carries `PodScheduled=False` with reason `Unschedulable`.
async fn wait_all_attempted(setup: &Setup<'_>, api: &Api<Pod>, ns: &str) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(60) + Duration::from_millis(20 * PODS as u64);
    setup
        .env
        .poll_every(
            &format!("{PODS} pods of {ns} attempted once"),
            timeout,
            Duration::from_secs(1),
            || async {
                let pods = api.list(&ListParams::default()).await?.items;
                let attempted = pods.iter().filter(|p| unschedulable(p)).count();
                Ok(if attempted == PODS {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(format!("{attempted} of {PODS} attempted"))
                })
            },
        )
        .await
}

fn unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

/// The unschedulable workload's table (Markdown), empty without runs.
pub fn render(outcomes: &[Outcome]) -> String {
    use std::fmt::Write as _;
    let Some(first) = outcomes.first() else {
        return String::new();
    };
    let mut out = format!(
        "\n{PODS} unschedulable pods (a nodeSelector no node matches) while kwok heartbeats the \
         nodes. First pass: from the first create until every pod was attempted once. Window: \
         the {} s after it. CPU-s per scheduler process; attempts from each scheduler's \
         schedule_attempts counter (result unschedulable).\n\n\
         | configuration | first pass s | first pass CPU-s | first-pass attempts | window CPU-s | \
         CPU-ms per pod per minute | window attempts | apiserver / etcd / kwok CPU-s in the \
         window | RSS MiB: start-up VmHWM; peak / end |\n\
         | --- | ---: | --- | ---: | --- | ---: | ---: | --- | --- |\n",
        first.window.as_secs()
    );
    let cells = |cpu: &[(&str, f64)]| {
        let total: f64 = cpu.iter().map(|(_, c)| c).sum();
        let parts = cpu
            .iter()
            .map(|(n, c)| format!("{n} {c:.2}"))
            .collect::<Vec<_>>()
            .join(" + ");
        (total, format!("{total:.2} ({parts})"))
    };
    for o in outcomes {
        let (_, pass) = cells(&o.first_pass_cpu);
        let (total, win) = cells(&o.window_cpu);
        let minutes = o.window.as_secs_f64() / 60.0;
        let infra = o
            .infra_cpu
            .iter()
            .map(|(_, c)| format!("{c:.2}"))
            .collect::<Vec<_>>()
            .join(" / ");
        let memory = o
            .memory
            .iter()
            .map(|m| {
                format!(
                    "{} {:.0}; {:.0} / {:.0}",
                    m.name, m.start_hwm, m.peak, m.end
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(
            out,
            "| {}. {} | {:.1} | {pass} | {:.0} | {win} | {:.3} | {:.0} | {infra} | {memory} |",
            o.config.letter(),
            o.config.describe(),
            o.first_pass.as_secs_f64(),
            o.attempts.0,
            total * 1000.0 / PODS as f64 / minutes,
            o.attempts.1,
        );
    }
    out
}
