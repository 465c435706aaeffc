//! Retry prompts: a pod placer rejected from a view older than kube-scheduler's does not wait for
//! kube-scheduler's 5-minute flush.
//!
//! placer runs with `--debug-watch-event-delay-ms=300`, so kube-scheduler always sees a node or
//! pod change first and retries the waiting pod into placer's old view: without the prompts
//! every trial gets stuck (set `PLACER_E2E_RACE_NO_PROMPTS=1` to watch that happen: the tests then
//! report the stuck pods and fail). With prompts off, run them alone and one at a time
//! (`cargo test --test e2e retry:: -- --test-threads=1`): any cluster event requeues every
//! extender-rejected pod, so concurrent tests rescue each other's stuck pods. With prompts on
//! they pass alongside the rest of the suite, where other tests' events can only help.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::json;

use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, HW_REASON, Placer, ScorePlugins, TestEnv, ZONE_LABEL,
    capability_policy,
};

/// How late placer applies node and pod events in the race tests.
const WATCH_EVENT_DELAY: &str = "--debug-watch-event-delay-ms=300";
/// Trials of the race test (`PLACER_E2E_RACE_TRIALS` overrides).
const TRIALS: usize = 40;
/// A freed pod not bound after this counts as stuck (kube-scheduler alone would wait 5 minutes).
const STUCK_AFTER: Duration = Duration::from_secs(10);
/// kube-scheduler's `podMaxBackoffSeconds` in the harness plus slack: after this a rejected pod
/// sits in the unschedulable pool, so the node event moves it to the active queue at once.
const BACKOFF_OVER: Duration = Duration::from_millis(2500);
/// Node label that ties each trial's pod to its own node.
const TRIAL_LABEL: &str = "e2e.placer.io/trial";

/// Waits until placer's cache holds a node in `zone` (its `/debug/zones` lists the zone).
async fn wait_placer_sees_zone(env: &TestEnv, placer: &Placer, zone: &str) -> anyhow::Result<()> {
    env.poll_every(
        &format!("placer to see zone {zone}"),
        Duration::from_secs(30),
        Duration::from_millis(20),
        || async {
            let dims = placer.get_json("/debug/zones").await?;
            let seen = dims
                .as_array()
                .context("/debug/zones is not an array")?
                .iter()
                .any(|d| d["zones"][zone]["nodes"].as_u64().unwrap_or(0) > 0);
            Ok(if seen {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue("not yet".to_owned())
            })
        },
    )
    .await
}

/// Trials, one at a time: a pod annotated for hardware encryption is parked by placer's
/// `CapabilityFilter` on its own node; once kube-scheduler's backoff is over the node is
/// labelled, which kube-scheduler sees 300 ms before placer does. Counts the pods not bound
/// within [`STUCK_AFTER`] and requires none.
#[tokio::test]
async fn pods_freed_by_a_node_change_placer_sees_late_are_not_stuck() -> anyhow::Result<()> {
    let env = TestEnv::new("retry-race").await?;
    let trials = std::env::var("PLACER_E2E_RACE_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(TRIALS);
    let (args, prompts) = race_args();
    let policy = capability_policy(&env).plugin(
        "ZoneSpread",
        Some(1),
        json!({ "zoneLabel": ZONE_LABEL, "countPods": "All" }),
    );
    let rig =
        ExtenderRig::start_with_args(&env, &policy, ScorePlugins::Defaults, |e| e, &args).await?;

    let mut stuck = Vec::new();
    let mut latencies = Vec::new();
    for i in 0..trials {
        let trial = i.to_string();
        let zone = env.zone(&trial);
        let node = env
            .node(&format!("t{i}"))
            .label(TRIAL_LABEL, &trial)
            .label(ZONE_LABEL, &zone);
        let node = env.create_nodes([node]).await?.remove(0);
        // The pod must meet placer's rule, not a node placer has not heard of yet.
        wait_placer_sees_zone(&env, &rig.placer, &zone).await?;
        let pod = format!("p{i}");
        env.create_pod(
            &env.pod(&pod)
                .annotation(HW_ANNOTATION, "true")
                .node_selector(TRIAL_LABEL, &trial),
        )
        .await?;
        env.wait_failed_scheduling(&pod, HW_REASON).await?;
        tokio::time::sleep(BACKOFF_OVER).await;

        env.label_node(&node, HW_LABEL, "true").await?;
        let labelled = Instant::now();
        match bound_within_stuck_bound(&env, &pod).await {
            Some(n) => {
                assert_eq!(n, node, "pod {pod} bound to a foreign node");
                latencies.push(labelled.elapsed());
            }
            None => stuck.push(pod),
        }
    }
    latencies.sort();
    let sent = rig
        .placer
        .metric(r#"placer_retry_prompts_total{result="sent"}"#)
        .await?;
    eprintln!(
        "retry race (prompts {}): {} of {trials} pods stuck after {STUCK_AFTER:?}; prompts sent: \
         {sent:?}; label-to-bound of the others: median {:?}, max {:?}",
        if prompts { "on" } else { "off" },
        stuck.len(),
        latencies.get(latencies.len() / 2),
        latencies.last(),
    );
    assert!(stuck.is_empty(), "stuck pods: {stuck:?}");
    Ok(())
}

/// The placer arguments of a race test: the event delay, and `--no-retry-prompts` when
/// `PLACER_E2E_RACE_NO_PROMPTS` is set; also says whether prompts are on.
fn race_args() -> (Vec<&'static str>, bool) {
    let off = std::env::var_os("PLACER_E2E_RACE_NO_PROMPTS").is_some();
    let mut args = vec![WATCH_EVENT_DELAY];
    if off {
        args.push("--no-retry-prompts");
    }
    (args, !off)
}

/// Waits up to [`STUCK_AFTER`] for `pod` to be bound; `None` when it stays pending.
async fn bound_within_stuck_bound(env: &TestEnv, pod: &str) -> Option<String> {
    env.poll(&format!("pod {pod} to be bound"), STUCK_AFTER, || async {
        let p = env.pods().get(pod).await?;
        Ok(match p.spec.and_then(|s| s.node_name) {
            Some(n) => ControlFlow::Break(n),
            None => ControlFlow::Continue("pending".to_owned()),
        })
    })
    .await
    .ok()
}

/// Trials of [`assigned_pod_deletion_placer_sees_late_frees_the_waiting_pod`].
const DELETION_TRIALS: usize = 3;

/// A pod that does not fit next to a pod already on its node (cpu) waits; the other pod is
/// deleted, which kube-scheduler sees 300 ms before placer does: kube-scheduler's own
/// NodeResourcesFit lets it through, placer's (in the extender profile) still counts the deleted
/// pod. The waiting pod must be bound within [`STUCK_AFTER`].
#[tokio::test]
async fn assigned_pod_deletion_placer_sees_late_frees_the_waiting_pod() -> anyhow::Result<()> {
    let env = TestEnv::new("retry-pod-delete").await?;
    let (args, prompts) = race_args();
    let policy = crate::harness::Policy::new(&env.scheduler_name()).plugin(
        "NodeResourcesFit",
        None,
        json!({}),
    );
    let _rig =
        ExtenderRig::start_with_args(&env, &policy, ScorePlugins::Defaults, |e| e, &args).await?;
    let mut stuck = Vec::new();
    for i in 0..DELETION_TRIALS {
        let trial = format!("d{i}");
        let zone = env.zone(&trial);
        let node = env
            .node(&trial)
            .label(TRIAL_LABEL, &trial)
            .label(ZONE_LABEL, &zone)
            .cpu("1");
        let node = env.create_nodes([node]).await?.remove(0);
        let holder = format!("holder-{i}");
        env.create_pod(&env.pod(&holder).bound_to(&node).request("cpu", "800m"))
            .await?;
        let pod = format!("waiting-{i}");
        env.create_pod(
            &env.pod(&pod)
                .node_selector(TRIAL_LABEL, &trial)
                .request("cpu", "500m"),
        )
        .await?;
        env.wait_failed_scheduling(&pod, "Insufficient cpu").await?;
        // placer's delayed pod watch has the holder by now (it was created before the pod).
        tokio::time::sleep(BACKOFF_OVER).await;
        env.delete_pods(&[&holder]).await?;
        match bound_within_stuck_bound(&env, &pod).await {
            Some(n) => assert_eq!(n, node, "pod {pod} bound to a foreign node"),
            None => stuck.push(pod),
        }
    }
    eprintln!(
        "pod-deletion race (prompts {}): {} of {DELETION_TRIALS} pods stuck after {STUCK_AFTER:?}",
        if prompts { "on" } else { "off" },
        stuck.len()
    );
    assert!(stuck.is_empty(), "stuck pods: {stuck:?}");
    Ok(())
}

/// A pod placer's capability rule keeps pending; the policy is reloaded without the rule. No
/// cluster event tells kube-scheduler, so only placer's prompt can get the pod retried; it must
/// be bound within a reload's time plus [`STUCK_AFTER`].
#[tokio::test]
async fn policy_reload_that_relaxes_a_rule_frees_the_waiting_pod() -> anyhow::Result<()> {
    let env = TestEnv::new("retry-reload").await?;
    let (args, prompts) = race_args();
    let nodes = env.create_nodes([env.node("n1")]).await?;
    let rig = ExtenderRig::start_with_args(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
        &args,
    )
    .await?;
    env.create_pod(&env.pod("secure").annotation(HW_ANNOTATION, "true"))
        .await?;
    env.wait_failed_scheduling("secure", HW_REASON).await?;
    tokio::time::sleep(BACKOFF_OVER).await;
    let relaxed =
        crate::harness::Policy::new(&env.scheduler_name()).plugin("ZoneSpread", None, json!({}));
    rig.placer.rewrite_policy(&relaxed.to_yaml())?;
    let bound = bound_within_stuck_bound(&env, "secure").await;
    eprintln!(
        "policy reload (prompts {}): pod {}",
        if prompts { "on" } else { "off" },
        if bound.is_some() { "bound" } else { "stuck" }
    );
    assert_eq!(
        bound.as_ref(),
        Some(&nodes[0]),
        "the pod must be freed by the reload"
    );
    Ok(())
}

/// Pods created by [`thousand_unschedulable_pods_cost_no_api_calls`] (`PLACER_E2E_PENDING_PODS`
/// overrides).
const PENDING_PODS: usize = 1000;
/// How long node churn runs while the pods wait.
const CHURN_FOR: Duration = Duration::from_secs(60);
/// Pause between two node changes of the churn.
const CHURN_EVERY: Duration = Duration::from_secs(5);

/// 1,000 pods no node can take (none has the capability label) while nodes keep changing:
/// every change makes placer re-check every parked pod against the changed node, none passes,
/// so placer sends no prompt. Prints the API calls placer made per minute.
#[tokio::test]
async fn thousand_unschedulable_pods_cost_no_api_calls() -> anyhow::Result<()> {
    let env = TestEnv::new("retry-load").await?;
    let count = std::env::var("PLACER_E2E_PENDING_PODS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(PENDING_PODS);
    let nodes = env
        .create_nodes([env.node("n1"), env.node("n2"), env.node("n3")])
        .await?;
    let rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
    )
    .await?;
    let placer = &rig.placer;
    let env = &env;
    futures::stream::iter(0..count)
        .map(|i| {
            let pod = env
                .pod(&format!("pending-{i}"))
                .annotation(HW_ANNOTATION, "true");
            async move { env.create_pod(&pod).await.map(drop) }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<()>>>()?;
    env.poll(
        &format!("placer to park {count} pods"),
        Duration::from_mins(3),
        || async {
            let parked = placer.metric("placer_parked_pods").await?.unwrap_or(0.0);
            Ok(if parked >= count as f64 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("{parked} parked"))
            })
        },
    )
    .await?;

    let prompts = || async {
        let mut total = 0.0;
        for result in ["sent", "gone", "failed"] {
            let series = format!(r#"placer_retry_prompts_total{{result="{result}"}}"#);
            total += placer.metric(&series).await?.unwrap_or(0.0);
        }
        anyhow::Ok(total)
    };
    let rechecks = || async {
        anyhow::Ok(
            placer
                .metric("placer_retry_rechecks_total")
                .await?
                .unwrap_or(0.0),
        )
    };
    let (prompts_before, rechecks_before) = (prompts().await?, rechecks().await?);
    let start = Instant::now();
    let mut changes = 0_u32;
    while start.elapsed() < CHURN_FOR {
        let node = &nodes[changes as usize % nodes.len()];
        env.label_node(node, "e2e.placer.io/churn", &changes.to_string())
            .await?;
        changes += 1;
        tokio::time::sleep(CHURN_EVERY).await;
    }
    // Let the last re-check finish before reading the counters.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let minutes = start.elapsed().as_secs_f64() / 60.0;
    let prompts = prompts().await? - prompts_before;
    let rechecked = rechecks().await? - rechecks_before;
    let pending = env
        .pods()
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
        .count();
    eprintln!(
        "{count} unschedulable pods, {changes} node changes in {minutes:.2} min: placer API calls \
         (prompts) {:.1}/min, parked-pod re-checks {:.0}/min, pods still pending {pending}",
        prompts / minutes,
        rechecked / minutes,
    );
    assert_eq!(prompts, 0.0, "no pod fits, so nothing may be prompted");
    assert!(
        rechecked >= f64::from(changes.saturating_sub(1)) * count as f64,
        "every change must re-check every parked pod ({rechecked} re-checks)"
    );
    assert_eq!(pending, count, "no pod may have been scheduled");
    Ok(())
}
