//! `placer serve`: start-up, the cache source, the listener, shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::{info, warn};

use super::ServeArgs;
use crate::cache::{Cache, ClusterState, snapshot_file, watch};
use crate::explain::pending::PendingFeed;
use crate::explain::{self, Diagnoses, Explainer, InTree, PendingPods};
use crate::modes::extender::{Binder, ExtenderState, Settings};
use crate::modes::standalone::leader::{self, ElectionConfig};
use crate::modes::standalone::scheduler::Standalone;
use crate::ops::policy_reload::PolicyReloader;
use crate::ops::signals::{Reloaders, Signals};
use crate::ops::telemetry;
use crate::ops::tls::{TlsFiles, TlsReloader};
use crate::policy::{self, CompiledPolicy};
use crate::server::conn::Timeouts;
use crate::server::listener::{Limits, Listener, Transport};
use crate::state::{AppState, Lifecycle};

/// Runs the service until SIGTERM, SIGINT or SIGQUIT.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    telemetry::init(args.log_format);
    // First: until handled, SIGHUP, SIGQUIT and SIGUSR1/2 end the process.
    let signals = Signals::install().context("installing signal handlers")?;
    let reload_on_sighup = signals.reload_handle();
    // One shutdown sequence for readiness, the listener and the scheduling loop.
    let lifecycle = Arc::new(Lifecycle::new());
    tokio::spawn(signals.run(
        lifecycle.clone(),
        Duration::from_secs(args.shutdown_delay_seconds),
    ));

    let compiled = CompiledPolicy::new(policy::load(&args.policy)?);
    if args.mode.schedules() && args.snapshot.is_some() {
        bail!(
            "--mode {:?} binds pods and needs an API server; --snapshot only works in extender mode",
            args.mode
        );
    }
    let dims = compiled.count_dimensions();
    let label_keys = compiled.node_label_keys();

    let mut api_client = None;
    let mut pending = None;
    let cache = match &args.snapshot {
        Some(path) => {
            let snapshot = snapshot_file::load(path)?;
            if let Some(warning) = snapshot.unknown_node_warning() {
                warn!(file = %path.display(), "{warning}");
            }
            let mut state = ClusterState::with_dimensions(&dims);
            state.watch_labels(label_keys.iter().map(String::as_str));
            info!(nodes = snapshot.nodes.len(), pods = snapshot.pods.len(), file = %path.display(), "loaded snapshot");
            pending = Some(Arc::new(PendingPods::from_pods(
                snapshot
                    .pods
                    .iter()
                    .filter(|p| p.node_name.is_none())
                    .cloned(),
            )));
            snapshot.fill(&mut state);
            Arc::new(Cache::from_state(state))
        }
        None => {
            let client = client(&args).await?;
            api_client = Some(client.clone());
            let cache = Arc::new(Cache::new());
            cache.write().set_dimensions(&dims);
            cache
                .write()
                .watch_labels(label_keys.iter().map(String::as_str));
            let delay = Duration::from_millis(args.debug_watch_event_delay_ms);
            tokio::spawn(watch::watch_nodes(client.clone(), cache.clone(), delay));
            tokio::spawn(watch::watch_pods(client.clone(), cache.clone(), delay));
            if args.mode.schedules() || explain_pods(&args) {
                tokio::spawn(watch::watch_scheduling_objects(
                    client.clone(),
                    cache.clone(),
                ));
            }
            cache
        }
    };

    let settings = Settings {
        max_body_bytes: args.max_body_bytes,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        verbs_enabled: args.mode.serves_verbs(),
        path_prefix: args.path_prefix.clone(),
    };
    let mut state = AppState::new(compiled, cache);
    state.lifecycle = lifecycle.clone();
    let binder = api_client
        .clone()
        .map(|client| Arc::new(Binder::new(client, state.metrics.clone())));
    let mut verbs = ExtenderState::new(&state, binder, settings);
    let explainer = explainer(&args, &state, pending, api_client.as_ref())?;
    if let (Some(client), true) = (
        &api_client,
        args.mode.serves_verbs() && !args.no_retry_prompts,
    ) {
        verbs.enable_retry_prompts(client.clone());
    }
    let policy_reloader = PolicyReloader::new(args.policy.clone(), state.clone());
    if !args.no_policy_reload {
        tokio::spawn(policy_reloader.clone().watch());
    }
    let metrics = state.metrics.clone();
    let tls = match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => {
            let files = TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.client_ca_file.clone(),
            };
            let reloader = TlsReloader::new(files, metrics.clone())?;
            tokio::spawn(reloader.clone().watch());
            Some(reloader)
        }
        _ => None,
    };
    reload_on_sighup.set(Reloaders {
        policy: policy_reloader,
        tls: tls.clone(),
    });

    let scheduling = match (args.mode.schedules(), api_client) {
        (true, Some(client)) => {
            let identity = replica_identity();
            let election = ElectionConfig {
                lease_duration: args.leader_elect_lease_duration,
                renew_deadline: args.leader_elect_renew_deadline,
                retry_period: args.leader_elect_retry_period,
                ..ElectionConfig::new(
                    &args.leader_elect_namespace,
                    &args.leader_elect_resource_name,
                    &identity,
                )
            };
            let leadership = if args.leader_elect {
                Some(
                    leader::join(
                        client.clone(),
                        election.clone(),
                        state.leader_health.clone(),
                        state.cache.watches().kind("lease"),
                    )
                    .await?,
                )
            } else {
                None
            };
            let mut standalone = Standalone::new(client, state.clone(), &identity)
                .with_diagnoses(explainer.diagnoses.clone());
            if explain_pods(&args) {
                standalone = standalone.feeding(PendingFeed {
                    pending: explainer.pending.clone(),
                    diagnoses: explainer.diagnoses.clone(),
                });
            }
            info!(
                identity,
                leader_elect = args.leader_elect,
                "standalone scheduling enabled"
            );
            Some(tokio::spawn(standalone.run(
                leadership,
                lifecycle.terminating(),
                election.renew_deadline,
            )))
        }
        _ => None,
    };
    let cache = state.cache.clone();
    let app = crate::server::router(state, verbs, Some(explainer));
    let listener = Listener::bind(args.listen).await?;
    let listen = listener.local_addr();
    let transport = match &tls {
        Some(reloader) => {
            info!(%listen, mode = ?args.mode, mtls = args.client_ca_file.is_some(), "placer serving HTTPS");
            Transport::Tls(reloader.config())
        }
        None => {
            info!(%listen, mode = ?args.mode, "placer serving HTTP");
            Transport::Plain
        }
    };
    let limits = Limits {
        timeouts: Timeouts {
            header_read: Duration::from_secs(args.header_read_timeout_seconds),
            idle: Duration::from_secs(args.idle_timeout_seconds),
        },
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        drain: Duration::from_secs(args.shutdown_drain_seconds),
    };
    listener
        .serve(app, transport, limits, metrics, &lifecycle)
        .await;
    // In-flight binds finish and the Lease is released before exiting.
    if let Some(task) = scheduling {
        let _ = task.await;
    }
    info!(request_snapshots = ?cache.publish_stats(), "placer stopped");
    Ok(())
}

/// Whether unscheduled pods are watched for `/explain/pods` (see the flag).
fn explain_pods(args: &ServeArgs) -> bool {
    args.explain_pods.unwrap_or(args.mode.schedules())
}

/// The explainer of `/explain/pods`: unscheduled pods from the snapshot, or
/// watched (`--explain-pods`), or none; kube-scheduler's plugins when the
/// verbs are served.
fn explainer(
    args: &ServeArgs,
    state: &AppState,
    pending: Option<Arc<PendingPods>>,
    client: Option<&kube::Client>,
) -> anyhow::Result<Arc<Explainer>> {
    let mut outcomes = None;
    let mut diagnoses = Diagnoses::new(args.explain_diagnoses_cap);
    if let (true, true, Some(_)) = (args.simulator_annotations, args.mode.schedules(), client) {
        let (tx, rx) = tokio::sync::mpsc::channel(explain::simulator::QUEUE);
        diagnoses = diagnoses.reporting_outcomes(tx);
        outcomes = Some(rx);
    }
    let diagnoses = Arc::new(diagnoses);
    let pending = match (pending, client) {
        (Some(p), _) => p,
        (None, Some(client)) if explain_pods(args) => {
            let p = Arc::new(PendingPods::new());
            // Where placer schedules, its own watch of the same pods feeds
            // the store (`Standalone::feeding`).
            if !args.mode.schedules() {
                let feed = PendingFeed {
                    pending: p.clone(),
                    diagnoses: diagnoses.clone(),
                };
                tokio::spawn(explain::pending::watch(
                    client.clone(),
                    state.cache.clone(),
                    feed,
                ));
            }
            p
        }
        _ => Arc::new(PendingPods::from_pods([])),
    };
    let in_tree = if args.mode.serves_verbs() {
        Some(Arc::new(match &args.explain_kube_scheduler_config {
            Some(path) => InTree::from_file(path)?,
            None => InTree::defaults()?,
        }))
    } else {
        None
    };
    let explainer = Arc::new(Explainer {
        policy: state.policy.clone(),
        cache: state.cache.clone(),
        mode: args.mode,
        pending,
        in_tree,
        diagnoses,
        replica: Default::default(),
    });
    if let (Some(rx), Some(client)) = (outcomes, client) {
        tokio::spawn(explain::simulator::annotate(
            client.clone(),
            explainer.clone(),
            rx,
        ));
    }
    Ok(explainer)
}

async fn client(args: &ServeArgs) -> anyhow::Result<kube::Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding cluster credentials (in-cluster, KUBECONFIG, ~/.kube/config)")?,
    };
    kube::Client::try_from(config).context("building the API client")
}

/// This replica's name in the Lease and in its events: `$POD_NAME` (the
/// manifests set it), else kube-scheduler's `<hostname>_<unique id>`, so two
/// processes never share an identity, not even two containers that are both
/// pid 1.
fn replica_identity() -> String {
    if let Ok(name) = std::env::var("POD_NAME")
        && !name.is_empty()
    {
        return name;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "placer".into());
    format!("{host}_{}", unique_id())
}

/// 16 hex digits from the kernel's random source, or from the process id and
/// the clock where there is none.
fn unique_id() -> String {
    use std::io::Read as _;
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        bytes = (nanos ^ (u64::from(std::process::id()) << 32)).to_be_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_unique_per_process_start() {
        let (a, b) = (unique_id(), unique_id());
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
