//! Tests of consumable capacity in the search: devices that allow multiple
//! allocations shared by several claims within their capacity, requests
//! with `capacity`, and what the results record. Go case names
//! (`structured/internal/allocatortesting/allocator_testing.go`) in comments.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    AllocationResult, CapacityRequestPolicy, CapacityRequestPolicyRange, CapacityRequirements,
    Device, DeviceCapacity, DeviceRequest,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::feature_tests::{consumes, partitioned, plain};
use super::tests::{DRIVER, all_request, cel, claim, device, picked, request, slice, triple};
use super::{AllocatedDevices, AllocatorError, DeviceId, HeldDevice};

fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

/// A device shared by any number of allocations, with capacity `bw`.
fn shared(name: &str, bw: Option<DeviceCapacity>) -> Device {
    let mut d = device(name);
    d.allow_multiple_allocations = Some(true);
    d.capacity = bw.map(|c| BTreeMap::from([("bw".to_owned(), c)]));
    d
}

fn plain_capacity(value: &str) -> DeviceCapacity {
    DeviceCapacity {
        value: q(value),
        request_policy: None,
    }
}

/// Go's `withCapacityRequestPolicyRange`: default 2, min 2, step 2, max 4.
fn stepped(value: &str) -> DeviceCapacity {
    DeviceCapacity {
        value: q(value),
        request_policy: Some(CapacityRequestPolicy {
            default: Some(q("2")),
            valid_range: Some(CapacityRequestPolicyRange {
                min: q("2"),
                step: Some(q("2")),
                max: Some(q("4")),
            }),
            valid_values: None,
        }),
    }
}

fn asking(mut r: DeviceRequest, bw: &str) -> DeviceRequest {
    if let Some(e) = r.exactly.as_mut() {
        e.capacity = Some(CapacityRequirements {
            requests: Some(BTreeMap::from([("bw".to_owned(), q(bw))])),
        });
    }
    r
}

/// `(device, consumed bw, has a share ID)` of every result of every claim.
fn shares(results: &[AllocationResult]) -> Vec<(String, Option<String>, bool)> {
    results
        .iter()
        .flat_map(|r| r.devices.iter().flat_map(|d| d.results.iter().flatten()))
        .map(|d| {
            let bw = d
                .consumed_capacity
                .as_ref()
                .and_then(|c| c.get("bw"))
                .map(|q| q.0.clone());
            (d.device.clone(), bw, d.share_id.is_some())
        })
        .collect()
}

fn share(device: &str, bw: Option<&str>) -> (String, Option<String>, bool) {
    (device.to_owned(), bw.map(str::to_owned), true)
}

/// Two claims of one request each (`asks` of bw, or nothing).
fn two_claims(asks: Option<&str>) -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    let r = |name| match asks {
        Some(bw) => asking(request(name, 1), bw),
        None => request(name, 1),
    };
    vec![claim("c0", vec![r("req-0")]), claim("c1", vec![r("req-0")])]
}

fn on_node(devices: Vec<Device>) -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![slice("s1", "node-1", "pool-1", devices)]
}

// "...-without-capacity-without-capacity-request": both claims share the
// device, each with its own share ID and nothing consumed.
#[test]
fn claims_share_a_device_without_capacity() {
    let results = plain(
        two_claims(None),
        on_node(vec![shared("d1", None)]),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(shares(&results), [share("d1", None), share("d1", None)]);
    let ids: Vec<_> = results
        .iter()
        .flat_map(|r| r.devices.iter().flat_map(|d| d.results.iter().flatten()))
        .map(|d| d.share_id.clone())
        .collect();
    assert_ne!(ids[0], ids[1], "one share ID per share");
}

// "...-without-policy-without-capacity-request-block": a request that asks
// nothing consumes the whole capacity, so a second share does not fit.
#[test]
fn asking_nothing_takes_the_whole_capacity() {
    let none = plain(
        two_claims(None),
        on_node(vec![shared("d1", Some(plain_capacity("2")))]),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(none, None);
    let one = plain(
        vec![claim("c0", vec![request("req-0", 1)])],
        on_node(vec![shared("d1", Some(plain_capacity("2")))]),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(shares(&one), [share("d1", Some("2"))]);
}

// "...-with-range-policy-with-capacity-request", "...-with-range-policy-step",
// "...-with-exceeded-consumable-capacity-request": requests round up to the
// policy's steps, and the shares stop at the device's value.
#[test]
fn shares_round_up_and_stop_at_the_capacity() {
    let results = plain(
        two_claims(Some("1")),
        on_node(vec![shared("d1", Some(stepped("4")))]),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        shares(&results),
        [share("d1", Some("2")), share("d1", Some("2"))]
    );
    // 3 rounds up to 4: with the first share's 4, past the value.
    let none = plain(
        two_claims(Some("3")),
        on_node(vec![shared("d1", Some(stepped("4")))]),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(none, None);
    // Above the policy's maximum: never.
    let over = plain(
        vec![claim("c0", vec![asking(request("req-0", 1), "6")])],
        on_node(vec![shared("d1", Some(stepped("8")))]),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(over, None);
}

// "...-with-allocated-capacity-use-remaining", "...-next-device",
// "...-with-no-available-consumable-capacity": allocated shares count.
#[test]
fn allocated_shares_leave_the_rest() {
    let held = |bw: i128| -> AllocatedDevices {
        [HeldDevice::Share(
            DeviceId::new(DRIVER, "pool-1", "d1"),
            BTreeMap::from([("bw".to_owned(), bw * 1_000_000_000)]),
        )]
        .into_iter()
        .collect()
    };
    let devices = || {
        on_node(vec![
            shared("d1", Some(stepped("4"))),
            shared("d2", Some(stepped("2"))),
        ])
    };
    let ask = || vec![claim("c0", vec![asking(request("req-0", 1), "2")])];
    let rest = plain(ask(), devices(), &held(2))
        .expect("no error")
        .expect("fits");
    assert_eq!(shares(&rest), [share("d1", Some("2"))]);
    let next = plain(ask(), devices(), &held(4))
        .expect("no error")
        .expect("fits");
    assert_eq!(shares(&next), [share("d2", Some("2"))]);
    // A device taken whole by someone is in use, shareable or not.
    let mut both = held(4);
    both.insert(DeviceId::new(DRIVER, "pool-1", "d2"));
    assert_eq!(plain(ask(), devices(), &both).expect("no error"), None);
}

// "...-with-missing-capacity-request": a device without the capacity asked
// for is skipped; a device taken whole checks the request against its value.
#[test]
fn requests_need_the_capacity_they_name() {
    let missing = plain(
        vec![claim("c0", vec![asking(request("req-0", 1), "1")])],
        on_node(vec![shared("d1", None), device("d2")]),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(missing, None);
    let mut dedicated = device("d3");
    dedicated.capacity = Some(BTreeMap::from([("bw".to_owned(), plain_capacity("10"))]));
    let whole = plain(
        vec![claim("c0", vec![asking(request("req-0", 1), "4")])],
        on_node(vec![dedicated.clone()]),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        shares(&whole),
        [("d3".to_owned(), None, false)],
        "a device taken whole records no share"
    );
    let too_much = plain(
        vec![claim("c0", vec![asking(request("req-0", 1), "11")])],
        on_node(vec![dedicated]),
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(too_much, None);
}

// "...-allocation-mode-all-filter-out-no-capacity": "all" takes the devices
// whose capacity can hold the request.
#[test]
fn all_mode_keeps_the_devices_with_the_capacity() {
    let mut all = all_request("req-0");
    if let Some(e) = all.exactly.as_mut() {
        e.capacity = Some(CapacityRequirements {
            requests: Some(BTreeMap::from([("bw".to_owned(), q("2"))])),
        });
    }
    let results = plain(
        vec![claim("c0", vec![all])],
        on_node(vec![
            shared("d1", Some(plain_capacity("2"))),
            shared("d2", None),
        ]),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(shares(&results), [share("d1", Some("2"))]);
}

// "partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership":
// the shared counters of a shared device are consumed by its first share
// only; an allocated share consumes them for everyone else.
#[test]
fn a_shared_device_consumes_its_counters_once() {
    let mut gpu = consumes(device("gpu"), 8);
    gpu.allow_multiple_allocations = Some(true);
    let results = plain(
        two_claims(None),
        partitioned(vec![gpu.clone()]),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        [
            [triple("req-0", "pool-1", "gpu")],
            [triple("req-0", "pool-1", "gpu")]
        ],
        "8Gi of 8Gi, counted once"
    );
    // A request for a device taken whole: the 4Gi partition.
    let mut whole = request("req-0", 1);
    if let Some(e) = whole.exactly.as_mut() {
        e.selectors = Some(vec![cel("!device.allowMultipleAllocations")]);
    }
    let devices = || partitioned(vec![gpu.clone(), consumes(device("half"), 4)]);
    let free = plain(
        vec![claim("c0", vec![whole.clone()])],
        devices(),
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(picked(&free), [[triple("req-0", "pool-1", "half")]]);
    let held: AllocatedDevices = [HeldDevice::Share(
        DeviceId::new(DRIVER, "pool-1", "gpu"),
        BTreeMap::new(),
    )]
    .into_iter()
    .collect();
    let none = plain(vec![claim("c0", vec![whole])], devices(), &held).expect("no error");
    assert_eq!(none, None, "the gpu's share holds all 8Gi");
}

// "consumable-capacity-range-policy-overflow-aborts-not-skip": an amount
// the arithmetic cannot represent aborts the allocation.
#[test]
fn unrepresentable_requests_abort() {
    let huge = DeviceCapacity {
        value: q("1e20"),
        request_policy: Some(CapacityRequestPolicy {
            default: None,
            valid_range: Some(CapacityRequestPolicyRange {
                min: q("1e16"),
                step: Some(q("1")),
                max: None,
            }),
            valid_values: None,
        }),
    };
    let err = plain(
        vec![claim("c0", vec![asking(request("req-0", 1), "1e19")])],
        on_node(vec![
            shared("d1", Some(huge)),
            shared("d2", Some(plain_capacity("1e20"))),
        ]),
        &AllocatedDevices::new(),
    )
    .expect_err("aborts");
    let AllocatorError::Fatal(message) = err else {
        panic!("not fatal: {err}");
    };
    assert!(
        message.starts_with("claim default/c0, request req-0: checking capacity for device driver-a/pool-1/d1: capacity \"bw\": "),
        "{message}"
    );
}
