//! From a chosen node to a bound pod, as kube-scheduler's `schedule_one.go`
//! orders it (design §8, "Binding"):
//!
//! - in the scheduling cycle, once the pod is assumed on its node:
//!   Reserve, then Permit ([`reserve_and_permit`]);
//! - in the binding cycle, asynchronously while the loop goes on
//!   ([`BindingCycle::run`]): PreBindPreFlight (and, when a PreBind plugin
//!   will act or Permit made the pod wait, `status.nominatedNodeName` set to
//!   the node, so other components see where it is going), Permit's wait,
//!   PreBind, Bind, PostBind.
//!
//! Whatever fails after Reserve ran unreserves every Reserve plugin in
//! reverse order before it is returned; the caller forgets the assumed pod
//! and requeues it. The framework runs each point's plugins (timing, error
//! wording); this module owns only the order.

use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use super::cycle::Failure;
use super::report::Reporter;
use crate::framework::{
    ApiWrite, Code, CycleState, ExtensionPoint, Framework, Nominating, PluginError, PodEventSink,
    WaitingPod, WaitingPods, fit_error_message,
};
use crate::metrics::Metrics;
use crate::objects::PodInfo;

/// Runs Reserve and Permit for `pod`, assumed on `node`. On success, the
/// pod's Permit wait if a plugin asked for one (it is in `waiting`). On
/// failure every Reserve plugin has been unreserved.
pub fn reserve_and_permit(
    framework: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &str,
    waiting: &WaitingPods,
    client: &Client,
) -> Result<Option<Arc<WaitingPod>>, PluginError> {
    let permitted = framework
        .reserve(state, pod, node)
        .and_then(|()| framework.permit(state, pod, node, waiting));
    if permitted.is_err() {
        let writes = framework.unreserve(state, pod, node);
        // Nothing of this attempt reached the API yet, so there is
        // normally nothing to undo; what a plugin asks for is sent anyway,
        // off the scheduling loop.
        if !writes.is_empty() {
            let (client, pod) = (client.clone(), pod.key());
            tokio::spawn(async move { send_unreserve_writes(&writes, &client, &pod).await });
        }
    }
    permitted
}

/// Sends Unreserve's writes; a failure is logged only (kube-scheduler's
/// DynamicResources does the same: the next attempt finds the claim as it
/// is and PostFilter or the claim's controller cleans up).
async fn send_unreserve_writes(writes: &[ApiWrite], client: &Client, pod: &str) {
    for write in writes {
        if let Err(e) = write.send(client.clone()).await {
            warn!(pod, write = write.what(), error = %e, "Unreserve's write failed");
        }
    }
}

/// What a failure after the node was chosen means for the pod: a rejection
/// at Reserve or Permit is kube-scheduler's FitError for one node (the pod
/// waits for a cluster change the rejecting plugin's hints say may help); a
/// rejection at PreBind or Bind, with its own message, and any error go to
/// backoff. The flag says whether the pod waits for a cluster change.
pub fn failure_of(e: &PluginError) -> (Failure, bool) {
    let at_permit = matches!(e.point, ExtensionPoint::Reserve | ExtensionPoint::Permit);
    let rejected = matches!(
        e.status.code(),
        Code::Unschedulable | Code::UnschedulableAndUnresolvable
    );
    if rejected {
        let message = if at_permit {
            fit_error_message(1, std::iter::once(&e.status))
        } else {
            e.status.message()
        };
        let failure = Failure::Unschedulable {
            message,
            nominating: Nominating::Clear,
            rejectors: vec![e.status.plugin()],
            writes: None,
        };
        return (failure, at_permit);
    }
    let failure = Failure::Error {
        message: e.to_string(),
    };
    (failure, false)
}

/// What a binding cycle needs besides the pod.
pub struct BindingCycle<'a> {
    /// The pod's profile.
    pub framework: &'a Framework,
    /// The API client PreBind and Bind plugins use.
    pub client: &'a Client,
    /// Writes `nominatedNodeName`, and the events plugins report ([`PodEventSink`]).
    pub reporter: &'a Arc<Reporter>,
    /// Pods waiting at Permit.
    pub waiting: &'a WaitingPods,
    /// Bind slots: one is held from PreBind through Bind (design §8).
    pub slots: &'a Arc<Semaphore>,
    /// `placer_bind_duration_seconds`.
    pub metrics: &'a Metrics,
}

impl BindingCycle<'_> {
    /// Binds `pod` to `node`. `slot` is the bind slot the loop took when the
    /// pod did not have to wait at Permit; a waiting pod takes one once its
    /// wait is over, so waiting never holds one. On failure the pod has been
    /// unreserved.
    pub async fn run(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<(), PluginError> {
        let bound = self.bind(state, pod, node, slot).await;
        match &bound {
            Ok(()) => self.framework.post_bind(state, pod, node),
            Err(_) => {
                let writes = self.framework.unreserve(state, pod, node);
                send_unreserve_writes(&writes, self.client, &pod.key()).await;
            }
        }
        bound
    }

    async fn bind(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<(), PluginError> {
        let fw = self.framework;
        let acting = fw.pre_bind_pre_flight(state, pod, node)?;
        if acting || self.waiting.get(&pod.uid).is_some() {
            // Not critical: the pod binds either way (kube-scheduler logs and goes on).
            if let Err(e) = self.reporter.nominated(pod, node).await {
                warn!(pod = %pod.key(), node, error = %e, "could not set nominatedNodeName before binding");
            }
        }
        fw.wait_on_permit(pod, self.waiting).await?;
        let _slot = match slot {
            Some(s) => s,
            None => match self.slots.clone().acquire_owned().await {
                Ok(s) => s,
                Err(_) => {
                    return Err(PluginError {
                        point: ExtensionPoint::Bind,
                        status: crate::framework::Status::error("the scheduler is stopping"),
                    });
                }
            },
        };
        state.write(PodEventSink(self.reporter.clone()));
        fw.pre_bind(state, pod, node, self.client).await?;
        let started = Instant::now();
        let bound = fw.bind(state, pod, node, self.client).await;
        self.metrics
            .bound(bound.is_ok(), started.elapsed().as_secs_f64());
        bound
    }
}
