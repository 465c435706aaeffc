//! Two pods racing for one PersistentVolume: each has its own `WaitForFirstConsumer` claim and
//! one free static local volume exists. placer and stock kube-scheduler each get a copy of the
//! same objects (on nodes of their own) on a control plane with kube-controller-manager's PV
//! binder, and each must bind one pod to the volume's node, leave the other waiting with the same
//! FailedScheduling text, and bind the volume once.

use std::ops::ControlFlow;

use super::plugins::claim_volume;
use super::volume_compare::{COPY, copy_nodes};
use super::volumes::{claim, free_local_volume, unbound_claim, wffc_class};
use super::*;
use crate::harness::compare::{SideBySide, assert_same_failure, comparable_plugins};
use crate::harness::controller_manager::ControllerManager;

/// The two pods of a copy once one is bound: (winner, its node, loser).
type Decided = (String, String, String);

/// Two pods created at the same moment, one free volume: one pod binds to the volume's node
/// with its claim bound to the volume, the other waits unschedulable with kube-scheduler's text,
/// and the volume's `claimRef` names the winner's claim only.
#[tokio::test]
async fn two_pods_racing_for_one_volume_match_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-volume-race").await?;
    let _kcm = ControllerManager::start_pv_binder(&env).await?;
    let both = SideBySide::start_against_default(&env, &comparable_plugins()).await?;

    let copies = both.copies();
    // Every node, class and volume first, so that both schedulers count the same nodes.
    let mut layout = Vec::new();
    for (tag, _) in &copies {
        let nodes = copy_nodes(&env, tag, 2).await?;
        let class =
            wffc_class(&env, &format!("race-{tag}"), "kubernetes.io/no-provisioner").await?;
        let volume = free_local_volume(&env, &class, &nodes[0]).await?;
        layout.push((nodes, class, volume));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut texts = Vec::new();
    for ((tag, scheduler), (nodes, class, volume)) in copies.iter().zip(&layout) {
        let names = [0, 1].map(|i| format!("race-{tag}{i}"));
        for name in &names {
            unbound_claim(&env, name, class).await?;
        }
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let (a, b) = (pod(&names[0]), pod(&names[1]));
        tokio::try_join!(
            env.create_pod_with_spec(&a, claim_volume(&names[0])),
            env.create_pod_with_spec(&b, claim_volume(&names[1])),
        )?;
        let (winner, node, loser) = one_bound(&env, &names).await?;
        assert_eq!(
            node, nodes[0],
            "{scheduler}: {winner} went to the volume's node"
        );
        let event = env.wait_scheduling_failure(&loser).await?;
        texts.push(event.message.unwrap_or_default());
        env.assert_stays_unbound(&loser, STAYS_PENDING).await?;

        // The winner's claim (the pod and claim share a name) holds the volume, the loser's
        // nothing, and the volume names the winner's claim.
        let bound_to = |c: PersistentVolumeClaim| c.spec.and_then(|s| s.volume_name);
        assert_eq!(bound_to(claim(&env, &winner).await?).as_ref(), Some(volume));
        assert_eq!(
            bound_to(claim(&env, &loser).await?),
            None,
            "{scheduler}: {loser}"
        );
        let pv = Api::<PersistentVolume>::all(env.client().clone())
            .get(volume)
            .await?;
        let holder = pv.spec.and_then(|s| s.claim_ref).and_then(|r| r.name);
        assert_eq!(
            holder.as_ref(),
            Some(&winner),
            "{scheduler}: {volume} bound once"
        );
    }
    assert_same_failure(
        &texts,
        "2 node(s) didn't find available persistent volumes to bind",
    );
    Ok(())
}

/// Waits until one of the two pods is bound; returns it, its node and the other pod.
async fn one_bound(env: &TestEnv, names: &[String; 2]) -> anyhow::Result<Decided> {
    env.poll(
        "one of the racing pods to be bound",
        SCHEDULING_TIMEOUT,
        || async {
            for (i, name) in names.iter().enumerate() {
                let node = env.pods().get(name).await?.spec.and_then(|s| s.node_name);
                if let Some(node) = node {
                    return Ok(ControlFlow::Break((
                        name.clone(),
                        node,
                        names[1 - i].clone(),
                    )));
                }
            }
            Ok(ControlFlow::Continue("neither is bound".to_owned()))
        },
    )
    .await
}
