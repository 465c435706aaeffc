//! Each plugin of the shipped standalone profile, on its own: where pods are bound, or the
//! FitError text of why not.

use super::*;

/// ZoneSpread: a new priority-0 pod goes to zone b, the emptiest zone for its priority.
#[tokio::test]
async fn zone_spread_prefers_emptiest_zone() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-zone-spread").await?;
    let nodes = env.create_zone_layout(&ZONE_LAYOUT).await?;
    let placer = env.start_standalone("placer", &[]).await?;

    env.create_pod(&env.pod("new")).await?;
    let node = env.wait_pod_bound("new").await?;
    assert_eq!(node, nodes[1], "expected zone b's node");
    assert_scheduled_event(&env, &placer, "new", &node).await
}

/// NetQoS: pods without `qos=latency-sensitive` are not steered (three of them spread over the
/// three nodes, one each); latency-sensitive pods then go to the `net=high` node although it is
/// no emptier than the others.
#[tokio::test]
async fn net_qos_steers_latency_sensitive_pods_to_fast_network() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-net-qos").await?;
    let nodes = env
        .create_nodes([
            env.node("high").label("net", "high"),
            env.node("low").label("net", "low"),
            env.node("plain"),
        ])
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;

    let mut spread = BTreeSet::new();
    for i in 0..3 {
        env.create_pod(&env.pod(&format!("plain-{i}"))).await?;
    }
    for i in 0..3 {
        spread.insert(env.wait_pod_bound(&format!("plain-{i}")).await?);
    }
    assert_eq!(
        spread,
        nodes.iter().cloned().collect(),
        "plain pods should spread one per node"
    );
    for i in 0..2 {
        let name = format!("fast-{i}");
        env.create_pod(&env.pod(&name).label("qos", "latency-sensitive"))
            .await?;
        let node = env.wait_pod_bound(&name).await?;
        assert_eq!(node, nodes[0], "{name} not on the net=high node");
        assert_scheduled_event(&env, &placer, &name, &node).await?;
    }
    Ok(())
}

/// CapabilityFilter: annotated pods land only on the labelled node; others anywhere.
#[tokio::test]
async fn capability_filter_places_only_on_labelled_node() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-capability").await?;
    let nodes = env
        .create_nodes([
            env.node("hw").label(SHIPPED_HW_LABEL, "true"),
            env.node("n2"),
            env.node("n3"),
        ])
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;

    for i in 0..3 {
        let pod = env
            .pod(&format!("secure-{i}"))
            .annotation(SHIPPED_HW_ANNOTATION, "true");
        env.create_pod(&pod).await?;
    }
    env.create_pod(&env.pod("ordinary")).await?;
    for i in 0..3 {
        let name = format!("secure-{i}");
        let node = env.wait_pod_bound(&name).await?;
        assert_eq!(node, nodes[0], "{name} not on the labelled node");
        assert_scheduled_event(&env, &placer, &name, &node).await?;
    }
    let node = env.wait_pod_bound("ordinary").await?;
    assert!(
        nodes.contains(&node),
        "ordinary bound to foreign node {node}"
    );
    Ok(())
}

/// CapabilityFilter: with no labelled node the annotated pod stays Pending with placer's reason
/// for each node; labelling a node (a cluster event) gets it scheduled there.
#[tokio::test]
async fn capability_filter_pending_until_node_labelled() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-capability-pending").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let placer = env.start_standalone("placer", &[]).await?;

    env.create_pod(&env.pod("secure").annotation(SHIPPED_HW_ANNOTATION, "true"))
        .await?;
    assert_unschedulable(&env, "secure", &[(2, HW_REASON)], &[(2, NOT_HELPFUL)]).await?;

    env.label_node(&nodes[1], SHIPPED_HW_LABEL, "true").await?;
    let node = env.wait_pod_bound("secure").await?;
    assert_eq!(node, nodes[1]);
    assert_scheduled_event(&env, &placer, "secure", &node).await
}

// ---------------------------------------------------------------------------------------------
// The safety plugins: for each, a pod that must land where expected and one that must not land.
// ---------------------------------------------------------------------------------------------

/// NodeResourcesFit, with events and conditions compared literally: a 6-CPU pod fits only the
/// 8-CPU node ("Successfully assigned ..."); a 4-CPU pod then fits nowhere (2 + 2 + 8 - 6 CPUs
/// free), "0/3 nodes are available: 3 Insufficient cpu." plus other tests' nodes.
#[tokio::test]
async fn node_resources_fit_and_outcome_reporting() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-resources").await?;
    let nodes = env
        .create_nodes([
            env.node("small-a").cpu("2"),
            env.node("small-b").cpu("2"),
            env.node("big").cpu("8"),
        ])
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;

    env.create_pod(&env.pod("fits").request("cpu", "6")).await?;
    let node = env.wait_pod_bound("fits").await?;
    assert_eq!(node, nodes[2]);
    assert_scheduled_event(&env, &placer, "fits", &node).await?;

    env.create_pod(&env.pod("too-big").request("cpu", "4"))
        .await?;
    // The small nodes could not hold it even empty: eviction cannot help there.
    assert_unschedulable(
        &env,
        "too-big",
        &[(3, INSUFFICIENT_CPU)],
        &[(2, NOT_HELPFUL), (1, NO_VICTIMS)],
    )
    .await?;
    Ok(())
}

/// TaintToleration (NoSchedule): a tolerating pod pinned to the tainted node lands there; a pod
/// without the toleration lands on the untainted node, and pinned to the tainted one it stays
/// Pending.
#[tokio::test]
async fn taint_toleration_no_schedule() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-taints").await?;
    let nodes = env
        .create_nodes([
            env.node("tainted")
                .taint("e2e.placer.io/dedicated", "gpu", "NoSchedule"),
            env.node("plain"),
        ])
        .await?;
    let (tainted, plain) = (&nodes[0], &nodes[1]);
    let placer = env.start_standalone("placer", &[]).await?;
    let toleration = json!({ "tolerations": [{
        "key": "e2e.placer.io/dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule",
    }] });

    env.create_pod_with_spec(&pinned(&env, "tolerant", tainted), toleration)
        .await?;
    assert_eq!(&env.wait_pod_bound("tolerant").await?, tainted);
    assert_scheduled_event(&env, &placer, "tolerant", tainted).await?;

    env.create_pod(&env.pod("intolerant")).await?;
    assert_eq!(&env.wait_pod_bound("intolerant").await?, plain);

    env.create_pod(&pinned(&env, "intolerant-pinned", tainted))
        .await?;
    assert_unschedulable(
        &env,
        "intolerant-pinned",
        &[(1, UNTOLERATED_TAINT), (1, SELECTOR_MISMATCH)],
        &[(2, NOT_HELPFUL)],
    )
    .await?;
    Ok(())
}

/// NodeAffinity: required node affinity by label (matchExpressions) and by name (matchFields)
/// picks the one matching node; a nodeSelector no node matches keeps the pod Pending.
#[tokio::test]
async fn node_affinity_required() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-node-affinity").await?;
    let nodes = env
        .create_nodes([
            env.node("ssd").label("disk", "ssd"),
            env.node("hdd").label("disk", "hdd"),
        ])
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;
    let required = |term: Value| {
        json!({ "affinity": { "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [term] },
        } } })
    };

    let by_label = required(json!({ "matchExpressions": [
        { "key": "disk", "operator": "In", "values": ["ssd", "nvme"] },
    ] }));
    env.create_pod_with_spec(&env.pod("wants-ssd"), by_label)
        .await?;
    assert_eq!(env.wait_pod_bound("wants-ssd").await?, nodes[0]);
    assert_scheduled_event(&env, &placer, "wants-ssd", &nodes[0]).await?;

    let by_name = required(json!({ "matchFields": [
        { "key": "metadata.name", "operator": "In", "values": [nodes[1]] },
    ] }));
    env.create_pod_with_spec(&env.pod("wants-hdd-node"), by_name)
        .await?;
    assert_eq!(env.wait_pod_bound("wants-hdd-node").await?, nodes[1]);

    env.create_pod(&env.pod("wants-nvme").node_selector("disk", "nvme"))
        .await?;
    assert_unschedulable(
        &env,
        "wants-nvme",
        &[(2, SELECTOR_MISMATCH)],
        &[(2, NOT_HELPFUL)],
    )
    .await?;
    Ok(())
}

/// NodePorts: two pods asking for host port 8080 land on different nodes; a third finds no node
/// with the port free.
#[tokio::test]
async fn node_ports_conflict() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-node-ports").await?;
    let nodes = env.create_nodes([env.node("a"), env.node("b")]).await?;
    let placer = env.start_standalone("placer", &[]).await?;
    let host_port = || {
        json!({ "containers": container_with_ports(json!([
            { "containerPort": 8080, "hostPort": 8080, "protocol": "TCP" },
        ])) })
    };

    env.create_pod_with_spec(&env.pod("web-0"), host_port())
        .await?;
    let first = env.wait_pod_bound("web-0").await?;
    env.create_pod_with_spec(&env.pod("web-1"), host_port())
        .await?;
    let second = env.wait_pod_bound("web-1").await?;
    assert_ne!(first, second, "two pods with host port 8080 on one node");
    assert!(nodes.contains(&first) && nodes.contains(&second));
    assert_scheduled_event(&env, &placer, "web-1", &second).await?;

    env.create_pod_with_spec(&env.pod("web-2"), host_port())
        .await?;
    assert_unschedulable(&env, "web-2", &[(2, PORTS_TAKEN)], &[(2, NO_VICTIMS)]).await?;
    Ok(())
}

/// PodTopologySpread (maxSkew 1, DoNotSchedule, over zones): with two `app=web` pods in zone a
/// and none in zone b, the next one must go to b; the one after that (6 CPUs) would fit only zone
/// a's node, where it would make the skew 2, so it stays Pending.
#[tokio::test]
async fn pod_topology_spread_do_not_schedule() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-spread").await?;
    let nodes = env
        .create_nodes([
            env.node("a1").label(ZONE_LABEL, &env.zone("a")),
            env.node("b1").label(ZONE_LABEL, &env.zone("b")).cpu("4"),
        ])
        .await?;
    env.create_bound_pods("web-a", &nodes[0], 2, |p| p.label("app", "web"))
        .await?;
    let placer = env.start_standalone("placer", &[]).await?;
    let spread = json!({ "topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": { "matchLabels": { "app": "web" } },
    }] });

    env.create_pod_with_spec(&env.pod("spread-0").label("app", "web"), spread.clone())
        .await?;
    assert_eq!(env.wait_pod_bound("spread-0").await?, nodes[1]);
    assert_scheduled_event(&env, &placer, "spread-0", &nodes[1]).await?;

    let big = env.pod("spread-1").label("app", "web").request("cpu", "6");
    env.create_pod_with_spec(&big, spread).await?;
    // 6 CPUs exceed b1's 4 even empty: eviction cannot help there.
    assert_unschedulable(
        &env,
        "spread-1",
        &[(1, SPREAD_VIOLATED), (1, INSUFFICIENT_CPU)],
        &[(1, NO_VICTIMS), (1, NOT_HELPFUL)],
    )
    .await?;
    Ok(())
}

/// InterPodAffinity (required anti-affinity, hostname topology): `app=db` pods repel each other,
/// so the second goes to the node the first left free and the third finds no node.
#[tokio::test]
async fn pod_anti_affinity_required_hostname() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-anti-affinity").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let placer = env.start_standalone("placer", &[]).await?;
    let anti = json!({ "affinity": { "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": { "matchLabels": { "app": "db" } }, "topologyKey": HOSTNAME,
        }],
    } } });
    let db = |name: &str| env.pod(name).label("app", "db");

    env.create_pod_with_spec(&db("db-0"), anti.clone()).await?;
    let first = env.wait_pod_bound("db-0").await?;
    let other = nodes.iter().find(|n| **n != first).expect("two nodes");
    env.create_pod_with_spec(&db("db-1"), anti.clone()).await?;
    assert_eq!(&env.wait_pod_bound("db-1").await?, other);
    assert_scheduled_event(&env, &placer, "db-1", other).await?;

    env.create_pod_with_spec(&db("db-2"), anti).await?;
    assert_unschedulable(&env, "db-2", &[(2, ANTI_AFFINITY)], &[(2, NO_VICTIMS)]).await?;
    Ok(())
}

/// InterPodAffinity with a `namespaceSelector` (decided from namespace labels placer watches):
/// the API server labels every namespace `kubernetes.io/metadata.name=<name>`, so a required
/// anti-affinity term selecting this test's namespace by that label counts `db-0`, and `db-1`
/// goes to the other node; a term selecting another namespace does not count `db-0` or
/// `db-1`, and with both nodes holding one, a pod whose term selects this namespace finds none.
#[tokio::test]
async fn pod_anti_affinity_namespace_selector() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-ns-selector").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let placer = env.start_standalone("placer", &[]).await?;
    let anti = |namespace: &str| {
        json!({ "affinity": { "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": { "matchLabels": { "app": "db" } }, "topologyKey": HOSTNAME,
                "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": namespace } },
            }],
        } } })
    };
    let db = |name: &str| env.pod(name).label("app", "db");
    let own = anti(env.namespace());

    env.create_pod_with_spec(&db("db-0"), own.clone()).await?;
    let first = env.wait_pod_bound("db-0").await?;
    let other = nodes.iter().find(|n| **n != first).expect("two nodes");
    env.create_pod_with_spec(&db("db-1"), own.clone()).await?;
    assert_eq!(&env.wait_pod_bound("db-1").await?, other);
    assert_scheduled_event(&env, &placer, "db-1", other).await?;

    // Selecting only kube-system, this pod's own term ignores db-0 and db-1 (theirs do not
    // select it either: it is not app=db).
    env.create_pod_with_spec(&env.pod("elsewhere"), anti("kube-system"))
        .await?;
    assert!(nodes.contains(&env.wait_pod_bound("elsewhere").await?));

    env.create_pod_with_spec(&db("db-2"), own).await?;
    assert_unschedulable(&env, "db-2", &[(2, ANTI_AFFINITY)], &[(2, NO_VICTIMS)]).await?;
    Ok(())
}

/// A PersistentVolume reachable only from `node` (local-volume style, by hostname), already
/// claimed by `claim`, and that claim bound to it as the PV controller would leave it (there is
/// no controller manager here): `spec.volumeName` plus the `bind-completed` annotation.
async fn bound_local_volume(env: &TestEnv, claim: &str, node: &str) -> anyhow::Result<String> {
    let pv_name = env.name(&format!("pv-{claim}"));
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": pv_name },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "local": { "path": "/mnt/data" },
            "claimRef": { "namespace": env.namespace(), "name": claim },
            "nodeAffinity": { "required": { "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": HOSTNAME, "operator": "In", "values": [node] },
            ] }] } },
        },
    }))?;
    Api::<PersistentVolume>::all(env.client().clone())
        .create(&PostParams::default(), &pv)
        .await
        .with_context(|| format!("create {pv_name}"))?;
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": claim,
                      "annotations": { "pv.kubernetes.io/bind-completed": "yes" } },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": { "requests": { "storage": "1Gi" } },
        },
    }))?;
    Api::<PersistentVolumeClaim>::namespaced(env.client().clone(), env.namespace())
        .create(&PostParams::default(), &pvc)
        .await
        .with_context(|| format!("create claim {claim}"))?;
    Ok(pv_name)
}

/// A pod spec with one volume using claim `claim`.
pub(super) fn claim_volume(claim: &str) -> Value {
    json!({ "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": claim } }] })
}

/// VolumeBinding: pods whose claim is bound to a volume pinned to `n2` all go to `n2`, never to
/// the otherwise equal `n1` (tie rotation would alternate). A pod whose claim does not exist gets
/// kube-scheduler's "persistentvolumeclaim ... not found", stated once; when the claim appears,
/// bound to a volume on `n1`, the pod is retried and lands on `n1`.
#[tokio::test]
async fn volume_binding_follows_bound_volumes() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-volumes").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    bound_local_volume(&env, "data", &nodes[1]).await?;
    let placer = env.start_standalone("placer", &[]).await?;

    for name in ["db-0", "db-1", "db-2"] {
        env.create_pod_with_spec(&env.pod(name), claim_volume("data"))
            .await?;
        assert_eq!(env.wait_pod_bound(name).await?, nodes[1], "{name}");
    }
    assert_scheduled_event(&env, &placer, "db-2", &nodes[1]).await?;

    env.create_pod_with_spec(&env.pod("late"), claim_volume("later"))
        .await?;
    let event = env.wait_pod_event("late", "FailedScheduling").await?;
    let message = event.message.unwrap_or_default();
    eprintln!("late: FailedScheduling: {message}");
    let total = message
        .strip_prefix("0/")
        .and_then(|m| m.split_once(' '))
        .and_then(|(n, _)| n.parse::<usize>().ok())
        .unwrap_or(0);
    assert!(total >= 2, "{message}");
    // A PreFilter rejection is stated once. The shipped profile runs DynamicResources, whose
    // PreFilter never ran (VolumeBinding's rejected first): its PostFilter then fails with the
    // cycle state's "not found" and ends PostFilter before DefaultPreemption, which is what
    // kube-scheduler v1.37 writes in the same case (the differential e2e compares it).
    assert_eq!(
        message,
        format!(
            "0/{total} nodes are available: persistentvolumeclaim \"later\" not found. not found"
        )
    );
    let condition = env.wait_pod_unschedulable("late").await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    env.assert_stays_unbound("late", STAYS_PENDING).await?;

    bound_local_volume(&env, "later", &nodes[0]).await?;
    assert_eq!(env.wait_pod_bound("late").await?, nodes[0]);
    Ok(())
}
