//! `placer serve`: start-up, the cache source, the listener, shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum_server::tls_rustls::RustlsConfig;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::info;

use super::ServeArgs;
use crate::cache::{Cache, ClusterState, snapshot_file, watch};
use crate::modes::extender::{AppState, Binder, Settings};
use crate::modes::standalone::leader;
use crate::modes::standalone::scheduler::Standalone;
use crate::ops::tls::TlsFiles;
use crate::ops::{policy_reload, telemetry, tls};
use crate::policy::{self, CompiledPolicy};

/// How long in-flight requests may take to finish after SIGTERM.
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    telemetry::init(args.log_format);
    let compiled = CompiledPolicy::new(policy::load(&args.policy)?);
    if args.mode.schedules() && args.snapshot.is_some() {
        bail!(
            "--mode {:?} binds pods and needs an API server; --snapshot only works in extender mode",
            args.mode
        );
    }
    let dims = compiled.count_dimensions();

    let mut api_client = None;
    let (cache, binder) = match &args.snapshot {
        Some(path) => {
            let snapshot = snapshot_file::load(path)?;
            let mut state = ClusterState::with_dimensions(&dims);
            info!(nodes = snapshot.nodes.len(), pods = snapshot.pods.len(), file = %path.display(), "loaded snapshot");
            snapshot.fill(&mut state);
            (Arc::new(Cache::from_state(state)), None)
        }
        None => {
            let client = client(&args).await?;
            api_client = Some(client.clone());
            let cache = Arc::new(Cache::new());
            cache.write().set_dimensions(&dims);
            let delay = Duration::from_millis(args.debug_watch_event_delay_ms);
            tokio::spawn(watch::watch_nodes(client.clone(), cache.clone(), delay));
            tokio::spawn(watch::watch_pods(client.clone(), cache.clone(), delay));
            if args.mode.schedules() {
                tokio::spawn(watch::watch_scheduling_objects(
                    client.clone(),
                    cache.clone(),
                ));
            }
            (cache, Some(Arc::new(Binder::new(client))))
        }
    };

    let settings = Settings {
        max_body_bytes: args.max_body_bytes,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        verbs_enabled: args.mode.serves_verbs(),
        path_prefix: args.path_prefix.clone(),
    };
    let mut state = AppState::new(compiled, cache, binder, settings);
    if let (Some(client), true) = (
        &api_client,
        args.mode.serves_verbs() && !args.no_retry_prompts,
    ) {
        state.enable_retry_prompts(client.clone());
    }
    if !args.no_policy_reload {
        tokio::spawn(policy_reload::run(args.policy.clone(), state.clone()));
    }
    let metrics = state.metrics.clone();

    // One stop signal for the listener and the scheduling loop.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let scheduling = match (args.mode.schedules(), api_client) {
        (true, Some(client)) => {
            let identity = replica_identity();
            let leadership = if args.leader_elect {
                Some(
                    leader::join(
                        client.clone(),
                        &args.leader_elect_namespace,
                        &args.leader_elect_lease,
                        &identity,
                    )
                    .await?,
                )
            } else {
                None
            };
            let standalone = Standalone::new(client, state.clone(), &identity);
            info!(
                identity,
                leader_elect = args.leader_elect,
                "standalone scheduling enabled"
            );
            Some(tokio::spawn(standalone.run(leadership, stop_rx.clone())))
        }
        _ => None,
    };
    let app = crate::server::router(state);
    let stopped = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
            info!("shutdown signal received; finishing in-flight requests");
        }
    };

    match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => {
            let files = TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.client_ca_file.clone(),
            };
            let config = RustlsConfig::from_config(Arc::new(files.server_config()?));
            tokio::spawn(tls::reload_on_change(files, config.clone(), metrics));
            let handle = axum_server::Handle::new();
            let shutdown = handle.clone();
            tokio::spawn(async move {
                stopped.await;
                shutdown.graceful_shutdown(Some(DRAIN));
            });
            info!(listen = %args.listen, mode = ?args.mode, mtls = args.client_ca_file.is_some(), "placer serving HTTPS");
            axum_server::bind_rustls(args.listen, config)
                .handle(handle)
                .serve(app.into_make_service())
                .await
                .with_context(|| format!("serving HTTPS on {}", args.listen))?;
        }
        _ => {
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("listening on {}", args.listen))?;
            info!(listen = %args.listen, mode = ?args.mode, "placer serving HTTP");
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
                .context("serving HTTP")?;
        }
    }
    if let Some(task) = scheduling {
        let _ = task.await;
    }
    info!("placer stopped");
    Ok(())
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

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
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
