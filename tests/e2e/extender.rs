//! Stock kube-scheduler calling placer as a scheduler extender: the business scenarios, each run
//! with both node shapes (`node_names`: `nodeCacheCapable: true`; `full_nodes`: `false`).
//!
//! Each scenario asserts where pods were bound, or why not. Scores only matter when at least two
//! nodes are feasible (kube-scheduler skips prioritize for a single feasible node), and the
//! expected winner always scores strictly higher (kube-scheduler breaks ties at random).
//!
//! With full nodes kube-scheduler v1.37 scores the nodes an extender filter returned as if no pod
//! ran on them (kubernetes/kubernetes#141781), so no scenario relies on a pod-load-based in-tree
//! score: in-tree preferences come from node taints instead.

use std::time::Duration;

use serde_json::json;

use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, HW_REASON, NodeShape, Policy, ScorePlugins, TestEnv,
    ZONE_LAYOUT, capability_policy, per_node_shape, zone_spread_policy,
};

per_node_shape! {
    /// New pods go to the zone with the fewest pods of their own priority.
    zone_spread_prefers_emptiest_zone => zone_spread_prefers_emptiest_zone;
    /// With `reverse: true` new pods go to the fullest zone (bin-packing).
    zone_spread_reverse_prefers_fullest_zone => zone_spread_reverse_prefers_fullest_zone;
    /// Latency-sensitive pods go to the fast-network node; other pods are not steered.
    net_qos_steers_only_latency_sensitive_pods => net_qos_steers_only_latency_sensitive_pods;
    /// Annotated pods land only on the labelled node.
    capability_filter_places_only_on_labelled_node => capability_filter_places_only_on_labelled_node;
    /// Annotated pods stay pending with placer's reason until a node gets the label.
    capability_filter_pending_until_node_labelled => capability_filter_pending_until_node_labelled;
}

/// Starts the rig for `policy`, kube-scheduler sending nodes to placer in `shape`.
async fn rig(
    env: &TestEnv,
    policy: &Policy,
    score: ScorePlugins,
    shape: NodeShape,
) -> anyhow::Result<ExtenderRig> {
    ExtenderRig::start(env, policy, score, |e| e.node_shape(shape)).await
}

/// Runs [`ZONE_LAYOUT`] with `ZoneSpread` (`reverse` as given) as the only score, schedules one
/// priority-0 pod and returns the zone it landed in.
async fn zone_spread_pick(
    test: &str,
    reverse: bool,
    shape: NodeShape,
) -> anyhow::Result<&'static str> {
    let env = TestEnv::new(&format!("{test}-{}", shape.label())).await?;
    let nodes = env.create_zone_layout(&ZONE_LAYOUT).await?;
    let policy = zone_spread_policy(&env, reverse);
    let _rig = rig(&env, &policy, ScorePlugins::Only(vec![]), shape).await?;

    env.create_pod(&env.pod("new")).await?;
    let node = env.wait_pod_bound("new").await?;
    nodes
        .iter()
        .position(|n| *n == node)
        .map(|i| ZONE_LAYOUT[i].zone)
        .ok_or_else(|| anyhow::anyhow!("bound to foreign node {node}"))
}

async fn zone_spread_prefers_emptiest_zone(shape: NodeShape) -> anyhow::Result<()> {
    let zone = zone_spread_pick("zone-spread", false, shape).await?;
    assert_eq!(zone, "b", "expected the emptiest same-priority zone");
    Ok(())
}

async fn zone_spread_reverse_prefers_fullest_zone(shape: NodeShape) -> anyhow::Result<()> {
    let zone = zone_spread_pick("zone-spread-reverse", true, shape).await?;
    assert_eq!(zone, "a", "expected the fullest same-priority zone");
    Ok(())
}

/// A latency-sensitive pod lands on the `net=high` node although kube-scheduler's own
/// `TaintToleration` score prefers the other two (`net=high` carries a `PreferNoSchedule` taint):
/// placer's weight-2 score outweighs it (high: 0 + 2×10×10 = 200; unlabelled: 100 + 2×1×10 = 120;
/// low: 100 + 0). A pod without the label is not steered (NetQoS is skipped for it), so the taint
/// alone keeps it off `net=high`.
async fn net_qos_steers_only_latency_sensitive_pods(shape: NodeShape) -> anyhow::Result<()> {
    let env = TestEnv::new(&format!("net-qos-{}", shape.label())).await?;
    let nodes = env
        .create_nodes([
            env.node("high").label("net", "high").taint(
                "e2e.placer.io/busy",
                "true",
                "PreferNoSchedule",
            ),
            env.node("low").label("net", "low"),
            env.node("plain"),
        ])
        .await?;
    let high = &nodes[0];
    let policy = Policy::new(&env.scheduler_name()).plugin(
        "NetQoS",
        Some(1),
        json!({
            "podLabel": "qos", "podValue": "latency-sensitive", "nodeLabel": "net",
            "tiers": { "high": 100, "low": 0 }, "unlabeledScore": 10,
        }),
    );
    let score = ScorePlugins::Only(vec![("TaintToleration".into(), 1)]);
    let _rig = ExtenderRig::start(&env, &policy, score, |e| e.node_shape(shape).weight(2)).await?;

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

/// Annotated pods land only on the labelled node; pods without the annotation are not filtered.
async fn capability_filter_places_only_on_labelled_node(shape: NodeShape) -> anyhow::Result<()> {
    let env = TestEnv::new(&format!("capability-{}", shape.label())).await?;
    let nodes = env
        .create_nodes([
            env.node("hw").label(HW_LABEL, "true"),
            env.node("n2"),
            env.node("n3"),
        ])
        .await?;
    let _rig = rig(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        shape,
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
/// placer's reason for each node; labelling a node later gets it scheduled there, with no
/// further cluster event (placer prompts kube-scheduler if it saw the label after it did).
async fn capability_filter_pending_until_node_labelled(shape: NodeShape) -> anyhow::Result<()> {
    let env = TestEnv::new(&format!("capability-pending-{}", shape.label())).await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let _rig = rig(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        shape,
    )
    .await?;

    env.create_pod(&env.pod("secure").annotation(HW_ANNOTATION, "true"))
        .await?;
    let message = env.wait_failed_scheduling("secure", HW_REASON).await?;
    eprintln!("FailedScheduling ({shape:?}): {message}");
    assert!(
        message.starts_with("0/") && message.contains(&format!("2 {HW_REASON}")),
        "unexpected event message: {message}"
    );
    let condition = env.wait_pod_unschedulable("secure").await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    env.assert_stays_unbound("secure", Duration::from_secs(3))
        .await?;

    env.label_node(&nodes[1], HW_LABEL, "true").await?;
    assert_eq!(env.wait_pod_bound("secure").await?, nodes[1]);
    Ok(())
}
