//! A pod's requests of extended resources that Dynamic Resource Allocation
//! may back (DRAExtendedResource, GA in v1.37): a DeviceClass that names an
//! extended resource (`spec.extendedResourceName`, or implicitly
//! `deviceclass.resource.kubernetes.io/<class>`) serves the pods that
//! request it on nodes whose allocatable does not list it. DynamicResources
//! then turns each container's request into a device request named after
//! the container's index and the resource's position among the container's
//! request names (`container-<i>-request-<j>`), which is why the positions
//! are kept here, computed once when the pod is decoded: for every resource
//! with a domain in its name. Which of them a class serves is the plugins'
//! question (`k8s::taints::is_dra_extended_resource_name`, then the
//! cluster's classes).

use super::ContainerView;
use super::requests::PodResources;
use crate::objects::resources::RequestList;

/// The prefix of a DeviceClass's implicit extended resource name
/// (`resourceapi.ResourceDeviceClassPrefix`).
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// One container's non-zero requests of resources with a domain in their
/// name (every extended resource a class may serve among them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerExtendedRequests {
    /// The container's index among the init containers followed by the
    /// containers.
    pub index: usize,
    /// The container's name.
    pub name: String,
    /// A container or a sidecar: it runs as long as the pod. An init
    /// container that runs to completion is not, and can reuse the devices
    /// of the long-lived containers after it.
    pub long_lived: bool,
    /// The requests, by resource name.
    pub requests: Vec<ExtendedRequest>,
}

/// One request of a container for an extended resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedRequest {
    /// The resource's name.
    pub resource: String,
    /// How many (extended resources are whole numbers).
    pub count: i64,
    /// The name's position among all the container's request names, sorted.
    pub position: usize,
}

/// The containers of a pod that request such resources, init containers
/// first, in spec order.
pub(super) fn extended_requests(
    containers: &[ContainerView],
    init: &[ContainerView],
    resources: &PodResources,
) -> Vec<ContainerExtendedRequests> {
    let init_count = init.len();
    init.iter()
        .zip(&resources.init_containers)
        .chain(containers.iter().zip(&resources.containers))
        .enumerate()
        .filter_map(|(index, (view, r))| {
            let requests = requests_of(&r.requests);
            (!requests.is_empty()).then(|| ContainerExtendedRequests {
                index,
                name: view.name.clone(),
                long_lived: index >= init_count || r.sidecar,
                requests,
            })
        })
        .collect()
}

/// The non-zero requests of resources with a domain in one container's
/// request list, with their positions among the list's sorted names.
fn requests_of(list: &RequestList) -> Vec<ExtendedRequest> {
    let named = [
        ("cpu", list.has_cpu),
        ("memory", list.has_memory),
        ("ephemeral-storage", list.has_ephemeral_storage),
    ];
    list.values
        .scalar
        .iter()
        .enumerate()
        .filter(|(_, (name, count))| **count != 0 && name.contains('/'))
        .map(|(nth, (name, count))| {
            // The scalar map is sorted as Go's `slices.Sort` sorts strings
            // (bytes); the three named resources fall in between.
            let before = named
                .iter()
                .filter(|(n, present)| *present && *n < name.as_str())
                .count();
            ExtendedRequest {
                resource: name.clone(),
                count: *count,
                position: nth + before,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_every_request_name_sorted() {
        let list = RequestList::from_list([
            ("memory", "1Gi"),
            ("cpu", "1"),
            ("example.com/gpu", "2"),
            ("ephemeral-storage", "1Gi"),
            ("zz.io/nic", "1"),
            ("hugepages-2Mi", "2Mi"),
            ("a.io/zero", "0"),
        ])
        .unwrap();
        // Sorted: a.io/zero, cpu, ephemeral-storage, example.com/gpu,
        // hugepages-2Mi, memory, zz.io/nic.
        let got: Vec<(String, i64, usize)> = requests_of(&list)
            .into_iter()
            .map(|r| (r.resource, r.count, r.position))
            .collect();
        assert_eq!(
            got,
            vec![("example.com/gpu".into(), 2, 3), ("zz.io/nic".into(), 1, 6)]
        );
    }
}
