//! One run: one configuration scheduling one workload, measured and checked.
//!
//! Throughput as scheduler_perf reports it: bindings counted per one-second interval from the
//! start of the run (the first create in SchedulingBasic, the first binding when the pods were
//! there before the scheduler) to the last binding, the last partial interval scaled to a rate;
//! average = pods / that time, p50 and p90 over the intervals. CPU seconds are `/proc` deltas of
//! each process over the run (a pre-created run counts the scheduler from its start, informer
//! sync included); RSS is sampled every second after the scheduler is ready (caches synced).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::contenders::{Config, Proc, Running};
use super::probe::{self, Probe, Samples};
use super::workload::{self, NODE_MILLICPU, NODE_PODS, POD_MILLICPU, Size};
use crate::harness::TestEnv;
use crate::harness::bind_watch::{BindWatch, Bound};
use crate::harness::procstat::{cpu_seconds, rss_mib};

/// When the measured pods come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// SchedulingBasic: created at a high rate while the scheduler runs.
    Basic,
    /// All pods exist before the scheduler starts.
    PreCreated,
}

impl Workload {
    pub fn label(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::PreCreated => "precreated",
        }
    }
}

/// What the whole scale test shares between runs.
pub struct Setup<'a> {
    pub env: &'a TestEnv,
    pub size: Size,
    /// The floor's snapshot, when configuration e runs.
    pub snapshot: Option<std::path::PathBuf>,
    /// kube-apiserver, etcd and kwok.
    pub infra: Vec<Proc>,
    /// Whether to check the Scheduled events too (one list call per poll).
    pub check_events: bool,
}

/// Resident memory of one process during a run, MiB.
pub struct Memory {
    pub name: &'static str,
    /// `VmHWM` when the scheduler was ready (caches synced): its start-up peak, the initial
    /// lists included.
    pub start_hwm: f64,
    /// Largest `VmRSS` sampled during the run.
    pub peak: f64,
    /// `VmRSS` at the last binding: settled.
    pub end: f64,
    /// `VmHWM` at the last binding.
    pub hwm: f64,
}

/// What one run measured.
pub struct Outcome {
    pub config: Config,
    pub workload: Workload,
    pub pods: usize,
    pub elapsed: Duration,
    /// Pods per second: average, p50, p90 of the per-second samples.
    pub rate: (f64, f64, f64),
    /// CPU seconds over the run of each scheduler process, then of the infrastructure.
    pub cpu: Vec<(&'static str, f64)>,
    pub infra_cpu: Vec<(&'static str, f64)>,
    pub memory: Vec<Memory>,
    /// `/metrics` of kube-scheduler and placer before and after the run.
    pub metrics_before: (String, String),
    pub metrics_after: (String, String),
    /// What configuration f's extender probe saw.
    pub probe: Option<ProbeOutcome>,
    /// Where the pods went.
    pub placement: Placement,
}

/// How evenly the pods (initial and measured) sit across zones and nodes: the balance that
/// ZoneSpread and topology spreading aim at, compared across configurations.
pub struct Placement {
    /// Pods per zone, zone by zone.
    pub per_zone: Vec<usize>,
    /// Fewest and most pods on one node, over every node of the run; the capability rule puts
    /// the pods asking for hardware encryption on half the nodes, in every configuration that
    /// applies it.
    pub node_min: usize,
    pub node_max: usize,
}

impl Placement {
    /// Most minus fewest pods per zone.
    pub fn zone_skew(&self) -> usize {
        let max = self.per_zone.iter().max().copied().unwrap_or(0);
        let min = self.per_zone.iter().min().copied().unwrap_or(0);
        max - min
    }
}

/// The extender probe of one run (`probe`).
pub struct ProbeOutcome {
    /// Node names per `/filter`.
    pub nodes: usize,
    /// The baseline, probed after sync and before the first create, with placer's `/metrics`
    /// before and after it; none for pre-created pods, which are scheduled from the start.
    pub idle: Option<(Samples, (String, String))>,
    /// From the first create (pre-created: from placer's readiness) to the last binding; the
    /// run's own scrapes bracket it.
    pub burst: Samples,
}

/// Starts the probe of `request` against `running`'s placer, for `limit` at most.
fn start_probe(
    running: &Running,
    request: &Arc<probe::Request>,
    limit: Duration,
) -> anyhow::Result<Probe> {
    let port = running
        .placer_port()
        .context("the probed configuration runs no placer")?;
    Ok(Probe::start(port, request.clone(), limit))
}

/// Runs `workload` under `config` in a fresh namespace, checks every pod was bound exactly once
/// and as the policy says, then deletes the pods (kwok finishes the deletions).
pub async fn run(setup: &Setup<'_>, config: Config, workload: Workload) -> anyhow::Result<Outcome> {
    let env = setup.env;
    let size = setup.size;
    let ns = env.name(&format!("{}-{}", config.letter(), workload.label()));
    let scheduler_name = format!("sched-{ns}");
    env.create_namespace(&ns).await?;
    let api: Api<Pod> = Api::namespaced(env.client().clone(), &ns);
    let pods: Vec<Pod> = (0..size.pods)
        .map(|i| workload::pod(env, &scheduler_name, i))
        .collect();
    let mut watch = BindWatch::start(env.client(), &ns).await?;
    let infra_before = cpu_of(&setup.infra)?;

    let probe_request = if config.probes_extender() {
        Some(Arc::new(probe::Request::new(env, &ns, size).await?))
    } else {
        None
    };
    let (running, sampler, start, cpu_before, metrics_before, idle, probing) = match workload {
        Workload::Basic => {
            let running =
                Running::start(env, config, &scheduler_name, setup.snapshot.as_deref()).await?;
            let sampler = RssSampler::start(&running.processes());
            let idle = match &probe_request {
                Some(request) => {
                    let before = running.scrape().await?.1;
                    let samples = start_probe(&running, request, probe::IDLE)?
                        .finish()
                        .await?;
                    Some((samples, (before, running.scrape().await?.1)))
                }
                None => None,
            };
            let cpu_before = cpu_of(&running.processes())?;
            let metrics_before = running.scrape().await?;
            let start = Instant::now();
            let probing = probe_request
                .as_ref()
                .map(|r| start_probe(&running, r, size.run_timeout()))
                .transpose()?;
            workload::create_all(&api, pods).await?;
            (
                running,
                sampler,
                Some(start),
                cpu_before,
                metrics_before,
                idle,
                probing,
            )
        }
        Workload::PreCreated => {
            workload::create_all(&api, pods).await?;
            let running =
                Running::start(env, config, &scheduler_name, setup.snapshot.as_deref()).await?;
            let sampler = RssSampler::start(&running.processes());
            let zeros = running.processes().iter().map(|p| (p.name, 0.0)).collect();
            let probing = probe_request
                .as_ref()
                .map(|r| start_probe(&running, r, size.run_timeout()))
                .transpose()?;
            (
                running,
                sampler,
                None,
                zeros,
                (String::new(), String::new()),
                None,
                probing,
            )
        }
    };

    let bindings = match watch.wait_for(size.pods, size.run_timeout()).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("scale {ns}: recent logs:\n{}", env.log_tails(40));
            return Err(e.context(format!("run {ns}")));
        }
    };
    // Stopped at the last binding (seen by the watch).
    let burst = match probing {
        Some(p) => Some(p.stop().await?),
        None => None,
    };
    let cpu_after = cpu_of(&running.processes())?;
    let infra_after = cpu_of(&setup.infra)?;
    let metrics_after = running.scrape().await?;
    let memory = sampler.finish()?;

    let first = bindings
        .values()
        .map(|b| b.at)
        .min()
        .context("no bindings")?;
    let start = start.unwrap_or(first);
    let rate = rates(&bindings, start);
    let elapsed = bindings
        .values()
        .map(|b| b.at)
        .max()
        .map_or(Duration::ZERO, |last| last.duration_since(start));

    let placement = check(setup, config, &watch, &bindings)?;
    let probe = match (burst, probe_request) {
        (Some(burst), Some(request)) => {
            if let Some((samples, _)) = &idle {
                samples.check("idle")?;
            }
            burst.check("burst")?;
            Some(ProbeOutcome {
                nodes: request.nodes(),
                idle,
                burst,
            })
        }
        _ => None,
    };
    let (log, line) = running.binding_log()?;
    env.check_bound_once_in_log(&ns, size.pods, log, line)
        .await?;
    if setup.check_events {
        env.check_one_scheduled_event_each(&ns, size.pods, config.describe())
            .await?;
    }
    workload::wait_running(env, &ns, size.pods, size.run_timeout()).await?;
    drop(running);
    // A grace period, so kwok's pod-delete stage has to finish every deletion.
    env.delete_all_pods(&ns, 1, size.run_timeout()).await?;

    Ok(Outcome {
        config,
        workload,
        pods: size.pods,
        elapsed,
        rate,
        cpu: delta(&cpu_before, &cpu_after),
        infra_cpu: delta(&infra_before, &infra_after),
        memory,
        metrics_before,
        metrics_after,
        probe,
        placement,
    })
}

/// Every pod on one of the test's nodes, never moved; the capability rule obeyed where the
/// configuration applies it; no node over its allocatable pods or CPU (initial pods included).
/// Returns where the pods went.
fn check(
    setup: &Setup<'_>,
    config: Config,
    watch: &BindWatch,
    bindings: &HashMap<String, Bound>,
) -> anyhow::Result<Placement> {
    let size = setup.size;
    ensure!(
        bindings.len() == size.pods,
        "{} bindings for {} pods",
        bindings.len(),
        size.pods
    );
    let moved = watch.moved();
    ensure!(
        moved.is_empty(),
        "{config:?}: pods bound twice to different nodes: {moved:?}"
    );
    let index: HashMap<String, usize> = (0..size.nodes)
        .map(|i| (workload::node_name(setup.env, i), i))
        .collect();
    let mut per_node: HashMap<usize, usize> = HashMap::new();
    for i in 0..size.initial_pods() {
        *per_node.entry(i % size.nodes).or_default() += 1;
    }
    for (pod, b) in bindings {
        let node = *index
            .get(&b.node)
            .with_context(|| format!("{config:?}: {pod} bound to foreign node {}", b.node))?;
        if config.enforces_capability() && workload::pod_wants_hw(pod) {
            ensure!(
                workload::node_has_hw(node),
                "{config:?}: {pod} needs hardware encryption but went to {}",
                b.node
            );
        }
        *per_node.entry(node).or_default() += 1;
    }
    let over: Vec<_> = per_node
        .iter()
        .filter(|(_, n)| **n > NODE_PODS || **n as u64 * POD_MILLICPU > NODE_MILLICPU)
        .collect();
    ensure!(
        over.is_empty(),
        "{config:?}: nodes over allocatable: {over:?}"
    );
    let placement = placement(size.nodes, &per_node);
    let placed: usize = placement.per_zone.iter().sum();
    ensure!(
        placed == size.initial_pods() + size.pods,
        "{config:?}: {placed} pods counted in zones, {} created",
        size.initial_pods() + size.pods
    );
    Ok(placement)
}

/// [`Placement`] of `per_node` pods (by node index) over `nodes` nodes.
fn placement(nodes: usize, per_node: &HashMap<usize, usize>) -> Placement {
    let mut per_zone = vec![0; workload::ZONES];
    let (mut node_min, mut node_max) = (usize::MAX, 0);
    for i in 0..nodes {
        let n = per_node.get(&i).copied().unwrap_or(0);
        per_zone[workload::zone_of(i)] += n;
        node_min = node_min.min(n);
        node_max = node_max.max(n);
    }
    Placement {
        per_zone,
        node_min: node_min.min(node_max),
        node_max,
    }
}

/// (average, p50, p90) pods per second, sampled per second from `start` to the last binding.
fn rates(bindings: &HashMap<String, Bound>, start: Instant) -> (f64, f64, f64) {
    let offsets: Vec<f64> = bindings
        .values()
        .map(|b| b.at.saturating_duration_since(start).as_secs_f64())
        .collect();
    let total = offsets.iter().copied().fold(0.0_f64, f64::max);
    if offsets.is_empty() || total <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let whole = total.floor() as usize;
    let mut bins = vec![0_usize; whole + 1];
    for t in &offsets {
        bins[(t.floor() as usize).min(whole)] += 1;
    }
    let mut samples: Vec<f64> = bins[..whole].iter().map(|c| *c as f64).collect();
    let tail = total - whole as f64;
    if tail >= 0.1 {
        samples.push(bins[whole] as f64 / tail);
    }
    samples.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        samples
            .get(((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    (offsets.len() as f64 / total, pct(0.5), pct(0.9))
}

pub fn cpu_of(procs: &[Proc]) -> anyhow::Result<Vec<(&'static str, f64)>> {
    procs
        .iter()
        .map(|p| Ok((p.name, cpu_seconds(p.pid)?)))
        .collect()
}

pub fn delta(
    before: &[(&'static str, f64)],
    after: &[(&'static str, f64)],
) -> Vec<(&'static str, f64)> {
    after
        .iter()
        .map(|(name, a)| {
            let b = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, b)| *b);
            (*name, a - b)
        })
        .collect()
}

/// Samples the RSS of some processes every second until finished.
pub struct RssSampler {
    procs: Vec<(&'static str, u32, f64)>,
    peaks: Arc<Mutex<HashMap<u32, f64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    /// Starts sampling `procs`, which are ready: their `VmHWM` now is their start-up peak.
    pub fn start(procs: &[Proc]) -> Self {
        let procs: Vec<_> = procs
            .iter()
            .map(|p| (p.name, p.pid, rss_mib(p.pid).map_or(0.0, |(_, hwm)| hwm)))
            .collect();
        let peaks = Arc::new(Mutex::new(HashMap::new()));
        let task = tokio::spawn({
            let (procs, peaks) = (procs.clone(), peaks.clone());
            async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    for (_, pid, _) in &procs {
                        if let Ok((rss, _)) = rss_mib(*pid) {
                            let mut peaks = peaks.lock().unwrap_or_else(|e| e.into_inner());
                            let peak: &mut f64 = peaks.entry(*pid).or_insert(0.0);
                            *peak = (*peak).max(rss);
                        }
                    }
                }
            }
        });
        Self { procs, peaks, task }
    }

    pub fn finish(self) -> anyhow::Result<Vec<Memory>> {
        self.task.abort();
        let peaks = self.peaks.lock().unwrap_or_else(|e| e.into_inner());
        self.procs
            .iter()
            .map(|(name, pid, start_hwm)| {
                let (end, hwm) = rss_mib(*pid)?;
                let peak = peaks.get(pid).copied().unwrap_or(end).max(end);
                Ok(Memory {
                    name,
                    start_hwm: *start_hwm,
                    peak,
                    end,
                    hwm,
                })
            })
            .collect()
    }
}
