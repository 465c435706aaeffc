//! Scale: scheduler configurations scheduling the same workloads on one control plane with
//! kwok-managed nodes (kwok plays their kubelets: Ready with leases, pods Running, deletions
//! finished), measured as scheduler_perf measures, and checked for correctness.
//!
//! Configurations (`contenders`): a. kube-scheduler, default plugins; b. kube-scheduler with
//! placer as extender (shipped `policy.yaml`); c. placer standalone (shipped standalone profile);
//! d. kube-scheduler with `comparable_plugins`; e. kube-scheduler with the floor (a minimal
//! extender, `../shared/tools/floor`) serving a snapshot of the same nodes and initial pods;
//! f. placer `--mode both` binding the pods as (c) while the test probes its extender verbs
//! (`probe`: one fixed pod's `/filter` and `/prioritize` every 20 ms, idle and during the burst);
//! g. placer standalone with kube-scheduler's default profile (`examples/default-profile.yaml`),
//! sampling nodes as (a) does; h. (a) and i. (g), both with `percentageOfNodesToScore: 100`.
//! Workloads (`measure`): SchedulingBasic (pods created 64 at a time while the scheduler runs)
//! and pre-created (every pod exists before the scheduler starts); `unschedulable`: 1,000 pods
//! no node takes, and the CPU spent on them while the nodes heartbeat. One configuration runs at
//! a time; its pods are deleted before the next starts.
//!
//! Every run asserts correctness, never speed: each pod bound once (bind watch: never moved;
//! one binding line in the scheduler's log; in the smoke size one `Scheduled` event), only to the
//! test's nodes, no node over its allocatable pods or CPU, pods asking for hardware encryption
//! only on hw-encrypt nodes in b, c, e and f; all pods Running afterwards and their deletions
//! done; in f every probe request answered 200 with a well-formed body.
//!
//! Knobs: `PLACER_SCALE=NODESxPODS` (default `200x500`, the CI smoke), `PLACER_SCALE_CONFIGS`
//! (letters, default `abcd`, plus `e` when `PLACER_SCALE_FLOOR_BIN` names a floor binary; `f`
//! to `i` only when named: `f` added 16–28 s to the smoke, `scripts/scale.sh` runs them),
//! `PLACER_SCALE_WORKLOADS` (`basic,precreated` by default; `unschedulable` when named),
//! `PLACER_SCALE_WINDOW` (the unschedulable workload's window, seconds, default 120),
//! `PLACER_SCALE_UNSCHEDULABLE_CONFIGS` (its configurations, default all of them),
//! `PLACER_SCALE_OUT` (a file to write the tables to). `scripts/scale.sh` is the documented entry
//! point for the large sizes.

mod contenders;
mod measure;
mod probe;
mod report;
mod unschedulable;
mod workload;

use anyhow::{Context as _, bail};

use crate::harness::TestEnv;
use crate::harness::kwok::Kwok;
use contenders::{Config, Proc};
use measure::{Setup, Workload};
use workload::Size;

/// The CI smoke size.
const SMOKE: &str = "200x500";

fn configs() -> anyhow::Result<Vec<Config>> {
    let default = if std::env::var_os("PLACER_SCALE_FLOOR_BIN").is_some() {
        "abcde"
    } else {
        "abcd"
    };
    let letters = std::env::var("PLACER_SCALE_CONFIGS").unwrap_or_else(|_| default.into());
    letters
        .chars()
        .filter(|c| c.is_ascii_alphabetic())
        .map(|c| {
            Config::ALL
                .into_iter()
                .find(|k| k.letter() == c)
                .with_context(|| format!("PLACER_SCALE_CONFIGS: no configuration {c:?}"))
        })
        .collect()
}

/// The binding workloads, and whether the unschedulable one runs too.
fn workloads() -> anyhow::Result<(Vec<Workload>, bool)> {
    let names =
        std::env::var("PLACER_SCALE_WORKLOADS").unwrap_or_else(|_| "basic,precreated".into());
    let (mut binding, mut unschedulable) = (Vec::new(), false);
    for name in names.split(',') {
        match name.trim() {
            "basic" => binding.push(Workload::Basic),
            "precreated" => binding.push(Workload::PreCreated),
            "unschedulable" => unschedulable = true,
            other => bail!("PLACER_SCALE_WORKLOADS: no workload {other:?}"),
        }
    }
    Ok((binding, unschedulable))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_configuration_schedules_the_same_workload() -> anyhow::Result<()> {
    let size = Size::parse(&std::env::var("PLACER_SCALE").unwrap_or_else(|_| SMOKE.into()))?;
    let (configs, workloads) = (configs()?, workloads()?);
    let env = TestEnv::new("scale").await?;
    let kwok = Kwok::start(&env).await?;
    let result = run_all(&env, &kwok, size, &configs, &workloads).await;
    workload::delete_nodes(&env).await;
    let (outcomes, pending) = result?;
    let mut table = report::render(size, &outcomes);
    table.push_str(&unschedulable::render(&pending));
    eprintln!("{table}");
    if let Some(path) = std::env::var_os("PLACER_SCALE_OUT") {
        std::fs::write(&path, &table).with_context(|| format!("write {path:?}"))?;
    }
    Ok(())
}

async fn run_all(
    env: &TestEnv,
    kwok: &Kwok,
    size: Size,
    configs: &[Config],
    (workloads, unschedulable): &(Vec<Workload>, bool),
) -> anyhow::Result<(Vec<measure::Outcome>, Vec<unschedulable::Outcome>)> {
    workload::create_nodes(env, size).await?;
    let initial_ns = env.name("init");
    workload::create_initial_pods(env, &initial_ns, size).await?;
    let snapshot = if configs.contains(&Config::KubeWithFloor) {
        let path = env.dir().join("snapshot.json");
        workload::write_snapshot(env, &initial_ns, &path).await?;
        Some(path)
    } else {
        None
    };
    let (apiserver, etcd) = env.cluster().pids();
    let setup = Setup {
        env,
        size,
        snapshot,
        infra: vec![
            Proc {
                name: "kube-apiserver",
                pid: apiserver,
            },
            Proc {
                name: "etcd",
                pid: etcd,
            },
            Proc {
                name: "kwok",
                pid: kwok.pid(),
            },
        ],
        check_events: size.pods <= 1000,
    };
    let mut outcomes = Vec::new();
    for &w in workloads {
        for &c in configs {
            let began = std::time::Instant::now();
            let outcome = measure::run(&setup, c, w).await.with_context(|| {
                format!("{} run of {}. {}", w.label(), c.letter(), c.describe())
            })?;
            // The whole run too (start, probe baseline, checks, deletions): what a configuration
            // adds to the CI smoke.
            eprintln!(
                "scale: {} {}. {}: {:.0} pods/s over {:.1?} ({:.1?} with start-up and checks)",
                w.label(),
                c.letter(),
                c.describe(),
                outcome.rate.0,
                outcome.elapsed,
                began.elapsed()
            );
            // Each run's rows as soon as it ends, so a later failure (a timeout at a size the
            // machine cannot hold) keeps what was measured.
            eprintln!("{}", report::render(size, std::slice::from_ref(&outcome)));
            outcomes.push(outcome);
        }
    }
    let mut pending = Vec::new();
    if *unschedulable {
        let window = unschedulable::window()?;
        for c in unschedulable::configs(configs)? {
            let outcome = unschedulable::run(&setup, c, window)
                .await
                .with_context(|| {
                    format!("unschedulable run of {}. {}", c.letter(), c.describe())
                })?;
            let cpu: f64 = outcome.window_cpu.iter().map(|(_, c)| c).sum();
            eprintln!(
                "scale: unschedulable {}. {}: first pass {:.1?}, {cpu:.2} CPU-s in {window:?}",
                c.letter(),
                c.describe(),
                outcome.first_pass,
            );
            eprintln!("{}", unschedulable::render(std::slice::from_ref(&outcome)));
            pending.push(outcome);
        }
    }
    Ok((outcomes, pending))
}
