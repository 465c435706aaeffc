//! Two replicas electing a leader (with `--leader-elect`, and by default without any flag):
//! failover after a crash and handover on SIGTERM, without binding a pod twice.

use super::*;
use crate::harness::http_get;

/// `--leader-elect` flags (kube-scheduler's names) for a Lease `name` in the test's namespace.
fn leader_args(env: &TestEnv, lease: &str) -> Vec<String> {
    vec![
        "--leader-elect".into(),
        format!("--leader-elect-resource-namespace={}", env.namespace()),
        format!("--leader-elect-resource-name={lease}"),
    ]
}

/// Starts two replicas `placer-a` and `placer-b` electing through `lease`, with the identity
/// of `kubeconfig` and `extra` arguments.
async fn two_replicas(
    env: &TestEnv,
    lease: &str,
    kubeconfig: &Path,
    extra: &[&str],
) -> anyhow::Result<[Placer; 2]> {
    let mut args = leader_args(env, lease);
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let a = env
        .start_standalone_as("placer-a", &args, kubeconfig)
        .await?;
    let b = env
        .start_standalone_as("placer-b", &args, kubeconfig)
        .await?;
    Ok([a, b])
}

/// Waits until one replica holds the Lease `lease` of the test's namespace (by identity) and
/// says so in `placer_leader`, the other saying 0; returns the leader's index.
async fn wait_leader(env: &TestEnv, lease: &str, replicas: &[&Placer]) -> anyhow::Result<usize> {
    wait_leader_in(env, env.namespace(), lease, replicas).await
}

/// Like [`wait_leader`] for the Lease `lease` in `namespace`.
async fn wait_leader_in(
    env: &TestEnv,
    namespace: &str,
    lease: &str,
    replicas: &[&Placer],
) -> anyhow::Result<usize> {
    env.poll(
        &format!("one replica to hold Lease {namespace}/{lease}"),
        LEASE_DURATION * 2,
        || async {
            let holder = env.lease_holder_in(namespace, lease).await?;
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

/// Polls the Lease `lease` of the test's namespace every 100 ms until `identity` holds it;
/// returns how long that took.
async fn wait_holder(env: &TestEnv, lease: &str, identity: &str) -> anyhow::Result<Duration> {
    wait_holder_in(env, env.namespace(), lease, identity).await
}

/// Like [`wait_holder`] for the Lease `lease` in `namespace`.
async fn wait_holder_in(
    env: &TestEnv,
    namespace: &str,
    lease: &str,
    identity: &str,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    env.poll_every(
        &format!("{identity} to hold Lease {namespace}/{lease}"),
        LEASE_DURATION * 2,
        Duration::from_millis(100),
        || async {
            Ok(match env.lease_holder_in(namespace, lease).await? {
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

/// Waits until one of `replicas` logged a "bound pod" line for `pod` (the log follows the bind);
/// returns each replica's count.
async fn wait_bind_lines(
    env: &TestEnv,
    replicas: &[&Placer],
    pod: &str,
) -> anyhow::Result<Vec<usize>> {
    env.poll(
        &format!("a \"bound pod\" line for {pod}"),
        SCHEDULING_TIMEOUT,
        || async {
            let lines = bind_lines(env, replicas, pod)?;
            Ok(if lines.iter().sum::<usize>() > 0 {
                ControlFlow::Break(lines)
            } else {
                ControlFlow::Continue(format!("{lines:?}"))
            })
        },
    )
    .await
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
    let mut replicas = two_replicas(&env, lease, env.cluster().kubeconfig(), &[]).await?;
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

/// Two replicas started with no leader-election flag, as kube-scheduler's would be: election is
/// on by default, on placer's default Lease (`placer` in namespace `default`, no `$POD_NAMESPACE`
/// here), so exactly one replica holds it and binds every pod, the other binding none. Once the
/// leader is stopped (SIGTERM to its process id), the other takes the Lease and binds the pods
/// created after. No other test uses the default Lease (the harness turns election off unless a
/// test elects).
#[tokio::test]
async fn two_replicas_without_flags_elect_one_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::new("sa-leader-default").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let (namespace, lease) = ("default", "placer");
    let mut replicas = [
        env.start_standalone_electing_by_default("placer-a").await?,
        env.start_standalone_electing_by_default("placer-b").await?,
    ];
    let both = [&replicas[0], &replicas[1]];
    let leader = wait_leader_in(&env, namespace, lease, &both).await?;
    let follower = 1 - leader;
    let follower_id = identity(&replicas[follower]);

    let before = create_pods(&env, "before", 4).await?;
    for pod in &before {
        assert!(nodes.contains(&env.wait_pod_bound(pod).await?));
    }
    let mut expected = vec![0, 0];
    expected[leader] = 1;
    for pod in &before {
        assert_eq!(
            wait_bind_lines(&env, &both, pod).await?,
            expected,
            "\"bound pod\" lines for {pod} in placer-a, placer-b: only the leader binds"
        );
    }

    let pid = replicas[leader]
        .pid()
        .context("the leader is not running")?;
    eprintln!("stopping the leader, process {pid}");
    replicas[leader].terminate();
    let status = replicas[leader].wait_exit(Duration::from_secs(30)).await?;
    assert!(status.success(), "the old leader exited with {status}");
    let takeover = wait_holder_in(&env, namespace, lease, &follower_id).await?;
    eprintln!("takeover after the leader stopped: {takeover:?}");
    let after = create_pods(&env, "after", 4).await?;
    for pod in &after {
        assert!(nodes.contains(&env.wait_pod_bound(pod).await?));
    }
    assert_eq!(replicas[follower].metric("placer_leader").await?, Some(1.0));
    let mut expected = vec![0, 0];
    expected[follower] = 1;
    let both = [&replicas[0], &replicas[1]];
    for pod in &after {
        assert_eq!(
            wait_bind_lines(&env, &both, pod).await?,
            expected,
            "\"bound pod\" lines for {pod} in placer-a, placer-b after the handover"
        );
    }
    Ok(())
}

/// SIGTERM to the leader: it stops scheduling and releases the Lease at once, at the start of its
/// shutdown delay (5 s here, the shipped default), while it still answers HTTP; the other replica,
/// which watches the Lease, takes over within 2 s of the signal and schedules. Both replicas run
/// with the shipped RBAC rules only (the scheduler's ClusterRole and the leader-election Role's
/// rules, which name the one Lease, granted cluster-wide here), so those rules are enough for
/// all of it, the Lease watch included.
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
    // The Lease name the shipped Role allows.
    let lease = election
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|rule| rule["resourceNames"][0].as_str())
        .context("the shipped leader-election Role names no Lease")?
        .to_owned();
    let lease = lease.as_str();
    let kubeconfig = env.restricted_kubeconfig("placer", rules).await?;
    let mut replicas =
        two_replicas(&env, lease, &kubeconfig, &["--shutdown-delay-seconds=5"]).await?;
    let leader = wait_leader(&env, lease, &[&replicas[0], &replicas[1]]).await?;
    let follower = 1 - leader;
    let (leader_id, follower_id) = (identity(&replicas[leader]), identity(&replicas[follower]));
    let log = replicas[leader].log_path().to_owned();

    env.create_pod(&env.pod("before")).await?;
    assert!(nodes.contains(&env.wait_pod_bound("before").await?));

    replicas[leader].terminate();
    let takeover = wait_holder(&env, lease, &follower_id).await?;
    eprintln!("takeover after SIGTERM of the leader: {takeover:?}");
    assert!(
        takeover <= Duration::from_secs(2),
        "takeover took {takeover:?}"
    );
    let (status, _) = http_get(replicas[leader].port(), "/readyz").await?;
    assert_eq!(status, 503, "the old leader is unready during its delay");
    env.create_pod(&env.pod("after")).await?;
    let node = env.wait_pod_bound("after").await?;
    assert!(nodes.contains(&node));

    let status = replicas[leader].wait_exit(Duration::from_secs(30)).await?;
    assert!(status.success(), "the old leader exited with {status}");
    let released = lines_with(&log, &["released the scheduling Lease"])?;
    assert_eq!(released.len(), 1, "the leader did not log the release");
    assert!(
        !lines_with(&log, &["placer stopped"])?.is_empty(),
        "the leader did not stop by itself"
    );
    assert_ne!(
        env.lease_holder(lease).await?.as_deref(),
        Some(leader_id.as_str())
    );
    assert_scheduled_event(&env, &replicas[follower], "after", &node).await
}

/// A leader whose API server goes away can renew nothing: it stops scheduling at the renew
/// deadline, and its `/healthz` fails once the deadline plus kube-scheduler's 20 s tolerance has
/// passed without a renewal (so the kubelet's liveness probe restarts it, as kube-scheduler's
/// watchdog does), naming the Lease. Once the API server is back the replica renews and
/// `/healthz` recovers. Short timings (3 s lease, 2 s deadline, 0.5 s retry) keep it quick.
#[tokio::test]
async fn a_leader_that_cannot_renew_fails_healthz_after_the_deadline() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-leader-healthz").await?;
    let lease = "placer-healthz";
    let mut args = leader_args(&env, lease);
    args.extend([
        "--leader-elect-lease-duration=3s".to_owned(),
        "--leader-elect-renew-deadline=2s".to_owned(),
        "--leader-elect-retry-period=500ms".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let placer = env
        .start_standalone_as("placer", &args, env.cluster().kubeconfig())
        .await?;
    let me = identity(&placer);
    // The Lease naming this replica is not enough: killing the API server between its write and
    // the answer leaves a replica that never learnt it leads, and so, as client-go's watchdog,
    // answers for no Lease. Wait until placer itself says it leads.
    wait_leader(&env, lease, &[&placer]).await?;
    assert_eq!(http_get(placer.port(), "/healthz").await?.0, 200);

    env.cluster().kill_apiserver();
    let down = Instant::now();
    let (status, body) = env
        .poll_every(
            "/healthz to fail",
            Duration::from_secs(60),
            Duration::from_millis(250),
            || async {
                let (status, body) = http_get(placer.port(), "/healthz").await?;
                Ok(if status == 200 {
                    ControlFlow::Continue(body)
                } else {
                    ControlFlow::Break((status, body))
                })
            },
        )
        .await?;
    let after = down.elapsed();
    eprintln!("/healthz failed {after:?} after the API server went away: {status} {body}");
    assert_eq!(status, 500);
    assert!(
        body.contains(&format!("Lease {}/{lease} last renewed", env.namespace())),
        "{body}"
    );
    // The last renewal was at most one retry period before the outage.
    assert!(
        after >= Duration::from_millis(21_500),
        "failed too early: {after:?}"
    );
    assert_eq!(placer.metric("placer_leader").await?, Some(0.0));

    env.cluster().start_apiserver().await?;
    env.poll_every(
        "/healthz to recover",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async {
            let (status, body) = http_get(placer.port(), "/healthz").await?;
            Ok(if status == 200 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(body)
            })
        },
    )
    .await?;
    wait_holder(&env, lease, &me).await?;
    Ok(())
}
