//! Tests of CEL selectors in allocation: attribute and capacity lookups, the
//! Kubernetes quantity and semver functions, class selectors, and compile
//! and runtime errors (Go's "with-class-selector", "with-request-selector",
//! "invalid-CEL-one-device", "CEL-runtime-error" cases and the CEL package's
//! own tests in `dynamic-resource-allocation/cel/compile_test.go`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAttribute, DeviceCapacity, DeviceClass, ResourceClaim,
    ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::tests::{
    CLASS, DRIVER, arcs, cel, claim, class, device, node, picked, request, slice, string_attr,
    triple, with_attr,
};
use super::{AllocatedDevices, Allocator, AllocatorError};
use crate::cache::dra_taints::TaintRules;

fn int_attr(i: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(i),
        ..Default::default()
    }
}

fn bool_attr(b: bool) -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(b),
        ..Default::default()
    }
}

fn version_attr(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        version: Some(v.to_owned()),
        ..Default::default()
    }
}

fn with_capacity(mut d: Device, key: &str, value: &str) -> Device {
    d.capacity.get_or_insert_with(BTreeMap::new).insert(
        key.to_owned(),
        DeviceCapacity {
            value: Quantity(value.to_owned()),
            request_policy: None,
        },
    );
    d
}

/// Three devices that differ in every attribute type and in capacity.
fn devices() -> Vec<Device> {
    let d = |name: &str, model: &str, cores: i64, fast: bool, version: &str, memory: &str| {
        let d = with_attr(device(name), "model", string_attr(model));
        let d = with_attr(d, "cores", int_attr(cores));
        let d = with_attr(d, "fast", bool_attr(fast));
        let d = with_attr(d, "driverVersion", version_attr(version));
        let d = with_attr(d, "other.example.com/zone", string_attr(name));
        with_capacity(d, "memory", memory)
    };
    vec![
        d("d1", "a100", 4, false, "1.0.0", "16Gi"),
        d("d2", "h100", 8, true, "1.2.0", "80Gi"),
        d("d3", "h100", 16, false, "2.0.0-rc.1", "40Gi"),
    ]
}

/// Allocates one request of one device with `selector` on it (and the
/// class's `class_selectors`) from [`devices`].
fn select(
    class_selectors: &[&str],
    selector: Option<&str>,
) -> Result<Option<Vec<AllocationResult>>, AllocatorError> {
    let mut req = request("req-0", 1);
    if let (Some(e), Some(s)) = (req.exactly.as_mut(), selector) {
        e.selectors = Some(vec![cel(s)]);
    }
    let known = class(CLASS, class_selectors);
    let class_of = move |name: &str| -> Option<Arc<DeviceClass>> {
        (name == CLASS).then(|| Arc::new(known.clone()))
    };
    let claims: Vec<ResourceClaim> = vec![claim("c1", vec![req])];
    let allocator = Allocator::new(claims, &class_of)?;
    let slices: Vec<Arc<ResourceSlice>> = arcs(vec![slice("s1", "node-1", "pool-1", devices())]);
    allocator.allocate(
        &node("node-1"),
        &slices,
        &slices,
        &AllocatedDevices::new(),
        &TaintRules::default(),
    )
}

/// The device picked for a selector that must match.
fn picked_by(selector: &str) -> String {
    let results = select(&[], Some(selector))
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .unwrap_or_else(|| panic!("{selector}: no device"));
    picked(&results)[0][0].2.clone()
}

#[test]
fn selectors_on_each_attribute_type() {
    let d = format!("device.attributes[\"{DRIVER}\"]");
    assert_eq!(picked_by(&format!("{d}.model == \"h100\"")), "d2");
    assert_eq!(picked_by(&format!("{d}.cores > 8")), "d3");
    assert_eq!(picked_by(&format!("{d}.fast")), "d2");
    assert_eq!(
        picked_by(&format!(
            "{d}.driverVersion.isGreaterThan(semver(\"1.1.0\"))"
        )),
        "d2"
    );
    assert_eq!(
        picked_by(&format!(
            "{d}.driverVersion.compareTo(semver(\"2.0.0\")) < 0 && {d}.driverVersion.major() == 2"
        )),
        "d3"
    );
    // Build metadata does not order or distinguish versions.
    assert_eq!(
        picked_by(&format!("{d}.driverVersion == semver(\"1.0.0+build.7\")")),
        "d1"
    );
    // Another domain's attribute, fully qualified on the device.
    assert_eq!(
        picked_by("device.attributes[\"other.example.com\"].zone == \"d3\""),
        "d3"
    );
    assert_eq!(picked_by(&format!("device.driver == \"{DRIVER}\"")), "d1");
    // cel.bind, as Kubernetes' examples use it to name the domain once.
    assert_eq!(
        picked_by(&format!(
            "cel.bind(a, device.attributes[\"{DRIVER}\"], a.model == \"h100\" && !a.fast)"
        )),
        "d3"
    );
    // Comprehensions over a map's keys and a literal list.
    assert_eq!(
        picked_by("[4, 8].exists(n, n == 8) && device.driver.startsWith(\"driver\")"),
        "d1"
    );
}

#[test]
fn selectors_on_capacity() {
    let c = format!("device.capacity[\"{DRIVER}\"].memory");
    assert_eq!(
        picked_by(&format!("{c}.compareTo(quantity(\"40Gi\")) > 0")),
        "d2"
    );
    assert_eq!(
        picked_by(&format!("{c}.isLessThan(quantity(\"20Gi\"))")),
        "d1"
    );
    assert_eq!(
        picked_by(&format!(
            "{c}.isGreaterThan(quantity(\"32Gi\")) && {c}.isLessThan(quantity(\"64Gi\"))"
        )),
        "d3"
    );
}

#[test]
fn missing_attributes_are_tested_with_has_and_in() {
    assert_eq!(
        picked_by(&format!("!has(device.attributes[\"{DRIVER}\"].nothing)")),
        "d1"
    );
    assert_eq!(
        picked_by(&format!("\"cores\" in device.attributes[\"{DRIVER}\"]")),
        "d1"
    );
    // A domain the device has nothing in is an empty map.
    assert_eq!(
        picked_by("!(\"cores\" in device.attributes[\"unknown.example.com\"])"),
        "d1"
    );
    assert_eq!(
        select(
            &[],
            Some("has(device.attributes[\"unknown.example.com\"].cores)")
        ),
        Ok(None)
    );
}

#[test]
fn no_device_matches_a_selector_that_is_false_everywhere() {
    let none = select(
        &[],
        Some(&format!("device.attributes[\"{DRIVER}\"].cores > 100")),
    );
    assert_eq!(none, Ok(None));
}

// "with-class-selector": the class's selector and the request's must both hold.
#[test]
fn class_and_request_selectors_both_apply() {
    let class_selector = format!("device.attributes[\"{DRIVER}\"].model == \"h100\"");
    let request_selector = format!("device.attributes[\"{DRIVER}\"].fast == false");
    let results = select(&[&class_selector], Some(&request_selector))
        .expect("no error")
        .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0", "pool-1", "d3")]]
    );
}

// "invalid-CEL-one-device": a compile error is reported for the claim.
#[test]
fn compile_errors_name_the_claim_or_class() {
    let err = select(&[], Some("device.attributes[")).expect_err("compile error");
    let AllocatorError::Fatal(message) = err else {
        panic!("not fatal: {err:?}");
    };
    assert!(
        message
            .starts_with("claim default/c1: selector #0: CEL compile error: compilation failed: "),
        "{message}"
    );
    let err = select(&["1 +"], None).expect_err("compile error");
    assert!(
        err.to_string()
            .starts_with("class class-a: selector #0: CEL compile error: compilation failed: "),
        "{err}"
    );
    let long = format!(
        "device.driver == \"{}\"",
        "x".repeat(super::cel::MAX_EXPRESSION_LENGTH)
    );
    let err = select(&[], Some(&long)).expect_err("too long");
    assert!(err.to_string().contains("the limit is 10240"), "{err}");
}

// "CEL-runtime-error": an attribute that is not there, without has(), is
// a runtime error of the claim on the first device it is evaluated for.
#[test]
fn runtime_errors_are_errors_not_mismatches() {
    let err = select(
        &[],
        Some(&format!("device.attributes[\"{DRIVER}\"].nothing == 1")),
    )
    .expect_err("runtime error");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "claim default/c1: selector #0 on device {DRIVER}/pool-1/d1: CEL runtime error: "
        )),
        "{message}"
    );
    assert!(message.contains("nothing"), "{message}");
    let err = select(&[], Some("device.driver")).expect_err("not a bool");
    assert!(
        err.to_string().contains("could not be converted to bool"),
        "{err}"
    );
    let err =
        select(&[], Some("sign(quantity(\"not a quantity\")) == 0")).expect_err("bad quantity");
    assert!(err.to_string().contains("CEL runtime error"), "{err}");
}
