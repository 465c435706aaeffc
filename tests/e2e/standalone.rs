//! placer as the only scheduler of the test's pods (`serve --mode standalone`), running the
//! standalone profile shipped in `policy.yaml` under the test's scheduler name.
//!
//! Each test asserts where pods were bound, or why not, in the words kube-scheduler would use:
//! the `Scheduled` event's note, the `FailedScheduling` event's FitError text (see
//! [`check_fit_error`] for how other tests' nodes in the shared cluster enter it) and the pod's
//! `PodScheduled` condition. Further: a bind that the API server refuses (placer runs with an
//! identity that may not create `pods/binding`) is rolled back and retried with backoff; two
//! replicas with `--leader-elect` hand over on a crash and on SIGTERM without binding a pod twice.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::harness::logs::{field, lines_with};
use crate::harness::{
    HW_REASON, NO_VICTIMS, NOT_HELPFUL, Placer, PodBuilder, REPORTING_CONTROLLER,
    SCHEDULING_TIMEOUT, TestEnv, ZONE_LABEL, ZONE_LAYOUT, check_fit_error,
    shipped_leader_election_rules, shipped_standalone_rules,
};

/// Pod annotation of the shipped standalone profile's CapabilityFilter rule (`policy.yaml`).
const SHIPPED_HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";
/// Node label of that rule.
const SHIPPED_HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";
/// The label kube-scheduler's hostname topology and placer's node builders use.
const HOSTNAME: &str = "kubernetes.io/hostname";
/// kube-scheduler's reasons, as placer must word them.
const INSUFFICIENT_CPU: &str = "Insufficient cpu";
const UNTOLERATED_TAINT: &str = "node(s) had untolerated taint(s)";
const SELECTOR_MISMATCH: &str = "node(s) didn't match Pod's node affinity/selector";
const PORTS_TAKEN: &str = "node(s) didn't have free ports for the requested pod ports";
const SPREAD_VIOLATED: &str = "node(s) didn't match pod topology spread constraints";
const ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// How long a pod that must not be bound is watched after it was reported unschedulable.
const STAYS_PENDING: Duration = Duration::from_secs(2);
/// kube-scheduler's (and placer's) leader-election lease duration.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often a candidate looks at the Lease: the 2 s retry period plus up to 0.4 s of jitter.
const RETRY_PERIOD: Duration = Duration::from_millis(2400);

/// A replica's identity in the Lease and in its events, as its latest start logged it (no
/// `POD_NAME` here, so it is `<hostname>_<unique id>`, new at every start).
fn identity(placer: &Placer) -> String {
    let lines =
        lines_with(placer.log_path(), &["standalone scheduling enabled"]).unwrap_or_default();
    let id = lines
        .last()
        .and_then(|l| field(l, "identity"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        id.contains('_'),
        "no identity logged by {}",
        placer.log_path().display()
    );
    id
}

/// The pod has exactly one `Scheduled` event, reported by `placer` (instance: the replica's identity),
/// with the note "Successfully assigned <ns>/<pod> to <node>", never repeated.
async fn assert_scheduled_event(
    env: &TestEnv,
    placer: &Placer,
    pod: &str,
    node: &str,
) -> anyhow::Result<()> {
    env.wait_pod_event(pod, "Scheduled").await?;
    let events = env.pod_events(pod, "Scheduled").await?;
    assert_eq!(events.len(), 1, "{pod}: Scheduled events {events:#?}");
    let e = &events[0];
    let expected = format!("Successfully assigned {}/{pod} to {node}", env.namespace());
    assert_eq!(e.message.as_deref(), Some(expected.as_str()));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.action.as_deref(), Some("Binding"));
    assert_eq!(e.reporting_component.as_deref(), Some(REPORTING_CONTROLLER));
    assert_eq!(
        e.reporting_instance.as_deref(),
        Some(identity(placer).as_str())
    );
    assert!(
        e.series.is_none() && e.count.unwrap_or(1) <= 1,
        "{pod}: Scheduled event repeated: {e:#?}"
    );
    Ok(())
}

/// The pod stays unbound with a `FailedScheduling` event (from `placer`) and a
/// `PodScheduled=False` condition (reason `Unschedulable`) whose texts are kube-scheduler's
/// FitError for the test's nodes failing with `own` (see [`check_fit_error`]). Returns the
/// event's message.
async fn assert_unschedulable(
    env: &TestEnv,
    pod: &str,
    own: &[(usize, &str)],
    preemption: &[(usize, &str)],
) -> anyhow::Result<String> {
    let event = env.wait_pod_event(pod, "FailedScheduling").await?;
    let message = event.message.clone().unwrap_or_default();
    eprintln!("{pod}: FailedScheduling: {message}");
    // The shipped profile runs DefaultPreemption, so the message always has its part.
    let total = check_fit_error(&message, own, Some(preemption))?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.action.as_deref(), Some("Scheduling"));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some(REPORTING_CONTROLLER)
    );
    let condition = env.wait_pod_unschedulable(pod).await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    let condition_message = condition.message.unwrap_or_default();
    // The event keeps the note of the first attempt (events.k8s.io series keep their note); the
    // condition shows the latest attempt, which differs only if other tests added nodes since.
    if check_fit_error(&condition_message, own, Some(preemption))? == total {
        assert_eq!(condition_message, message, "{pod}: condition vs event");
    }
    env.assert_stays_unbound(pod, STAYS_PENDING).await?;
    Ok(message)
}

/// A pod for the test's scheduler pinned to `node` by its hostname label.
fn pinned(env: &TestEnv, name: &str, node: &str) -> PodBuilder {
    env.pod(name).node_selector(HOSTNAME, node)
}

/// The one container of every test pod, with `ports`.
fn container_with_ports(ports: Value) -> Value {
    json!([{ "name": "main", "image": "registry.k8s.io/pause:3.10", "ports": ports }])
}

// ---------------------------------------------------------------------------------------------
// The business scenarios, with every safety plugin of the shipped profile active.
// ---------------------------------------------------------------------------------------------

// ZONE_LAYOUT's five priority-1000 pods also make zone b's node the most loaded one for
// NodeResourcesFit, which ZoneSpread's weight 2 outweighs.

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
fn claim_volume(claim: &str) -> Value {
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
    // A PreFilter rejection is stated once; preemption cannot help on any node.
    assert_eq!(
        message,
        format!(
            "0/{total} nodes are available: persistentvolumeclaim \"later\" not found. \
             preemption: 0/{total} nodes are available: {total} Preemption is not helpful for \
             scheduling."
        )
    );
    let condition = env.wait_pod_unschedulable("late").await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    env.assert_stays_unbound("late", STAYS_PENDING).await?;

    bound_local_volume(&env, "later", &nodes[0]).await?;
    assert_eq!(env.wait_pod_bound("late").await?, nodes[0]);
    Ok(())
}

/// Polls `pod` until it is bound; returns the `status.nominatedNodeName` seen meanwhile (the
/// last one) and the node.
async fn nomination_then_node(
    env: &TestEnv,
    pod: &str,
) -> anyhow::Result<(Option<String>, String)> {
    let deadline = Instant::now() + SCHEDULING_TIMEOUT;
    let mut nominated = None;
    while Instant::now() < deadline {
        let p = env.pods().get(pod).await?;
        if let Some(n) = p.status.and_then(|s| s.nominated_node_name) {
            nominated = Some(n);
        }
        if let Some(node) = p.spec.and_then(|s| s.node_name) {
            return Ok((nominated, node));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("{pod} not bound within {SCHEDULING_TIMEOUT:?}")
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
    let uid = preemptor.metadata.uid.unwrap_or_default();
    // The nomination is visible between the preemption and the bind (the API server clears
    // `nominatedNodeName` when it binds the pod), a second or more given the backoff.
    let (nominated, node) = nomination_then_node(&env, "preemptor").await?;
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

    env.create_pod(
        &env.pod("preemptor")
            .priority_class(&high)
            .request("cpu", "2"),
    )
    .await?;
    let (nominated, node) = nomination_then_node(&env, "preemptor").await?;
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
/// `PodScheduled` condition (`SchedulerError`) say "binding rejected: ..." with the API server's
/// refusal; the bind-failure metric counts; attempts repeat, with backoff (not in a hot loop).
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
    let ns = env.namespace();

    env.create_pod(&env.pod("p1").request("cpu", "3")).await?;
    let event = env.wait_pod_event("p1", "FailedScheduling").await?;
    let message = event.message.unwrap_or_default();
    eprintln!("p1: FailedScheduling: {message}");
    let rejected = format!("binding rejected: binding pod {ns}/p1 to node {node} failed: ");
    assert!(message.starts_with(&rejected), "{message}");
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
            .is_some_and(|m| m.starts_with(&rejected)),
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
    let rejected2 = format!("binding rejected: binding pod {ns}/p2 to node {node} failed: ");
    env.wait_unschedulable_message("p2", &rejected2).await?;

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

/// `--leader-elect` flags for a Lease `name` in the test's namespace.
fn leader_args(env: &TestEnv, lease: &str) -> Vec<String> {
    vec![
        "--leader-elect".into(),
        format!("--leader-elect-namespace={}", env.namespace()),
        format!("--leader-elect-lease={lease}"),
    ]
}

/// Starts two replicas `placer-a` and `placer-b` electing through `lease`, with the identity
/// of `kubeconfig`.
async fn two_replicas(
    env: &TestEnv,
    lease: &str,
    kubeconfig: &Path,
) -> anyhow::Result<[Placer; 2]> {
    let args = leader_args(env, lease);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let a = env
        .start_standalone_as("placer-a", &args, kubeconfig)
        .await?;
    let b = env
        .start_standalone_as("placer-b", &args, kubeconfig)
        .await?;
    Ok([a, b])
}

/// Waits until one replica holds the Lease (by identity) and says so in `placer_leader`, the
/// other saying 0; returns the leader's index.
async fn wait_leader(env: &TestEnv, lease: &str, replicas: &[&Placer]) -> anyhow::Result<usize> {
    env.poll(
        &format!("one replica to hold Lease {lease}"),
        LEASE_DURATION * 2,
        || async {
            let holder = env.lease_holder(lease).await?;
            let mut gauges = Vec::new();
            for r in replicas {
                gauges.push(r.metric("placer_leader").await?.unwrap_or(-1.0));
            }
            let leader = replicas
                .iter()
                .position(|r| holder.as_deref() == Some(identity(r).as_str()));
            Ok(match leader {
                Some(i)
                    if gauges
                        .iter()
                        .enumerate()
                        .all(|(j, g)| *g == f64::from(i == j)) =>
                {
                    ControlFlow::Break(i)
                }
                _ => ControlFlow::Continue(format!("holder {holder:?}, placer_leader {gauges:?}")),
            })
        },
    )
    .await
}

/// Polls the Lease every 100 ms until `identity` holds it; returns how long that took.
async fn wait_holder(env: &TestEnv, lease: &str, identity: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    env.poll_every(
        &format!("{identity} to hold Lease {lease}"),
        LEASE_DURATION * 2,
        Duration::from_millis(100),
        || async {
            Ok(match env.lease_holder(lease).await? {
                Some(h) if h == identity => ControlFlow::Break(start.elapsed()),
                other => ControlFlow::Continue(format!("holder {other:?}")),
            })
        },
    )
    .await
}

/// Creates pods `<prefix>-0..count` for the test's scheduler.
async fn create_pods(env: &TestEnv, prefix: &str, count: usize) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        env.create_pod(&env.pod(&name)).await?;
        names.push(name);
    }
    Ok(names)
}

/// How many "bound pod" lines for `pod` each replica logged.
fn bind_lines(env: &TestEnv, replicas: &[&Placer], pod: &str) -> anyhow::Result<Vec<usize>> {
    let key = format!("{}/{pod}", env.namespace());
    replicas
        .iter()
        .map(|r| {
            Ok(lines_with(r.log_path(), &["bound pod"])?
                .iter()
                .filter(|l| field(l, "pod") == Some(key.as_str()))
                .count())
        })
        .collect()
}

/// Waits for the pod's `Scheduled` event: it follows the binding, asynchronously, so it can lag
/// behind `spec.nodeName` on a loaded machine.
async fn wait_scheduled_event(env: &TestEnv, pod: &str) -> anyhow::Result<()> {
    env.poll(
        &format!("the Scheduled event of {pod}"),
        SCHEDULING_TIMEOUT,
        || async {
            let n = env.pod_events(pod, "Scheduled").await?.len();
            Ok(if n > 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("{pod}: {n} events"))
            })
        },
    )
    .await
}

/// Two replicas with `--leader-elect`: exactly one holds the Lease and schedules. After a
/// `kill -9` of the leader the other takes over once the lease has lapsed, and binds the pods
/// created meanwhile. As in client-go, a candidate times the lease from when it last saw the
/// record change (up to one retry period after the last renewal) and checks once per retry
/// period, so the takeover takes the lease duration plus up to two retry periods. No pod is bound
/// twice: each pod has exactly one "bound pod" log line across both replicas, from the replica
/// that led at the time, and exactly one `Scheduled` event.
#[tokio::test]
async fn leader_failover_after_kill() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-leader-kill").await?;
    let nodes = env
        .create_nodes([env.node("n1"), env.node("n2"), env.node("n3")])
        .await?;
    let lease = "placer-e2e";
    let mut replicas = two_replicas(&env, lease, env.cluster().kubeconfig()).await?;
    let leader = wait_leader(&env, lease, &[&replicas[0], &replicas[1]]).await?;
    let follower = 1 - leader;
    let follower_id = identity(&replicas[follower]);
    eprintln!(
        "leader: {} ({}), follower: {follower_id}",
        ["placer-a", "placer-b"][leader],
        identity(&replicas[leader])
    );

    let before = create_pods(&env, "before", 4).await?;
    for pod in &before {
        assert!(nodes.contains(&env.wait_pod_bound(pod).await?));
        // A SIGKILLed scheduler (placer or kube-scheduler alike) loses events
        // it has not sent yet, so kill the leader only once they are in.
        wait_scheduled_event(&env, pod).await?;
    }

    let killed = Instant::now();
    replicas[leader].kill();
    let after = create_pods(&env, "after", 4).await?;
    let takeover = wait_holder(&env, lease, &follower_id).await?;
    eprintln!("takeover after kill -9 of the leader: {takeover:?}");
    assert!(
        takeover <= LEASE_DURATION + RETRY_PERIOD * 2 + Duration::from_secs(2),
        "takeover took {takeover:?}"
    );
    for pod in &after {
        assert!(nodes.contains(&env.wait_pod_bound(pod).await?));
    }
    eprintln!(
        "pods created at the kill all bound {:?} after it",
        killed.elapsed()
    );
    assert_eq!(replicas[follower].metric("placer_leader").await?, Some(1.0));

    let both = [&replicas[0], &replicas[1]];
    for pod in &after {
        wait_scheduled_event(&env, pod).await?;
    }
    for (pods, by) in [(&before, leader), (&after, follower)] {
        for pod in pods {
            let mut expected = vec![0, 0];
            expected[by] = 1;
            assert_eq!(
                bind_lines(&env, &both, pod)?,
                expected,
                "\"bound pod\" lines for {pod} in placer-a, placer-b"
            );
            let events = env.pod_events(pod, "Scheduled").await?;
            assert_eq!(events.len(), 1, "{pod}: Scheduled events {events:#?}");
            assert!(events[0].series.is_none(), "{pod}: {events:#?}");
        }
    }
    Ok(())
}

/// SIGTERM to the leader: it stops scheduling, releases the Lease and exits; the Lease is then
/// free (or already held by the other replica), and the other replica takes over within a retry
/// period, far sooner than the 15 s a crash costs, and schedules. Both replicas run with the
/// shipped RBAC rules only (the scheduler's ClusterRole and the leader-election Role's rules,
/// the latter granted cluster-wide here), so those rules are enough for all of it.
#[tokio::test]
async fn leader_releases_lease_on_sigterm() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-leader-term").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let mut rules = shipped_standalone_rules()?;
    let election = shipped_leader_election_rules()?;
    rules
        .as_array_mut()
        .expect("rules are a list")
        .extend(election.as_array().into_iter().flatten().cloned());
    let kubeconfig = env.restricted_kubeconfig("placer", rules).await?;
    let lease = "placer-e2e";
    let mut replicas = two_replicas(&env, lease, &kubeconfig).await?;
    let leader = wait_leader(&env, lease, &[&replicas[0], &replicas[1]]).await?;
    let follower = 1 - leader;
    let (leader_id, follower_id) = (identity(&replicas[leader]), identity(&replicas[follower]));
    let log = replicas[leader].log_path().to_owned();

    env.create_pod(&env.pod("before")).await?;
    assert!(nodes.contains(&env.wait_pod_bound("before").await?));

    let terminated = Instant::now();
    replicas[leader].stop();
    let exited = terminated.elapsed();
    eprintln!("leader exited {exited:?} after SIGTERM");
    let released = lines_with(&log, &["released the scheduling Lease"])?;
    assert_eq!(released.len(), 1, "the leader did not log the release");
    assert!(
        !lines_with(&log, &["placer stopped"])?.is_empty(),
        "the leader did not stop by itself within the grace period"
    );
    let holder = env.lease_holder(lease).await?;
    eprintln!("Lease holder right after the leader exited: {holder:?}");
    assert_ne!(holder.as_deref(), Some(leader_id.as_str()));

    let takeover = wait_holder(&env, lease, &follower_id).await?;
    let takeover = takeover + exited;
    eprintln!("takeover after SIGTERM of the leader: {takeover:?}");
    assert!(
        takeover <= RETRY_PERIOD + Duration::from_secs(2),
        "takeover took {takeover:?}"
    );
    env.create_pod(&env.pod("after")).await?;
    let node = env.wait_pod_bound("after").await?;
    assert!(nodes.contains(&node));
    assert_scheduled_event(&env, &replicas[follower], "after", &node).await
}
