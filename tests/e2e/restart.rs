//! kube-apiserver killed and restarted (same port, same etcd data) under a running placer and
//! kube-scheduler, on a control plane of the test's own: placer stays ready and says which
//! watches are down, sees a change made right after the API server is back within the bound its
//! watch backoff sets ([`backoff_bound`]; the time is measured and printed), and a pod then
//! schedules through placer's filter onto the node created after the restart.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use placer::cache::watch_stream::{FIRST_RETRY, MAX_RETRY};
use serde_json::json;

use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, Placer, ScorePlugins, TestEnv, ZONE_LABEL,
    capability_policy,
};

/// How long the API server stays down (after placer noticed).
const OUTAGE: Duration = Duration::from_secs(3);
/// Slack on top of [`backoff_bound`] for a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(10);

/// The longest placer's watch backoff (client-go's: steps of 0.8 s doubling to 30 s, each wait up
/// to twice its step) can leave an API server that was away for `outage` unnoticed once it is
/// ready: the wait in progress then, whose step is at most the outage plus the first step (each
/// step is the sum of the ones before plus the first, and every wait is at least its step), and,
/// if the watch's resource version expired meanwhile (410), the relist's wait, one step further.
fn backoff_bound(outage: Duration) -> Duration {
    let step = (outage + FIRST_RETRY).min(MAX_RETRY);
    let next = (step * 2).min(MAX_RETRY);
    step * 2 + next * 2
}

/// The value of `series` in placer's `/metrics`, polled until `want` holds.
async fn wait_metric(
    env: &TestEnv,
    placer: &Placer,
    series: &str,
    want: impl Fn(f64) -> bool,
) -> anyhow::Result<f64> {
    env.poll_every(
        &format!("{series} to change"),
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let v = placer.metric(series).await?.unwrap_or(f64::NAN);
            Ok(if want(v) {
                ControlFlow::Break(v)
            } else {
                ControlFlow::Continue(format!("{v}"))
            })
        },
    )
    .await
}

/// Whether placer's `/debug/zones` lists a node in `zone`.
async fn placer_has_zone(placer: &Placer, zone: &str) -> anyhow::Result<bool> {
    let dims = placer.get_json("/debug/zones").await?;
    Ok(dims
        .as_array()
        .context("/debug/zones is not an array")?
        .iter()
        .any(|d| d["zones"][zone]["nodes"].as_u64().unwrap_or(0) > 0))
}

#[tokio::test]
async fn placer_recovers_from_an_apiserver_restart_within_its_backoff() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("apiserver-restart").await?;
    env.create_nodes([env.node("before").label(ZONE_LABEL, &env.zone("before"))])
        .await?;
    let policy = capability_policy(&env).plugin(
        "ZoneSpread",
        Some(1),
        json!({ "zoneLabel": ZONE_LABEL, "countPods": "All" }),
    );
    let rig = ExtenderRig::start(&env, &policy, ScorePlugins::Defaults, |e| e).await?;
    let placer = &rig.placer;
    let connected = r#"placer_watch_connected{kind="node"}"#;
    wait_metric(&env, placer, connected, |v| v == 1.0).await?;

    let killed = Instant::now();
    env.cluster().kill_apiserver();
    wait_metric(&env, placer, connected, |v| v == 0.0).await?;
    let (status, body) = placer_readyz(placer).await?;
    eprintln!("placer /readyz while the API server is down: {status} {body}");
    assert_eq!(status, 200, "a lost watch must not make placer unready");
    assert!(body.contains("disconnectedSeconds"), "{body}");
    tokio::time::sleep(OUTAGE).await;

    let ready = env.cluster().start_apiserver().await?;
    let bound = backoff_bound(ready.duration_since(killed)) + SLACK;
    let zone = env.zone("after");
    let after = env
        .node("after")
        .label(ZONE_LABEL, &zone)
        .label(HW_LABEL, "true");
    // The admin client may need a moment of its own to reconnect; retry the create briefly.
    let node = env
        .poll_every(
            "the node to be created",
            Duration::from_secs(10),
            Duration::from_millis(20),
            || async { Ok(ControlFlow::Break(env.create_nodes([after.clone()]).await?)) },
        )
        .await?
        .remove(0);
    let created = ready.elapsed();
    let seen = env
        .poll_every(
            "placer to see the node created after the restart",
            bound,
            Duration::from_millis(20),
            || async {
                Ok(if placer_has_zone(placer, &zone).await? {
                    ControlFlow::Break(ready.elapsed())
                } else {
                    ControlFlow::Continue("not yet".to_owned())
                })
            },
        )
        .await?;
    eprintln!(
        "API server restart: down {:?}, node created {created:?} after /readyz was ok, placer saw \
         it {seen:?} after /readyz was ok (bound {bound:?})",
        ready.duration_since(killed)
    );
    assert!(seen < bound, "placer took {seen:?} (bound {bound:?})");
    // Both watches (nodes and the quiet pod watch) report connected again.
    let reconnected = env
        .poll_every(
            "placer's /readyz to list no disconnected watch",
            bound,
            Duration::from_millis(20),
            || async {
                let (status, body) = placer_readyz(placer).await?;
                Ok(
                    if (status, body.as_str()) == (200, r#"{"status":"ready"}"#) {
                        ControlFlow::Break(ready.elapsed())
                    } else {
                        ControlFlow::Continue(format!("{status} {body}"))
                    },
                )
            },
        )
        .await?;
    eprintln!("API server restart: every watch connected {reconnected:?} after /readyz was ok");
    assert_eq!(
        placer.metric(connected).await?,
        Some(1.0),
        "node watch connected"
    );

    env.create_pod(&env.pod("secure").annotation(HW_ANNOTATION, "true"))
        .await?;
    assert_eq!(
        env.wait_pod_bound("secure").await?,
        node,
        "only the node created after the restart has the capability"
    );
    Ok(())
}

/// placer's `/readyz`: status and body.
async fn placer_readyz(placer: &Placer) -> anyhow::Result<(u16, String)> {
    crate::harness::http_get(placer.port(), "/readyz").await
}
