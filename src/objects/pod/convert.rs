//! A [`PodInfo`] from a k8s-openapi `Pod`, as the watch cache sees it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::volumes::{InlineDisk, Sources};
use super::{
    ContainerView, ControllerRef, PREEMPT_NEVER, PodInfo, PodSpecInfo, PreemptionInfo, Requests,
    VolumeClaim, host_port, requests_and_ports,
};
use crate::objects::resources::{QuantityError, Resources};

impl From<&Pod> for PodInfo {
    fn from(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        PodInfo {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
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
                spec.map(|s| spec_from_api(meta.name.as_deref().unwrap_or(""), s))
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
fn spec_from_api(pod_name: &str, spec: &k8s_openapi::api::core::v1::PodSpec) -> PodSpecInfo {
    fn list(list: Option<&BTreeMap<String, Quantity>>) -> Result<Resources, QuantityError> {
        Resources::from_list(
            list.iter()
                .flat_map(|l| l.iter().map(|(k, q)| (k.as_str(), q.0.as_str()))),
        )
    }
    fn view(c: &k8s_openapi::api::core::v1::Container) -> Result<ContainerView, QuantityError> {
        Ok(ContainerView {
            requests: list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))?,
            ports: c
                .ports
                .iter()
                .flatten()
                .filter_map(|p| host_port(p.host_port, p.protocol.as_deref(), p.host_ip.as_deref()))
                .collect(),
            sidecar: c.restart_policy.as_deref() == Some("Always"),
        })
    }
    let requests = || -> Result<Requests, QuantityError> {
        let containers = spec
            .containers
            .iter()
            .map(view)
            .collect::<Result<Vec<_>, _>>()?;
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .map(view)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(requests_and_ports(
            &containers,
            &init,
            &list(spec.overhead.as_ref())?,
        ))
    };
    let r = requests().unwrap_or_default();
    PodSpecInfo {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        affinity: spec.affinity.clone(),
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        requests: r.requests,
        non_zero_requests: r.non_zero,
        host_ports: r.host_ports,
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
    }
}
