//! VolumeRestrictions, NodeVolumeLimits and VolumeZone against stock kube-scheduler: the same
//! objects, one copy per scheduler (each copy's pods confined to the copy's nodes by a label),
//! and the first `FailedScheduling` texts must be equal byte for byte.

use k8s_openapi::api::storage::v1::CSINode;

use super::*;
use crate::harness::compare::{SideBySide, comparable_plugins};

/// The label that confines each copy's pods to its nodes.
pub(super) const COPY: &str = "placer-e2e/copy";
/// Creates `count` nodes of copy `tag` (`<tag>1`, `<tag>2`, …), labelled with [`COPY`].
pub(super) async fn copy_nodes(
    env: &TestEnv,
    tag: &str,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    env.create_nodes((1..=count).map(|i| env.node(&format!("{tag}{i}")).label(COPY, tag)))
        .await
}

/// A CSI driver with a one-volume limit per node.
const DRIVER: &str = "csi.placer.test";

/// Objects of one copy (`p` for placer, `k` for kube-scheduler).
struct Copy<'a> {
    env: &'a TestEnv,
    tag: &'static str,
    scheduler: String,
}

impl Copy<'_> {
    fn name(&self, suffix: &str) -> String {
        format!("{suffix}-{}", self.tag)
    }

    async fn create<K>(&self, object: Value) -> anyhow::Result<()>
    where
        K: kube::Resource<Scope = kube::core::ClusterResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let o: K = serde_json::from_value(object)?;
        Api::<K>::all(self.env.client().clone())
            .create(&PostParams::default(), &o)
            .await?;
        Ok(())
    }

    /// A volume (CSI unless `labels` are given: then a host path with those labels) and a claim
    /// bound to it, as the PV controller leaves them.
    async fn bound_claim(&self, claim: &str, modes: &[&str], labels: Value) -> anyhow::Result<()> {
        let (claim, pv) = (self.name(claim), self.env.name(&self.name(claim)));
        let mut spec = json!({
            "capacity": { "storage": "1Gi" }, "accessModes": modes, "storageClassName": "",
            "claimRef": { "namespace": self.env.namespace(), "name": claim },
        });
        if labels.as_object().is_some_and(|l| !l.is_empty()) {
            spec["hostPath"] = json!({ "path": "/tmp/placer-e2e" });
        } else {
            spec["csi"] = json!({ "driver": DRIVER, "volumeHandle": pv });
        }
        self.create::<PersistentVolume>(json!({
            "metadata": { "name": pv, "labels": labels },
            "spec": spec,
        }))
        .await?;
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": { "name": claim,
                          "annotations": { "pv.kubernetes.io/bind-completed": "yes" } },
            "spec": { "accessModes": modes, "storageClassName": "", "volumeName": pv,
                      "resources": { "requests": { "storage": "1Gi" } } },
        }))?;
        Api::<PersistentVolumeClaim>::namespaced(self.env.client().clone(), self.env.namespace())
            .create(&PostParams::default(), &pvc)
            .await?;
        Ok(())
    }

    /// A pod of this copy's scheduler using `claims`, bound to `node` if given.
    async fn pod(&self, name: &str, claims: &[&str], node: Option<&str>) -> anyhow::Result<String> {
        let name = self.name(name);
        let mut pod = self
            .env
            .pod(&name)
            .scheduler(&self.scheduler)
            .node_selector(COPY, self.tag);
        if let Some(node) = node {
            pod = pod.bound_to(node);
        }
        let volumes: Vec<Value> = claims
            .iter()
            .enumerate()
            .map(|(i, c)| json!({ "name": format!("v{i}"), "persistentVolumeClaim": { "claimName": self.name(c) } }))
            .collect();
        self.env
            .create_pod_with_spec(&pod, json!({ "volumes": volumes }))
            .await?;
        Ok(name)
    }
}

/// A ReadWriteOncePod claim in use, a full CSI driver and a volume in another zone: placer's
/// FailedScheduling texts are kube-scheduler's.
#[tokio::test]
async fn volume_filters_agree_with_kube_scheduler() -> anyhow::Result<()> {
    let env = TestEnv::with_own_control_plane("sa-volume-compare").await?;
    let both = SideBySide::start(&env, &comparable_plugins()).await?;
    let placer_name = both.placer_name.clone();

    let copies = [
        Copy {
            env: &env,
            tag: "p",
            scheduler: placer_name.clone(),
        },
        Copy {
            env: &env,
            tag: "k",
            scheduler: env.scheduler_name(),
        },
    ];
    // Every object first, so that both schedulers count the same nodes.
    for copy in &copies {
        let node = copy.name("n1");
        env.create_nodes([env
            .node(&node)
            .label(COPY, copy.tag)
            .label(ZONE_LABEL, "z2")])
            .await?;
        let node = env.name(&node);
        copy.create::<CSINode>(json!({
            "metadata": { "name": node },
            "spec": { "drivers": [{ "name": DRIVER, "nodeID": node, "allocatable": { "count": 1 } }] },
        }))
        .await?;
        copy.bound_claim("once", &["ReadWriteOncePod"], json!({}))
            .await?;
        copy.bound_claim("held", &["ReadWriteOnce"], json!({}))
            .await?;
        copy.bound_claim("more", &["ReadWriteOnce"], json!({}))
            .await?;
        copy.bound_claim("zoned", &["ReadWriteOnce"], json!({ ZONE_LABEL: "z1" }))
            .await?;
        copy.pod("holder", &["once", "held"], Some(&node)).await?;
    }
    // Both schedulers' caches must hold the CSINodes and claims before the pods come.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut messages: Vec<Vec<String>> = Vec::new();
    for copy in &copies {
        let mut texts = Vec::new();
        for (pod, claims) in [
            ("rwop", &["once"][..]),
            ("limit", &["more"]),
            ("zone", &["zoned"]),
        ] {
            let name = copy.pod(pod, claims, None).await?;
            let event = env.wait_scheduling_failure(&name).await?;
            texts.push(event.message.unwrap_or_default());
        }
        messages.push(texts);
    }
    eprintln!(
        "placer: {:#?}\nkube-scheduler: {:#?}",
        messages[0], messages[1]
    );
    for (placer, kube) in messages[0].iter().zip(&messages[1]) {
        assert_eq!(placer, kube);
    }
    assert!(messages[0][0].contains("ReadWriteOncePod access mode already in-use"));
    assert!(messages[0][1].contains("node(s) exceed max volume count"));
    assert!(messages[0][2].contains("node(s) had no available volume zone"));
    Ok(())
}
