//! `GET /explain/pods/{namespace}/{name}` on the real control plane: a pending pod's summary is
//! byte for byte the `FailedScheduling` text its scheduler wrote, and for a pod that got bound
//! the predicted winner is the node it was bound to.
//!
//! The pending pod is blocked by a taint on two nodes (kube-scheduler's TaintToleration), by
//! resources on one (NodeResourcesFit) and by placer's CapabilityFilter on the last; a
//! `nodeSelector` on the test's run label keeps it off other tests' nodes, which then count as
//! "didn't match Pod's node affinity/selector" for both the scheduler and the endpoint. Nodes
//! other tests add between the event and the query change "0/N"; the check is polled until both
//! were taken from the same cluster, and fails if they never agree.

use std::ops::ControlFlow;

use serde_json::{Value, json};

use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, HW_REASON, Placer, PodBuilder, RUN_LABEL, ScorePlugins,
    TestEnv, capability_policy,
};

/// The shipped standalone profile's CapabilityFilter rule (policy.yaml).
const SHIPPED_HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";
const SHIPPED_HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";

/// Polls until the endpoint's summary equals the pod's latest `FailedScheduling` message; returns
/// the explanation.
async fn summary_matches_event(env: &TestEnv, placer: &Placer, pod: &str) -> anyhow::Result<Value> {
    let path = format!("/explain/pods/{}/{pod}", env.namespace());
    env.poll(
        &format!("{path} to state {pod}'s FailedScheduling text"),
        crate::harness::SCHEDULING_TIMEOUT,
        || async {
            let events = env.failed_scheduling_messages(pod).await?;
            let explained = placer.get_json(&path).await?;
            Ok(match events.last() {
                Some(m) if explained["summary"] == json!(m) => ControlFlow::Break(explained),
                last => ControlFlow::Continue(format!(
                    "event {last:?}, endpoint {}",
                    explained["summary"]
                )),
            })
        },
    )
    .await
}

/// The blocked pod: needs `annotation`=true and 2 cpus, tolerates nothing, confined to this run.
fn blocked_pod(env: &TestEnv, name: &str, annotation: &str) -> PodBuilder {
    env.pod(name)
        .annotation(annotation, "true")
        .request("cpu", "2")
        .node_selector(RUN_LABEL, env.run_id())
}

#[tokio::test]
async fn extender_summary_is_the_failed_scheduling_text() -> anyhow::Result<()> {
    let env = TestEnv::new("explain-extender").await?;
    let taint = ("e2e.placer.io/dedicated", "gpu", "NoSchedule");
    env.create_nodes([
        env.node("tainted-1")
            .label(HW_LABEL, "true")
            .taint(taint.0, taint.1, taint.2),
        env.node("tainted-2")
            .label(HW_LABEL, "true")
            .taint(taint.0, taint.1, taint.2),
        env.node("small").label(HW_LABEL, "true").cpu("1"),
        env.node("plain"),
    ])
    .await?;
    let rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
    )
    .await?;
    env.create_pod(&blocked_pod(&env, "blocked", HW_ANNOTATION))
        .await?;
    let event = env.wait_failed_scheduling("blocked", HW_REASON).await?;
    eprintln!("FailedScheduling: {event}");
    let explained = summary_matches_event(&env, &rig.placer, "blocked").await?;
    assert_eq!(explained["deployment"], "extender");
    assert_eq!(explained["feasible"], 0);
    let by_node: Vec<(String, String)> = explained["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| {
            n["node"]
                .as_str()
                .is_some_and(|n| n.starts_with(env.run_id()))
        })
        .map(|n| {
            (
                n["node"].as_str().unwrap_or_default().to_string(),
                format!(
                    "{} {}",
                    n["failure"]["by"].as_str().unwrap_or("-"),
                    n["failure"]["plugin"].as_str().unwrap_or("-")
                ),
            )
        })
        .collect();
    assert_eq!(
        by_node,
        [
            (env.name("plain"), "placer CapabilityFilter".to_string()),
            (
                env.name("small"),
                "kube-scheduler NodeResourcesFit".to_string()
            ),
            (
                env.name("tainted-1"),
                "kube-scheduler TaintToleration".to_string()
            ),
            (
                env.name("tainted-2"),
                "kube-scheduler TaintToleration".to_string()
            ),
        ]
    );
    let hint = format!(
        "2 node(s) would pass every filter if the pod tolerated taint {}={}:{}",
        taint.0, taint.1, taint.2
    );
    assert!(
        explained["hints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| *h == json!(hint)),
        "hints: {}",
        explained["hints"]
    );
    Ok(())
}

#[tokio::test]
async fn extender_winner_is_the_bound_node() -> anyhow::Result<()> {
    let env = TestEnv::new("explain-winner").await?;
    // Equal nodes but for a PreferNoSchedule taint on two of them: kube-scheduler's
    // TaintToleration score (weight 3) decides; placer's policy has no score plugin.
    let nodes = env
        .create_nodes([
            env.node("a").label(HW_LABEL, "true").taint(
                "e2e.placer.io/busy",
                "true",
                "PreferNoSchedule",
            ),
            env.node("b").label(HW_LABEL, "true"),
            env.node("c").label(HW_LABEL, "true").taint(
                "e2e.placer.io/busy",
                "true",
                "PreferNoSchedule",
            ),
        ])
        .await?;
    let rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
    )
    .await?;
    env.create_pod(
        &env.pod("fits")
            .annotation(HW_ANNOTATION, "true")
            .node_selector(RUN_LABEL, env.run_id()),
    )
    .await?;
    let bound = env.wait_pod_bound("fits").await?;
    assert_eq!(bound, nodes[1]);
    let path = format!("/explain/pods/{}/fits", env.namespace());
    let explained = env
        .poll(
            "placer to see the binding",
            crate::harness::SCHEDULING_TIMEOUT,
            || async {
                let e = rig.placer.get_json(&path).await?;
                Ok(if e["boundNode"] == json!(bound) {
                    ControlFlow::Break(e)
                } else {
                    ControlFlow::Continue(format!("boundNode {}", e["boundNode"]))
                })
            },
        )
        .await?;
    assert_eq!(explained["winner"], json!(bound), "{explained:#}");
    assert_eq!(explained["feasible"], 3);
    assert!(explained["runnerUp"].is_string());
    Ok(())
}

#[tokio::test]
async fn standalone_summary_and_last_attempt_are_the_failed_scheduling_text() -> anyhow::Result<()>
{
    let env = TestEnv::new("explain-standalone").await?;
    let taint = ("e2e.placer.io/dedicated", "gpu", "NoSchedule");
    env.create_nodes([
        env.node("tainted-1")
            .label(SHIPPED_HW_LABEL, "true")
            .taint(taint.0, taint.1, taint.2),
        env.node("tainted-2")
            .label(SHIPPED_HW_LABEL, "true")
            .taint(taint.0, taint.1, taint.2),
        env.node("small").label(SHIPPED_HW_LABEL, "true").cpu("1"),
        env.node("plain"),
    ])
    .await?;
    let placer = env.start_standalone("placer", &[]).await?;
    env.create_pod(
        &blocked_pod(&env, "blocked", SHIPPED_HW_ANNOTATION).scheduler(&env.scheduler_name()),
    )
    .await?;
    env.wait_failed_scheduling("blocked", "hardware encryption")
        .await?;
    let explained = summary_matches_event(&env, &placer, "blocked").await?;
    assert_eq!(explained["deployment"], "standalone");
    let events = env.failed_scheduling_messages("blocked").await?;
    assert_eq!(
        explained["lastAttempt"]["message"],
        json!(events.last()),
        "the scheduling loop recorded its attempt"
    );
    Ok(())
}
