//! Leader election through a `coordination.k8s.io` Lease, with kube-scheduler's
//! (client-go's) semantics, flags and default timings: 15 s lease, 10 s renew
//! deadline, 2 s retry (`--leader-elect-lease-duration`, `-renew-deadline`,
//! `-retry-period`, `-resource-name`, `-resource-namespace`).
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
//! - On shutdown the leader releases the Lease (no holder). Candidates also
//!   watch the Lease (through the cache's list-and-watch loop, health kind
//!   `lease`) and try at once when it is released, so another replica takes
//!   over within milliseconds instead of at its next retry.
//! - `/healthz` fails when the leader (or a leader that stepped down because
//!   it could not renew) has gone without a renewal for the renew deadline
//!   plus kube-scheduler's 20 s tolerance ([`LeaderHealth`]).
//!
//! Why not `kube-lease-manager` (built on the same kube and k8s-openapi): it
//! times a lease from the holder's `renewTime` (the holder's clock, hence its
//! own skew "grace") in whole seconds, with a duration and a grace instead of
//! client-go's lease duration, renew deadline and retry period measured on
//! the candidate's clock, so kube-scheduler's flags would not mean what they
//! say; and it has no hook for the release at the start of the shutdown
//! delay, the Lease watch or the health check.
//!
//! Every replica keeps its caches warm and serves HTTP; only the holder of
//! the Lease schedules. Lease election has no fencing, so a deposed leader
//! could act briefly; the Binding's UID precondition and the API server's
//! refusal to bind a bound pod keep a pod from being bound twice.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::cache::watch_health::WatchHealth;
use crate::cache::watch_stream::{self, Step};
use crate::state::LeaderHealth;

/// kube-scheduler's default `leaseDuration`.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// kube-scheduler's default `renewDeadline`: the leader gives up after failing to renew this long.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// kube-scheduler's default `retryPeriod`: how often candidates try and the leader renews.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// client-go's `JitterFactor`: candidates wait up to this much of a retry period more.
const JITTER_FACTOR: f64 = 1.2;

/// Which Lease, who this replica is, and the timings.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's holder identity.
    pub identity: String,
    /// Followers take the Lease after it went unrenewed this long.
    pub lease_duration: Duration,
    /// The leader stops scheduling when it could not renew for this long.
    pub renew_deadline: Duration,
    /// How often candidates try and the leader renews.
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// kube-scheduler's defaults for Lease `namespace/name`.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        ElectionConfig {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
        }
    }

    /// client-go's checks: the lease outlasts the renew deadline, which
    /// outlasts a jittered retry period.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be greater than zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "--leader-elect-lease-duration ({:?}) must be greater than --leader-elect-renew-deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * JITTER_FACTOR {
            return Err(format!(
                "--leader-elect-renew-deadline ({:?}) must be greater than {JITTER_FACTOR} x --leader-elect-retry-period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The lease duration as the Lease records it: whole seconds, at least 1.
    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs_f64().ceil() as u64)
            .unwrap_or(i32::MAX)
            .max(1)
    }

    /// Up to 20 % of a retry period on top of it, so candidates do not poll in lockstep.
    fn jittered_retry(&self) -> Duration {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let fraction = f64::from(nanos % 1000) / 1000.0 * (JITTER_FACTOR - 1.0);
        self.retry_period + self.retry_period.mul_f64(fraction)
    }
}

/// Why this replica could not join the election.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The Lease could not be read (missing RBAC, say).
    #[error(
        "reading the leader-election Lease {lease} (--leader-elect is on by default; \
         --leader-elect=false schedules without a Lease, for a single replica)"
    )]
    ReadLease {
        /// The Lease, `namespace/name`.
        lease: String,
        /// What the API server (or the way to it) said.
        source: kube::Error,
    },
    /// The timings contradict each other.
    #[error("{0}")]
    Timings(String),
}

/// This replica's view of the election.
pub struct Leadership {
    state: watch::Receiver<bool>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Joins the election `config` describes. Fails when the timings contradict
/// each other or the Lease cannot be read at all (missing RBAC, say), so
/// that shows at start-up. `health` is what `/healthz` reads; `watch` is
/// the health entry of the Lease watch.
pub async fn join(
    client: Client,
    config: ElectionConfig,
    health: Arc<LeaderHealth>,
    watch: Arc<WatchHealth>,
) -> Result<Leadership, JoinError> {
    config.validate().map_err(JoinError::Timings)?;
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    api.get_opt(&config.name)
        .await
        .map_err(|source| JoinError::ReadLease {
            lease: config.lease(),
            source,
        })?;
    let (state_tx, state) = watch::channel(false);
    let (stop, stop_rx) = oneshot::channel();
    let (steps_tx, steps) = mpsc::channel(16);
    tokio::spawn(watch_stream::run(
        api.clone(),
        Some(format!("metadata.name={}", config.name)),
        watch,
        steps_tx,
    ));
    info!(lease = %config.lease(), identity = %config.identity, "joined leader election");
    let elector = Elector {
        api,
        config,
        health,
        observed: None,
    };
    let task = tokio::spawn(elector.run(state_tx, stop_rx, steps));
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
    config: ElectionConfig,
    health: Arc<LeaderHealth>,
    observed: Option<Observed>,
}

type Steps = mpsc::Receiver<(std::time::Instant, Step<Lease>)>;

/// Whether `identity` may write itself into the Lease whose record is `spec`,
/// unchanged for `unchanged_for`: it is free, ours, or its holder let it lapse
/// (after the duration the record names, else `default`).
fn may_claim(spec: &LeaseSpec, identity: &str, unchanged_for: Duration, default: Duration) -> bool {
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(default, Duration::from_secs);
    holder.is_empty() || holder == identity || unchanged_for >= duration
}

/// The record `identity` writes to acquire or renew a Lease that held
/// `previous` (`None`: no Lease yet), for `lease_seconds`.
fn claim(
    previous: Option<&LeaseSpec>,
    identity: &str,
    lease_seconds: i32,
    now: Timestamp,
) -> LeaseSpec {
    let renewing = previous.filter(|p| p.holder_identity.as_deref() == Some(identity));
    let transitions = previous.map_or(0, |p| {
        p.lease_transitions.unwrap_or(0) + i32::from(renewing.is_none())
    });
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(lease_seconds),
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

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl Elector {
    async fn run(
        mut self,
        state: watch::Sender<bool>,
        mut stop: oneshot::Receiver<()>,
        mut steps: Steps,
    ) {
        loop {
            // Candidate: try every (jittered) retry period, and at once when
            // the watch shows the Lease released or gone.
            loop {
                match self.try_acquire_or_renew().await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => warn!(error = %e, "could not read or take the Lease; retrying"),
                }
                let next_try = tokio::time::sleep(self.config.jittered_retry());
                tokio::pin!(next_try);
                loop {
                    tokio::select! {
                        _ = &mut stop => return,
                        () = &mut next_try => break,
                        Some((_, step)) = steps.recv() => if self.seen(step) { break },
                    }
                }
            }
            info!(identity = %self.config.identity, "acquired the scheduling Lease");
            state.send_replace(true);

            // Leader.
            let mut renewed = Instant::now();
            loop {
                let next_renewal = tokio::time::sleep(self.config.retry_period);
                tokio::pin!(next_renewal);
                loop {
                    tokio::select! {
                        _ = &mut stop => {
                            state.send_replace(false);
                            self.release().await;
                            return;
                        }
                        () = &mut next_renewal => break,
                        // Kept up to date; the renewal finds out about a new holder.
                        Some((_, step)) = steps.recv() => { self.seen(step); }
                    }
                }
                let deadline = renewed + self.config.renew_deadline;
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
                        deadline = ?self.config.renew_deadline,
                        "could not renew the Lease in time; stopping scheduling"
                    );
                    break;
                }
            }
            state.send_replace(false);
        }
    }

    /// Notes what the Lease holds now; the clock restarts when it changed.
    /// Another holder relieves this replica of the Lease's health.
    fn observe(&mut self, spec: LeaseSpec) {
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        if !holder.is_empty() && holder != self.config.identity {
            self.health.let_go();
        }
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed {
                spec,
                since: Instant::now(),
            });
        }
    }

    /// A step of the Lease watch; true when the Lease is now free to take
    /// (released or deleted), so a candidate should try at once.
    fn seen(&mut self, step: Step<Lease>) -> bool {
        let lease = match step {
            Step::Listed(mut all) => match all.pop() {
                Some(lease) => lease,
                None => return true,
            },
            Step::Applied(lease) => lease,
            Step::Deleted(_) => return true,
        };
        let spec = lease.spec.unwrap_or_default();
        let free = spec.holder_identity.as_deref().unwrap_or("").is_empty();
        self.observe(spec);
        free
    }

    /// client-go's `tryAcquireOrRenew`: true when this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> kube::Result<bool> {
        let now = Timestamp::now();
        let (identity, seconds) = (self.config.identity.clone(), self.config.lease_seconds());
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    ..Default::default()
                },
                spec: Some(claim(None, &identity, seconds, now)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created.spec.unwrap_or_default());
                    self.health
                        .renewed(&self.config.lease(), self.config.renew_deadline);
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
        if !may_claim(&spec, &identity, unchanged_for, self.config.lease_duration) {
            return Ok(false);
        }
        lease.spec = Some(claim(Some(&spec), &identity, seconds, now));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(updated.spec.unwrap_or_default());
                self.health
                    .renewed(&self.config.lease(), self.config.renew_deadline);
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up if this replica still holds it.
    async fn release(&mut self) {
        let result = async {
            let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
                return Ok(false);
            };
            let spec = lease.spec.take().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            lease.spec = Some(released(&spec, Timestamp::now()));
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
                .map(|_| true)
        }
        .await;
        self.health.let_go();
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
        let claims = |spec: &LeaseSpec, for_: Duration| may_claim(spec, "me", for_, LEASE_DURATION);
        assert!(claims(&LeaseSpec::default(), Duration::ZERO));
        assert!(claims(&held_by(None, 3), Duration::ZERO));
        assert!(claims(&held_by(Some(""), 3), Duration::ZERO));
        assert!(claims(&held_by(Some("me"), 3), Duration::ZERO));
        assert!(!claims(&held_by(Some("other"), 3), secs(14)));
        assert!(claims(&held_by(Some("other"), 3), secs(15)));
        let mut released = held_by(Some("other"), 3);
        released.lease_duration_seconds = Some(1);
        assert!(claims(&released, secs(1)));
        let mut unnamed = held_by(Some("other"), 3);
        unnamed.lease_duration_seconds = None;
        assert!(!may_claim(&unnamed, "me", secs(4), secs(5)));
        assert!(
            may_claim(&unnamed, "me", secs(5), secs(5)),
            "the configured duration"
        );
    }

    #[test]
    fn timings_are_checked_as_client_go_does() {
        let mut c = ElectionConfig::new("ns", "placer", "me");
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.lease_seconds(), 15);
        c.renew_deadline = Duration::from_secs(15);
        assert!(
            c.validate()
                .unwrap_err()
                .contains("--leader-elect-lease-duration")
        );
        c.renew_deadline = Duration::from_millis(2400);
        assert!(
            c.validate()
                .unwrap_err()
                .contains("1.2 x --leader-elect-retry-period")
        );
        c.renew_deadline = Duration::from_millis(2500);
        assert_eq!(c.validate(), Ok(()));
        c.retry_period = Duration::ZERO;
        assert!(c.validate().is_err());
        c.lease_duration = Duration::from_millis(1500);
        assert_eq!(c.lease_seconds(), 2, "rounded up to whole seconds");
        let retry = ElectionConfig::new("ns", "placer", "me");
        let waits: Vec<Duration> = (0..20).map(|_| retry.jittered_retry()).collect();
        assert!(
            waits
                .iter()
                .all(|w| *w >= RETRY_PERIOD && *w <= RETRY_PERIOD.mul_f64(1.2)),
            "{waits:?}"
        );
    }

    #[test]
    fn claims_count_transitions_and_keep_the_acquire_time_on_renewal() {
        let now = Timestamp::from_second(1_000).unwrap();
        let first = claim(None, "me", 15, now);
        assert_eq!(first.holder_identity.as_deref(), Some("me"));
        assert_eq!(first.lease_transitions, Some(0));
        assert_eq!(first.lease_duration_seconds, Some(15));
        assert_eq!(first.acquire_time, Some(MicroTime(now)));

        let renewed = claim(Some(&held_by(Some("me"), 2)), "me", 15, now);
        assert_eq!(renewed.lease_transitions, Some(2));
        assert_eq!(renewed.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));

        let taken = claim(Some(&held_by(Some("other"), 2)), "me", 15, now);
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));

        let gone = released(&taken, now);
        assert_eq!(gone.holder_identity, None);
        assert_eq!(gone.lease_transitions, Some(3));
        assert!(may_claim(&gone, "other", Duration::ZERO, LEASE_DURATION));
    }
}
