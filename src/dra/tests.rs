//! Tests of the allocator, after the cases of Go's shared allocator test
//! table (`structured/internal/allocatortesting/allocator_testing.go`),
//! whose case names the comments give.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CELDeviceSelector, Device, DeviceAttribute, DeviceClaim, DeviceClass,
    DeviceClassSpec, DeviceConstraint, DeviceRequest, DeviceSelector, DeviceSubRequest,
    ExactDeviceRequest, ResourceClaim, ResourceClaimSpec, ResourcePool, ResourceSlice,
    ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{AllocatedDevices, Allocator, AllocatorError, DeviceId, STEP_BUDGET, SearchLimits};
use crate::cache::dra_taints::TaintRules;
use crate::objects::NodeInfo;

pub(super) const DRIVER: &str = "driver-a";
pub(super) const CLASS: &str = "class-a";

pub(super) fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("default".to_owned()),
        ..Default::default()
    }
}

pub(super) fn class(name: &str, selectors: &[&str]) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(selectors.iter().map(|e| cel(e)).collect()),
            ..Default::default()
        }),
    }
}

pub(super) fn cel(expression: &str) -> DeviceSelector {
    DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: expression.to_owned(),
        }),
    }
}

pub(super) fn device(name: &str) -> Device {
    Device {
        name: name.to_owned(),
        ..Default::default()
    }
}

pub(super) fn with_attr(mut d: Device, key: &str, value: DeviceAttribute) -> Device {
    d.attributes
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value);
    d
}

pub(super) fn string_attr(s: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(s.to_owned()),
        ..Default::default()
    }
}

/// A complete one-slice pool `pool` local to `node`.
pub(super) fn slice(name: &str, node: &str, pool: &str, devices: Vec<Device>) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.to_owned(),
            node_name: Some(node.to_owned()),
            pool: ResourcePool {
                name: pool.to_owned(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..Default::default()
        },
    }
}

pub(super) fn request(name: &str, count: i64) -> DeviceRequest {
    DeviceRequest {
        name: name.to_owned(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: CLASS.to_owned(),
            allocation_mode: Some("ExactCount".to_owned()),
            count: Some(count),
            ..Default::default()
        }),
        first_available: None,
    }
}

pub(super) fn all_request(name: &str) -> DeviceRequest {
    let mut r = request(name, 0);
    if let Some(e) = r.exactly.as_mut() {
        e.allocation_mode = Some("All".to_owned());
        e.count = None;
    }
    r
}

pub(super) fn claim(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        metadata: meta(name),
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                ..Default::default()
            }),
        }),
        status: None,
    }
}

pub(super) fn node(name: &str) -> NodeInfo {
    NodeInfo::new(name, [("zone", "a")])
}

/// The classes every test knows: `class-a` selects everything.
fn classes() -> impl Fn(&str) -> Option<Arc<DeviceClass>> {
    let known = [class(CLASS, &[])];
    move |name: &str| {
        known
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned()
            .map(Arc::new)
    }
}

pub(super) fn arcs(slices: Vec<ResourceSlice>) -> Vec<Arc<ResourceSlice>> {
    slices.into_iter().map(Arc::new).collect()
}

/// Allocates `claims` on node-1 from `slices` with `allocated` in use.
pub(super) fn allocate(
    claims: Vec<ResourceClaim>,
    slices: Vec<ResourceSlice>,
    allocated: &AllocatedDevices,
) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
    allocate_tainted(claims, slices, allocated, &TaintRules::default())
}

/// [`allocate`] with DeviceTaintRules. Within the limits Filter applies
/// by default (kube-scheduler's 10 s `filterTimeout` and placer's step
/// budget), so every case of the tables shows they change no verdict.
pub(super) fn allocate_tainted(
    claims: Vec<ResourceClaim>,
    slices: Vec<ResourceSlice>,
    allocated: &AllocatedDevices,
    rules: &TaintRules,
) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
    let allocator = Allocator::new(claims, &classes())?;
    let slices = arcs(slices);
    let limits = SearchLimits::new(Some(std::time::Duration::from_secs(10)), STEP_BUDGET);
    allocator.allocate_within(&node("node-1"), &slices, &slices, allocated, rules, &limits)
}

/// `(request, pool, device)` of every device result of every claim.
pub(super) fn picked(results: &[AllocationResult]) -> Vec<Vec<(String, String, String)>> {
    results
        .iter()
        .map(|r| {
            r.devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .map(|d| (d.request.clone(), d.pool.clone(), d.device.clone()))
                .collect()
        })
        .collect()
}

pub(super) fn triple(request: &str, pool: &str, device: &str) -> (String, String, String) {
    (request.to_owned(), pool.to_owned(), device.to_owned())
}

fn local_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node.to_owned()]),
            }]),
            match_expressions: None,
        }],
    }
}

// "simple": one request, one device, the result pinned to the node.
#[test]
fn simple_count_allocates_and_pins_to_the_node() {
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![slice("s1", "node-1", "pool-1", vec![device("dev-1")])],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0", "pool-1", "dev-1")]]
    );
    assert_eq!(results[0].node_selector, Some(local_selector("node-1")));
    let result = &results[0]
        .devices
        .as_ref()
        .expect("devices")
        .results
        .as_ref()
        .expect("results")[0];
    assert_eq!(result.driver, DRIVER);
    assert_eq!(result.admin_access, None);
}

// "small-and-large": two devices of two in the pool.
#[test]
fn exact_count_takes_devices_in_order() {
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 2)])],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2"), device("d3")],
        )],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0", "pool-1", "d1"),
            triple("req-0", "pool-1", "d2")
        ]]
    );
}

// "not-enough-suitable-devices".
#[test]
fn not_enough_devices_does_not_fit() {
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 3)])],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2")],
        )],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(results, None);
}

// "all-devices-some-allocated"-like: an allocated device is not reused, and
// devices of an earlier claim in the same call are not reused either.
#[test]
fn allocated_devices_and_earlier_claims_are_not_reused() {
    let allocated: AllocatedDevices = [DeviceId::new(DRIVER, "pool-1", "d1")]
        .into_iter()
        .collect();
    let results = allocate(
        vec![
            claim("c1", vec![request("req-0", 1)]),
            claim("c2", vec![request("req-0", 1)]),
        ],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2"), device("d3")],
        )],
        &allocated,
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![
            vec![triple("req-0", "pool-1", "d2")],
            vec![triple("req-0", "pool-1", "d3")]
        ]
    );
    let both: AllocatedDevices = [
        DeviceId::new(DRIVER, "pool-1", "d1"),
        DeviceId::new(DRIVER, "pool-1", "d2"),
    ]
    .into_iter()
    .collect();
    let none = allocate(
        vec![
            claim("c1", vec![request("req-0", 1)]),
            claim("c2", vec![request("req-0", 1)]),
        ],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2"), device("d3")],
        )],
        &both,
    )
    .expect("no error");
    assert_eq!(none, None);
}

// "all-devices": every device of the node; "all-devices-some-allocated":
// one in use makes "All" impossible.
#[test]
fn all_mode_takes_every_device_or_nothing() {
    let slices = || {
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2")],
        )]
    };
    let results = allocate(
        vec![claim("c1", vec![all_request("req-0")])],
        slices(),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0", "pool-1", "d1"),
            triple("req-0", "pool-1", "d2")
        ]]
    );
    let allocated: AllocatedDevices = [DeviceId::new(DRIVER, "pool-1", "d2")]
        .into_iter()
        .collect();
    let none = allocate(
        vec![claim("c1", vec![all_request("req-0")])],
        slices(),
        &allocated,
    )
    .expect("no error");
    assert_eq!(none, None);
    // "all-devices-no-devices"-like: nothing to take is not a fit.
    let empty = allocate(
        vec![claim("c1", vec![all_request("req-0")])],
        vec![],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(empty, None);
}

fn match_model(mut c: ResourceClaim, requests: &[&str]) -> ResourceClaim {
    if let Some(d) = c.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        d.constraints = Some(vec![DeviceConstraint {
            match_attribute: Some(format!("{DRIVER}/model")),
            requests: Some(requests.iter().map(|r| (*r).to_owned()).collect()),
            distinct_attribute: None,
        }]);
    }
    c
}

// "with-constraint-not-matching-first"-like: the first device for req-0
// has no partner for req-1; the search must backtrack to the second.
#[test]
fn match_attribute_backtracks_to_the_second_choice() {
    let devices = vec![
        with_attr(device("d1"), "model", string_attr("x")),
        with_attr(device("d2"), "model", string_attr("y")),
        with_attr(device("d3"), "model", string_attr("y")),
    ];
    let results = allocate(
        vec![match_model(
            claim("c1", vec![request("req-0", 1), request("req-1", 1)]),
            &[],
        )],
        vec![slice("s1", "node-1", "pool-1", devices)],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0", "pool-1", "d2"),
            triple("req-1", "pool-1", "d3")
        ]]
    );
}

// "with-constraint-non-existent-attribute": no device has it.
#[test]
fn match_attribute_without_the_attribute_does_not_fit() {
    let results = allocate(
        vec![match_model(
            claim("c1", vec![request("req-0", 1)]),
            &["req-0"],
        )],
        vec![slice("s1", "node-1", "pool-1", vec![device("d1")])],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(results, None);
}

// "prioritized-list-first-unavailable": the first subrequest wants more
// devices than there are, the second fits; the result names "req/sub".
#[test]
fn first_available_takes_the_first_subrequest_that_fits() {
    let sub = |name: &str, count: i64| DeviceSubRequest {
        name: name.to_owned(),
        device_class_name: CLASS.to_owned(),
        allocation_mode: Some("ExactCount".to_owned()),
        count: Some(count),
        ..Default::default()
    };
    let req = DeviceRequest {
        name: "req-0".to_owned(),
        exactly: None,
        first_available: Some(vec![sub("big", 3), sub("small", 1)]),
    };
    let results = allocate(
        vec![claim("c1", vec![req])],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2")],
        )],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0/small", "pool-1", "d1")]]
    );
}

// "admin-access-enabled": an admin-access request may use an allocated device
// and is marked as such in the result.
#[test]
fn admin_access_may_use_devices_in_use() {
    let mut req = request("req-0", 1);
    if let Some(e) = req.exactly.as_mut() {
        e.admin_access = Some(true);
    }
    let allocated: AllocatedDevices = [DeviceId::new(DRIVER, "pool-1", "d1")]
        .into_iter()
        .collect();
    let results = allocate(
        vec![claim("c1", vec![req])],
        vec![slice("s1", "node-1", "pool-1", vec![device("d1")])],
        &allocated,
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0", "pool-1", "d1")]]
    );
    let result = &results[0]
        .devices
        .as_ref()
        .expect("devices")
        .results
        .as_ref()
        .expect("results")[0];
    assert_eq!(result.admin_access, Some(true));
}

// "missing-class".
#[test]
fn missing_class_is_an_error() {
    let mut req = request("req-0", 1);
    if let Some(e) = req.exactly.as_mut() {
        e.device_class_name = "no-such-class".to_owned();
    }
    let err = Allocator::new(vec![claim("c1", vec![req])], &classes()).expect_err("missing class");
    assert_eq!(
        err,
        AllocatorError::Fatal(
            "claim default/c1, request req-0: could not retrieve device class no-such-class: deviceclass.resource.k8s.io \"no-such-class\" not found".to_owned()
        )
    );
}

// "too-many-devices-single-request": more than AllocationResultsMaxSize.
#[test]
fn requests_beyond_the_result_limit_are_an_error() {
    let err = allocate(
        vec![claim("c1", vec![request("req-0", 33)])],
        vec![],
        &AllocatedDevices::new(),
    )
    .expect_err("over the limit");
    assert_eq!(
        err,
        AllocatorError::Fatal(
            "claim default/c1, request req-0: adding 33 devices exceeds the claim limit of 32, with 0 already accounted for".to_owned()
        )
    );
}

#[test]
fn allocator_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Allocator>();
}

fn first_available(name: &str, subs: &[(&str, i64)]) -> DeviceRequest {
    DeviceRequest {
        name: name.to_owned(),
        exactly: None,
        first_available: Some(
            subs.iter()
                .map(|(sub, count)| DeviceSubRequest {
                    name: (*sub).to_owned(),
                    device_class_name: CLASS.to_owned(),
                    allocation_mode: Some("ExactCount".to_owned()),
                    count: Some(*count),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

// "prioritized-list-with-backtracking": the first subrequest fits alone but
// leaves nothing for the next request; the search goes back to the second.
#[test]
fn first_available_backtracks_when_a_later_request_fails() {
    let results = allocate(
        vec![claim(
            "c1",
            vec![
                first_available("req-0", &[("big", 2), ("small", 1)]),
                request("req-1", 1),
            ],
        )],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2")],
        )],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0/small", "pool-1", "d1"),
            triple("req-1", "pool-1", "d2")
        ]]
    );
}

// "prioritized-list-too-many-in-first-subrequest": a subrequest beyond the
// result limit is skipped, not an error, when another fits.
#[test]
fn first_available_skips_subrequests_beyond_the_limit() {
    let results = allocate(
        vec![claim(
            "c1",
            vec![first_available("req-0", &[("huge", 33), ("one", 1)])],
        )],
        vec![slice("s1", "node-1", "pool-1", vec![device("d1")])],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0/one", "pool-1", "d1")]]
    );
}

// "admin-access-claims-device-allocating-for-non-admin-access": an admin
// claim may take a device another claim of the pod is taking, but one
// claim never gets the same device twice.
#[test]
fn admin_access_shares_with_other_claims_not_within_one() {
    let admin = |count: i64| {
        let mut req = request("req-0", count);
        if let Some(e) = req.exactly.as_mut() {
            e.admin_access = Some(true);
        }
        req
    };
    let results = allocate(
        vec![
            claim("c1", vec![request("req-0", 1)]),
            claim("c2", vec![admin(1)]),
        ],
        vec![slice("s1", "node-1", "pool-1", vec![device("d1")])],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![
            vec![triple("req-0", "pool-1", "d1")],
            vec![triple("req-0", "pool-1", "d1")]
        ]
    );
    let none = allocate(
        vec![claim("c1", vec![admin(2)])],
        vec![slice("s1", "node-1", "pool-1", vec![device("d1")])],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(none, None);
}
