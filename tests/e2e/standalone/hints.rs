//! Queueing hints on the real control plane: a pod no node can take waits in the unschedulable
//! pool while the cluster changes in ways that cannot help it, and is retried as soon as a change
//! that can arrives.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;

use super::*;
use crate::harness::bind_watch::BindWatch;

/// The node label the waiting pod selects; no node carries it until the test sets it.
const FREE_LABEL: &str = "e2e.placer.io/hints-free";
/// The attempts that ended with no node for the pod.
const UNSCHEDULABLE_ATTEMPTS: &str = r#"placer_schedule_attempts_total{result="unschedulable"}"#;
/// Pods waiting in the unschedulable pool.
const IN_POOL: &str = r#"placer_pending_pods{queue="unschedulable"}"#;
/// How long the cluster keeps changing while the pod must not be retried.
const CHURN: Duration = Duration::from_secs(6);
/// How often every node heartbeats during the churn (a kubelet's is 10 s; compressed here).
const HEARTBEAT: Duration = Duration::from_millis(300);
/// A generous bound on label patch to binding: not a performance assertion.
const RETRY_BOUND: Duration = Duration::from_secs(5);

/// A kubelet's status heartbeat: the Ready condition's `lastHeartbeatTime` moves on, nothing a
/// scheduler reads changes.
async fn heartbeat(env: &TestEnv, node: &str) -> anyhow::Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "placer e2e fake node", "lastHeartbeatTime": now,
    }]}});
    Api::<Node>::all(env.client().clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .with_context(|| format!("heartbeat of {node}"))?;
    Ok(())
}

/// NodeAffinity rejects the pod on every node (it selects a label none carries). While the nodes
/// heartbeat, one of them is relabelled with unrelated labels, a node without the label joins
/// and other pods are bound, placer never tries the pod again (its attempts stay put, it stays
/// in the unschedulable pool); once a node gets the label, the pod is bound to it within
/// [`RETRY_BOUND`] of the patch, as seen through a watch. Without queueing hints every one of
/// those changes would retry it.
#[tokio::test]
async fn unschedulable_pod_waits_through_heartbeats_and_unrelated_changes() -> anyhow::Result<()> {
    // A control plane of its own: other tests' nodes would add rejections (taints, full nodes)
    // whose plugins other tests' changes may rightly wake.
    let env = TestEnv::with_own_control_plane("sa-hints").await?;
    let mut nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let placer = env.start_standalone("placer", &[]).await?;
    let mut binds = BindWatch::start(env.client(), env.namespace()).await?;

    env.create_pod(&env.pod("waiting").node_selector(FREE_LABEL, "yes"))
        .await?;
    env.wait_pod_event("waiting", "FailedScheduling").await?;
    env.poll(
        "the pod to wait in the unschedulable pool",
        SCHEDULING_TIMEOUT,
        || async {
            Ok(match placer.metric(IN_POOL).await? {
                Some(n) if n >= 1.0 => ControlFlow::Break(()),
                other => ControlFlow::Continue(format!("{IN_POOL} = {other:?}")),
            })
        },
    )
    .await?;
    let before = placer.metric(UNSCHEDULABLE_ATTEMPTS).await?.unwrap_or(0.0);

    let start = Instant::now();
    let (mut rounds, mut beats, mut changes) = (0, 0, 0);
    while start.elapsed() < CHURN {
        for node in &nodes {
            heartbeat(&env, node).await?;
            beats += 1;
        }
        rounds += 1;
        // About once a second, a change a plugin reads but that cannot help the pod.
        if rounds % 3 == 0 {
            changes += 1;
            env.label_node(&nodes[0], "e2e.placer.io/unrelated", &changes.to_string())
                .await?;
            let other = format!("other-{changes}");
            env.create_pod(&env.pod(&other)).await?;
            if changes == 2 {
                nodes.extend(env.create_nodes([env.node("n3")]).await?);
            }
        }
        tokio::time::sleep(HEARTBEAT).await;
    }
    let bound = binds.wait_for(changes, SCHEDULING_TIMEOUT).await?;
    let others: BTreeSet<&str> = bound.keys().map(String::as_str).collect();
    assert!(
        !others.contains("waiting"),
        "bound without a label: {others:?}"
    );
    let after = placer.metric(UNSCHEDULABLE_ATTEMPTS).await?.unwrap_or(0.0);
    eprintln!(
        "{beats} heartbeats and {changes} unrelated changes (relabels, bound pods, a node added) \
         in {:?}: unschedulable attempts {before} -> {after}",
        start.elapsed()
    );
    assert_eq!(
        after, before,
        "the waiting pod was retried by changes that cannot help it"
    );
    assert_eq!(placer.metric(IN_POOL).await?, Some(1.0));

    let labelled = Instant::now();
    env.label_node(&nodes[1], FREE_LABEL, "yes").await?;
    let bound = binds.wait_for(changes + 1, SCHEDULING_TIMEOUT).await?;
    let waiting = bound.get("waiting").context("another pod bound instead")?;
    let took = waiting.at.saturating_duration_since(labelled);
    eprintln!("label patch to binding seen by the watch: {took:?}");
    assert_eq!(waiting.node, nodes[1]);
    assert!(took < RETRY_BOUND, "bound {took:?} after the label patch");
    assert_scheduled_event(&env, &placer, "waiting", &nodes[1]).await
}
