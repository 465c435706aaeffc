//! What `/healthz` knows of leader election: when this replica last
//! confirmed the Lease it holds, or held until its renewals stopped.
//!
//! kube-scheduler's watchdog (client-go's `HealthzAdaptor`) fails its
//! `/healthz` when the leader has not renewed for a while past the lease:
//! the elector should have stepped down or renewed by then, and neither
//! happened, so something is stuck (or the API server is out of reach) and a
//! restart is the remedy the kubelet can apply. placer's elector steps down
//! at the renew deadline and keeps trying as a candidate; this check fails
//! once the renew deadline plus [`GRACE`] has passed without a renewal and
//! without seeing another holder, and recovers as soon as either happens.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// kube-scheduler's tolerance beyond the point its elector should have acted.
pub const GRACE: Duration = Duration::from_secs(20);

/// The elector's last word on the Lease this replica is responsible for.
#[derive(Debug, Default)]
pub struct LeaderHealth {
    held: Mutex<Option<Held>>,
}

#[derive(Debug, Clone)]
struct Held {
    lease: String,
    renewed: Instant,
    limit: Duration,
}

impl LeaderHealth {
    /// This replica (re)confirmed `lease` now; it answers for it until
    /// [`LeaderHealth::let_go`]. `renew_deadline` plus [`GRACE`] without
    /// another confirmation fails the check.
    pub fn renewed(&self, lease: &str, renew_deadline: Duration) {
        *self.held.lock() = Some(Held {
            lease: lease.to_string(),
            renewed: Instant::now(),
            limit: renew_deadline + GRACE,
        });
    }

    /// The Lease is not this replica's concern any more: released, or
    /// another replica was seen holding it.
    pub fn let_go(&self) {
        *self.held.lock() = None;
    }

    /// `Err` with the reason when the Lease went unconfirmed for too long.
    pub fn check(&self) -> Result<(), String> {
        let Some(held) = self.held.lock().clone() else {
            return Ok(());
        };
        let since = held.renewed.elapsed();
        if since <= held.limit {
            return Ok(());
        }
        Err(format!(
            "leader election: Lease {} last renewed {:.1}s ago, over the renew deadline plus {}s",
            held.lease,
            since.as_secs_f64(),
            GRACE.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_only_past_the_deadline_plus_grace_and_recovers() {
        let health = LeaderHealth::default();
        assert!(health.check().is_ok(), "not responsible for any Lease");
        health.renewed("ns/placer", Duration::from_secs(10));
        assert!(health.check().is_ok());
        // As if the last renewal were long ago.
        if let Some(h) = health.held.lock().as_mut() {
            h.renewed -= Duration::from_secs(31);
        }
        let e = health.check().unwrap_err();
        assert!(e.contains("Lease ns/placer last renewed 31."), "{e}");
        health.renewed("ns/placer", Duration::from_secs(10));
        assert!(health.check().is_ok(), "a renewal clears it");
        if let Some(h) = health.held.lock().as_mut() {
            h.renewed -= Duration::from_secs(60);
        }
        health.let_go();
        assert!(health.check().is_ok(), "another holder clears it");
    }
}
