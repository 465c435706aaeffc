//! VolumeBinding with unbound `WaitForFirstConsumer` claims on a control plane of the test's own
//! with kube-controller-manager's PV binder: placer picks the static local volume on the chosen
//! node (or asks for provisioning there), PreBind writes it and waits until the PV controller has
//! bound the claim, then the pod binds.

use k8s_openapi::api::storage::v1::StorageClass;

use super::plugins::claim_volume;
use super::volume_compare::{COPY, copy_nodes};
use super::*;
use crate::harness::compare::{SideBySide, assert_same_failure, comparable_plugins};
use crate::harness::controller_manager::ControllerManager;

/// A `WaitForFirstConsumer` class `<run id>-<suffix>` of `provisioner`; returns its name.
pub(super) async fn wffc_class(
    env: &TestEnv,
    suffix: &str,
    provisioner: &str,
) -> anyhow::Result<String> {
    let name = env.name(suffix);
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": { "name": name },
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }))?;
    Api::<StorageClass>::all(env.client().clone())
        .create(&PostParams::default(), &class)
        .await
        .with_context(|| format!("create class {name}"))?;
    Ok(name)
}

/// An available local volume of `class` on `node`, not claimed.
pub(super) async fn free_local_volume(
    env: &TestEnv,
    class: &str,
    node: &str,
) -> anyhow::Result<String> {
    let name = format!("pv-{node}");
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "local": { "path": "/mnt/data" },
            "nodeAffinity": { "required": { "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": HOSTNAME, "operator": "In", "values": [node] },
            ] }] } },
        },
    }))?;
    Api::<PersistentVolume>::all(env.client().clone())
        .create(&PostParams::default(), &pv)
        .await
        .with_context(|| format!("create {name}"))?;
    Ok(name)
}

/// An unbound claim `name` of `class` asking for 1Gi.
pub(super) async fn unbound_claim(env: &TestEnv, name: &str, class: &str) -> anyhow::Result<()> {
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "resources": { "requests": { "storage": "1Gi" } },
        },
    }))?;
    Api::<PersistentVolumeClaim>::namespaced(env.client().clone(), env.namespace())
        .create(&PostParams::default(), &pvc)
        .await
        .with_context(|| format!("create claim {name}"))?;
    Ok(())
}

/// The claim as the API server has it now.
pub(super) async fn claim(env: &TestEnv, name: &str) -> anyhow::Result<PersistentVolumeClaim> {
    Ok(
        Api::<PersistentVolumeClaim>::namespaced(env.client().clone(), env.namespace())
            .get(name)
            .await?,
    )
}

/// Two StatefulSet-like pods racing for two local volumes on two of three nodes each get the
/// volume of the node they are bound to, through the PV controller; a third finds none left and
/// gets kube-scheduler's FailedScheduling text; a claim of a provisioner-backed class gets the
/// chosen node as `volume.kubernetes.io/selected-node`.
#[tokio::test]
async fn wait_for_first_consumer_claims_are_bound_on_the_chosen_node() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-wffc").await?;
    let nodes = env
        .create_nodes([env.node("n1"), env.node("n2"), env.node("n3")])
        .await?;
    let local = wffc_class(&env, "local", "kubernetes.io/no-provisioner").await?;
    let mut volumes = BTreeSet::new();
    for node in &nodes[..2] {
        volumes.insert(free_local_volume(&env, &local, node).await?);
    }
    let _kcm = ControllerManager::start_pv_binder(&env).await?;
    let _placer = env.start_standalone("placer", &[]).await?;

    for i in 0..2 {
        unbound_claim(&env, &format!("data-{i}"), &local).await?;
        env.create_pod_with_spec(
            &env.pod(&format!("db-{i}")),
            claim_volume(&format!("data-{i}")),
        )
        .await?;
    }
    let mut used = BTreeSet::new();
    for i in 0..2 {
        let node = env.wait_pod_bound(&format!("db-{i}")).await?;
        let c = claim(&env, &format!("data-{i}")).await?;
        let volume = c.spec.and_then(|s| s.volume_name).unwrap_or_default();
        assert_eq!(
            volume,
            format!("pv-{node}"),
            "db-{i}'s claim is bound to its node's volume"
        );
        assert!(
            c.metadata
                .annotations
                .unwrap_or_default()
                .contains_key("pv.kubernetes.io/bind-completed"),
            "the PV controller completed the binding"
        );
        used.insert(volume);
    }
    assert_eq!(used, volumes, "the two pods took different volumes");

    unbound_claim(&env, "data-2", &local).await?;
    env.create_pod_with_spec(&env.pod("db-2"), claim_volume("data-2"))
        .await?;
    let event = env.wait_scheduling_failure("db-2").await?;
    let message = event.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
        ),
        "{message}"
    );
    env.assert_stays_unbound("db-2", STAYS_PENDING).await?;

    let provisioned = wffc_class(&env, "dyn", "example.com/nobody-provisions").await?;
    unbound_claim(&env, "dyn", &provisioned).await?;
    env.create_pod_with_spec(&env.pod("dyn-pod"), claim_volume("dyn"))
        .await?;
    let deadline = Instant::now() + SCHEDULING_TIMEOUT;
    loop {
        let selected = claim(&env, "dyn")
            .await?
            .metadata
            .annotations
            .unwrap_or_default()
            .get("volume.kubernetes.io/selected-node")
            .cloned();
        if let Some(node) = selected {
            assert!(nodes.contains(&node), "selected {node}, not a test node");
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "no selected-node on claim dyn");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing provisions it: the pod waits in PreBind and is not bound.
    env.assert_stays_unbound("dyn-pod", STAYS_PENDING).await?;
    Ok(())
}

/// The same WaitForFirstConsumer layout for placer and for stock kube-scheduler (one copy each,
/// on nodes of its own, one local volume per node): each binds two pods to the nodes of their
/// volumes through the PV controller, and the third pod's FailedScheduling text is the same.
#[tokio::test]
async fn wait_for_first_consumer_outcomes_match_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-wffc-compare").await?;
    let _kcm = ControllerManager::start_pv_binder(&env).await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;

    let copies = both.copies();
    // Every node, class and volume first, so that both schedulers count the same nodes.
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = copy_nodes(&env, tag, 2).await?;
        let class = wffc_class(
            &env,
            &format!("local-{tag}"),
            "kubernetes.io/no-provisioner",
        )
        .await?;
        for node in &nodes {
            free_local_volume(&env, &class, node).await?;
        }
        layout.push((nodes, class));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = Vec::new();
    for ((tag, scheduler), (nodes, class)) in copies.iter().zip(&layout) {
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let mut used = BTreeSet::new();
        for i in 0..2 {
            let (claim_name, pod_name) = (format!("data-{tag}{i}"), format!("db-{tag}{i}"));
            unbound_claim(&env, &claim_name, class).await?;
            env.create_pod_with_spec(&pod(&pod_name), claim_volume(&claim_name))
                .await?;
            let node = env.wait_pod_bound(&pod_name).await?;
            let volume = claim(&env, &claim_name)
                .await?
                .spec
                .and_then(|s| s.volume_name)
                .unwrap_or_default();
            assert_eq!(
                volume,
                format!("pv-{node}"),
                "{scheduler}: {pod_name} on {node}"
            );
            used.insert(node);
        }
        assert_eq!(used.len(), 2, "{scheduler}: one pod per volume");
        assert!(used.iter().all(|n| nodes.contains(n)));
        let (claim_name, pod_name) = (format!("data-{tag}2"), format!("db-{tag}2"));
        unbound_claim(&env, &claim_name, class).await?;
        env.create_pod_with_spec(&pod(&pod_name), claim_volume(&claim_name))
            .await?;
        let event = env.wait_scheduling_failure(&pod_name).await?;
        texts.push(event.message.unwrap_or_default());
    }
    assert_same_failure(
        &texts,
        "2 node(s) didn't find available persistent volumes to bind",
    );
    Ok(())
}
