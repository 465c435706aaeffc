//! Event series on the real API server: a pod that fails to schedule twice within six minutes has
//! one `FailedScheduling` event whose series counts both failures, as kube-scheduler's does.

use super::*;

/// The node label the pod selects; the test's node gets it in the middle of the test.
const WANTED_LABEL: &str = "e2e.placer.io/series-wanted";

/// The test's node gets the label the pod selects and, in the same patch, a taint the pod does
/// not tolerate: NodeAffinity's queueing hint retries the pod, TaintToleration rejects it, and
/// placer patches the series of the first `FailedScheduling` event (`series.count` 2) instead
/// of creating a second event. The patch carries only `series`, so the API server must accept
/// it as an update of the whole event.
#[tokio::test]
async fn a_second_failure_counts_on_the_first_events_series() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-event-series").await?;
    let nodes = env.create_nodes([env.node("n1")]).await?;
    let _placer = env.start_standalone("placer", &[]).await?;
    env.create_pod(&env.pod("waiting").node_selector(WANTED_LABEL, "yes"))
        .await?;
    let first = env.wait_pod_event("waiting", "FailedScheduling").await?;
    let first_note = first.message.clone().unwrap_or_default();
    assert!(
        first_note.contains(SELECTOR_MISMATCH),
        "first failure: {first_note}"
    );

    let patch = json!({
        "metadata": { "labels": { WANTED_LABEL: "yes" } },
        "spec": { "taints": [{ "key": "e2e.placer.io/closed", "value": "yes", "effect": "NoSchedule" }] },
    });
    Api::<k8s_openapi::api::core::v1::Node>::all(env.client().clone())
        .patch(&nodes[0], &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let events = env
        .poll(
            "the FailedScheduling event's series to count the second failure",
            SCHEDULING_TIMEOUT,
            || async {
                let events = env.pod_events("waiting", "FailedScheduling").await?;
                let counts: Vec<Option<i32>> = events
                    .iter()
                    .map(|e| e.series.as_ref().and_then(|s| s.count))
                    .collect();
                Ok(if counts.iter().any(Option::is_some) || events.len() > 1 {
                    ControlFlow::Break(events)
                } else {
                    ControlFlow::Continue(format!("series counts {counts:?}"))
                })
            },
        )
        .await?;
    let [event] = &events[..] else {
        panic!(
            "one FailedScheduling event expected, got {}: {:?}",
            events.len(),
            events.iter().map(|e| &e.message).collect::<Vec<_>>()
        );
    };
    assert_eq!(event.metadata.name, first.metadata.name);
    let series = event.series.as_ref().context("no series")?;
    assert_eq!(series.count, Some(2), "{series:?}");
    assert!(series.last_observed_time.is_some(), "{series:?}");
    assert_eq!(
        event.message.as_deref(),
        Some(first_note.as_str()),
        "a repeat keeps the first event's note, as client-go's series do"
    );
    Ok(())
}
