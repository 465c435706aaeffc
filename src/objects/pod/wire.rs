//! A [`PodInfo`] decoded straight from a Pod in kube-scheduler's JSON, as
//! the HTTP verbs receive it: only the fields placer reads, the rest skipped.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, Affinity, AzureDiskVolumeSource,
    GCEPersistentDiskVolumeSource, ISCSIVolumeSource, PortworxVolumeSource, RBDVolumeSource,
    Toleration, TopologySpreadConstraint,
};
use serde::Deserialize;

use super::volumes::{InlineDisk, Sources};
use super::{
    ContainerView, ControllerRef, PREEMPT_NEVER, PodInfo, PodSpecInfo, PreemptionInfo, VolumeClaim,
    host_port, requests_and_ports,
};
use crate::objects::resources::Resources;

/// Decodes a Pod in Kubernetes' JSON form (camelCase keys) straight into a
/// [`PodInfo`]. `null` is accepted wherever a field may be absent.
impl<'de> Deserialize<'de> for PodInfo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(d)?;
        let meta = wire.metadata.unwrap_or_default();
        let mut spec = wire.spec.unwrap_or_default();
        let (priority, scheduler_name, node_name, preemption_policy) = (
            spec.priority,
            spec.scheduler_name.take(),
            spec.node_name.take(),
            spec.preemption_policy.take(),
        );
        let status = wire.status.unwrap_or_default();
        let spec_info = spec.info(meta.name.as_deref().unwrap_or(""));
        Ok(PodInfo {
            name: meta.name.unwrap_or_default(),
            namespace: meta.namespace.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            annotations: meta.annotations.unwrap_or_default(),
            priority: priority.unwrap_or(0),
            scheduler_name: scheduler_name.unwrap_or_default(),
            node_name: node_name.filter(|n| !n.is_empty()),
            phase: status.phase,
            deleting: meta.deletion_timestamp.is_some(),
            controller: ControllerRef::first_of(
                meta.owner_references
                    .iter()
                    .flatten()
                    .map(|o| (o.controller, [&o.api_version, &o.kind, &o.name])),
            ),
            spec: Arc::new(spec_info),
            preemption: PreemptionInfo {
                never: preemption_policy.as_deref() == Some(PREEMPT_NEVER),
                nominated_node: status.nominated_node_name.filter(|n| !n.is_empty()),
                start_time: status
                    .start_time
                    .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                    .map(|t| t.as_second()),
                // A pending pod sent to the extender is no preemption victim.
                preempted: false,
            },
        })
    }
}

#[derive(Deserialize)]
#[serde(expecting = "a Pod object")]
struct WirePod {
    metadata: Option<WireMeta>,
    spec: Option<WireSpec>,
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    deletion_timestamp: Option<serde::de::IgnoredAny>,
    owner_references: Option<Vec<WireOwner>>,
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireOwner {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    controller: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    priority: Option<i32>,
    preemption_policy: Option<String>,
    scheduler_name: Option<String>,
    node_name: Option<String>,
    node_selector: Option<BTreeMap<String, String>>,
    affinity: Option<Affinity>,
    tolerations: Option<Vec<Toleration>>,
    containers: Option<Vec<WireContainer>>,
    init_containers: Option<Vec<WireContainer>>,
    overhead: Option<Resources>,
    topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    scheduling_gates: Option<Vec<WireName>>,
    volumes: Option<Vec<WireVolume>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireContainer {
    resources: Option<WireResources>,
    ports: Option<Vec<WirePort>>,
    restart_policy: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireResources {
    requests: Option<Resources>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePort {
    host_port: Option<i32>,
    protocol: Option<String>,
    #[serde(rename = "hostIP")]
    host_ip: Option<String>,
}

#[derive(Deserialize)]
struct WireName {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolume {
    #[serde(default)]
    name: String,
    persistent_volume_claim: Option<WireClaim>,
    ephemeral: Option<serde::de::IgnoredAny>,
    gce_persistent_disk: Option<GCEPersistentDiskVolumeSource>,
    aws_elastic_block_store: Option<AWSElasticBlockStoreVolumeSource>,
    iscsi: Option<ISCSIVolumeSource>,
    rbd: Option<RBDVolumeSource>,
    azure_disk: Option<AzureDiskVolumeSource>,
    portworx_volume: Option<PortworxVolumeSource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaim {
    claim_name: String,
}

impl WireContainer {
    fn view(&self) -> ContainerView {
        ContainerView {
            requests: self
                .resources
                .as_ref()
                .and_then(|r| r.requests.clone())
                .unwrap_or_default(),
            ports: self
                .ports
                .iter()
                .flatten()
                .filter_map(|p| host_port(p.host_port, p.protocol.as_deref(), p.host_ip.as_deref()))
                .collect(),
            sidecar: self.restart_policy.as_deref() == Some("Always"),
        }
    }
}

impl WireSpec {
    fn info(self, pod_name: &str) -> PodSpecInfo {
        let containers: Vec<_> = self
            .containers
            .iter()
            .flatten()
            .map(WireContainer::view)
            .collect();
        let init: Vec<_> = self
            .init_containers
            .iter()
            .flatten()
            .map(WireContainer::view)
            .collect();
        let r = requests_and_ports(&containers, &init, &self.overhead.unwrap_or_default());
        PodSpecInfo {
            node_selector: self.node_selector.unwrap_or_default(),
            affinity: self.affinity,
            tolerations: self.tolerations.unwrap_or_default(),
            requests: r.requests,
            non_zero_requests: r.non_zero,
            host_ports: r.host_ports,
            topology_spread_constraints: self.topology_spread_constraints.unwrap_or_default(),
            scheduling_gates: self
                .scheduling_gates
                .into_iter()
                .flatten()
                .map(|g| g.name)
                .collect(),
            inline_disks: self
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| {
                    InlineDisk::of(Sources {
                        gce: v.gce_persistent_disk.as_ref(),
                        ebs: v.aws_elastic_block_store.as_ref(),
                        iscsi: v.iscsi.as_ref(),
                        rbd: v.rbd.as_ref(),
                        azure: v.azure_disk.as_ref(),
                        portworx: v.portworx_volume.as_ref(),
                    })
                })
                .collect(),
            pvc_claims: self
                .volumes
                .into_iter()
                .flatten()
                .filter_map(|v| match (v.persistent_volume_claim, v.ephemeral) {
                    (Some(c), _) => Some(VolumeClaim::named(&c.claim_name)),
                    (None, Some(_)) => Some(VolumeClaim::ephemeral(pod_name, &v.name)),
                    (None, None) => None,
                })
                .collect(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    nominated_node_name: Option<String>,
    start_time: Option<String>,
}
