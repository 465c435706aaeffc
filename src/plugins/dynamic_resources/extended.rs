//! Extended resources backed by DRA (DRAExtendedResource, GA in v1.37):
//! a pod that requests `example.com/gpu: 1` in a container's resources,
//! on a node whose allocatable has no `example.com/gpu`, gets the device
//! from the DeviceClass that serves the name, through a ResourceClaim the
//! scheduler writes for the pod (kube-scheduler's
//! `extendeddynamicresources.go`):
//!
//! - PreFilter ([`ExtendedCycle::new`]): the pod's extended resources, which
//!   of them a class serves, and a claim an earlier attempt created for the
//!   pod and left behind (stale: every node rejects the pod until
//!   PostFilter deletes it).
//! - Filter ([`ExtendedCycle::on_node`]): which resources the node leaves
//!   to DRA (allocatable 0); those become device requests of one claim per
//!   node variant, allocated with the pod's own claims by an allocator
//!   built once per variant.
//! - PreBind ([`super::bind`]): the claim is created (its name generated
//!   from the pod's), allocated and reserved for the pod like any other,
//!   and the pod's `status.extendedResourceClaimStatus` maps each
//!   container's resource to its device request.
//! - Unreserve and PostFilter delete a claim the pod no longer needs.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ContainerExtendedResourceRequest;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaim,
    ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;

use super::owned_by;
use crate::cache::ClusterState;
use crate::dra::{Allocator, AllocatorError};
use crate::framework::Status;
use crate::k8s::resource_names::is_dra_extended_resource_name;
use crate::objects::pod::ContainerExtendedRequests;
use crate::objects::{NodeInfo, PodInfo};

/// The name the pod's claim has until PreBind creates it (not a valid
/// object name, so it never meets a real claim).
pub(super) const IN_MEMORY_NAME: &str = "<extended-resources>";
/// The annotation that marks a claim written for a pod's extended
/// resources (`resourceapi.ExtendedResourceClaimAnnotation`).
pub(super) const ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// Filter reason: a claim from an earlier attempt is in the way.
pub const ERR_STALE: &str = "cannot schedule extended resource claim";
/// Filter reason: an extended resource neither the node nor a class provides.
pub const ERR_CANNOT_FIT: &str = "cannot fit resource";

/// One extended resource the pod requests.
#[derive(Debug)]
struct Requested {
    name: String,
    /// The DeviceClass that serves it, if one does.
    class: Option<String>,
}

/// PreFilter's view of the pod's extended resources.
pub(super) struct ExtendedCycle {
    /// The pod's non-zero extended resources, by name.
    requested: Vec<Requested>,
    /// A claim an earlier attempt created for the pod.
    pub(super) stale: Option<Arc<ResourceClaim>>,
    /// The pod's containers' requests (kept for the device requests).
    containers: Vec<ContainerExtendedRequests>,
    /// The claim's metadata as PreBind creates it.
    meta: ObjectMeta,
    /// An allocator per node variant (bit `i` set: `requested[i]` comes
    /// from DRA), built on the first node of that variant.
    allocators: Mutex<HashMap<u64, Arc<Variant>>>,
}

/// The claim and allocator for one set of resources left to DRA.
pub(super) struct Variant {
    /// The claim with one device request per container and resource.
    pub(super) claim: Arc<ResourceClaim>,
    /// Which request serves which container's resource.
    pub(super) mappings: Arc<Vec<ContainerExtendedResourceRequest>>,
    /// Allocates the pod's unallocated claims followed by `claim`.
    pub(super) allocator: Allocator,
}

/// What Filter chose for the pod's extended resources on one node.
#[derive(Clone)]
pub(super) struct ExtendedChoice {
    /// The claim to create.
    pub(super) claim: Arc<ResourceClaim>,
    /// The devices allocated for it.
    pub(super) allocation: AllocationResult,
    /// For the pod's `status.extendedResourceClaimStatus`.
    pub(super) mappings: Arc<Vec<ContainerExtendedResourceRequest>>,
}

impl ExtendedCycle {
    /// `None` when the pod requests no extended resource a DeviceClass
    /// serves (kube-scheduler's `hasDeviceClassMappedExtendedResource`).
    pub(super) fn new(pod: &PodInfo, cluster: &ClusterState) -> Option<ExtendedCycle> {
        let dra = cluster.dra();
        let requested: Vec<Requested> = pod
            .spec
            .requests
            .scalar
            .iter()
            .filter(|&(name, &q)| q != 0 && is_dra_extended_resource_name(name))
            .map(|(name, _)| Requested {
                name: name.clone(),
                class: dra
                    .class_for_extended_resource(name)
                    .and_then(|c| c.metadata.name.clone()),
            })
            .collect();
        if requested.iter().all(|r| r.class.is_none()) {
            return None;
        }
        let stale = dra
            .claims_in(&pod.namespace)
            .find(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION))
                    .is_some_and(|v| v == "true")
                    && owned_by(c, pod)
            })
            .cloned();
        Some(ExtendedCycle {
            requested,
            stale,
            containers: pod.spec.extended_requests.clone(),
            meta: claim_meta(pod),
            allocators: Mutex::default(),
        })
    }

    /// kube-scheduler's `filterExtendedResources` on `node`: the resources
    /// the node leaves to DRA, as a variant (`None`: none), or the node's
    /// rejection. `user_claims` are the pod's claims to allocate, which the
    /// variant's allocator allocates first.
    pub(super) fn on_node(
        &self,
        node: &NodeInfo,
        user_claims: impl FnOnce() -> Vec<ResourceClaim>,
        cluster: &ClusterState,
    ) -> Result<Option<Arc<Variant>>, Status> {
        if self.stale.is_some() {
            return Err(Status::unresolvable(ERR_STALE));
        }
        let mut mask = 0u64;
        for (i, r) in self.requested.iter().enumerate() {
            let allocatable = node.allocatable.scalar.get(&r.name);
            if r.class.is_some() && allocatable.is_none_or(|&a| a == 0) {
                if i >= 64 {
                    return Err(Status::error(
                        "more than 64 extended resources backed by DRA in one pod",
                    ));
                }
                mask |= 1 << i;
            } else if allocatable.is_none() {
                return Err(Status::unresolvable(ERR_CANNOT_FIT));
            }
        }
        if mask == 0 {
            return Ok(None);
        }
        if let Some(v) = self.allocators.lock().get(&mask) {
            return Ok(Some(v.clone()));
        }
        let variant = Arc::new(self.variant(mask, user_claims(), cluster)?);
        self.allocators.lock().insert(mask, variant.clone());
        Ok(Some(variant))
    }

    /// Builds the claim and allocator of variant `mask`.
    fn variant(
        &self,
        mask: u64,
        mut claims: Vec<ResourceClaim>,
        cluster: &ClusterState,
    ) -> Result<Variant, Status> {
        let served: Vec<(&str, &str)> = self
            .requested
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .filter_map(|(_, r)| Some((r.name.as_str(), r.class.as_deref()?)))
            .collect();
        let (requests, mappings) = requests_and_mappings(&self.containers, &served);
        let claim = ResourceClaim {
            metadata: self.meta.clone(),
            spec: Some(ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(requests),
                    ..Default::default()
                }),
            }),
            status: None,
        };
        let dra = cluster.dra();
        let class_of = |name: &str| dra.class(name);
        claims.push(claim.clone());
        let allocator = match Allocator::new(claims, &class_of) {
            Ok(a) => a,
            Err(AllocatorError::OnNode(e)) => return Err(Status::unresolvable(e)),
            Err(e) => return Err(Status::error(e.to_string())),
        };
        Ok(Variant {
            claim: Arc::new(claim),
            mappings: Arc::new(mappings),
            allocator,
        })
    }
}

/// The claim's metadata: owned by the pod, marked by the annotation, its
/// name generated from the pod's when created.
fn claim_meta(pod: &PodInfo) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(pod.namespace.clone()),
        name: Some(IN_MEMORY_NAME.to_owned()),
        generate_name: Some(format!("{}-extended-resources-", pod.name)),
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            controller: Some(true),
            block_owner_deletion: None,
        }]),
        annotations: Some([(ANNOTATION.to_owned(), "true".to_owned())].into()),
        ..ObjectMeta::default()
    }
}

/// kube-scheduler's `createRequestsAndMappings`: per resource (by name),
/// one request per long-lived container (a container or sidecar) named
/// `container-<index>-request-<position>`; an init container that runs to
/// completion first reuses the requests of the long-lived containers after
/// it and asks only for the rest, and of those the largest is the one
/// request every such init container maps to. Requests come sorted by name.
fn requests_and_mappings(
    containers: &[ContainerExtendedRequests],
    served: &[(&str, &str)],
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let mut requests: Vec<DeviceRequest> = Vec::new();
    let mut mappings = Vec::new();
    let mapping = |c: &ContainerExtendedRequests, resource: &str, request: &str| {
        ContainerExtendedResourceRequest {
            container_name: c.name.clone(),
            resource_name: resource.to_owned(),
            request_name: request.to_owned(),
        }
    };
    for &(resource, class) in served {
        let wants = |c: &ContainerExtendedRequests| {
            c.requests
                .iter()
                .find(|r| r.resource == resource && r.count != 0)
                .map(|r| {
                    (
                        r.count,
                        format!("container-{}-request-{}", c.index, r.position),
                    )
                })
        };
        let device_request = |name: String, count: i64| DeviceRequest {
            name,
            exactly: Some(ExactDeviceRequest {
                device_class_name: class.to_owned(),
                allocation_mode: Some("ExactCount".into()),
                count: Some(count),
                ..Default::default()
            }),
            first_available: None,
        };
        // Long-lived containers' requests, by container index.
        let long: Vec<(usize, i64, String)> = containers
            .iter()
            .filter(|c| c.long_lived)
            .filter_map(|c| wants(c).map(|(count, name)| (c.index, count, name)))
            .collect();
        let mut long_mappings = Vec::new();
        for c in containers.iter().filter(|c| c.long_lived) {
            if let Some((_, name)) = wants(c) {
                long_mappings.push(mapping(c, resource, &name));
            }
        }
        let mut short_mappings = Vec::new();
        let mut largest: Option<(i64, String)> = None;
        let mut short_names = Vec::new();
        for c in containers.iter().filter(|c| !c.long_lived) {
            let Some((count, name)) = wants(c) else {
                continue;
            };
            let mut reused = 0;
            let mut covered = false;
            for (_, n, long_name) in long.iter().filter(|(i, _, _)| *i >= c.index) {
                reused += n;
                short_mappings.push(mapping(c, resource, long_name));
                if reused >= count {
                    covered = true;
                    break;
                }
            }
            if covered {
                continue;
            }
            let rest = count - reused;
            short_mappings.push(mapping(c, resource, &name));
            short_names.push(name.clone());
            if largest.as_ref().is_none_or(|(n, _)| *n < rest) {
                largest = Some((rest, name));
            }
        }
        if let Some((_, largest_name)) = &largest
            && short_names.len() > 1
        {
            for m in &mut short_mappings {
                if m.request_name != *largest_name && short_names.contains(&m.request_name) {
                    m.request_name = largest_name.clone();
                }
            }
        }
        if let Some((count, name)) = largest {
            requests.push(device_request(name, count));
        }
        requests.extend(
            long.into_iter()
                .map(|(_, count, name)| device_request(name, count)),
        );
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::pod::ExtendedRequest;

    fn container(
        index: usize,
        long_lived: bool,
        requests: &[(&str, i64, usize)],
    ) -> ContainerExtendedRequests {
        ContainerExtendedRequests {
            index,
            name: format!("c{index}"),
            long_lived,
            requests: requests
                .iter()
                .map(|&(resource, count, position)| ExtendedRequest {
                    resource: resource.into(),
                    count,
                    position,
                })
                .collect(),
        }
    }

    /// Requests as `(name, count)`, mappings as `(container, request)`.
    type Summary = (Vec<(String, i64)>, Vec<(String, String)>);

    fn summary(
        (requests, mappings): (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>),
    ) -> Summary {
        (
            requests
                .into_iter()
                .map(|r| (r.name, r.exactly.and_then(|e| e.count).unwrap_or(0)))
                .collect(),
            mappings
                .into_iter()
                .map(|m| (m.container_name, m.request_name))
                .collect(),
        )
    }

    /// Two regular containers: one request each, sorted by name.
    #[test]
    fn each_long_lived_container_gets_its_own_request() {
        let containers = [
            container(0, true, &[("example.com/gpu", 1, 1)]),
            container(1, true, &[("example.com/gpu", 2, 0)]),
        ];
        let got = summary(requests_and_mappings(
            &containers,
            &[("example.com/gpu", "gpu")],
        ));
        assert_eq!(
            got.0,
            vec![
                ("container-0-request-1".into(), 1),
                ("container-1-request-0".into(), 2)
            ]
        );
        assert_eq!(
            got.1,
            vec![
                ("c0".into(), "container-0-request-1".into()),
                ("c1".into(), "container-1-request-0".into())
            ]
        );
    }

    /// kube-scheduler's table (`TestCreateRequestsAndMappings`'s init
    /// container cases): an init container reuses the devices of the
    /// containers after it and asks for the rest; of two init containers
    /// that ask, the larger request serves both.
    #[test]
    fn init_containers_reuse_later_requests_and_share_the_largest_rest() {
        let containers = [
            container(0, false, &[("example.com/gpu", 3, 0)]),
            container(1, false, &[("example.com/gpu", 2, 0)]),
            container(2, false, &[("example.com/gpu", 1, 0)]),
            container(3, true, &[("example.com/gpu", 1, 0)]),
        ];
        let got = summary(requests_and_mappings(
            &containers,
            &[("example.com/gpu", "gpu")],
        ));
        assert_eq!(
            got.0,
            vec![
                ("container-0-request-0".into(), 2),
                ("container-3-request-0".into(), 1)
            ]
        );
        assert_eq!(
            got.1,
            vec![
                ("c3".into(), "container-3-request-0".into()),
                ("c0".into(), "container-3-request-0".into()),
                ("c0".into(), "container-0-request-0".into()),
                ("c1".into(), "container-3-request-0".into()),
                ("c1".into(), "container-0-request-0".into()),
                ("c2".into(), "container-3-request-0".into()),
            ]
        );
    }

    /// A resource the node provides itself is not requested from DRA.
    #[test]
    fn only_the_served_resources_become_requests() {
        let containers = [container(
            0,
            true,
            &[("example.com/gpu", 1, 0), ("example.com/nic", 1, 1)],
        )];
        let got = summary(requests_and_mappings(
            &containers,
            &[("example.com/nic", "nic")],
        ));
        assert_eq!(got.0, vec![("container-0-request-1".into(), 1)]);
    }
}
