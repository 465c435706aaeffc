//! A bind the API server refuses is rolled back and retried with backoff.

use super::*;

/// The shipped `placer-standalone` rules without `pods/binding`.
fn rules_without_binding() -> anyhow::Result<Value> {
    let mut rules = shipped_standalone_rules()?;
    let list = rules.as_array_mut().expect("rules are a list");
    for rule in list.iter_mut() {
        if let Some(resources) = rule["resources"].as_array_mut() {
            resources.retain(|r| r != "pods/binding");
        }
    }
    list.retain(|r| r["resources"].as_array().is_some_and(|rs| !rs.is_empty()));
    Ok(rules)
}

/// Pods placer counts in `zone` (`/debug/zones`, every counting dimension; assumed pods count).
async fn zone_pods(placer: &Placer, zone: &str) -> anyhow::Result<u64> {
    let views = placer.get_json("/debug/zones").await?;
    Ok(views
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["zones"][zone]["pods"].as_object())
        .flat_map(|pods| pods.values())
        .filter_map(Value::as_u64)
        .sum())
}

/// placer runs with the shipped standalone RBAC rules minus `pods/binding`, so the API server
/// refuses every Binding. The pod that fits stays unbound; its `FailedScheduling` event and
/// `PodScheduled` condition (`SchedulerError`) say `running Bind plugin "DefaultBinder": ...` with
/// the API server's refusal, as kube-scheduler words it; the bind-failure metric counts; attempts repeat, with backoff (not in a hot loop).
/// The assumed pod is forgotten: `/debug/zones` stops counting it, and a second pod of the same
/// size, which fits the node only if the first one's CPUs were given back, is placed on it too
/// (and refused too). Once the rule is granted, exactly one of the two gets bound (and counted)
/// and the other is then unschedulable for CPU.
#[tokio::test]
async fn bind_failure_rolls_back_and_retries_with_backoff() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-bind-failure").await?;
    let nodes = env
        .create_nodes([env.node("only").cpu("4").label(ZONE_LABEL, &env.zone("a"))])
        .await?;
    let (node, zone) = (&nodes[0], env.zone("a"));
    let kubeconfig = env
        .restricted_kubeconfig("placer-no-bind", rules_without_binding()?)
        .await?;
    let placer = env.start_standalone_as("placer", &[], &kubeconfig).await?;

    env.create_pod(&env.pod("p1").request("cpu", "3")).await?;
    let event = env.wait_pod_event("p1", "FailedScheduling").await?;
    let message = event.message.unwrap_or_default();
    eprintln!("p1: FailedScheduling: {message}");
    let rejected = r#"running Bind plugin "DefaultBinder": pods "p1" is forbidden: "#;
    assert!(message.starts_with(rejected), "{message}");
    assert!(
        message.contains(r#"cannot create resource "pods/binding""#),
        "{message}"
    );
    let condition = env.wait_pod_unschedulable("p1").await?;
    assert_eq!(condition.reason.as_deref(), Some("SchedulerError"));
    assert!(
        condition
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with(rejected)),
        "{condition:?}"
    );

    env.poll(
        "p1 to be forgotten by placer's cache",
        SCHEDULING_TIMEOUT,
        || async {
            Ok(match zone_pods(&placer, &zone).await? {
                0 => ControlFlow::Break(()),
                n => ControlFlow::Continue(format!("{n} pods counted in {zone}")),
            })
        },
    )
    .await?;

    let failures = r#"placer_bind_duration_seconds_count{result="failure"}"#;
    let successes = r#"placer_bind_duration_seconds_count{result="success"}"#;
    let attempts = r#"placer_schedule_attempts_total{result="scheduled"}"#;
    assert!(placer.metric(failures).await?.unwrap_or(0.0) >= 1.0);
    let before = placer.metric(attempts).await?.unwrap_or(0.0);
    env.assert_stays_unbound("p1", Duration::from_secs(5))
        .await?;
    let after = placer.metric(attempts).await?.unwrap_or(0.0);
    eprintln!("placement attempts of p1: {before} before, {after} 5 s later");
    assert!(after > before, "p1 not retried after a failed bind");
    // Backoff 1 s, 2 s, 4 s, ...: at most 3 further attempts fit into 5 s.
    assert!(after - before <= 3.0, "p1 retried without backoff");
    assert_eq!(placer.metric(successes).await?.unwrap_or(0.0), 0.0);

    env.create_pod(&env.pod("p2").request("cpu", "3")).await?;
    let rejected2 = r#"running Bind plugin "DefaultBinder": pods "p2" is forbidden: "#;
    env.wait_unschedulable_message("p2", rejected2).await?;

    let mut full = shipped_standalone_rules()?;
    assert!(full.to_string().contains("pods/binding"));
    env.set_restricted_rules("placer-no-bind", full.take())
        .await?;
    let (bound, other) = env
        .poll(
            "p1 or p2 to be bound once binding is allowed",
            SCHEDULING_TIMEOUT,
            || async {
                for (pod, other) in [("p1", "p2"), ("p2", "p1")] {
                    let p = env.pods().get(pod).await?;
                    if p.spec.and_then(|s| s.node_name).is_some() {
                        return Ok(ControlFlow::Break((pod, other)));
                    }
                }
                Ok(ControlFlow::Continue("both unbound".into()))
            },
        )
        .await?;
    assert_eq!(&env.wait_pod_bound(bound).await?, node);
    assert_scheduled_event(&env, &placer, bound, node).await?;
    let message = env.wait_unschedulable_message(other, "0/").await?;
    eprintln!("{other} once {bound} is bound: {message}");
    check_fit_error(&message, &[(1, INSUFFICIENT_CPU)], Some(&[(1, NO_VICTIMS)]))?;
    env.assert_stays_unbound(other, STAYS_PENDING).await?;
    assert!(placer.metric(successes).await?.unwrap_or(0.0) >= 1.0);
    assert_eq!(zone_pods(&placer, &zone).await?, 1, "only {bound} counts");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Leader election.
// ---------------------------------------------------------------------------------------------
