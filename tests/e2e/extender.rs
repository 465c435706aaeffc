//! Stock kube-scheduler calling placer as a scheduler extender (`nodeCacheCapable: true`).
//!
//! Each scenario asserts where pods were bound, or why not. Scores only matter when at least two
//! nodes are feasible (kube-scheduler skips prioritize for a single feasible node), and the
//! expected winner always scores strictly higher (kube-scheduler breaks ties at random).

use std::time::Duration;

use serde_json::json;

use crate::harness::{ExtenderRig, Policy, ScorePlugins, TestEnv, ZONE_LABEL, ZonePods};

/// Pod priority-0 counts per zone: a = 3, b = 1, c = 2; zone b also runs five pods of priority
/// 1000, which `SamePriority` must ignore (counting them would make b the fullest zone).
const ZONE_LAYOUT: [ZonePods; 3] = [
    ZonePods {
        zone: "a",
        same_priority: 3,
        other_priority: 0,
    },
    ZonePods {
        zone: "b",
        same_priority: 1,
        other_priority: 5,
    },
    ZonePods {
        zone: "c",
        same_priority: 2,
        other_priority: 0,
    },
];

/// Runs [`ZONE_LAYOUT`] with `ZoneSpread` (`reverse` as given) as the only score, schedules one
/// priority-0 pod and returns the index of the zone it landed in.
async fn zone_spread_pick(test: &str, reverse: bool) -> anyhow::Result<usize> {
    let env = TestEnv::new(test).await?;
    let nodes = env.create_zone_layout(&ZONE_LAYOUT).await?;
    let policy = Policy::new(&env.scheduler_name()).plugin(
        "ZoneSpread",
        Some(2),
        json!({ "zoneLabel": ZONE_LABEL, "countPods": "SamePriority", "reverse": reverse }),
    );
    let _rig = ExtenderRig::start(&env, &policy, ScorePlugins::Only(vec![]), |e| e).await?;

    env.create_pod(&env.pod("new")).await?;
    let node = env.wait_pod_bound("new").await?;
    nodes
        .iter()
        .position(|n| *n == node)
        .ok_or_else(|| anyhow::anyhow!("bound to foreign node {node}"))
}

/// New pods go to the zone with the fewest pods of their own priority.
#[tokio::test]
async fn zone_spread_prefers_emptiest_zone() -> anyhow::Result<()> {
    let zone = zone_spread_pick("zone-spread", false).await?;
    assert_eq!(
        ZONE_LAYOUT[zone].zone, "b",
        "expected the emptiest same-priority zone"
    );
    Ok(())
}

/// With `reverse: true` new pods go to the fullest zone (bin-packing).
#[tokio::test]
async fn zone_spread_reverse_prefers_fullest_zone() -> anyhow::Result<()> {
    let zone = zone_spread_pick("zone-spread-reverse", true).await?;
    assert_eq!(
        ZONE_LAYOUT[zone].zone, "a",
        "expected the fullest same-priority zone"
    );
    Ok(())
}

/// A latency-sensitive pod lands on the `net=high` node although kube-scheduler's own
/// `NodeResourcesFit` score prefers the emptier `net=low` and unlabelled nodes; a pod without the
/// label is not steered, so that score alone keeps it off the loaded `net=high` node.
#[tokio::test]
async fn net_qos_steers_only_latency_sensitive_pods() -> anyhow::Result<()> {
    let env = TestEnv::new("net-qos").await?;
    let nodes = env
        .create_nodes([
            env.node("high").label("net", "high"),
            env.node("low").label("net", "low"),
            env.node("plain"),
        ])
        .await?;
    let high = &nodes[0];
    env.create_bound_pods("filler", high, 1, |p| p.request("cpu", "4"))
        .await?;
    let policy = Policy::new(&env.scheduler_name()).plugin(
        "NetQoS",
        Some(1),
        json!({
            "podLabel": "qos", "podValue": "latency-sensitive", "nodeLabel": "net",
            "tiers": { "high": 100, "low": 0 }, "unlabeledScore": 10,
        }),
    );
    let score = ScorePlugins::Only(vec![("NodeResourcesFit".into(), 1)]);
    let _rig = ExtenderRig::start(&env, &policy, score, |e| e).await?;

    env.create_pod(&env.pod("fast").label("qos", "latency-sensitive"))
        .await?;
    assert_eq!(
        &env.wait_pod_bound("fast").await?,
        high,
        "latency-sensitive pod not on net=high"
    );

    env.create_pod(&env.pod("plain")).await?;
    let node = env.wait_pod_bound("plain").await?;
    assert_ne!(
        &node, high,
        "a pod without qos=latency-sensitive was steered to net=high"
    );
    Ok(())
}

const HW_ANNOTATION: &str = "e2e.placer.io/require-hw-encrypt";
const HW_LABEL: &str = "e2e.placer.io/hw-encrypt";
const HW_REASON: &str = "node(s) lack hardware encryption";

/// A policy whose only plugin is `CapabilityFilter` with the hardware-encryption rule.
fn capability_policy(env: &TestEnv) -> Policy {
    Policy::new(&env.scheduler_name()).plugin(
        "CapabilityFilter",
        None,
        json!({ "rules": [{
            "podAnnotation": HW_ANNOTATION, "podValue": "true",
            "nodeLabel": HW_LABEL, "nodeValue": "true", "reason": HW_REASON,
        }] }),
    )
}

/// Annotated pods land only on the labelled node; pods without the annotation are not filtered.
#[tokio::test]
async fn capability_filter_places_only_on_labelled_node() -> anyhow::Result<()> {
    let env = TestEnv::new("capability").await?;
    let nodes = env
        .create_nodes([
            env.node("hw").label(HW_LABEL, "true"),
            env.node("n2"),
            env.node("n3"),
        ])
        .await?;
    let _rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
    )
    .await?;

    for i in 0..3 {
        env.create_pod(
            &env.pod(&format!("secure-{i}"))
                .annotation(HW_ANNOTATION, "true"),
        )
        .await?;
    }
    env.create_pod(&env.pod("ordinary")).await?;
    for i in 0..3 {
        assert_eq!(
            env.wait_pod_bound(&format!("secure-{i}")).await?,
            nodes[0],
            "secure-{i} not on the labelled node"
        );
    }
    assert!(nodes.contains(&env.wait_pod_bound("ordinary").await?));
    Ok(())
}

/// With no labelled node the annotated pod stays Pending and its `FailedScheduling` event carries
/// placer's reason; labelling a node later gets it scheduled there (nudging kube-scheduler with
/// further node events, see [`TestEnv::wait_pod_bound_nudging`] for why).
#[tokio::test]
async fn capability_filter_pending_until_node_labelled() -> anyhow::Result<()> {
    let env = TestEnv::new("capability-pending").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let _rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
    )
    .await?;

    env.create_pod(&env.pod("secure").annotation(HW_ANNOTATION, "true"))
        .await?;
    let message = env.wait_failed_scheduling("secure", HW_REASON).await?;
    eprintln!("FailedScheduling: {message}");
    assert!(
        message.contains("0/"),
        "unexpected event message: {message}"
    );
    let condition = env.wait_pod_unschedulable("secure").await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    env.assert_stays_unbound("secure", Duration::from_secs(3))
        .await?;

    env.label_node(&nodes[1], HW_LABEL, "true").await?;
    assert_eq!(
        env.wait_pod_bound_nudging("secure", &nodes[1]).await?,
        nodes[1]
    );
    Ok(())
}

/// While placer is down (and not ignorable) nothing is scheduled and the event names the
/// extender failure; after a restart on the same port the pending pod is scheduled.
#[tokio::test]
async fn placer_outage_blocks_scheduling_until_restart() -> anyhow::Result<()> {
    let env = TestEnv::new("outage").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let mut rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
    )
    .await?;

    rig.placer.kill();
    env.create_pod(&env.pod("waiting")).await?;
    let message = env
        .wait_failed_scheduling("waiting", &format!("127.0.0.1:{}", rig.placer.port()))
        .await?;
    eprintln!("FailedScheduling while placer is down: {message}");
    env.assert_stays_unbound("waiting", Duration::from_secs(2))
        .await?;

    rig.placer.restart().await?;
    assert!(nodes.contains(&env.wait_pod_bound("waiting").await?));
    Ok(())
}
