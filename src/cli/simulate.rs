//! `placer simulate`: a cluster file and a workload through standalone
//! mode's scheduler, offline (see [`crate::simulate`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};

use super::OutputFormat;
use crate::cache::snapshot_file;
use crate::policy::{self, CompiledPolicy};
use crate::simulate::expand::Expander;
use crate::simulate::{cluster_cache, run_blocking, timing, workload};

/// Options of `placer simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The cluster: nodes and pods, as `serve --snapshot` reads them.
    #[arg(long)]
    pub cluster: PathBuf,
    /// The workload: a file or a folder of Pods, Deployments, ReplicaSets,
    /// StatefulSets, Jobs and PriorityClasses; timed with the annotations
    /// `simulate.placer.io/arrive-at` and `simulate.placer.io/runs-for`.
    #[arg(long)]
    pub workload: PathBuf,
    /// Policy file (its profiles are the schedulers).
    #[arg(long, default_value = "policy.yaml")]
    pub policy: PathBuf,
    /// The profile of pods that name no `spec.schedulerName`.
    #[arg(long, default_value = "placer")]
    pub scheduler_name: String,
    /// Seed of the tie-break among equally good nodes and of generated
    /// names: one seed, one outcome.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// Runs the simulation and prints its report.
pub fn simulate(args: &SimulateArgs) -> anyhow::Result<()> {
    print!("{}", simulate_to_string(args)?);
    Ok(())
}

/// The report `simulate` prints.
pub fn simulate_to_string(args: &SimulateArgs) -> anyhow::Result<String> {
    let policy = Arc::new(CompiledPolicy::new(policy::load(&args.policy)?));
    if policy.profile(&args.scheduler_name).is_none() {
        bail!(
            "{}: no profile with schedulerName {:?} (--scheduler-name)",
            args.policy.display(),
            args.scheduler_name
        );
    }
    let cluster = snapshot_file::load(&args.cluster)?;
    if let Some(warning) = cluster.unknown_node_warning() {
        eprintln!("warning: {}: {warning}", args.cluster.display());
    }
    let mut expander = Expander::new(args.seed, &args.scheduler_name);
    let workload = workload::load(&args.workload, &mut expander)?;
    let (cache, mut arrivals) = cluster_cache(&policy, cluster, &workload);
    for pod in workload.pods {
        arrivals.push(timing::arrival(pod).map_err(anyhow::Error::msg)?);
    }
    let outcome = run_blocking(policy, cache, arrivals, args.seed)
        .context("starting the simulation's runtime")?;
    Ok(match args.format {
        OutputFormat::Table => outcome.to_table(),
        OutputFormat::Json => {
            serde_json::to_string_pretty(&outcome).context("encoding the report")? + "\n"
        }
    })
}
