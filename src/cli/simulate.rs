//! `placer simulate`: a cluster file and a workload through standalone
//! mode's scheduler, offline (see [`crate::simulate`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};

use super::OutputFormat;
use crate::cache::snapshot_file;
use crate::objects::{NodeInfo, PodInfo};
use crate::policy::{self, CompiledPolicy};
use crate::simulate::expand::Expander;
use crate::simulate::outcome::Drained;
use crate::simulate::whatif::{self, Inputs, NodeSelector};
use crate::simulate::{capacity, timing, workload};

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
    /// After the run: how many more copies of the one Pod in FILE fit.
    #[arg(long, value_name = "FILE")]
    pub max_of: Option<PathBuf>,
    /// Before the run, drain the nodes this label selector matches
    /// (`key=value,key!=value,key,!key`): cordoned, their pods (but
    /// DaemonSets') scheduled again first.
    #[arg(long, value_name = "SELECTOR")]
    pub drain: Option<NodeSelector>,
    /// After the run: the smallest number of nodes like the one Node in FILE
    /// to add for no pod to stay pending (by search, one run per count tried).
    #[arg(long, value_name = "FILE")]
    pub add_nodes: Option<PathBuf>,
    /// Run again with the policy in FILE (same --scheduler-name) and show
    /// the pods that end differently.
    #[arg(long, value_name = "FILE")]
    pub compare_profile: Option<PathBuf>,
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
    let policy = load_policy(&args.policy, &args.scheduler_name)?;
    let cluster = snapshot_file::load(&args.cluster)?;
    if let Some(warning) = cluster.unknown_node_warning() {
        eprintln!("warning: {}: {warning}", args.cluster.display());
    }
    let mut expander = Expander::new(args.seed, &args.scheduler_name);
    let workload = workload::load(&args.workload, &mut expander)?;
    let mut arrivals = Vec::with_capacity(workload.pods.len());
    for pod in &workload.pods {
        arrivals.push(timing::arrival(pod.clone()).map_err(anyhow::Error::msg)?);
    }
    let mut inputs = Inputs {
        nodes: cluster.nodes,
        pods: cluster.pods,
        workload,
        arrivals,
        seed: args.seed,
        scheduler_name: args.scheduler_name.clone(),
    };
    let drained = args
        .drain
        .as_ref()
        .map(|selector| whatif::drain(&mut inputs, selector));
    let max_of = match &args.max_of {
        Some(file) => Some(one_pod(file, args)?),
        None => None,
    };
    let (mut outcome, cache) = inputs
        .run(&policy)
        .context("starting the simulation's runtime")?;
    outcome.drained = drained.map(|(nodes, pods)| Drained { nodes, pods });
    if let Some(file) = &args.add_nodes {
        let template = one_node(file)?;
        outcome.add_nodes = Some(whatif::add_nodes(&inputs, &policy, &template)?);
    }
    if let Some(file) = &args.compare_profile {
        let other = load_policy(file, &args.scheduler_name)?;
        let (theirs, _) = inputs.run(&other)?;
        outcome.compare = Some(whatif::compare(
            &outcome,
            &theirs,
            &file.display().to_string(),
        ));
    }
    if let Some(pod) = max_of {
        let m = capacity::max_of(&policy, &cache, &pod, args.seed)
            .map_err(|e| anyhow::anyhow!("--max-of: {e}"))?;
        outcome.max_of = Some(m);
    }
    Ok(match args.format {
        OutputFormat::Table => outcome.to_table(),
        OutputFormat::Json => {
            serde_json::to_string_pretty(&outcome).context("encoding the report")? + "\n"
        }
    })
}

/// The policy in `file`, which must have a profile `scheduler_name`.
fn load_policy(
    file: &std::path::Path,
    scheduler_name: &str,
) -> anyhow::Result<Arc<CompiledPolicy>> {
    let policy = Arc::new(CompiledPolicy::new(policy::load(file)?));
    if policy.profile(scheduler_name).is_none() {
        bail!(
            "{}: no profile with schedulerName {scheduler_name:?} (--scheduler-name)",
            file.display()
        );
    }
    Ok(policy)
}

/// The one Node `file` holds.
fn one_node(file: &std::path::Path) -> anyhow::Result<NodeInfo> {
    let mut nodes = snapshot_file::load(file)?.nodes;
    if nodes.len() != 1 {
        bail!(
            "{}: expected exactly one Node, found {}",
            file.display(),
            nodes.len()
        );
    }
    Ok(nodes.swap_remove(0))
}

/// The one pod `file` holds (a controller's first, if it holds one).
fn one_pod(file: &std::path::Path, args: &SimulateArgs) -> anyhow::Result<PodInfo> {
    let mut expander = Expander::new(args.seed, &args.scheduler_name);
    let mut pods = workload::load(file, &mut expander)?.pods;
    if pods.is_empty() {
        bail!("{}: no Pod in the file", file.display());
    }
    Ok(pods.swap_remove(0))
}
