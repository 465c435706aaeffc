//! placer unreachable while kube-scheduler needs its filter: with `ignorable: false` nothing is
//! scheduled and the pod says why; with `ignorable: true` kube-scheduler schedules without placer.

use std::time::Duration;

use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, HW_REASON, ScorePlugins, TestEnv, capability_policy,
};

/// What kube-scheduler logs when it skips an ignorable extender that failed.
const SKIPPED_LOG: &str = "Skipping extender as it returned error and has ignorable flag set";

/// Nodes `n1` (labelled `HW_LABEL=true` when `labelled`) and `n2`, placer with the capability
/// policy as an extender with the given `ignorable`, then placer killed and the annotated pod
/// `secure` created. Returns the env, the rig and the node names.
async fn placer_down(
    test: &str,
    ignorable: bool,
    labelled: bool,
) -> anyhow::Result<(TestEnv, ExtenderRig, Vec<String>)> {
    let env = TestEnv::new(test).await?;
    let n1 = env.node("n1");
    let n1 = if labelled {
        n1.label(HW_LABEL, "true")
    } else {
        n1
    };
    let nodes = env.create_nodes([n1, env.node("n2")]).await?;
    let mut rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e.ignorable(ignorable),
    )
    .await?;
    rig.placer.kill();
    env.create_pod(&env.pod("secure").annotation(HW_ANNOTATION, "true"))
        .await?;
    Ok((env, rig, nodes))
}

/// Not ignorable: while placer is down the pod stays pending, its `FailedScheduling` event and
/// `PodScheduled` condition (reason `SchedulerError`) carry Go's "connection refused" error for
/// placer's filter URL; after a restart on the same port placer's filter places it on the
/// labelled node.
#[tokio::test]
async fn placer_outage_blocks_scheduling_until_restart() -> anyhow::Result<()> {
    let (env, mut rig, nodes) = placer_down("outage", false, true).await?;
    let (url, port) = (rig.placer.url(), rig.placer.port());

    let expected =
        format!("Post \"{url}/filter\": dial tcp 127.0.0.1:{port}: connect: connection refused");
    let message = env.wait_failed_scheduling("secure", &expected).await?;
    eprintln!("FailedScheduling while placer is down: {message}");
    assert_eq!(message, expected);
    let condition = env.wait_pod_unschedulable("secure").await?;
    assert_eq!(condition.reason.as_deref(), Some("SchedulerError"));
    assert_eq!(condition.message.as_deref(), Some(expected.as_str()));
    env.assert_stays_unbound("secure", Duration::from_secs(2))
        .await?;

    rig.placer.restart().await?;
    assert_eq!(
        env.wait_pod_bound("secure").await?,
        nodes[0],
        "after the restart placer's filter must place the annotated pod on the labelled node"
    );
    Ok(())
}

/// Ignorable: while placer is down the annotated pod is scheduled at once although no node has
/// the label placer's filter requires (so placer was skipped, and kube-scheduler logs why); after a
/// restart placer filters again and the next annotated pod gets placer's reason.
#[tokio::test]
async fn ignorable_placer_outage_schedules_without_it() -> anyhow::Result<()> {
    let (env, mut rig, nodes) = placer_down("outage-ignorable", true, false).await?;

    let node = env.wait_pod_bound("secure").await?;
    assert!(nodes.contains(&node), "bound to foreign node {node}");
    let failures = env.failed_scheduling_messages("secure").await?;
    assert!(failures.is_empty(), "FailedScheduling events: {failures:?}");
    let skipped = env
        .wait_log_line(
            rig.scheduler.log_path(),
            &[SKIPPED_LOG, &format!("{}/filter", rig.placer.url())],
        )
        .await?;
    eprintln!("kube-scheduler while placer is down: {skipped}");
    assert!(
        skipped.contains("connection refused"),
        "unexpected log line: {skipped}"
    );

    rig.placer.restart().await?;
    env.create_pod(&env.pod("secure-after").annotation(HW_ANNOTATION, "true"))
        .await?;
    env.wait_failed_scheduling("secure-after", HW_REASON)
        .await?;
    env.assert_stays_unbound("secure-after", Duration::from_secs(1))
        .await?;
    Ok(())
}
