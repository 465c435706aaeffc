//! NodeAffinity's `addedAffinity` (args of the profile, applied to every pod of it) against
//! stock kube-scheduler: the same profile args for both, one copy of the nodes per scheduler,
//! and the same placement and the same `FailedScheduling` text. The differential generators do
//! not vary plugin args, so this is where a difference in the scheduler-enforced affinity shows.

use super::volume_compare::COPY;
use super::*;
use crate::harness::compare::{ProfilePlugin, SideBySide, assert_same_failure, comparable_plugins};

/// Node label the profile's required `addedAffinity` asks for (`In [batch]`).
const POOL: &str = "e2e.placer.io/pool";
/// Node label the profile's preferred `addedAffinity` term scores (weight 5).
const DISK: &str = "e2e.placer.io/disk";

/// The comparable default plugins, with `NodeAffinity` enforcing `POOL=batch` and preferring
/// `DISK=ssd` for every pod of the profile.
fn plugins_with_added_affinity() -> Vec<ProfilePlugin> {
    let mut plugins = comparable_plugins();
    for p in &mut plugins {
        if p.name == "NodeAffinity" {
            p.args = Some(json!({ "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
                    { "matchExpressions": [{ "key": POOL, "operator": "In", "values": ["batch"] }] },
                ] },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    { "weight": 5, "preference": { "matchExpressions": [
                        { "key": DISK, "operator": "In", "values": ["ssd"] },
                    ] } },
                ],
            } }));
        }
    }
    plugins
}

/// Three nodes per copy: `batch` with a hard disk, `web` with an SSD (excluded by the profile)
/// and `batch` with an SSD. A plain pod must go to the third (the only one the preferred term
/// scores among those the required term allows); a pod selecting `web` fits nowhere, and its
/// text must say so as kube-scheduler words it.
#[tokio::test]
async fn added_affinity_matches_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-added-affinity").await?;
    let both = SideBySide::start(&env, &plugins_with_added_affinity()).await?;

    let copies = both.copies();
    // Every node first, so that both schedulers count the same nodes in their texts.
    let mut layouts = Vec::new();
    for (tag, _) in &copies {
        let nodes = env
            .create_nodes([
                env.node(&format!("{tag}1"))
                    .label(COPY, tag)
                    .label(POOL, "batch")
                    .label(DISK, "hdd"),
                env.node(&format!("{tag}2"))
                    .label(COPY, tag)
                    .label(POOL, "web")
                    .label(DISK, "ssd"),
                env.node(&format!("{tag}3"))
                    .label(COPY, tag)
                    .label(POOL, "batch")
                    .label(DISK, "ssd"),
            ])
            .await?;
        layouts.push(nodes);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut texts = Vec::new();
    for ((tag, scheduler), nodes) in copies.iter().zip(&layouts) {
        let pod = |name: &str| env.pod(name).scheduler(scheduler).node_selector(COPY, tag);
        let plain = format!("plain-{tag}");
        env.create_pod(&pod(&plain)).await?;
        let node = env.wait_pod_bound(&plain).await?;
        assert_eq!(
            Some(&node),
            nodes.get(2),
            "{scheduler}: the pod goes to the only batch node with an SSD"
        );

        let web = format!("web-{tag}");
        env.create_pod(&pod(&web).node_selector(POOL, "web"))
            .await?;
        let event = env.wait_pod_event(&web, "FailedScheduling").await?;
        texts.push(event.message.unwrap_or_default());
    }
    assert_same_failure(
        &texts,
        "node(s) didn't match scheduler-enforced node affinity",
    );
    Ok(())
}
