//! Checks that a scheduler bound every pod of a namespace exactly once, from two sources besides
//! the pods themselves (see `bind_watch`): the scheduler's log and the `Scheduled` events; and
//! the namespace housekeeping of runs that schedule many pods in turn.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::env::{RUN_LABEL, TestEnv};
use super::logs::{field, lines_with};

/// The line kube-scheduler logs (at `--v=2`) for each binding it makes or delegates.
pub const KUBE_SCHEDULER_BOUND_LINE: &str = "Successfully bound pod to node";
/// The line placer's standalone scheduler logs for each binding.
pub const PLACER_BOUND_LINE: &str = "bound pod";

impl TestEnv {
    /// Creates a namespace `name` labelled like the test's own.
    pub async fn create_namespace(&self, name: &str) -> anyhow::Result<()> {
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { RUN_LABEL: self.run_id() } }
        }))?;
        Api::<Namespace>::all(self.client().clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("create namespace {name}"))?;
        Ok(())
    }

    /// Every one of `expected` pods of `namespace` has exactly one `bound_line` line (its `pod`
    /// field is `namespace/name`) in the scheduler log at `log`; waits up to 30 s for them.
    pub async fn check_bound_once_in_log(
        &self,
        namespace: &str,
        expected: usize,
        log: &Path,
        bound_line: &str,
    ) -> anyhow::Result<()> {
        let prefix = format!("{namespace}/");
        let per_pod = self
            .poll(
                &format!("{expected} binding lines in {}", log.display()),
                Duration::from_secs(30),
                || async {
                    let mut per_pod: BTreeMap<String, usize> = BTreeMap::new();
                    for line in lines_with(log, &[bound_line])? {
                        if let Some(pod) = field(&line, "pod").and_then(|p| p.strip_prefix(&prefix))
                        {
                            *per_pod.entry(pod.to_owned()).or_default() += 1;
                        }
                    }
                    Ok(if per_pod.len() >= expected {
                        ControlFlow::Break(per_pod)
                    } else {
                        ControlFlow::Continue(format!("{} pods logged", per_pod.len()))
                    })
                },
            )
            .await?;
        let twice: Vec<_> = per_pod.iter().filter(|(_, n)| **n != 1).collect();
        ensure!(
            twice.is_empty() && per_pod.len() == expected,
            "{}: {} pods logged, expected {expected}; with more than one binding line: {twice:?}",
            log.display(),
            per_pod.len()
        );
        Ok(())
    }

    /// Every one of `expected` pods of `namespace` has exactly one `Scheduled` event, not
    /// repeated (no series); waits up to 30 s for them.
    pub async fn check_one_scheduled_event_each(
        &self,
        namespace: &str,
        expected: usize,
        label: &str,
    ) -> anyhow::Result<()> {
        let events: Api<Event> = Api::namespaced(self.client().clone(), namespace);
        let params = ListParams::default().fields("reason=Scheduled");
        let per_pod = self
            .poll(
                &format!("{expected} Scheduled events of {label}"),
                Duration::from_secs(30),
                || async {
                    let mut per_pod: BTreeMap<String, i32> = BTreeMap::new();
                    for e in events.list(&params).await?.items {
                        let times = e
                            .series
                            .as_ref()
                            .and_then(|s| s.count)
                            .into_iter()
                            .chain(e.count)
                            .max()
                            .unwrap_or(1)
                            .max(1);
                        let pod = e.involved_object.name.unwrap_or_default();
                        *per_pod.entry(pod).or_default() += times;
                    }
                    Ok(if per_pod.len() >= expected {
                        ControlFlow::Break(per_pod)
                    } else {
                        ControlFlow::Continue(format!("{} pods with events", per_pod.len()))
                    })
                },
            )
            .await?;
        let repeated: Vec<_> = per_pod.iter().filter(|(_, n)| **n != 1).collect();
        ensure!(
            repeated.is_empty() && per_pod.len() == expected,
            "{label}: {} pods with Scheduled events, not exactly once: {repeated:?}",
            per_pod.len()
        );
        Ok(())
    }

    /// Deletes every pod of `namespace` with `grace` and waits up to `timeout` until they are
    /// gone. Without kubelets a bound pod deleted with a grace period > 0 stays until something
    /// (kwok) confirms it; grace 0 removes it at once.
    pub async fn delete_all_pods(
        &self,
        namespace: &str,
        grace: u32,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let api: Api<Pod> = Api::namespaced(self.client().clone(), namespace);
        let params = DeleteParams::default().grace_period(grace);
        // At 10,000 pods one DeleteCollection can outlast the API server's request timeout
        // (60 s): the server cuts the response and goes on deleting. Asking again is safe (a
        // deletion is idempotent) and covers what the first call had not reached. Three tries
        // were not always enough for 11,000 pods on a busy 2-core machine (a measured scale
        // run lost its figures in this cleanup), so six, each ending at the server's timeout.
        const TRIES: u32 = 6;
        let mut tries = 0;
        loop {
            tries += 1;
            match api.delete_collection(&params, &ListParams::default()).await {
                Ok(_) => break,
                Err(e) if tries < TRIES => {
                    eprintln!("delete the pods of {namespace}: {e}; asking again");
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("delete the pods of {namespace} ({tries} tries)")
                    });
                }
            }
        }
        self.poll(
            &format!("the pods of {namespace} to be gone"),
            timeout,
            || async {
                let left = api.list(&ListParams::default().limit(1)).await?;
                Ok(if left.items.is_empty() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(format!(
                        "{} left",
                        left.metadata.remaining_item_count.unwrap_or(0) + 1
                    ))
                })
            },
        )
        .await
    }
}
