//! DynamicResources on a control plane of the test's own, no kubelet: the test is the "driver"
//! (it publishes ResourceSlices for its nodes as plain API objects), kube-controller-manager's
//! resourceclaim controller creates the claims of pods' templates, and the schedulers allocate.
//! Where a case runs both, placer and stock kube-scheduler get one copy of the objects each (their
//! own nodes, slices and claims), one after the other, and must agree on placement, allocation and
//! the FailedScheduling text. No device is ever allocated twice.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};

use super::volume_compare::{COPY, copy_nodes};
use super::*;
use crate::harness::compare::{SideBySide, assert_same_failure, comparable_plugins};
use crate::harness::controller_manager::ControllerManager;
use crate::harness::node_allocation;

/// The test driver's name.
pub(super) const DRIVER: &str = "gpu.placer.test";

/// A DeviceClass `name` of the test driver's devices, with an optional extra CEL selector.
pub(super) async fn device_class(
    env: &TestEnv,
    name: &str,
    selector: Option<&str>,
) -> anyhow::Result<()> {
    device_class_serving(env, name, selector, None).await
}

/// [`device_class`] that also serves the extended resource `extended` (DRAExtendedResource).
pub(super) async fn device_class_serving(
    env: &TestEnv,
    name: &str,
    selector: Option<&str>,
    extended: Option<&str>,
) -> anyhow::Result<()> {
    let mut selectors =
        vec![json!({ "cel": { "expression": format!("device.driver == '{DRIVER}'") } })];
    if let Some(s) = selector {
        selectors.push(json!({ "cel": { "expression": s } }));
    }
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "selectors": selectors, "extendedResourceName": extended },
    }))?;
    Api::<DeviceClass>::all(env.client().clone())
        .create(&PostParams::default(), &class)
        .await
        .with_context(|| format!("create class {name}"))?;
    Ok(())
}

/// Publishes `node`'s devices in one slice (pool = node): each `(name, numa, model)`.
pub(super) async fn publish(
    env: &TestEnv,
    node: &str,
    devices: &[(&str, i64, &str)],
) -> anyhow::Result<()> {
    let devices: Vec<Value> = devices
        .iter()
        .map(|(name, numa, model)| {
            json!({ "name": name, "attributes": {
                "numa": { "int": numa },
                "model": { "string": model },
            } })
        })
        .collect();
    publish_slice(env, node, "gpus", json!(devices)).await
}

/// Publishes `devices` (a JSON list) for `node` in one slice `<node>-<suffix>` of the test
/// driver (pool = node).
pub(super) async fn publish_slice(
    env: &TestEnv,
    node: &str,
    suffix: &str,
    devices: Value,
) -> anyhow::Result<()> {
    let slice: ResourceSlice = serde_json::from_value(json!({
        "metadata": { "name": format!("{node}-{suffix}") },
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 },
            "devices": devices,
        },
    }))?;
    Api::<ResourceSlice>::all(env.client().clone())
        .create(&PostParams::default(), &slice)
        .await
        .with_context(|| format!("publish {node}'s {suffix}"))?;
    Ok(())
}

/// A claim template (or, `shared`, a claim) `name` asking for `count` devices of `class`,
/// with a `matchAttribute` constraint on `numa` when `same_numa`.
pub(super) async fn claim_spec(
    env: &TestEnv,
    name: &str,
    class: &str,
    count: i64,
    same_numa: bool,
    shared: bool,
) -> anyhow::Result<()> {
    let mut devices = json!({ "requests": [{ "name": "gpu", "exactly": {
        "deviceClassName": class, "allocationMode": "ExactCount", "count": count,
    } }] });
    if same_numa {
        devices["constraints"] =
            json!([{ "requests": ["gpu"], "matchAttribute": format!("{DRIVER}/numa") }]);
    }
    let spec = json!({ "devices": devices });
    let api_ns = env.namespace();
    if shared {
        let claim: ResourceClaim =
            serde_json::from_value(json!({ "metadata": { "name": name }, "spec": spec }))?;
        Api::<ResourceClaim>::namespaced(env.client().clone(), api_ns)
            .create(&PostParams::default(), &claim)
            .await
            .with_context(|| format!("create claim {name}"))?;
    } else {
        let template: ResourceClaimTemplate = serde_json::from_value(
            json!({ "metadata": { "name": name }, "spec": { "spec": spec } }),
        )?;
        Api::<ResourceClaimTemplate>::namespaced(env.client().clone(), api_ns)
            .create(&PostParams::default(), &template)
            .await
            .with_context(|| format!("create template {name}"))?;
    }
    Ok(())
}

/// The pod spec part that claims through template `template` (or the claim `claim`).
fn claims(template: Option<&str>, claim: Option<&str>) -> Value {
    let mut entry = json!({ "name": "gpu" });
    if let Some(t) = template {
        entry["resourceClaimTemplateName"] = json!(t);
    }
    if let Some(c) = claim {
        entry["resourceClaimName"] = json!(c);
    }
    json!({ "resourceClaims": [entry] })
}

/// Every claim's allocated devices as `(claim, node of the pool, device)`; fails if a device
/// is allocated twice.
pub(super) async fn allocations(env: &TestEnv) -> anyhow::Result<Vec<(String, String, String)>> {
    let list = Api::<ResourceClaim>::namespaced(env.client().clone(), env.namespace())
        .list(&Default::default())
        .await?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for c in list.items {
        let name = c.metadata.name.clone().unwrap_or_default();
        let results = c
            .status
            .and_then(|s| s.allocation)
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .unwrap_or_default();
        for r in results {
            anyhow::ensure!(
                seen.insert((r.pool.clone(), r.device.clone())),
                "device {}/{} allocated twice",
                r.pool,
                r.device
            );
            out.push((name.clone(), r.pool, r.device));
        }
    }
    Ok(out)
}

/// Two nodes of copy `tag` with one GPU (`gpu-0`) each.
pub(super) async fn gpu_nodes(env: &TestEnv, tag: &str) -> anyhow::Result<Vec<String>> {
    let nodes = copy_nodes(env, tag, 2).await?;
    for node in &nodes {
        publish(env, node, &[("gpu-0", 0, "a100")]).await?;
    }
    Ok(nodes)
}

/// The claim the resourceclaim controller made for `pod`'s entry.
async fn claim_of(env: &TestEnv, pod: &str) -> anyhow::Result<String> {
    let p: Pod = env.pods().get(pod).await?;
    p.status
        .and_then(|s| s.resource_claim_statuses)
        .and_then(|s| s.into_iter().next())
        .and_then(|s| s.resource_claim_name)
        .with_context(|| format!("{pod} has no generated claim"))
}

/// One GPU per pod until the devices run out: placer and kube-scheduler each bind two pods to
/// their two one-GPU nodes (each claim allocated the device of the pod's node) and give the
/// third the same FailedScheduling text. Claims come from a template: each pod waits until the
/// resourceclaim controller has created its claim.
#[tokio::test]
async fn one_gpu_per_pod_until_they_run_out_matches_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-compare").await?;
    let _kcm = ControllerManager::start_resource_claims(&env).await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class(&env, "gpu", None).await?;
    claim_spec(&env, "one-gpu", "gpu", 1, false, false).await?;

    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = gpu_nodes(&env, tag).await?;
        layout.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = Vec::new();
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let mut used = BTreeSet::new();
        for i in 0..2 {
            let name = format!("job-{tag}{i}");
            env.create_pod_with_spec(&pod(&name), claims(Some("one-gpu"), None))
                .await?;
            let node = env.wait_pod_bound(&name).await?;
            let claim = claim_of(&env, &name).await?;
            let allocated = allocations(&env).await?;
            assert!(
                allocated.contains(&(claim.clone(), node.clone(), "gpu-0".into())),
                "{scheduler}: {name} on {node}, its claim {claim} holds {allocated:?}"
            );
            used.insert(node);
        }
        assert_eq!(used.len(), 2, "{scheduler}: one pod per GPU");
        assert!(used.iter().all(|n| nodes.contains(n)));
        let name = format!("job-{tag}2");
        env.create_pod_with_spec(&pod(&name), claims(Some("one-gpu"), None))
            .await?;
        let event = env.wait_pod_event(&name, "FailedScheduling").await?;
        texts.push(event.message.unwrap_or_default());
    }
    assert_same_failure(&texts, "cannot allocate all claims");
    allocations(&env).await?;
    Ok(())
}

/// A DeviceTaintRule `name` tainting every device of the test driver's pool `pool` (a node's
/// devices: the pool is named after the node) with `effect`.
async fn taint_pool(env: &TestEnv, name: &str, pool: &str, effect: &str) -> anyhow::Result<()> {
    let rule: DeviceTaintRule = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "deviceSelector": { "driver": DRIVER, "pool": pool },
            "taint": { "key": "placer.test/broken", "value": "yes", "effect": effect },
        },
    }))?;
    Api::<DeviceTaintRule>::all(env.client().clone())
        .create(&PostParams::default(), &rule)
        .await
        .with_context(|| format!("create DeviceTaintRule {name}"))?;
    Ok(())
}

/// A DeviceTaintRule tainting one node's GPU sends placer's and kube-scheduler's GPU pod to the
/// other node;
/// with that GPU taken, both give the next pod the same FailedScheduling text; deleting the rule
/// frees the tainted GPU and both pending pods bind to it (the rule's deletion reaches both
/// queues as an update of the node's ResourceSlice).
#[tokio::test]
async fn device_taint_rules_keep_pods_off_tainted_devices_as_kube_scheduler_does()
-> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-taints").await?;
    let _kcm = ControllerManager::start_resource_claims(&env).await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class(&env, "gpu", None).await?;
    claim_spec(&env, "one-gpu", "gpu", 1, false, false).await?;

    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = gpu_nodes(&env, tag).await?;
        taint_pool(&env, &format!("broken-{tag}"), &nodes[0], "NoSchedule").await?;
        layout.push(nodes);
    }
    // Both schedulers see the slices and the rules before the first pod.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = Vec::new();
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let first = format!("gpu-{tag}0");
        env.create_pod_with_spec(&pod(&first), claims(Some("one-gpu"), None))
            .await?;
        assert_eq!(
            env.wait_pod_bound(&first).await?,
            nodes[1],
            "{scheduler}: the untainted GPU"
        );
        let second = format!("gpu-{tag}1");
        env.create_pod_with_spec(&pod(&second), claims(Some("one-gpu"), None))
            .await?;
        let event = env.wait_pod_event(&second, "FailedScheduling").await?;
        texts.push(event.message.unwrap_or_default());
    }
    assert_same_failure(&texts, "cannot allocate all claims");

    // One copy at a time, so that nothing but the rule's deletion (no claim written for the
    // other scheduler's pods) can send the pending pod back to its scheduler's queue.
    let rules = Api::<DeviceTaintRule>::all(env.client().clone());
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        rules
            .delete(&format!("broken-{tag}"), &Default::default())
            .await?;
        let second = format!("gpu-{tag}1");
        assert_eq!(
            env.wait_pod_bound(&second).await?,
            nodes[0],
            "{scheduler}: the GPU the rule no longer taints"
        );
        let claim = claim_of(&env, &second).await?;
        assert!(
            allocations(&env)
                .await?
                .contains(&(claim, nodes[0].clone(), "gpu-0".into())),
            "{scheduler}: {second}'s claim holds the freed GPU"
        );
    }
    Ok(())
}

/// What the allocator decides, placer and kube-scheduler side by side (one copy of the nodes,
/// slices and shared claim each, one after the other): two devices with `matchAttribute` on
/// `numa` only fit the node whose two GPUs share a NUMA node; a class whose CEL selector asks
/// for a model only fits the node with that model; a claim shared by two pods puts both on the
/// node of its one allocation, reserved for both; a pod whose claim template comes later waits,
/// then schedules. Both schedulers must make every one of these placements.
#[tokio::test]
async fn constraints_selectors_and_shared_claims_match_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra").await?;
    let _kcm = ControllerManager::start_resource_claims(&env).await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class(&env, "gpu", None).await?;
    device_class(
        &env,
        "h100",
        Some(&format!("device.attributes['{DRIVER}'].model == 'h100'")),
    )
    .await?;
    claim_spec(&env, "two-numa", "gpu", 2, true, false).await?;
    claim_spec(&env, "one-h100", "h100", 1, false, false).await?;
    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = env
            .create_nodes(
                ["split", "paired", "h100"]
                    .map(|n| env.node(&format!("{tag}{n}")).label(COPY, tag)),
            )
            .await?;
        publish(
            &env,
            &nodes[0],
            &[("gpu-0", 0, "a100"), ("gpu-1", 1, "a100")],
        )
        .await?;
        publish(
            &env,
            &nodes[1],
            &[("gpu-0", 0, "a100"), ("gpu-1", 0, "a100")],
        )
        .await?;
        publish(&env, &nodes[2], &[("gpu-0", 0, "h100")]).await?;
        layout.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let env = &env;
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let bound = |name: String, claims: Value, node: usize| {
            let pod = pod(&name);
            async move {
                env.create_pod_with_spec(&pod, claims).await?;
                let got = env.wait_pod_bound(&name).await?;
                assert_eq!(got, nodes[node], "{scheduler}: {name}");
                anyhow::Ok(())
            }
        };
        bound(format!("pair-{tag}"), claims(Some("two-numa"), None), 1).await?;
        bound(format!("hopper-{tag}"), claims(Some("one-h100"), None), 2).await?;

        // The split node's two GPUs are left: a claim shared by two pods takes one of them.
        let shared = format!("shared-{tag}");
        claim_spec(env, &shared, "gpu", 1, false, true).await?;
        for name in ["a", "b"] {
            bound(format!("{name}-{tag}"), claims(None, Some(&shared)), 0).await?;
        }
        let claim = Api::<ResourceClaim>::namespaced(env.client().clone(), env.namespace())
            .get(&shared)
            .await?;
        let reserved: BTreeSet<String> = claim
            .status
            .and_then(|s| s.reserved_for)
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            reserved,
            BTreeSet::from([format!("a-{tag}"), format!("b-{tag}")]),
            "{scheduler}"
        );

        // A pod whose template does not exist yet has no claim: it waits (PreEnqueue) until
        // the resourceclaim controller creates the claim from the template created later,
        // then takes the split node's last GPU.
        let (late, later) = (format!("late-{tag}"), format!("later-{tag}"));
        env.create_pod_with_spec(&pod(&late), claims(Some(&later), None))
            .await?;
        env.assert_stays_unbound(&late, STAYS_PENDING).await?;
        claim_spec(env, &later, "gpu", 1, false, false).await?;
        assert_eq!(env.wait_pod_bound(&late).await?, nodes[0], "{scheduler}");
    }
    let by_claim: BTreeMap<String, usize> =
        allocations(&env)
            .await?
            .into_iter()
            .fold(BTreeMap::new(), |mut m, (c, _, _)| {
                *m.entry(c).or_default() += 1;
                m
            });
    assert_eq!(by_claim.values().sum::<usize>(), 10, "{by_claim:?}");
    Ok(())
}

/// Many pods race for few devices in standalone mode with binds in flight: exactly as many are
/// bound as there are devices, each once, and no device is allocated twice.
#[tokio::test]
async fn pods_racing_for_few_devices_get_one_each() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-race").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    for node in &nodes {
        publish(&env, node, &[("gpu-0", 0, "a100"), ("gpu-1", 1, "a100")]).await?;
    }
    device_class(&env, "gpu", None).await?;
    claim_spec(&env, "one-gpu", "gpu", 1, false, false).await?;
    let _kcm = ControllerManager::start_resource_claims(&env).await?;
    let _placer = env.start_standalone("placer", &[]).await?;
    let names: Vec<String> = (0..12).map(|i| format!("racer-{i}")).collect();
    for name in &names {
        env.create_pod_with_spec(&env.pod(name), claims(Some("one-gpu"), None))
            .await?;
    }
    let deadline = Instant::now() + SCHEDULING_TIMEOUT;
    let bound = loop {
        let pods = env.pods().list(&Default::default()).await?.items;
        let bound: Vec<Pod> = pods
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .collect();
        if bound.len() >= 4 || Instant::now() > deadline {
            break bound;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(bound.len(), 4, "one pod per device");
    tokio::time::sleep(STAYS_PENDING).await;
    let allocated = allocations(&env).await?;
    assert_eq!(allocated.len(), 4, "{allocated:?}");
    let still: usize = env
        .pods()
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count();
    assert_eq!(still, 4, "no pod bound after the devices ran out");
    Ok(())
}

/// Writes claim `name` (one GPU) as allocated to `node`'s `gpu-0` by someone before (a driver,
/// a scheduler since gone) and held by no pod.
async fn stale_claim(env: &TestEnv, name: &str, node: &str) -> anyhow::Result<()> {
    claim_spec(env, name, "gpu", 1, false, true).await?;
    env.edit_claim_status(name, &format!("allocate {name} on {node}"), |status| {
        status.allocation = Some(node_allocation("gpu", DRIVER, node, "gpu-0")?);
        Ok(())
    })
    .await
}

/// A claim allocated for a node the pod cannot use (a taint it does not tolerate), held by no
/// pod: DynamicResources' PostFilter deallocates it (before DefaultPreemption would evict
/// anyone), and the next attempt allocates the other node's GPU. placer and kube-scheduler give
/// the same FailedScheduling text and the same placement.
#[tokio::test]
async fn a_claim_allocated_where_the_pod_cannot_go_is_deallocated() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-dra-dealloc").await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    device_class(&env, "gpu", None).await?;
    let copies = both.copies();
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = env
            .create_nodes([
                env.node(&format!("{tag}1")).label(COPY, tag).taint(
                    "placer-e2e/busy",
                    "yes",
                    "NoSchedule",
                ),
                env.node(&format!("{tag}2")).label(COPY, tag),
            ])
            .await?;
        for node in &nodes {
            publish(&env, node, &[("gpu-0", 0, "a100")]).await?;
        }
        stale_claim(&env, &format!("stale-{tag}"), &nodes[0]).await?;
        layout.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = Vec::new();
    for ((tag, scheduler), nodes) in copies.iter().zip(&layout) {
        let name = format!("user-{tag}");
        let pod = env.pod(&name).scheduler(scheduler).node_selector(COPY, tag);
        let claim = format!("stale-{tag}");
        env.create_pod_with_spec(&pod, claims(None, Some(&claim)))
            .await?;
        let event = env.wait_pod_event(&name, "FailedScheduling").await?;
        texts.push(event.message.unwrap_or_default());
        assert_eq!(env.wait_pod_bound(&name).await?, nodes[1], "{scheduler}");
        let allocated = allocations(&env).await?;
        assert!(
            allocated.contains(&(claim.clone(), nodes[1].clone(), "gpu-0".into())),
            "{scheduler}: {claim} holds {allocated:?}"
        );
    }
    assert_same_failure(&texts, "deallocation of ResourceClaim completed");
    Ok(())
}
