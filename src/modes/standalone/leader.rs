//! Leader election through a `coordination.k8s.io` Lease, with kube-scheduler's
//! (client-go's) semantics and timings: 15 s lease, 10 s renew deadline, 2 s retry.
//!
//! - A candidate reads the Lease every retry period (plus a little jitter). It
//!   takes the Lease when nobody holds it (never held, or released) or when the
//!   holder has not renewed it for a lease duration, measured on the
//!   candidate's own clock from the moment it last saw the record change (as
//!   client-go does, so clock skew between replicas does not matter).
//! - Writes carry the `resourceVersion` they read, so of two candidates only
//!   one wins.
//! - The leader renews every retry period. When no renewal succeeded within
//!   the renew deadline it stops leading (10 s < 15 s: before another replica
//!   may take over) and becomes a candidate again.
//! - On shutdown the leader releases the Lease (no holder), so another replica
//!   takes over within a retry period instead of waiting for it to expire.
//!
//! Every replica keeps its caches warm and serves HTTP; only the holder of
//! the Lease schedules. Lease election has no fencing, so a deposed leader
//! could act briefly; the Binding's UID precondition and the API server's
//! refusal to bind a bound pod keep a pod from being bound twice.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

/// kube-scheduler's `leaseDuration`.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// kube-scheduler's `renewDeadline`: the leader gives up after failing to renew this long.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// kube-scheduler's `retryPeriod`: how often candidates try and the leader renews.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Why this replica could not join the election.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The Lease could not be read (missing RBAC, say).
    #[error("reading the leader-election Lease {lease}")]
    ReadLease {
        /// The Lease, `namespace/name`.
        lease: String,
        /// What the API server (or the way to it) said.
        source: kube::Error,
    },
}

/// This replica's view of the election.
pub struct Leadership {
    state: watch::Receiver<bool>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Joins the election for Lease `namespace/name` as `identity`. Fails when
/// the Lease cannot be read at all (missing RBAC, say), so that shows at start-up.
pub async fn join(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> Result<Leadership, JoinError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    api.get_opt(name)
        .await
        .map_err(|source| JoinError::ReadLease {
            lease: format!("{namespace}/{name}"),
            source,
        })?;
    let (state_tx, state) = watch::channel(false);
    let (stop, stop_rx) = oneshot::channel();
    let elector = Elector {
        api,
        name: name.to_string(),
        identity: identity.to_string(),
        observed: None,
    };
    let task = tokio::spawn(elector.run(state_tx, stop_rx));
    info!(lease = %format!("{namespace}/{name}"), identity, "joined leader election");
    Ok(Leadership { state, stop, task })
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

    /// Leaves the election, giving the Lease up if held, so another replica
    /// can take over at once.
    pub async fn release(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            warn!(error = %e, "leader election task failed");
        }
    }
}

/// What this replica last saw of the Lease, and since when (its own clock).
struct Observed {
    spec: LeaseSpec,
    since: Instant,
}

struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    observed: Option<Observed>,
}

/// Whether `identity` may write itself into the Lease whose record is `spec`,
/// unchanged for `unchanged_for`: it is free, ours, or its holder let it lapse.
fn may_claim(spec: &LeaseSpec, identity: &str, unchanged_for: Duration) -> bool {
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(LEASE_DURATION, Duration::from_secs);
    holder.is_empty() || holder == identity || unchanged_for >= duration
}

/// The record `identity` writes to acquire or renew a Lease that held
/// `previous` (`None`: no Lease yet).
fn claim(previous: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> LeaseSpec {
    let renewing = previous.filter(|p| p.holder_identity.as_deref() == Some(identity));
    let transitions = previous.map_or(0, |p| {
        p.lease_transitions.unwrap_or(0) + i32::from(renewing.is_none())
    });
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
        acquire_time: renewing
            .and_then(|p| p.acquire_time.clone())
            .or(Some(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    }
}

/// The record a leader writes to give the Lease up (as client-go does: no
/// holder, a 1 s duration).
fn released(previous: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: previous.lease_transitions,
        ..Default::default()
    }
}

/// 0–400 ms, so candidates do not poll in lockstep.
fn jitter() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    Duration::from_millis(u64::from(nanos % 400))
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl Elector {
    async fn run(mut self, state: watch::Sender<bool>, mut stop: oneshot::Receiver<()>) {
        loop {
            // Candidate.
            loop {
                match self.try_acquire_or_renew().await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => warn!(error = %e, "could not read or take the Lease; retrying"),
                }
                tokio::select! {
                    _ = &mut stop => return,
                    () = tokio::time::sleep(RETRY_PERIOD + jitter()) => {}
                }
            }
            info!(identity = %self.identity, "acquired the scheduling Lease");
            state.send_replace(true);

            // Leader.
            let mut renewed = Instant::now();
            loop {
                tokio::select! {
                    _ = &mut stop => {
                        state.send_replace(false);
                        self.release().await;
                        return;
                    }
                    () = tokio::time::sleep(RETRY_PERIOD) => {}
                }
                let deadline = renewed + RENEW_DEADLINE;
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(true)) => renewed = Instant::now(),
                    Ok(Ok(false)) => {
                        warn!("another replica took the Lease; stopping scheduling");
                        break;
                    }
                    Ok(Err(e)) => warn!(error = %e, "could not renew the Lease; retrying"),
                    Err(_) => {}
                }
                if Instant::now() >= deadline {
                    warn!(
                        deadline = ?RENEW_DEADLINE,
                        "could not renew the Lease in time; stopping scheduling"
                    );
                    break;
                }
            }
            state.send_replace(false);
        }
    }

    /// Notes what the Lease holds now; the clock restarts when it changed.
    fn observe(&mut self, spec: LeaseSpec) {
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed {
                spec,
                since: Instant::now(),
            });
        }
    }

    /// client-go's `tryAcquireOrRenew`: true when this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> kube::Result<bool> {
        let now = Timestamp::now();
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(claim(None, &self.identity, now)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec.unwrap_or_default());
                    Ok(true)
                }
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.take().unwrap_or_default();
        self.observe(spec.clone());
        let unchanged_for = self
            .observed
            .as_ref()
            .map_or(Duration::ZERO, |o| o.since.elapsed());
        if !may_claim(&spec, &self.identity, unchanged_for) {
            return Ok(false);
        }
        lease.spec = Some(claim(Some(&spec), &self.identity, now));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(updated.spec.unwrap_or_default());
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up if this replica still holds it.
    async fn release(&mut self) {
        let result = async {
            let Some(mut lease) = self.api.get_opt(&self.name).await? else {
                return Ok(false);
            };
            let spec = lease.spec.take().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
                return Ok(false);
            }
            lease.spec = Some(released(&spec, Timestamp::now()));
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
                .map(|_| true)
        }
        .await;
        match result {
            Ok(true) => info!("released the scheduling Lease"),
            Ok(false) => info!("the scheduling Lease was no longer ours to release"),
            Err(e) => warn!(error = %e, "releasing the Lease failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: Option<&str>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            renew_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_is_claimed_when_free_ours_or_lapsed() {
        let secs = Duration::from_secs;
        assert!(may_claim(&LeaseSpec::default(), "me", Duration::ZERO));
        assert!(may_claim(&held_by(None, 3), "me", Duration::ZERO));
        assert!(may_claim(&held_by(Some(""), 3), "me", Duration::ZERO));
        assert!(may_claim(&held_by(Some("me"), 3), "me", Duration::ZERO));
        assert!(!may_claim(&held_by(Some("other"), 3), "me", secs(14)));
        assert!(may_claim(&held_by(Some("other"), 3), "me", secs(15)));
        let mut released = held_by(Some("other"), 3);
        released.lease_duration_seconds = Some(1);
        assert!(may_claim(&released, "me", secs(1)));
    }

    #[test]
    fn claims_count_transitions_and_keep_the_acquire_time_on_renewal() {
        let now = Timestamp::from_second(1_000).unwrap();
        let first = claim(None, "me", now);
        assert_eq!(first.holder_identity.as_deref(), Some("me"));
        assert_eq!(first.lease_transitions, Some(0));
        assert_eq!(first.lease_duration_seconds, Some(15));
        assert_eq!(first.acquire_time, Some(MicroTime(now)));

        let renewed = claim(Some(&held_by(Some("me"), 2)), "me", now);
        assert_eq!(renewed.lease_transitions, Some(2));
        assert_eq!(renewed.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));

        let taken = claim(Some(&held_by(Some("other"), 2)), "me", now);
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));

        let gone = released(&taken, now);
        assert_eq!(gone.holder_identity, None);
        assert_eq!(gone.lease_transitions, Some(3));
        assert!(may_claim(&gone, "other", Duration::ZERO));
    }
}
