//! `placer serve`: start-up, the cache source, the listener, shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use arc_swap::ArcSwap;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::info;

use super::ServeArgs;
use crate::cache::{Cache, ClusterState, snapshot_file, watch};
use crate::modes::extender::{AppState, Binder, Settings};
use crate::modes::standalone;
use crate::ops::telemetry;
use crate::policy::{self, CompiledPolicy};

/// Runs the service until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    telemetry::init(args.log_format);
    let compiled = CompiledPolicy::new(policy::load(&args.policy)?);
    if args.mode.schedules() {
        bail!(standalone::UNAVAILABLE);
    }
    let dims = compiled.count_dimensions();
    let policy = Arc::new(ArcSwap::from_pointee(compiled));

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
            let cache = Arc::new(Cache::new());
            cache.write().set_dimensions(&dims);
            tokio::spawn(watch::watch_nodes(client.clone(), cache.clone()));
            tokio::spawn(watch::watch_pods(client.clone(), cache.clone()));
            (cache, Some(Arc::new(Binder::new(client))))
        }
    };

    let state = AppState {
        policy,
        cache,
        binder,
        settings: Arc::new(Settings {
            max_body_bytes: args.max_body_bytes,
            request_timeout: Duration::from_millis(args.request_timeout_ms),
            verbs_enabled: args.mode.serves_verbs(),
            path_prefix: args.path_prefix.clone(),
        }),
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    info!(listen = %args.listen, mode = ?args.mode, "placer serving");
    axum::serve(listener, crate::server::router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving HTTP")?;
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
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    info!("shutdown signal received; finishing in-flight requests");
}
