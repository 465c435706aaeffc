//! Leader election through a `coordination.k8s.io` Lease, with
//! kube-scheduler's timings (15 s lease; renewal well before it lapses).
//!
//! Every replica keeps its caches warm and serves HTTP; only the holder of
//! the Lease schedules. Lease election has no fencing, so a deposed leader
//! could act briefly; the Binding's UID precondition and the API server's
//! refusal to bind a bound pod keep a pod from being bound twice.

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// kube-scheduler's `leaseDuration`.
pub const LEASE_SECONDS: u64 = 15;
/// Renew this long before the lease lapses (15 s − kube-scheduler's 10 s renew deadline).
pub const GRACE_SECONDS: u64 = 5;

/// This replica's view of the election.
pub struct Leadership {
    state: watch::Receiver<bool>,
    task:
        JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>,
}

/// Joins the election for Lease `namespace/name` as `identity`.
pub async fn join(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> anyhow::Result<Leadership> {
    let manager = LeaseManagerBuilder::new(client, name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(LEASE_SECONDS)
        .with_grace(GRACE_SECONDS)
        .build()
        .await?;
    let (state, task) = manager.watch().await;
    info!(lease = %format!("{namespace}/{name}"), identity, "joined leader election");
    Ok(Leadership { state, task })
}

impl Leadership {
    /// True while this replica holds the Lease.
    pub fn is_leader(&self) -> bool {
        *self.state.borrow()
    }

    /// Waits until the leadership changes; false if the election task ended.
    pub async fn changed(&mut self) -> bool {
        self.state.changed().await.is_ok()
    }

    /// Gives the Lease up so another replica can take over at once.
    pub async fn release(self) {
        drop(self.state);
        match self.task.await {
            Ok(Ok(_)) => info!("released the scheduling Lease"),
            Ok(Err(e)) => warn!(error = %e, "releasing the Lease failed"),
            Err(e) => warn!(error = %e, "leader election task failed"),
        }
    }
}
