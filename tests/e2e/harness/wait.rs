//! Waiting for, and reading, scheduling outcomes: bound pods, `PodScheduled` conditions and
//! `FailedScheduling` events.
//!
//! kube-scheduler (v1.37) writes its events through `events.k8s.io/v1` (`reportingController` = the
//! profile's scheduler name, `action: Scheduling`, `series` once repeated). The API server stores
//! them as core Events, so they are read here through `core/v1` (`involvedObject` = the event's
//! `regarding`, `message` = its `note`, `source` empty, `reportingComponent` set), which supports
//! server-side field selectors on `involvedObject.name` and `reason`.

use std::future::Future;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::{Event, PodCondition};
use kube::Api;
use kube::api::ListParams;

use super::env::TestEnv;

/// Default time allowed for a scheduling outcome to show up.
pub const SCHEDULING_TIMEOUT: Duration = Duration::from_mins(1);

impl TestEnv {
    /// Calls `check` every 250 ms until it breaks with a value; `Continue(state)` describes what
    /// was seen so far. After `timeout` it prints the test's log tails and fails with `what` and
    /// the last state. Errors from `check` count as a state (the API may hiccup), not as failure.
    pub async fn poll<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        check: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<ControlFlow<T, String>>>,
    {
        self.poll_every(what, timeout, Duration::from_millis(250), check)
            .await
    }

    /// [`TestEnv::poll`] with another pause between checks (short ones to measure latencies).
    pub async fn poll_every<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        interval: Duration,
        mut check: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<ControlFlow<T, String>>>,
    {
        let start = Instant::now();
        loop {
            let state = match check().await {
                Ok(ControlFlow::Break(value)) => return Ok(value),
                Ok(ControlFlow::Continue(state)) => state,
                Err(e) => format!("error: {e:#}"),
            };
            if start.elapsed() > timeout {
                eprintln!(
                    "timed out waiting for {what}; last seen: {state}; recent logs:\n{}",
                    self.log_tails(60)
                );
                bail!("timed out after {timeout:?} waiting for {what}; last seen: {state}");
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Waits until the pod has `spec.nodeName`; returns the node.
    pub async fn wait_pod_bound(&self, pod: &str) -> anyhow::Result<String> {
        self.poll(
            &format!("pod {pod} to be bound"),
            SCHEDULING_TIMEOUT,
            || self.bound_node(pod),
        )
        .await
    }

    /// `Break(node)` once the pod is bound, else `Continue(its PodScheduled condition)`.
    async fn bound_node(&self, pod: &str) -> anyhow::Result<ControlFlow<String, String>> {
        let p = self.pods().get(pod).await?;
        Ok(match p.spec.and_then(|s| s.node_name) {
            Some(node) => ControlFlow::Break(node),
            None => ControlFlow::Continue(describe_scheduled(p.status.and_then(|s| s.conditions))),
        })
    }

    /// The pod's `PodScheduled` condition, if set.
    pub async fn pod_scheduled_condition(&self, pod: &str) -> anyhow::Result<Option<PodCondition>> {
        let p = self.pods().get(pod).await?;
        Ok(p.status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "PodScheduled")))
    }

    /// Waits until the pod's `PodScheduled` condition is `False` and returns it.
    pub async fn wait_pod_unschedulable(&self, pod: &str) -> anyhow::Result<PodCondition> {
        self.poll(
            &format!("pod {pod} to be PodScheduled=False"),
            SCHEDULING_TIMEOUT,
            || async {
                Ok(match self.pod_scheduled_condition(pod).await? {
                    Some(c) if c.status == "False" => ControlFlow::Break(c),
                    other => ControlFlow::Continue(format!("{other:?}")),
                })
            },
        )
        .await
    }

    /// Messages of the pod's `FailedScheduling` events, oldest first.
    pub async fn failed_scheduling_messages(&self, pod: &str) -> anyhow::Result<Vec<String>> {
        let events: Api<Event> = Api::namespaced(self.client().clone(), self.namespace());
        let params = ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={pod},reason=FailedScheduling"
        ));
        let mut list = events.list(&params).await?.items;
        list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        Ok(list.into_iter().filter_map(|e| e.message).collect())
    }

    /// Waits for a `FailedScheduling` event of the pod whose message contains `needle` (any
    /// message when empty); returns that message.
    pub async fn wait_failed_scheduling(&self, pod: &str, needle: &str) -> anyhow::Result<String> {
        self.poll(
            &format!("a FailedScheduling event of {pod} containing {needle:?}"),
            SCHEDULING_TIMEOUT,
            || async {
                let messages = self.failed_scheduling_messages(pod).await?;
                Ok(match messages.iter().rev().find(|m| m.contains(needle)) {
                    Some(m) => ControlFlow::Break(m.clone()),
                    None => ControlFlow::Continue(format!("events: {messages:?}")),
                })
            },
        )
        .await
    }

    /// Checks that the pod stays unbound for `period` (use after it was already seen unschedulable,
    /// so the scheduler had its chance).
    pub async fn assert_stays_unbound(&self, pod: &str, period: Duration) -> anyhow::Result<()> {
        let end = Instant::now() + period;
        while Instant::now() < end {
            if let Some(node) = self.pods().get(pod).await?.spec.and_then(|s| s.node_name) {
                bail!("pod {pod} was bound to {node} but should have stayed pending");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    }
}

fn describe_scheduled(conditions: Option<Vec<PodCondition>>) -> String {
    conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .map_or_else(
            || "unbound, no PodScheduled condition".to_owned(),
            |c| {
                format!(
                    "unbound, PodScheduled={} {:?}: {:?}",
                    c.status, c.reason, c.message
                )
            },
        )
}
