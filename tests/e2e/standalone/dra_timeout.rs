//! DynamicResources' `filterTimeout`: a claim built to explode the allocator's search (four
//! devices of one NUMA node out of 255, then the one device of the other NUMA node, all bound by
//! `matchAttribute`: every one of the C(255, 4), some 170 million, combinations fails at the last
//! request) is given up on after the timeout. placer and stock kube-scheduler, each with its own
//! node, devices and claims and `filterTimeout: 1s`, give the pod the same FailedScheduling text
//! (an Error: the node is named, the pod retries with backoff), within a bounded time, and bind
//! the ordinary pods created after it meanwhile.

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};

use super::dra::{DRIVER, claim_spec, device_class};
use super::volume_compare::{COPY, copy_nodes};
use super::*;
use crate::harness::compare::{ProfilePlugin, SideBySide, comparable_plugins};

/// Devices on NUMA node 0 per node; one more sits on NUMA node 1.
const SAME_NUMA: usize = 255;
/// The API's limit of devices in one ResourceSlice.
const SLICE_MAX_DEVICES: usize = 128;

/// Publishes `node`'s [`SAME_NUMA`] + 1 devices as one pool of two slices.
async fn publish_many(env: &TestEnv, node: &str) -> anyhow::Result<()> {
    let mut devices: Vec<Value> = (0..SAME_NUMA)
        .map(|i| json!({ "name": format!("gpu-{i}"), "attributes": { "numa": { "int": 0 } } }))
        .collect();
    devices.push(json!({ "name": "odd", "attributes": { "numa": { "int": 1 } } }));
    let parts: Vec<&[Value]> = devices.chunks(SLICE_MAX_DEVICES).collect();
    for (i, part) in parts.iter().enumerate() {
        let slice: ResourceSlice = serde_json::from_value(json!({
            "metadata": { "name": format!("{node}-gpus-{i}") },
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": { "name": node, "generation": 1, "resourceSliceCount": parts.len() },
                "devices": part,
            },
        }))?;
        Api::<ResourceSlice>::all(env.client().clone())
            .create(&PostParams::default(), &slice)
            .await
            .with_context(|| format!("publish {node}'s slice {i}"))?;
    }
    Ok(())
}

/// The exploding claim `name`: four devices of one NUMA node, then the one of the other.
async fn exploding_claim(env: &TestEnv, name: &str) -> anyhow::Result<()> {
    let exact = |request: &str, count: i64, selectors: Value| {
        json!({ "name": request, "exactly": { "deviceClassName": "gpu",
            "allocationMode": "ExactCount", "count": count, "selectors": selectors } })
    };
    let odd =
        json!([{ "cel": { "expression": format!("device.attributes['{DRIVER}'].numa == 1") } }]);
    let claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "devices": {
            "requests": [exact("many", 4, json!([])), exact("odd", 1, odd)],
            "constraints": [{ "requests": ["many", "odd"], "matchAttribute": format!("{DRIVER}/numa") }],
        } },
    }))?;
    Api::<ResourceClaim>::namespaced(env.client().clone(), env.namespace())
        .create(&PostParams::default(), &claim)
        .await
        .with_context(|| format!("create claim {name}"))?;
    Ok(())
}

/// kube-scheduler's default plugins with DynamicResources' `filterTimeout` at 1 s.
fn plugins_with_short_timeout() -> Vec<ProfilePlugin> {
    let mut plugins = comparable_plugins();
    for p in &mut plugins {
        if p.name == "DynamicResources" {
            p.args = Some(json!({ "filterTimeout": "1s" }));
        }
    }
    plugins
}

#[tokio::test]
async fn an_exploding_claim_times_out_as_in_kube_scheduler_while_other_pods_bind()
-> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-timeout").await?;
    let both = SideBySide::start(&env, &plugins_with_short_timeout()).await?;
    device_class(&env, "gpu", None).await?;
    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = copy_nodes(&env, tag, 1).await?;
        publish_many(&env, &nodes[0]).await?;
        exploding_claim(&env, &format!("explode-{tag}")).await?;
        claim_spec(&env, &format!("one-{tag}"), "gpu", 1, false, true).await?;
        layout.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let claiming = |claim: String| {
            json!({ "resourceClaims": [
            { "name": "gpu", "resourceClaimName": claim }] })
        };
        let exploding = format!("explode-{tag}");
        let created = Instant::now();
        env.create_pod_with_spec(&pod(&exploding), claiming(exploding.clone()))
            .await?;
        // Created while the first attempt searches: a pod without claims, and one whose claim
        // is ordinary, on the same node.
        let others = [format!("plain-{tag}"), format!("one-gpu-{tag}")];
        env.create_pod_with_spec(&pod(&others[0]), json!({}))
            .await?;
        env.create_pod_with_spec(&pod(&others[1]), claiming(format!("one-{tag}")))
            .await?;
        for other in &others {
            assert_eq!(
                env.wait_pod_bound(other).await?,
                nodes[0],
                "{scheduler}: {other}"
            );
        }
        let text = env.wait_failed_scheduling(&exploding, "timed out").await?;
        eprintln!(
            "{scheduler}: {exploding} FailedScheduling after {:?}: {text}",
            created.elapsed()
        );
        assert_eq!(
            text,
            format!(
                "running \"DynamicResources\" filter plugin: node {}: timed out trying to allocate devices",
                nodes[0]
            ),
            "{scheduler}"
        );
        let condition = env.wait_pod_unschedulable(&exploding).await?;
        assert_eq!(
            condition.reason.as_deref(),
            Some("SchedulerError"),
            "{scheduler}"
        );
        env.assert_stays_unbound(&exploding, STAYS_PENDING).await?;
    }
    Ok(())
}
