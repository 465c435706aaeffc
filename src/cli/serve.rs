//! `placer serve`: start-up, the cache source, the listener, shutdown.

use std::sync::Arc;
use std::time::Duration;

use std::num::NonZeroUsize;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use tracing::{info, warn};

use super::ServeArgs;
use crate::cache::{Cache, ClusterState, snapshot_file, watch};
use crate::explain::pending::PendingFeed;
use crate::explain::{self, Diagnoses, Explainer, InTree, PendingPods};
use crate::metrics::Metrics;
use crate::modes::extender::{Binder, ExtenderState, Settings};
use crate::modes::standalone::leader::{self, ElectionConfig};
use crate::modes::standalone::queue::QueueTimings;
use crate::modes::standalone::scheduler::Standalone;
use crate::ops::access::{Access, AccessSettings, AlwaysAllow, ReviewSettings, Reviewer, Scheme};
use crate::ops::policy_reload::PolicyReloader;
use crate::ops::signals::{Reloaders, Signals};
use crate::ops::tls::{TlsFiles, TlsReloader};
use crate::ops::{memory, telemetry};
use crate::policy::{self, CompiledPolicy};
use crate::server::conn::Timeouts;
use crate::server::listener::{Limits, Listener, Transport};
use crate::state::{AppState, Lifecycle, Mode};

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

    tokio::spawn(memory::trim_periodically(Duration::from_secs(
        args.memory_trim_interval_seconds,
    )));

    let compiled = CompiledPolicy::new(policy::load(&args.policy)?);
    let queue_timings = queue_timings(&args)?;
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
                // Explaining runs kube-scheduler's default profile, which has
                // DynamicResources. A policy reload that adds it needs a
                // restart to start these watches (until then it skips pods).
                if compiled.needs_dra() || explain_pods(&args) {
                    cache.write().dra_mut().set_watched();
                    tokio::spawn(watch::watch_dra_objects(client.clone(), cache.clone()));
                }
            }
            cache
        }
    };

    let settings = Settings {
        max_body_bytes: args.max_body_bytes,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        verbs_enabled: args.mode.serves_verbs(),
        path_prefix: args.path_prefix.clone(),
        own_scheduling: match args.mode {
            Mode::Extender => None,
            Mode::Standalone => Some("standalone"),
            Mode::Both => Some("both"),
        },
        bind_any_scheduler: args.bind_any_scheduler,
    };
    let mut state = AppState::new(compiled, cache);
    state.lifecycle = lifecycle.clone();
    let binder = api_client
        .clone()
        .map(|client| Arc::new(Binder::new(client, state.metrics.clone())));
    let mut verbs = ExtenderState::new(&state, binder, settings);
    let explainer = explainer(&args, &state, pending, api_client.as_ref())?;
    if explain_pods(&args) {
        // A watch feeds the store: /bind finds unscheduled pods there.
        verbs.pending = Some(explainer.pending.clone());
    }
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
            let mut standalone =
                Standalone::with_timings(client, state.clone(), &identity, queue_timings)
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
    let access = access(&args, tls.is_some(), metrics.clone()).await?;
    let cache = state.cache.clone();
    let app = crate::server::secured_router(state, verbs, Some(explainer), &access);
    let listener = Listener::bind(args.listen).await?;
    let listen = listener.local_addr();
    let transport = match &tls {
        Some(reloader) => {
            info!(%listen, mode = ?args.mode, mtls = args.client_ca_file.is_some(), reads = access.reads_described(), "placer serving HTTPS");
            Transport::Tls(reloader.config())
        }
        None => {
            info!(%listen, mode = ?args.mode, reads = access.reads_described(), "placer serving HTTP");
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
        threads: usize::try_from(args.http_threads)
            .ok()
            .and_then(NonZeroUsize::new)
            .unwrap_or(NonZeroUsize::MIN),
    };
    listener
        .serve(app, transport, limits, metrics, &lifecycle)
        .context("starting the HTTP serving threads")?
        .await?;
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

/// The access checks (design §3.4): the verbs need a client certificate
/// when there is a client CA; the other paths are reviewed through the API
/// server when delegated authentication is configured (the two kubeconfig
/// flags, else in-cluster), else need a client certificate when there is a
/// client CA, else are open for `--snapshot` (a file, no cluster behind it)
/// and closed for a live cluster, but for the always-allowed paths.
async fn access(
    args: &ServeArgs,
    https: bool,
    metrics: Arc<Metrics>,
) -> anyhow::Result<Arc<Access>> {
    let always_allow = AlwaysAllow::new(&args.authorization_always_allow_paths)
        .map_err(|e| anyhow!("--authorization-always-allow-paths: {e}"))?;
    let client_ca = args.client_ca_file.is_some();
    let reads = match delegated_clients(args).await? {
        Some((authentication, authorization)) => {
            if !https {
                warn!(
                    "delegated authentication over plain HTTP: bearer tokens cross the network unencrypted; serve HTTPS (--tls-cert-file)"
                );
            }
            let settings = ReviewSettings {
                token_ttl: args.authentication_token_webhook_cache_ttl,
                allowed_ttl: args.authorization_webhook_cache_authorized_ttl,
                denied_ttl: args.authorization_webhook_cache_unauthorized_ttl,
                ..ReviewSettings::default()
            };
            let reviewer = Reviewer::new(authentication, authorization, settings, metrics.clone())
                .map_err(|_| anyhow!("no random source for the token cache's key"))?;
            Scheme::Delegated(Arc::new(reviewer))
        }
        None => undelegated_reads(args),
    };
    let access = Access::new(
        AccessSettings {
            client_ca,
            verbs_allowed_names: args.verbs_allowed_names.clone(),
            always_allow,
            reads,
        },
        metrics,
    );
    info!(
        verbs = if client_ca { "client certificate" } else { "open" },
        reads = access.reads_described(),
        always_allow = ?args.authorization_always_allow_paths,
        "access checks"
    );
    Ok(access)
}

/// How the reads are checked without delegated authentication: a client
/// certificate when there is a client CA; else open for `--snapshot` only
/// (a file, no cluster behind it), closed for a live cluster but for the
/// always-allowed paths, as kube-scheduler's authorizer without its
/// kubeconfig.
fn undelegated_reads(args: &ServeArgs) -> Scheme {
    if args.client_ca_file.is_some() {
        Scheme::ClientCertificate
    } else if args.snapshot.is_some() {
        Scheme::Open
    } else {
        Scheme::Closed
    }
}

/// The API clients of delegated authentication and authorization: from
/// their kubeconfig flags, a missing one from the in-cluster configuration;
/// `None` when neither flag is given and placer runs outside a cluster (as
/// kube-scheduler, whose kubeconfigs are optional the same way).
async fn delegated_clients(
    args: &ServeArgs,
) -> anyhow::Result<Option<(kube::Client, kube::Client)>> {
    let in_cluster = match kube::Config::incluster() {
        Ok(config) => {
            Some(kube::Client::try_from(config).context("building the in-cluster API client")?)
        }
        Err(_) => None,
    };
    let authentication = delegated_client(
        "authentication-kubeconfig",
        args.authentication_kubeconfig.as_deref(),
        in_cluster.as_ref(),
    )
    .await?;
    let authorization = delegated_client(
        "authorization-kubeconfig",
        args.authorization_kubeconfig.as_deref(),
        in_cluster.as_ref(),
    )
    .await?;
    match (authentication, authorization) {
        (Some(authentication), Some(authorization)) => Ok(Some((authentication, authorization))),
        (None, None) => Ok(None),
        (Some(_), None) => bail!(
            "--authentication-kubeconfig is set but --authorization-kubeconfig is not, and placer does not run in a cluster: set both"
        ),
        (None, Some(_)) => bail!(
            "--authorization-kubeconfig is set but --authentication-kubeconfig is not, and placer does not run in a cluster: set both"
        ),
    }
}

/// The client of one delegated review: from its flag's kubeconfig, else in-cluster.
async fn delegated_client(
    flag: &str,
    kubeconfig: Option<&Path>,
    in_cluster: Option<&kube::Client>,
) -> anyhow::Result<Option<kube::Client>> {
    match kubeconfig {
        Some(path) => Ok(Some(
            kube_client(Some(path))
                .await
                .with_context(|| format!("--{flag}"))?,
        )),
        None => Ok(in_cluster.cloned()),
    }
}

async fn client(args: &ServeArgs) -> anyhow::Result<kube::Client> {
    kube_client(args.kubeconfig.as_deref()).await
}

/// An API client from `kubeconfig`, or inferred (in-cluster, KUBECONFIG, ~/.kube/config).
async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(super::kube_config(kubeconfig, None).await?)
        .context("building the API client")
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

/// The scheduling queue's backoff and flush from the flags, checked as
/// kube-scheduler validates podInitialBackoffSeconds and podMaxBackoffSeconds.
fn queue_timings(args: &ServeArgs) -> anyhow::Result<QueueTimings> {
    if args.pod_max_backoff_seconds < args.pod_initial_backoff_seconds {
        bail!(
            "--pod-max-backoff-seconds ({}) must be at least --pod-initial-backoff-seconds ({})",
            args.pod_max_backoff_seconds,
            args.pod_initial_backoff_seconds
        );
    }
    if args.pod_max_in_unschedulable_pods_duration.is_zero() {
        bail!("--pod-max-in-unschedulable-pods-duration must be greater than 0");
    }
    Ok(QueueTimings {
        initial_backoff: Duration::from_secs(args.pod_initial_backoff_seconds),
        max_backoff: Duration::from_secs(args.pod_max_backoff_seconds),
        max_unschedulable: args.pod_max_in_unschedulable_pods_duration,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn identities_are_unique_per_process_start() {
        let (a, b) = (unique_id(), unique_id());
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    fn serve_args(flags: &[&str]) -> ServeArgs {
        let argv = ["placer", "serve"].iter().chain(flags);
        match super::super::Cli::try_parse_from(argv) {
            Ok(super::super::Cli {
                command: super::super::Command::Serve(args),
                ..
            }) => args,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn without_delegation_only_a_snapshot_leaves_the_reads_open() {
        let scheme = |flags: &[&str]| match undelegated_reads(&serve_args(flags)) {
            Scheme::Open => "open",
            Scheme::Closed => "closed",
            Scheme::ClientCertificate => "client certificate",
            Scheme::Delegated(_) => "delegated",
        };
        assert_eq!(scheme(&["--snapshot=cluster.yaml"]), "open");
        assert_eq!(scheme(&[]), "closed");
        assert_eq!(scheme(&["--kubeconfig=kubeconfig"]), "closed");
        let mtls = [
            "--tls-cert-file=t",
            "--tls-key-file=k",
            "--client-ca-file=ca",
        ];
        assert_eq!(scheme(&mtls), "client certificate");
        let snapshot_mtls = [&mtls[..], &["--snapshot=cluster.yaml"]].concat();
        assert_eq!(scheme(&snapshot_mtls), "client certificate");
    }

    #[test]
    fn bind_any_scheduler_is_off_unless_given() {
        assert!(!serve_args(&[]).bind_any_scheduler);
        assert!(serve_args(&["--bind-any-scheduler"]).bind_any_scheduler);
    }

    #[test]
    fn queue_timings_default_to_kube_schedulers() {
        let timings = queue_timings(&serve_args(&[])).unwrap();
        assert_eq!(timings.initial_backoff, Duration::from_secs(1));
        assert_eq!(timings.max_backoff, Duration::from_secs(10));
        assert_eq!(timings.max_unschedulable, Duration::from_secs(300));
    }

    #[test]
    fn queue_timings_come_from_kube_schedulers_names() {
        let timings = queue_timings(&serve_args(&[
            "--pod-initial-backoff-seconds=2",
            "--pod-max-backoff-seconds=30",
            "--pod-max-in-unschedulable-pods-duration=90s",
        ]))
        .unwrap();
        assert_eq!(timings.initial_backoff, Duration::from_secs(2));
        assert_eq!(timings.max_backoff, Duration::from_secs(30));
        assert_eq!(timings.max_unschedulable, Duration::from_secs(90));
    }

    #[test]
    fn contradictory_queue_timings_are_refused() {
        let err = queue_timings(&serve_args(&[
            "--pod-initial-backoff-seconds=20",
            "--pod-max-backoff-seconds=10",
        ]))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("--pod-max-backoff-seconds (10) must be at least")
        );
        let err = queue_timings(&serve_args(&[
            "--pod-max-in-unschedulable-pods-duration=0s",
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("greater than 0"));
        assert!(
            super::super::Cli::try_parse_from([
                "placer",
                "serve",
                "--pod-initial-backoff-seconds=0"
            ])
            .is_err()
        );
    }
}
