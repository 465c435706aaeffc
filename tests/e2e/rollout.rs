//! A rolling update of placer under load: stock kube-scheduler calls placer (`ignorable: false`)
//! through a Service while placer is replaced twice, the way a Deployment with `maxSurge: 1,
//! maxUnavailable: 0` does it, and no scheduling call fails.
//!
//! No kubelet runs here, so the Service is the harness's (`harness::service`): readiness probes
//! every second, a second for a change to reach kube-proxy, new connections round robin over the
//! published endpoints, open connections kept where they are. Each step of a rollout: start the
//! new replica, wait until the Service routes to it, delete the old one (its endpoint starts
//! leaving and it gets SIGTERM at the same moment), wait until it exited.
//!
//! `PLACER_E2E_ROLLOUT_DELAY=<seconds>` sets placer's `--shutdown-delay-seconds` (default 5, the
//! shipped one); with 0, the behaviour before the delay existed, calls fail (the test then reports
//! and fails).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;

use crate::harness::bind_watch::BindWatch;
use crate::harness::bound_once::KUBE_SCHEDULER_BOUND_LINE;
use crate::harness::service::ServiceRouter;
use crate::harness::{
    ExtenderConfig, HW_ANNOTATION, HW_LABEL, Placer, PodBuilder, RUN_LABEL, Scheduler,
    SchedulerConfig, TestEnv, capability_policy,
};

/// How often a pod is created while the rollouts run.
const POD_EVERY: Duration = Duration::from_millis(100);

/// The readiness probe period and the endpoint propagation delay of the simulated Service.
const PROBE_PERIOD: Duration = Duration::from_secs(1);
const PROPAGATION: Duration = Duration::from_secs(1);

fn shutdown_delay() -> u64 {
    std::env::var("PLACER_E2E_ROLLOUT_DELAY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

/// Waits until the Service routes new connections to `replica` (too).
async fn wait_routed(
    env: &TestEnv,
    service: &ServiceRouter,
    replica: &Placer,
) -> anyhow::Result<()> {
    env.poll_every(
        "the Service to route to the new replica",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async {
            Ok(if service.is_published(replica.port()) {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue("not published".to_owned())
            })
        },
    )
    .await
}

/// Replaces `old` by a new replica `name` behind `service`: surge, wait until routed, delete the
/// old one, wait until it exited. Returns the new replica.
async fn roll(
    env: &TestEnv,
    service: &ServiceRouter,
    mut old: Placer,
    name: &str,
    policy: &str,
    args: &[&str],
) -> anyhow::Result<Placer> {
    let new = Placer::start_with(env, policy, name, "extender", args).await?;
    service.add(new.port());
    wait_routed(env, service, &new).await?;
    let deleted = Instant::now();
    service.terminating(old.port());
    old.terminate();
    let status = old.wait_exit(Duration::from_secs(60)).await?;
    eprintln!(
        "rollout to {name}: the old replica exited {:?} after SIGTERM ({status})",
        deleted.elapsed()
    );
    anyhow::ensure!(status.success(), "the old replica exited with {status}");
    service.remove(old.port());
    Ok(new)
}

/// Every pod created during two rollouts is bound exactly once, and kube-scheduler records no
/// `FailedScheduling` event naming the extender: with the shutdown delay, a replica going away
/// answers every call that reaches it, and only stops accepting once the Service has stopped
/// sending it new connections.
#[tokio::test]
async fn rolling_updates_fail_no_scheduling_call() -> anyhow::Result<()> {
    let env = TestEnv::new("rollout").await?;
    let nodes = env
        .create_nodes([
            env.node("n1").label(HW_LABEL, "true"),
            env.node("n2").label(HW_LABEL, "true"),
            env.node("n3"),
        ])
        .await?;
    let policy = capability_policy(&env).to_yaml();
    let delay = format!("--shutdown-delay-seconds={}", shutdown_delay());
    let args = [delay.as_str()];

    let v1 = Placer::start_with(&env, &policy, "placer-v1", "extender", &args).await?;
    let service = ServiceRouter::start(PROBE_PERIOD, PROPAGATION).await?;
    service.add(v1.port());
    wait_routed(&env, &service, &v1).await?;
    let config = SchedulerConfig::new(&env.scheduler_name())
        .extender(ExtenderConfig::new(&service.url()).ignorable(false));
    let scheduler = Scheduler::start(&env, &config).await?;
    let mut binds = BindWatch::start(env.client(), env.namespace()).await?;

    // A steady stream of pods, every other one needing placer's capability rule.
    let creating = Arc::new(AtomicBool::new(true));
    let creator = {
        let (pods, creating) = (env.pods(), creating.clone());
        let (scheduler_name, run_id) = (env.scheduler_name(), env.run_id().to_owned());
        tokio::spawn(async move {
            let mut created = 0_usize;
            while creating.load(Ordering::Relaxed) {
                let mut pod = PodBuilder::new(&format!("p-{created}"))
                    .scheduler(&scheduler_name)
                    .node_selector(RUN_LABEL, &run_id);
                if created.is_multiple_of(2) {
                    pod = pod.annotation(HW_ANNOTATION, "true");
                }
                pods.create(&kube::api::PostParams::default(), &pod.build())
                    .await?;
                created += 1;
                tokio::time::sleep(POD_EVERY).await;
            }
            anyhow::Ok(created)
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let v2 = roll(&env, &service, v1, "placer-v2", &policy, &args).await?;
    let v3 = roll(&env, &service, v2, "placer-v3", &policy, &args).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    creating.store(false, Ordering::Relaxed);
    let created = creator.await??;

    binds.wait_for(created, Duration::from_secs(120)).await?;
    let events: Api<Event> = Api::namespaced(env.client().clone(), env.namespace());
    let failed: Vec<String> = events
        .list(&ListParams::default().fields("reason=FailedScheduling"))
        .await?
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .collect();
    let naming_placer: Vec<&String> = failed
        .iter()
        .filter(|m| m.contains(&service.url()))
        .collect();
    let counts = service.counts();
    eprintln!(
        "rollout: {created} pods created, {} bound, {} moved; FailedScheduling events: {} in all, {} \
         naming the extender; Service: {} connections routed, {} refused by a replica, {} without \
         an endpoint",
        binds.count(),
        binds.moved().len(),
        failed.len(),
        naming_placer.len(),
        counts.routed.load(Ordering::Relaxed),
        counts.refused.load(Ordering::Relaxed),
        counts.no_endpoint.load(Ordering::Relaxed),
    );
    assert!(
        naming_placer.is_empty(),
        "FailedScheduling events naming the extender: {naming_placer:#?}"
    );
    assert_eq!(binds.count(), created, "every pod bound");
    assert!(
        binds.moved().is_empty(),
        "pods bound twice: {:?}",
        binds.moved()
    );
    for (pod, bound) in binds.bindings() {
        assert!(nodes.contains(&bound.node), "{pod} on {}", bound.node);
    }
    env.check_bound_once_in_log(
        env.namespace(),
        created,
        scheduler.log_path(),
        KUBE_SCHEDULER_BOUND_LINE,
    )
    .await?;
    drop(scheduler);
    drop(v3);
    Ok(())
}
