//! DefaultPreemption: the cheapest victims go, budgets are respected, the preemptor is
//! nominated and then bound.

use super::*;

/// Watches `pod` from `created` (the object the create call returned) until it is bound; returns
/// the `status.nominatedNodeName` any version meanwhile carried (the last one) and the node. A
/// watch sees every version: with nothing else to schedule, the preemptor is retried as soon
/// as its victim is gone (SchedulerPopFromBackoffQ), so its nomination may last only
/// milliseconds.
async fn nomination_then_node(
    env: &TestEnv,
    created: &k8s_openapi::api::core::v1::Pod,
) -> anyhow::Result<(Option<String>, String)> {
    use futures::StreamExt as _;
    use kube::api::{WatchEvent, WatchParams};
    let name = created.metadata.name.clone().unwrap_or_default();
    let from = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut stream = env.pods().watch(&params, &from).await?.boxed();
    let mut nominated = None;
    let watched = async {
        while let Some(event) = stream.next().await {
            let p = match event? {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => p,
                _ => continue,
            };
            if let Some(n) = p.status.and_then(|s| s.nominated_node_name) {
                nominated = Some(n);
            }
            if let Some(node) = p.spec.and_then(|s| s.node_name) {
                return Ok(node);
            }
        }
        anyhow::bail!("the watch of {name} ended before it was bound")
    };
    let node = tokio::time::timeout(SCHEDULING_TIMEOUT, watched)
        .await
        .with_context(|| format!("{name} not bound within {SCHEDULING_TIMEOUT:?}"))??;
    Ok((nominated, node))
}

/// DefaultPreemption: both 2-CPU nodes are full, `n1` with a priority-10 pod and `n2` with a
/// priority-100 pod. A priority-1000 pod evicts only the priority-10 pod (the cheaper node): the
/// victim gets a `Preempted` event naming the preemptor, the preemptor's first FailedScheduling
/// says where it will go, it is nominated to `n1` and bound there. A priority-100 pod then finds
/// no victims anywhere (nothing of lower priority is left) and stays Pending, and the
/// priority-100 pod on `n2` survives both.
#[tokio::test]
async fn default_preemption_evicts_the_cheapest_victim() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-preempt").await?;
    let nodes = env
        .create_nodes([env.node("n1").cpu("2"), env.node("n2").cpu("2")])
        .await?;
    let low = env.create_priority_class("low", 10).await?;
    let mid = env.create_priority_class("mid", 100).await?;
    let high = env.create_priority_class("high", 1000).await?;
    let full = |class: &str| {
        let class = class.to_owned();
        move |p: PodBuilder| p.priority_class(&class).request("cpu", "2")
    };
    env.create_bound_pods("low", &nodes[0], 1, full(&low))
        .await?;
    env.create_bound_pods("mid", &nodes[1], 1, full(&mid))
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;

    let preemptor = env
        .create_pod(
            &env.pod("preemptor")
                .priority_class(&high)
                .request("cpu", "2"),
        )
        .await?;
    let uid = preemptor.metadata.uid.clone().unwrap_or_default();
    // The nomination is set between the preemption and the bind (the API server clears
    // `nominatedNodeName` when it binds the pod).
    let (nominated, node) = nomination_then_node(&env, &preemptor).await?;
    assert_eq!(nominated.as_deref(), Some(nodes[0].as_str()));
    assert_eq!(node, nodes[0]);
    assert_scheduled_event(&env, &placer, "preemptor", &nodes[0]).await?;

    let preempted = env.wait_pod_event("low-0", "Preempted").await?;
    assert_eq!(
        preempted.message.as_deref(),
        Some(format!("Preempted by pod {uid} on node {}", nodes[0]).as_str())
    );
    assert_eq!(preempted.type_.as_deref(), Some("Normal"));
    assert_eq!(preempted.action.as_deref(), Some("Preempting"));
    assert_eq!(
        preempted.reporting_component.as_deref(),
        Some(REPORTING_CONTROLLER)
    );
    assert_eq!(
        preempted.related.and_then(|r| r.name).as_deref(),
        Some("preemptor")
    );
    let gone = env.pods().get_opt("low-0").await?;
    assert!(gone.is_none(), "the victim was deleted: {gone:?}");
    assert!(env.pods().get_opt("mid-0").await?.is_some());

    let first = env.wait_pod_event("preemptor", "FailedScheduling").await?;
    let message = first.message.unwrap_or_default();
    eprintln!("preemptor: FailedScheduling: {message}");
    let suffix = format!(
        " preemption: found a potential placement for pod on node {}, preempting 1 victims",
        nodes[0]
    );
    let fit = message
        .strip_suffix(&suffix)
        .with_context(|| format!("no {suffix:?} in {message:?}"))?;
    check_fit_error(fit, &[(2, INSUFFICIENT_CPU)], None)?;
    assert!(
        placer
            .metric("placer_preemption_attempts_total")
            .await?
            .unwrap_or(0.0)
            >= 1.0
    );

    env.create_pod(&env.pod("peer").priority_class(&mid).request("cpu", "2"))
        .await?;
    assert_unschedulable(&env, "peer", &[(2, INSUFFICIENT_CPU)], &[(2, NO_VICTIMS)]).await?;
    assert!(env.pods().get_opt("mid-0").await?.is_some());
    Ok(())
}

/// DefaultPreemption honours PodDisruptionBudgets: both 2-CPU nodes hold one priority-10 pod,
/// equal in every other respect, and the one on `n1` (which wins ties, being first by name) is
/// protected by a budget that allows no disruption. The preemptor evicts the unprotected pod on
/// `n2` instead. No disruption controller runs here, so the test writes the budget's status
/// (`disruptionsAllowed: 0`) itself.
#[tokio::test]
async fn default_preemption_spares_pods_a_budget_protects() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-preempt-pdb").await?;
    let nodes = env
        .create_nodes([env.node("n1").cpu("2"), env.node("n2").cpu("2")])
        .await?;
    let low = env.create_priority_class("low", 10).await?;
    let high = env.create_priority_class("high", 1000).await?;
    env.create_bound_pods("guarded", &nodes[0], 1, |p| {
        p.priority_class(&low)
            .request("cpu", "2")
            .label("app", "guarded")
    })
    .await?;
    env.create_bound_pods("free", &nodes[1], 1, |p| {
        p.priority_class(&low)
            .request("cpu", "2")
            .label("app", "free")
    })
    .await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(env.client().clone(), env.namespace());
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": "guarded" },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "guarded" } } },
    }))?;
    budgets.create(&PostParams::default(), &pdb).await?;
    let status = json!({ "status": {
        "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
    } });
    budgets
        .patch_status("guarded", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;

    let preemptor = env
        .create_pod(
            &env.pod("preemptor")
                .priority_class(&high)
                .request("cpu", "2"),
        )
        .await?;
    let (nominated, node) = nomination_then_node(&env, &preemptor).await?;
    assert_eq!(nominated.as_deref(), Some(nodes[1].as_str()));
    assert_eq!(node, nodes[1]);
    assert_scheduled_event(&env, &placer, "preemptor", &nodes[1]).await?;
    env.wait_pod_event("free-0", "Preempted").await?;
    assert!(env.pods().get_opt("free-0").await?.is_none());
    assert!(
        env.pods().get_opt("guarded-0").await?.is_some(),
        "the budget-protected pod was spared"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Bind failures.
// ---------------------------------------------------------------------------------------------
