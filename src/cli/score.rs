//! `placer score`: the offline twin of `POST /explain`.

use anyhow::{Context, bail};

use super::{OutputFormat, ScoreArgs};
use crate::cache::{ClusterState, snapshot_file};
use crate::framework::explain;
use crate::k8s::pod_spec;
use crate::policy::{self, CompiledPolicy};

/// Explains how every node in the cluster file filters and scores for the pod.
pub fn score(args: &ScoreArgs) -> anyhow::Result<()> {
    let policy = CompiledPolicy::new(policy::load(&args.policy)?);
    let cluster = snapshot_file::load(&args.cluster)?;
    if let Some(warning) = cluster.unknown_node_warning() {
        eprintln!("warning: {}: {warning}", args.cluster.display());
    }
    let pods = snapshot_file::load(&args.pod)?;
    let [pod] = <[_; 1]>::try_from(pods.pods).map_err(|v| {
        anyhow::anyhow!(
            "{}: expected exactly one Pod, found {}",
            args.pod.display(),
            v.len()
        )
    })?;
    if let Err(e) = pod_spec::validate(&pod) {
        bail!("{}: Pod {}: {e}", args.pod.display(), pod.key());
    }
    let Some(framework) = policy.profile_for_extender(&pod.scheduler_name) else {
        bail!(
            "no profile for schedulerName {:?} and no extender.defaultProfile in {}",
            pod.scheduler_name,
            args.policy.display()
        );
    };
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    state.watch_labels(policy.node_label_keys().iter().map(String::as_str));
    let mut nodes: Vec<_> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    nodes.sort();
    cluster.fill(&mut state);
    let requested: Vec<_> = nodes
        .into_iter()
        .map(|n| {
            let node = state.node(&n).map(|n| &**n);
            (n, node)
        })
        .collect();
    let e = explain(framework, &pod, &requested, &state);
    match args.format {
        OutputFormat::Table => print!("{}", e.to_table()),
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&e).context("encoding the explanation")?
        ),
    }
    Ok(())
}
