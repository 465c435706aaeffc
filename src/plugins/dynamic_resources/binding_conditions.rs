//! Binding conditions (DRADeviceBindingConditions, on by default in v1.37):
//! a driver may publish a device with `bindingConditions` (and
//! `bindingFailureConditions`) when it must prepare the device, e.g. attach
//! it to the node, before the pod may bind. kube-scheduler's PreBind then
//! waits, after writing the claims, until every binding condition of every
//! allocated device is `True` in the claim's `status.devices`, checking every
//! 5 s for at most `bindingTimeout`; a failure condition that turns `True`,
//! or a claim allocated longer than `bindingTimeout` ago, fails the binding
//! cycle. The next attempt's Filter finds such a claim unusable on every
//! node, and PostFilter deallocates it so that other devices may be tried.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use k8s_openapi::jiff::Timestamp;
use kube::Api;

use super::kobj;

/// How often PreBind looks at the claims again (kube-scheduler's poll).
const POLL: Duration = Duration::from_secs(5);

/// Where a claim's devices stand (`isClaimReadyForBinding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Readiness {
    /// Allocated, and every binding condition is true (or there are none).
    Ready,
    /// Not allocated, or some binding condition is not true yet.
    Waiting,
    /// A binding failure condition is true: the message says which.
    Failed(String),
}

/// The allocation results of `claim`.
fn results(claim: &ResourceClaim) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
}

/// Whether some allocated device of `claim` has binding conditions.
pub(super) fn has_binding_conditions(claim: &ResourceClaim) -> bool {
    results(claim).any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}

/// kube-scheduler's `isClaimReadyForBinding`.
pub(super) fn readiness(claim: &ResourceClaim) -> Readiness {
    let Some(status) = claim.status.as_ref().filter(|s| s.allocation.is_some()) else {
        return Readiness::Waiting;
    };
    for result in results(claim) {
        let wanted = result.binding_conditions.as_deref().unwrap_or_default();
        if wanted.is_empty() {
            continue;
        }
        let device = status.devices.iter().flatten().find(|d| {
            d.driver == result.driver && d.pool == result.pool && d.device == result.device
        });
        let Some(device) = device else {
            return Readiness::Waiting;
        };
        let condition = |kind: &str| device.conditions.iter().flatten().find(|c| c.type_ == kind);
        for failure in result.binding_failure_conditions.iter().flatten() {
            if let Some(c) = condition(failure).filter(|c| c.status == "True") {
                return Readiness::Failed(format!(
                    "device binding failed: claim={}, reason={}, message={:?}",
                    claim.metadata.name.as_deref().unwrap_or_default(),
                    c.reason,
                    c.message
                ));
            }
        }
        if wanted
            .iter()
            .any(|w| condition(w).is_none_or(|c| c.status != "True"))
        {
            return Readiness::Waiting;
        }
    }
    Readiness::Ready
}

/// kube-scheduler's `isClaimTimeout`: a device with binding conditions,
/// allocated more than `timeout` before `now`.
pub(super) fn timed_out(claim: &ResourceClaim, timeout: Duration, now: Timestamp) -> bool {
    let Some(allocated_at) = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.allocation_timestamp.as_ref())
    else {
        return false;
    };
    has_binding_conditions(claim)
        && now.duration_since(allocated_at.0).unsigned_abs() > timeout
        && now > allocated_at.0
}

/// An allocated claim no pod can use any more: a binding failure, or a
/// binding that took longer than `timeout` (Filter's check).
pub(super) fn stuck(claim: &ResourceClaim, timeout: Duration) -> bool {
    match readiness(claim) {
        Readiness::Ready => false,
        Readiness::Failed(_) => true,
        Readiness::Waiting => timed_out(claim, timeout, Timestamp::now()),
    }
}

/// PreBind's wait: reads `names` (claims of `api`'s namespace) now and
/// every [`POLL`] until all are ready, or fails as kube-scheduler does.
pub(super) async fn wait_until_ready(
    api: &Api<ResourceClaim>,
    names: &[String],
    timeout: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if all_ready(api, names, timeout).await? {
            return Ok(());
        }
        if tokio::time::Instant::now() + POLL > deadline {
            return Err("device binding timeout: context deadline exceeded".to_owned());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One look at every claim (kube-scheduler's `isPodReadyForBinding`).
async fn all_ready(
    api: &Api<ResourceClaim>,
    names: &[String],
    timeout: Duration,
) -> Result<bool, String> {
    for name in names {
        let claim = api
            .get(name)
            .await
            .map_err(|e| format!("get claim {name}: {e}"))?;
        match readiness(&claim) {
            Readiness::Ready => {}
            Readiness::Failed(e) => return Err(e),
            Readiness::Waiting if timed_out(&claim, timeout, Timestamp::now()) => {
                return Err(format!("device binding timeout: claim={}", kobj(&claim)));
            }
            Readiness::Waiting => return Ok(false),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(status: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {},
            "status": status,
        }))
        .unwrap()
    }

    fn allocated(conditions: serde_json::Value) -> ResourceClaim {
        claim(serde_json::json!({
            "allocation": {
                "allocationTimestamp": "2026-01-01T10:00:00Z",
                "devices": {"results": [{
                    "request": "r", "driver": "d", "pool": "p", "device": "dev",
                    "bindingConditions": ["Attached"],
                    "bindingFailureConditions": ["AttachFailed"],
                }]},
            },
            "devices": [{"driver": "d", "pool": "p", "device": "dev", "conditions": conditions}],
        }))
    }

    fn condition(kind: &str, status: &str) -> serde_json::Value {
        serde_json::json!({"type": kind, "status": status, "reason": "Driver",
            "message": "said so", "lastTransitionTime": "2026-12-03T10:00:00Z"})
    }

    /// `TestIsClaimReadyForBinding`'s cases: no condition yet, the
    /// condition false, true, and a failure condition true.
    #[test]
    fn a_claim_is_ready_when_every_binding_condition_is_true() {
        assert_eq!(
            readiness(&allocated(serde_json::json!([]))),
            Readiness::Waiting
        );
        let pending = allocated(serde_json::json!([condition("Attached", "False")]));
        assert_eq!(readiness(&pending), Readiness::Waiting);
        let ready = allocated(serde_json::json!([condition("Attached", "True")]));
        assert_eq!(readiness(&ready), Readiness::Ready);
        let failed = allocated(serde_json::json!([
            condition("Attached", "False"),
            condition("AttachFailed", "True")
        ]));
        assert_eq!(
            readiness(&failed),
            Readiness::Failed(
                "device binding failed: claim=c, reason=Driver, message=\"said so\"".into()
            )
        );
        // Without binding conditions an allocated claim is ready; an
        // unallocated one is not.
        let plain = claim(serde_json::json!({"allocation": {"devices": {"results": [
            {"request": "r", "driver": "d", "pool": "p", "device": "dev"}]}}}));
        assert_eq!(readiness(&plain), Readiness::Ready);
        assert!(!has_binding_conditions(&plain));
        assert_eq!(readiness(&claim(serde_json::json!({}))), Readiness::Waiting);
    }

    #[test]
    fn a_binding_times_out_after_the_timeout_from_its_allocation() {
        let pending = allocated(serde_json::json!([]));
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let minute = Duration::from_secs(60);
        assert!(!timed_out(&pending, minute, at("2026-01-01T10:00:59Z")));
        assert!(timed_out(&pending, minute, at("2026-01-01T10:01:01Z")));
        assert!(stuck(&pending, minute));
        let ready = allocated(serde_json::json!([condition("Attached", "True")]));
        assert!(!stuck(&ready, minute));
    }
}
