//! placer's cache follows the cluster: a node moved to another zone, deleted pods and a node in a
//! new zone show up in `/debug/zones` within [`FRESHNESS_BOUND`] of the API call returning, and
//! the next pod kube-scheduler places through placer goes to the zone that is now the emptiest.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::harness::{
    ExtenderRig, Placer, SCHEDULING_TIMEOUT, ScorePlugins, TestEnv, ZONE_LABEL, ZonePods,
    zone_spread_policy,
};

/// Upper bound for placer to reflect one change (generous: watch events arrive in milliseconds).
const FRESHNESS_BOUND: Duration = Duration::from_secs(5);

/// How often placer's view is polled while a change is being timed.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Priority-0 pods per zone at the start: a = 1, b = 3, c = 4.
const LAYOUT: [ZonePods; 3] = [
    ZonePods {
        zone: "a",
        same_priority: 1,
        other_priority: 0,
    },
    ZonePods {
        zone: "b",
        same_priority: 3,
        other_priority: 0,
    },
    ZonePods {
        zone: "c",
        same_priority: 4,
        other_priority: 0,
    },
];

/// Zone suffix → (nodes, counted priority-0 pods), for this test's zones only.
type ZoneView = BTreeMap<String, (u64, u64)>;

/// placer's `/debug/zones` reduced to the test's zones (zones without nodes and pods left out).
async fn zone_view(env: &TestEnv, placer: &Placer) -> anyhow::Result<ZoneView> {
    let dimensions = placer.get_json("/debug/zones").await?;
    let prefix = env.zone("");
    let mut view = ZoneView::new();
    for dimension in dimensions
        .as_array()
        .context("/debug/zones is not an array")?
    {
        let zones = dimension["zones"].as_object().context("no zones object")?;
        for (zone, numbers) in zones {
            let Some(zone) = zone.strip_prefix(&prefix) else {
                continue;
            };
            let nodes = numbers["nodes"].as_u64().unwrap_or(0);
            let pods = numbers["pods"]["priority=0"].as_u64().unwrap_or(0);
            if nodes + pods > 0 {
                view.insert(zone.to_owned(), (nodes, pods));
            }
        }
    }
    Ok(view)
}

/// Waits until placer's view of the test's zones is `expected` (`(zone, nodes, pods)`), polling
/// every [`POLL_INTERVAL`]; returns the time elapsed since `since`.
async fn wait_zone_view(
    env: &TestEnv,
    placer: &Placer,
    expected: &[(&str, u64, u64)],
    since: Instant,
) -> anyhow::Result<Duration> {
    let expected: ZoneView = expected
        .iter()
        .map(|&(zone, nodes, pods)| (zone.to_owned(), (nodes, pods)))
        .collect();
    env.poll_every(
        &format!("placer's /debug/zones to show {expected:?}"),
        SCHEDULING_TIMEOUT,
        POLL_INTERVAL,
        || async {
            let view = zone_view(env, placer).await?;
            Ok(if view == expected {
                ControlFlow::Break(since.elapsed())
            } else {
                ControlFlow::Continue(format!("{view:?}"))
            })
        },
    )
    .await
}

/// Runs `change` (API calls), then times how long placer takes to show `expected`; prints the
/// time and checks it against [`FRESHNESS_BOUND`].
async fn timed_change(
    env: &TestEnv,
    placer: &Placer,
    what: &str,
    change: impl Future<Output = anyhow::Result<()>>,
    expected: &[(&str, u64, u64)],
) -> anyhow::Result<()> {
    change.await?;
    let took = wait_zone_view(env, placer, expected, Instant::now()).await?;
    eprintln!("cache freshness: {what}: placer reflected it {took:?} after the API call returned");
    assert!(
        took < FRESHNESS_BOUND,
        "{what}: placer took {took:?} (bound {FRESHNESS_BOUND:?})"
    );
    Ok(())
}

/// Schedules a new priority-0 pod and returns the node it was bound to.
async fn schedule(env: &TestEnv, name: &str) -> anyhow::Result<String> {
    env.create_pod(&env.pod(name)).await?;
    env.wait_pod_bound(name).await
}

/// (a) Node `a` relabelled into zone c (1 + 4 pods): b (3) becomes the emptiest zone.
/// (b) The 4 pods on node `c` deleted with grace 0: zone c (1) becomes the emptiest again.
/// (c) Node `d` added in the new, empty zone d: it becomes the emptiest.
/// After each change placer's view is timed, then a new pod must land in that emptiest zone.
#[tokio::test]
async fn cache_follows_relabel_pod_deletion_and_new_node() -> anyhow::Result<()> {
    let env = TestEnv::new("freshness").await?;
    let nodes = env.create_zone_layout(&LAYOUT).await?;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let rig = ExtenderRig::start(
        &env,
        &zone_spread_policy(&env, false),
        ScorePlugins::Only(vec![]),
        |e| e,
    )
    .await?;
    let placer = &rig.placer;
    let start = [("a", 1, 1), ("b", 1, 3), ("c", 1, 4)];
    wait_zone_view(&env, placer, &start, Instant::now()).await?;

    let zone_c = env.zone("c");
    let relabel = env.label_node(a, ZONE_LABEL, &zone_c);
    timed_change(
        &env,
        placer,
        "node relabelled into another zone",
        relabel,
        &[("b", 1, 3), ("c", 2, 5)],
    )
    .await?;
    assert_eq!(
        &schedule(&env, "after-relabel").await?,
        b,
        "expected zone b"
    );
    wait_zone_view(&env, placer, &[("b", 1, 4), ("c", 2, 5)], Instant::now()).await?;

    let deleted: Vec<String> = (0..4).map(|i| format!("same-c-{i}")).collect();
    let deleted: Vec<&str> = deleted.iter().map(String::as_str).collect();
    let delete = env.delete_pods(&deleted);
    timed_change(
        &env,
        placer,
        "4 pods deleted (grace 0)",
        delete,
        &[("b", 1, 4), ("c", 2, 1)],
    )
    .await?;
    let node = schedule(&env, "after-delete").await?;
    assert!(
        node == *a || node == *c,
        "expected zone c (nodes a, c), got {node}"
    );
    wait_zone_view(&env, placer, &[("b", 1, 4), ("c", 2, 2)], Instant::now()).await?;

    let d = env.node("d").label(ZONE_LABEL, &env.zone("d"));
    let add = async { env.create_nodes([d.clone()]).await.map(drop) };
    timed_change(
        &env,
        placer,
        "node added in a new zone",
        add,
        &[("b", 1, 4), ("c", 2, 2), ("d", 1, 0)],
    )
    .await?;
    wait_scheduler_knows(&env, d.name()).await?;
    assert_eq!(
        schedule(&env, "after-add").await?,
        d.name(),
        "expected zone d"
    );
    Ok(())
}

/// Waits until kube-scheduler can place pods on `node`: its node informer and placer's watch are
/// independent, so placer may show a new node before kube-scheduler considers it. A pod pinned to
/// the node with priority 1000 (not counted for priority-0 pods) is scheduled once it does.
async fn wait_scheduler_knows(env: &TestEnv, node: &str) -> anyhow::Result<()> {
    let class = env.create_priority_class("probe", 1000).await?;
    let probe = env
        .pod("probe")
        .priority_class(&class)
        .node_selector("kubernetes.io/hostname", node);
    env.create_pod(&probe).await?;
    anyhow::ensure!(
        env.wait_pod_bound("probe").await? == node,
        "probe misplaced"
    );
    Ok(())
}
