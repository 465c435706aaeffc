//! Tests of the features v1.37 enables by default besides selectors:
//! partitionable devices (shared counters), device taints, binding
//! conditions, distinctAttribute and configurations (consumable capacity:
//! `share_tests`). Go case names in comments
//! (`structured/internal/allocatortesting/allocator_testing.go`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::Counter;
use k8s_openapi::api::resource::v1::{
    AllocationResult, CounterSet, Device, DeviceAllocationConfiguration, DeviceClaimConfiguration,
    DeviceClass, DeviceConstraint, DeviceCounterConsumption, DeviceTaint, DeviceToleration,
    OpaqueDeviceConfiguration, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

use super::tests::{
    CLASS, DRIVER, arcs, claim, class, device, node, picked, request, slice, string_attr, triple,
    with_attr,
};
use super::{AllocatedDevices, Allocator, AllocatorError, DeviceId};
use crate::cache::dra_taints::TaintRules;

fn run(
    claims: Vec<ResourceClaim>,
    slices: Vec<ResourceSlice>,
    allocated: &AllocatedDevices,
    known: DeviceClass,
) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
    let class_of = move |name: &str| -> Option<Arc<DeviceClass>> {
        (name == CLASS).then(|| Arc::new(known.clone()))
    };
    let allocator = Allocator::new(claims, &class_of)?;
    let slices = arcs(slices);
    allocator.allocate(
        &node("node-1"),
        &slices,
        &slices,
        allocated,
        &TaintRules::default(),
    )
}

pub(super) fn plain(
    claims: Vec<ResourceClaim>,
    slices: Vec<ResourceSlice>,
    allocated: &AllocatedDevices,
) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
    run(claims, slices, allocated, class(CLASS, &[]))
}

pub(super) fn consumes(mut d: Device, gib: i64) -> Device {
    d.consumes_counters = Some(vec![DeviceCounterConsumption {
        counter_set: "gpu-0".to_owned(),
        counters: BTreeMap::from([(
            "memory".to_owned(),
            Counter {
                value: Quantity(format!("{gib}Gi")),
            },
        )]),
        compatibility_groups: None,
    }]);
    d
}

/// A pool of two slices: `devices`, and a counter set `gpu-0` of 8Gi.
pub(super) fn partitioned(devices: Vec<Device>) -> Vec<ResourceSlice> {
    let mut with_devices = slice("s1", "node-1", "pool-1", devices);
    with_devices.spec.pool.resource_slice_count = 2;
    let mut counters = slice("s2", "node-1", "pool-1", vec![]);
    counters.spec.pool.resource_slice_count = 2;
    counters.spec.devices = None;
    counters.spec.shared_counters = Some(vec![CounterSet {
        name: "gpu-0".to_owned(),
        counters: BTreeMap::from([(
            "memory".to_owned(),
            Counter {
                value: Quantity("8Gi".to_owned()),
            },
        )]),
    }]);
    vec![with_devices, counters]
}

// "partitionable-devices-single-device", "partitionable-devices-multiple-devices",
// "partitionable-devices-no-capacity-available": partitions share 8Gi.
#[test]
fn partitions_share_the_counters_of_their_device() {
    let devices = || {
        vec![
            consumes(device("whole"), 8),
            consumes(device("half-a"), 4),
            consumes(device("half-b"), 4),
        ]
    };
    let one = plain(
        vec![claim("c1", vec![request("req-0", 1)])],
        partitioned(devices()),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(picked(&one), vec![vec![triple("req-0", "pool-1", "whole")]]);
    // Two devices: "whole" leaves nothing, so both halves.
    let two = plain(
        vec![claim("c1", vec![request("req-0", 2)])],
        partitioned(devices()),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&two),
        vec![vec![
            triple("req-0", "pool-1", "half-a"),
            triple("req-0", "pool-1", "half-b")
        ]]
    );
    // An allocated half leaves only the other half.
    let allocated: AllocatedDevices = [DeviceId::new(DRIVER, "pool-1", "half-a")]
        .into_iter()
        .collect();
    let rest = plain(
        vec![claim("c1", vec![request("req-0", 1)])],
        partitioned(devices()),
        &allocated,
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&rest),
        vec![vec![triple("req-0", "pool-1", "half-b")]]
    );
    let none = plain(
        vec![claim("c1", vec![request("req-0", 2)])],
        partitioned(devices()),
        &allocated,
    )
    .expect("no error");
    assert_eq!(none, None);
}

// Counters are exact, as Go's `Quantity` arithmetic: two devices taking
// 500u each fit a counter of 1m, three taking 400u do not.
#[test]
fn counters_below_a_milli_unit_are_exact() {
    let amounts = |devices: &[(&str, &str)], total: &str| {
        let devices = devices
            .iter()
            .map(|(name, takes)| {
                let mut d = consumes(device(name), 1);
                if let Some(c) = d.consumes_counters.as_mut() {
                    c[0].counters.insert(
                        "memory".to_owned(),
                        Counter {
                            value: Quantity((*takes).to_owned()),
                        },
                    );
                }
                d
            })
            .collect();
        let mut slices = partitioned(devices);
        if let Some(sets) = slices[1].spec.shared_counters.as_mut() {
            sets[0].counters.insert(
                "memory".to_owned(),
                Counter {
                    value: Quantity(total.to_owned()),
                },
            );
        }
        slices
    };
    let two = plain(
        vec![claim("c1", vec![request("req-0", 2)])],
        amounts(&[("a", "500u"), ("b", "500u")], "1m"),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&two),
        vec![vec![
            triple("req-0", "pool-1", "a"),
            triple("req-0", "pool-1", "b")
        ]]
    );
    let three = plain(
        vec![claim("c1", vec![request("req-0", 3)])],
        amounts(&[("a", "400u"), ("b", "400u"), ("c", "400u")], "1m"),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(three, None);
    // Nano-units, the finest a quantity has.
    let nanos = plain(
        vec![claim("c1", vec![request("req-0", 2)])],
        amounts(&[("a", "1n"), ("b", "1n")], "2n"),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert!(nanos.is_some());
}

// "partitionable-devices-overallocated-capacity-pool" / dangling references:
// a device consuming an unknown counter set makes the pool invalid.
#[test]
fn unknown_counter_sets_make_the_pool_invalid() {
    let mut d = consumes(device("d1"), 1);
    if let Some(c) = d.consumes_counters.as_mut() {
        c[0].counter_set = "nope".to_owned();
    }
    let err = plain(
        vec![claim("c1", vec![request("req-0", 1)])],
        partitioned(vec![d]),
        &AllocatedDevices::new(),
    )
    .expect_err("invalid pool");
    assert_eq!(
        err,
        AllocatorError::OnNode("invalid resource pools were encountered".to_owned())
    );
}

fn taint(effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: "broken".to_owned(),
        value: Some("yes".to_owned()),
        effect: effect.to_owned(),
        time_added: None,
    }
}

// "tainted-two-devices", "tainted-no-effect", "tainted-two-devices-tolerated".
#[test]
fn tainted_devices_need_a_toleration() {
    let mut d1 = device("d1");
    d1.taints = Some(vec![taint("NoSchedule")]);
    let mut d2 = device("d2");
    d2.taints = Some(vec![taint("None")]);
    let results = plain(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![slice("s1", "node-1", "pool-1", vec![d1.clone(), d2])],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0", "pool-1", "d2")]]
    );

    let mut tolerant = request("req-0", 1);
    let toleration = DeviceToleration {
        key: Some("broken".to_owned()),
        operator: Some("Exists".to_owned()),
        ..Default::default()
    };
    if let Some(e) = tolerant.exactly.as_mut() {
        e.tolerations = Some(vec![toleration.clone()]);
    }
    let results = plain(
        vec![claim("c1", vec![tolerant])],
        vec![slice("s1", "node-1", "pool-1", vec![d1.clone()])],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    let result = &results[0]
        .devices
        .as_ref()
        .expect("devices")
        .results
        .as_ref()
        .expect("results")[0];
    assert_eq!(result.device, "d1");
    assert_eq!(result.tolerations, Some(vec![toleration]));

    let none = plain(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![slice("s1", "node-1", "pool-1", vec![d1])],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(none, None);
}

// Binding conditions: devices with them are tried last, and the result
// carries them; a device that binds to its node pins the claim.
#[test]
fn binding_conditions_are_copied_and_such_pools_come_last() {
    let mut gated = device("gated");
    gated.binding_conditions = Some(vec!["attached".to_owned()]);
    gated.binding_failure_conditions = Some(vec!["failed".to_owned()]);
    gated.binds_to_node = Some(true);
    let mut gated_pool = slice("s0", "", "pool-0", vec![gated]);
    gated_pool.spec.node_name = None;
    gated_pool.spec.all_nodes = Some(true);
    let mut free_pool = slice("s1", "", "pool-1", vec![device("free")]);
    free_pool.spec.node_name = None;
    free_pool.spec.all_nodes = Some(true);
    let results = plain(
        vec![claim("c1", vec![request("req-0", 2)])],
        vec![gated_pool, free_pool],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0", "pool-1", "free"),
            triple("req-0", "pool-0", "gated")
        ]]
    );
    let result = &results[0]
        .devices
        .as_ref()
        .expect("devices")
        .results
        .as_ref()
        .expect("results")[1];
    assert_eq!(result.binding_conditions, Some(vec!["attached".to_owned()]));
    assert_eq!(
        result.binding_failure_conditions,
        Some(vec!["failed".to_owned()])
    );
    assert!(results[0].node_selector.is_some(), "binds to the node");
}

// distinctAttribute: two devices with different values of an attribute.
#[test]
fn distinct_attribute_skips_equal_values() {
    let devices = vec![
        with_attr(device("d1"), "numa", string_attr("0")),
        with_attr(device("d2"), "numa", string_attr("0")),
        with_attr(device("d3"), "numa", string_attr("1")),
    ];
    let mut c = claim("c1", vec![request("req-0", 2)]);
    if let Some(d) = c.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        d.constraints = Some(vec![DeviceConstraint {
            distinct_attribute: Some(format!("{DRIVER}/numa")),
            match_attribute: None,
            requests: None,
        }]);
    }
    let results = plain(
        vec![c],
        vec![slice("s1", "node-1", "pool-1", devices)],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0", "pool-1", "d1"),
            triple("req-0", "pool-1", "d3")
        ]]
    );
}

fn opaque(driver: &str) -> OpaqueDeviceConfiguration {
    OpaqueDeviceConfiguration {
        driver: driver.to_owned(),
        parameters: RawExtension(serde_json::json!({"kind": "test"})),
    }
}

// "with-class-device-config", "claim-with-device-config",
// "claim-config-covering-all-requests-is-cleared".
#[test]
fn class_and_claim_configs_are_copied() {
    let mut known = class(CLASS, &[]);
    if let Some(spec) = known.spec.as_mut() {
        spec.config = Some(vec![
            k8s_openapi::api::resource::v1::DeviceClassConfiguration {
                opaque: Some(opaque("from-class")),
            },
        ]);
    }
    let mut c = claim("c1", vec![request("req-0", 1), request("req-1", 1)]);
    if let Some(d) = c.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        d.config = Some(vec![DeviceClaimConfiguration {
            requests: Some(vec!["req-1".to_owned()]),
            opaque: Some(opaque("from-claim")),
        }]);
    }
    let results = run(
        vec![c],
        vec![slice(
            "s1",
            "node-1",
            "pool-1",
            vec![device("d1"), device("d2")],
        )],
        &AllocatedDevices::new(),
        known,
    )
    .expect("no error")
    .expect("fits");
    let config = results[0].devices.as_ref().and_then(|d| d.config.clone());
    assert_eq!(
        config,
        Some(vec![
            // The class config names both requests, i.e. all: cleared.
            DeviceAllocationConfiguration {
                source: "FromClass".to_owned(),
                requests: None,
                opaque: Some(opaque("from-class")),
            },
            DeviceAllocationConfiguration {
                source: "FromClaim".to_owned(),
                requests: Some(vec!["req-1".to_owned()]),
                opaque: Some(opaque("from-claim")),
            },
        ])
    );
}
