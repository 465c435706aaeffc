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

use super::requests::{ContainerResources, PodResources};
use super::volumes::{InlineDisk, Sources};
use super::{
    ContainerView, ControllerRef, PREEMPT_NEVER, PodInfo, PodResourceClaim, PodSpecInfo,
    PreemptionInfo, VolumeClaim, host_port, requests_and_ports, resize_infeasible,
};
use crate::objects::features::{PodFeatureInputs, RESTART_ALL_CONTAINERS_ACTION};
use crate::objects::images::normalized_image_name;
use crate::objects::resources::{RequestList, Resources};

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
        let mut status = wire.status.unwrap_or_default();
        let spec_info = spec.info(meta.name.as_deref().unwrap_or(""), &mut status);
        Ok(PodInfo {
            name: meta.name.unwrap_or_default(),
            namespace: meta.namespace.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            labels: Arc::new(meta.labels.unwrap_or_default()),
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
    ephemeral_containers: Option<Vec<WireContainer>>,
    host_network: Option<bool>,
    host_users: Option<bool>,
    overhead: Option<Resources>,
    resources: Option<WireResources>,
    topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    scheduling_gates: Option<Vec<WireName>>,
    volumes: Option<Vec<WireVolume>>,
    resource_claims: Option<Vec<WirePodClaim>>,
}

/// One of `spec.resourceClaims`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePodClaim {
    #[serde(default)]
    name: String,
    resource_claim_name: Option<String>,
    resource_claim_template_name: Option<String>,
}

/// One of `status.resourceClaimStatuses`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaimStatus {
    #[serde(default)]
    name: String,
    resource_claim_name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireContainer {
    #[serde(default)]
    name: String,
    image: Option<String>,
    restart_policy_rules: Option<Vec<WireRestartRule>>,
    volume_mounts: Option<Vec<WireVolumeMount>>,
    resources: Option<WireResources>,
    ports: Option<Vec<WirePort>>,
    restart_policy: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireResources {
    requests: Option<RequestList>,
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
    image: Option<WireImageVolume>,
    gce_persistent_disk: Option<GCEPersistentDiskVolumeSource>,
    aws_elastic_block_store: Option<AWSElasticBlockStoreVolumeSource>,
    iscsi: Option<ISCSIVolumeSource>,
    rbd: Option<RBDVolumeSource>,
    azure_disk: Option<AzureDiskVolumeSource>,
    portworx_volume: Option<PortworxVolumeSource>,
    csi: Option<WireCsiVolume>,
}

#[derive(Deserialize)]
struct WireCsiVolume {
    #[serde(default)]
    driver: String,
}

#[derive(Deserialize)]
struct WireRestartRule {
    #[serde(default)]
    action: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolumeMount {
    bind_mount_options: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct WireImageVolume {
    reference: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaim {
    claim_name: String,
}

impl WireContainer {
    fn has_bind_mount_options(&self) -> bool {
        self.volume_mounts
            .iter()
            .flatten()
            .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
    }

    fn view(&self, statuses: &[WireContainerStatus]) -> (ContainerView, ContainerResources) {
        let status = statuses.iter().find(|s| s.name == self.name);
        (
            ContainerView {
                name: self.name.clone(),
                ports: self
                    .ports
                    .iter()
                    .flatten()
                    .filter_map(|p| {
                        host_port(p.host_port, p.protocol.as_deref(), p.host_ip.as_deref())
                    })
                    .collect(),
            },
            ContainerResources {
                requests: self
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.clone())
                    .unwrap_or_default(),
                allocated: status.and_then(|s| s.allocated_resources.clone()),
                actuated: status
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.clone()),
                sidecar: self.restart_policy.as_deref() == Some("Always"),
            },
        )
    }
}

impl WireSpec {
    /// The spec's view; the status gives the resize resources (taken from it).
    fn info(self, pod_name: &str, status: &mut WireStatus) -> PodSpecInfo {
        // `findContainerStatus`: container statuses first, then init ones.
        let statuses: Vec<WireContainerStatus> = status
            .container_statuses
            .take()
            .into_iter()
            .flatten()
            .chain(status.init_container_statuses.take().into_iter().flatten())
            .collect();
        let (views, containers): (Vec<_>, Vec<_>) = self
            .containers
            .iter()
            .flatten()
            .map(|c| c.view(&statuses))
            .unzip();
        let (init_views, init_containers): (Vec<_>, Vec<_>) = self
            .init_containers
            .iter()
            .flatten()
            .map(|c| c.view(&statuses))
            .unzip();
        let pod_status_resources = status.resources.take();
        let resources = PodResources {
            containers,
            init_containers,
            overhead: self.overhead.unwrap_or_default(),
            pod_requests: self.resources.and_then(|r| r.requests),
            pod_allocated: status.allocated_resources.take(),
            pod_status_resources: pod_status_resources.is_some(),
            pod_actuated: pod_status_resources.and_then(|r| r.requests),
            resize_infeasible: resize_infeasible(
                status
                    .conditions
                    .iter()
                    .flatten()
                    .map(|c| (c.kind.as_str(), c.reason.as_deref())),
            ),
        };
        let r = requests_and_ports(&views, &init_views, &resources);
        let containers = || {
            self.init_containers
                .iter()
                .flatten()
                .chain(self.containers.iter().flatten())
        };
        let required_features = PodFeatureInputs {
            restart_all_containers: containers().any(|c| {
                c.restart_policy_rules
                    .iter()
                    .flatten()
                    .any(|r| r.action == RESTART_ALL_CONTAINERS_ACTION)
            }),
            host_network: self.host_network == Some(true),
            host_users_false: self.host_users == Some(false),
            bind_mount_options: containers()
                .chain(self.ephemeral_containers.iter().flatten())
                .any(WireContainer::has_bind_mount_options),
        }
        .infer();
        let images = self
            .init_containers
            .iter()
            .flatten()
            .chain(self.containers.iter().flatten())
            .map(|c| c.image.as_deref().unwrap_or(""))
            .chain(self.volumes.iter().flatten().filter_map(|v| {
                v.image
                    .as_ref()
                    .map(|i| i.reference.as_deref().unwrap_or(""))
            }))
            .map(normalized_image_name)
            .collect();
        PodSpecInfo {
            node_selector: self.node_selector.unwrap_or_default(),
            affinity: self.affinity,
            tolerations: self.tolerations.unwrap_or_default(),
            requests: r.requests.spec,
            counted: r.requests.counted,
            non_zero_requests: r.requests.non_zero,
            scoring_requests: r.requests.scoring,
            host_ports: r.host_ports,
            extended_requests: r.extended,
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
            inline_csi_drivers: self
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| v.csi.as_ref().map(|c| c.driver.clone()))
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
            images,
            required_features,
            resource_claims: self
                .resource_claims
                .iter()
                .flatten()
                .map(|c| {
                    PodResourceClaim::resolve(
                        &c.name,
                        c.resource_claim_name.as_deref(),
                        c.resource_claim_template_name.as_deref(),
                        status
                            .resource_claim_statuses
                            .iter()
                            .flatten()
                            .map(|s| (s.name.as_str(), s.resource_claim_name.as_deref())),
                    )
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
    allocated_resources: Option<RequestList>,
    resources: Option<WireResources>,
    container_statuses: Option<Vec<WireContainerStatus>>,
    init_container_statuses: Option<Vec<WireContainerStatus>>,
    conditions: Option<Vec<WireCondition>>,
    resource_claim_statuses: Option<Vec<WireClaimStatus>>,
}

/// The resize resources of one container's status.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainerStatus {
    #[serde(default)]
    name: String,
    allocated_resources: Option<RequestList>,
    resources: Option<WireResources>,
}

#[derive(Deserialize)]
struct WireCondition {
    #[serde(rename = "type", default)]
    kind: String,
    reason: Option<String>,
}
