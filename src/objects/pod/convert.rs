//! A [`PodInfo`] from a k8s-openapi `Pod`, as the watch cache sees it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::requests::{ContainerResources, PodResources};
use super::volumes::{InlineDisk, Sources};
use super::{
    ContainerView, ControllerRef, PREEMPT_NEVER, PodInfo, PodResourceClaim, PodSpecInfo,
    PreemptionInfo, Requests, VolumeClaim, host_port, requests_and_ports, resize_infeasible,
};
use crate::objects::features::{FeatureSet, PodFeatureInputs, RESTART_ALL_CONTAINERS_ACTION};
use crate::objects::images::normalized_image_name;
use crate::objects::resources::{QuantityError, RequestList};

impl From<&Pod> for PodInfo {
    fn from(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        PodInfo {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            labels: Arc::new(meta.labels.clone().unwrap_or_default()),
            annotations: meta.annotations.clone().unwrap_or_default(),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            scheduler_name: spec
                .and_then(|s| s.scheduler_name.clone())
                .unwrap_or_default(),
            node_name: spec
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            deleting: meta.deletion_timestamp.is_some(),
            controller: ControllerRef::first_of(
                meta.owner_references
                    .iter()
                    .flatten()
                    .map(|o| (o.controller, [&o.api_version, &o.kind, &o.name])),
            ),
            spec: Arc::new(
                spec.map(|s| {
                    spec_from_api(meta.name.as_deref().unwrap_or(""), s, pod.status.as_ref())
                })
                .unwrap_or_default(),
            ),
            preemption: preemption_from_api(pod),
        }
    }
}

fn preemption_from_api(pod: &Pod) -> PreemptionInfo {
    let status = pod.status.as_ref();
    let preempted = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler")
        });
    PreemptionInfo {
        never: pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some(PREEMPT_NEVER),
        nominated_node: status
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty()),
        start_time: status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second()),
        preempted,
    }
}

/// The spec of a pod the API server accepted (so its quantities are valid;
/// one that still fails to parse counts as zero rather than failing the watch).
/// The status contributes the in-place-resize resources the pod holds.
fn spec_from_api(
    pod_name: &str,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    status: Option<&PodStatus>,
) -> PodSpecInfo {
    type List = BTreeMap<String, Quantity>;
    fn list(list: Option<&List>) -> Result<RequestList, QuantityError> {
        RequestList::from_list(
            list.iter()
                .flat_map(|l| l.iter().map(|(k, q)| (k.as_str(), q.0.as_str()))),
        )
    }
    fn optional(l: Option<&List>) -> Result<Option<RequestList>, QuantityError> {
        l.map(|l| list(Some(l))).transpose()
    }
    let statuses: Vec<&ContainerStatus> = status
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .collect();
    let view = |c: &Container| -> Result<(ContainerView, ContainerResources), QuantityError> {
        let status = statuses.iter().find(|s| s.name == c.name);
        Ok((
            ContainerView {
                name: c.name.clone(),
                ports: c
                    .ports
                    .iter()
                    .flatten()
                    .filter_map(|p| {
                        host_port(p.host_port, p.protocol.as_deref(), p.host_ip.as_deref())
                    })
                    .collect(),
            },
            ContainerResources {
                requests: list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))?,
                allocated: optional(status.and_then(|s| s.allocated_resources.as_ref()))?,
                actuated: optional(
                    status
                        .and_then(|s| s.resources.as_ref())
                        .and_then(|r| r.requests.as_ref()),
                )?,
                sidecar: c.restart_policy.as_deref() == Some("Always"),
            },
        ))
    };
    let requests = || -> Result<Requests, QuantityError> {
        let (views, containers): (Vec<_>, Vec<_>) = spec
            .containers
            .iter()
            .map(view)
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        let (init_views, init_containers): (Vec<_>, Vec<_>) = spec
            .init_containers
            .iter()
            .flatten()
            .map(view)
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .unzip();
        let pod_status_resources = status.and_then(|s| s.resources.as_ref());
        let resources = PodResources {
            containers,
            init_containers,
            overhead: list(spec.overhead.as_ref())?.values,
            pod_requests: optional(spec.resources.as_ref().and_then(|r| r.requests.as_ref()))?,
            pod_allocated: optional(status.and_then(|s| s.allocated_resources.as_ref()))?,
            pod_status_resources: pod_status_resources.is_some(),
            pod_actuated: optional(pod_status_resources.and_then(|r| r.requests.as_ref()))?,
            resize_infeasible: resize_infeasible(
                status
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|c| (c.type_.as_str(), c.reason.as_deref())),
            ),
        };
        Ok(requests_and_ports(&views, &init_views, &resources))
    };
    let r = requests().unwrap_or_default();
    PodSpecInfo {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        affinity: spec.affinity.clone(),
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        requests: r.requests.spec,
        counted: r.requests.counted,
        non_zero_requests: r.requests.non_zero,
        scoring_requests: r.requests.scoring,
        host_ports: r.host_ports,
        extended_requests: r.extended,
        topology_spread_constraints: spec.topology_spread_constraints.clone().unwrap_or_default(),
        scheduling_gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        pvc_claims: spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => Some(VolumeClaim::named(&c.claim_name)),
                (None, Some(_)) => Some(VolumeClaim::ephemeral(pod_name, &v.name)),
                (None, None) => None,
            })
            .collect(),
        required_features: features_from_api(spec),
        resource_claims: spec
            .resource_claims
            .iter()
            .flatten()
            .map(|c| {
                PodResourceClaim::resolve(
                    &c.name,
                    c.resource_claim_name.as_deref(),
                    c.resource_claim_template_name.as_deref(),
                    status
                        .and_then(|s| s.resource_claim_statuses.as_ref())
                        .into_iter()
                        .flatten()
                        .map(|s| (s.name.as_str(), s.resource_claim_name.as_deref())),
                )
            })
            .collect(),
        images: spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
            .map(|c| c.image.as_deref().unwrap_or(""))
            .chain(spec.volumes.iter().flatten().filter_map(|v| {
                v.image
                    .as_ref()
                    .map(|i| i.reference.as_deref().unwrap_or(""))
            }))
            .map(normalized_image_name)
            .collect(),
        inline_disks: spec
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
        inline_csi_drivers: spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| v.csi.as_ref().map(|c| c.driver.clone()))
            .collect(),
    }
}

/// What NodeDeclaredFeatures' inference reads of a spec.
fn features_from_api(spec: &k8s_openapi::api::core::v1::PodSpec) -> FeatureSet {
    let containers = || {
        spec.init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
    };
    let bind_mounts = |mounts: Option<&Vec<k8s_openapi::api::core::v1::VolumeMount>>| {
        mounts
            .into_iter()
            .flatten()
            .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
    };
    PodFeatureInputs {
        restart_all_containers: containers().any(|c| {
            c.restart_policy_rules
                .iter()
                .flatten()
                .any(|r| r.action == RESTART_ALL_CONTAINERS_ACTION)
        }),
        host_network: spec.host_network == Some(true),
        host_users_false: spec.host_users == Some(false),
        bind_mount_options: containers().any(|c| bind_mounts(c.volume_mounts.as_ref()))
            || spec
                .ephemeral_containers
                .iter()
                .flatten()
                .any(|c| bind_mounts(c.volume_mounts.as_ref())),
    }
    .infer()
}
