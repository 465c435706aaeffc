//! Binding conditions (DRADeviceBindingConditions, on by default in v1.37): the test driver
//! publishes a device that must be attached before a pod may use it. placer and stock
//! kube-scheduler, each on its own node, claim and device, allocate the device, then wait in
//! PreBind (reporting `BindingConditionsPending` on the pod); the pod binds only once the driver
//! reports the device attached.

use super::dra::{DRIVER, allocations, claim_spec, device_class, publish_slice};
use super::volume_compare::{COPY, copy_nodes};
use super::*;
use crate::harness::compare::{SideBySide, comparable_plugins};

/// Publishes `node`'s one device, which binds only once `Attached` is true.
async fn publish_attachable(env: &TestEnv, node: &str) -> anyhow::Result<()> {
    let devices = json!([{ "name": "gpu-0",
        "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"] }]);
    publish_slice(env, node, "gpus", devices).await
}

/// The driver reports `node`'s device of claim `name` attached.
async fn attach(env: &TestEnv, name: &str, node: &str) -> anyhow::Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    env.edit_claim_status(
        name,
        &format!("report {name}'s device attached"),
        |status| {
            status.devices = Some(serde_json::from_value(json!([{
                "driver": DRIVER, "pool": node, "device": "gpu-0",
                "conditions": [{ "type": "Attached", "status": "True", "reason": "Attached",
                    "message": "attached by the test driver", "lastTransitionTime": now }],
            }]))?);
            Ok(())
        },
    )
    .await
}

#[tokio::test]
async fn pre_bind_waits_for_binding_conditions_as_kube_scheduler_does() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-binding").await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class(&env, "gpu", None).await?;
    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = copy_nodes(&env, tag, 1).await?;
        publish_attachable(&env, &nodes[0]).await?;
        claim_spec(&env, &format!("attach-{tag}"), "gpu", 1, false, true).await?;
        layout.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let (name, claim) = (format!("user-{tag}"), format!("attach-{tag}"));
        let pod = env.pod(&name).scheduler(scheduler).node_selector(COPY, tag);
        env.create_pod_with_spec(
            &pod,
            json!({ "resourceClaims": [
            { "name": "gpu", "resourceClaimName": claim }] }),
        )
        .await?;
        // Allocated and reserved, then held in PreBind until the device is attached.
        env.poll(
            &format!("{scheduler}: {claim} allocated"),
            SCHEDULING_TIMEOUT,
            || async {
                let held = allocations(&env).await?.iter().any(|(c, _, _)| *c == claim);
                Ok(if held {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue("not allocated yet".into())
                })
            },
        )
        .await?;
        // Both say why the pod waits, as kube-scheduler's PreBind does.
        let pending = env
            .wait_pod_event(&name, "BindingConditionsPending")
            .await?;
        assert_eq!(
            pending.message.as_deref(),
            Some(
                format!(
                    "waiting for binding conditions for device on node {}",
                    nodes[0]
                )
                .as_str()
            ),
            "{scheduler}"
        );
        env.assert_stays_unbound(&name, Duration::from_secs(6))
            .await
            .with_context(|| format!("{scheduler} bound {name} before the device was attached"))?;
        attach(&env, &claim, &nodes[0]).await?;
        assert_eq!(env.wait_pod_bound(&name).await?, nodes[0], "{scheduler}");
    }
    Ok(())
}
