//! The control plane itself: it starts, and stock kube-scheduler schedules on fake nodes.

use std::time::Duration;

use crate::harness::{Scheduler, SchedulerConfig, TestEnv};

/// Without any extender, kube-scheduler binds a pod to one of the test's API-only nodes; bound
/// pods delete at once with grace 0; a stopped scheduler binds nothing until restarted.
#[tokio::test]
async fn control_plane_schedules_with_stock_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::new("smoke-stock").await?;
    let nodes = env.create_nodes([env.node("n1"), env.node("n2")]).await?;
    let mut scheduler =
        Scheduler::start(&env, &SchedulerConfig::new(&env.scheduler_name())).await?;

    env.create_pod(&env.pod("p1")).await?;
    let node = env.wait_pod_bound("p1").await?;

    assert!(
        nodes.contains(&node),
        "pod bound to {node}, not one of the test's nodes {nodes:?}"
    );
    let condition = env
        .pod_scheduled_condition("p1")
        .await?
        .expect("PodScheduled condition set");
    assert_eq!(condition.status, "True");
    env.delete_pods(&["p1"]).await?;
    assert!(
        env.pods().get_opt("p1").await?.is_none(),
        "p1 still exists after delete"
    );

    scheduler.stop();
    env.create_pod(&env.pod("p2")).await?;
    env.assert_stays_unbound("p2", Duration::from_secs(1))
        .await?;
    scheduler.restart().await?;
    assert!(nodes.contains(&env.wait_pod_bound("p2").await?));
    Ok(())
}

/// Reports how long the shared control plane took to start (measured by whichever test started it).
#[tokio::test]
async fn control_plane_start_time() -> anyhow::Result<()> {
    let env = TestEnv::new("smoke-timing").await?;
    let t = env.cluster().timings();
    eprintln!(
        "control plane start: binaries {:.1?}, etcd ready {:.1?}, kube-apiserver ready {:.1?}, total {:.1?}",
        t.binaries,
        t.etcd,
        t.apiserver,
        t.binaries + t.etcd + t.apiserver
    );
    Ok(())
}
