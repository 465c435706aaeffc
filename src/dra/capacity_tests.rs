//! Tests of capacity arithmetic, after the cases of Go's
//! `consumable_capacity_test.go` (names in comments).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

fn amount(s: &str) -> Amount {
    Amount::parse(s).expect("a quantity")
}

fn range(min: &str, step: Option<&str>, max: Option<&str>) -> CapacityRequestPolicyRange {
    CapacityRequestPolicyRange {
        min: q(min),
        step: step.map(q),
        max: max.map(q),
    }
}

fn capacity(value: &str, policy: Option<CapacityRequestPolicy>) -> DeviceCapacity {
    DeviceCapacity {
        value: q(value),
        request_policy: policy,
    }
}

fn ranged(value: &str, default: Option<&str>, r: CapacityRequestPolicyRange) -> DeviceCapacity {
    capacity(
        value,
        Some(CapacityRequestPolicy {
            default: default.map(q),
            valid_range: Some(r),
            valid_values: None,
        }),
    )
}

fn valued(value: &str, default: &str, values: &[&str]) -> DeviceCapacity {
    capacity(
        value,
        Some(CapacityRequestPolicy {
            default: Some(q(default)),
            valid_range: None,
            valid_values: Some(values.iter().map(|v| q(v)).collect()),
        }),
    )
}

fn requests(pairs: &[(&str, &str)]) -> CapacityRequests {
    let map: BTreeMap<String, Quantity> =
        pairs.iter().map(|(n, v)| ((*n).to_owned(), q(v))).collect();
    CapacityRequests::parse(Some(&map)).expect("parses")
}

fn one_capacity(c: DeviceCapacity) -> BTreeMap<String, DeviceCapacity> {
    BTreeMap::from([("bw".to_owned(), c)])
}

/// What a request of `requested` (none: `None`) consumes of `c`, written
/// as Go writes it.
fn consumed(requested: Option<&str>, c: DeviceCapacity) -> Result<String, String> {
    let pairs: Vec<(&str, &str)> = requested.map(|r| ("bw", r)).into_iter().collect();
    consumption(&requests(&pairs), Some(&one_capacity(c))).map(|v| v[0].1.canonical())
}

#[test]
fn quantities_are_written_as_go_writes_them() {
    for (input, canonical) in [
        ("0", "0"),
        ("1Gi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("512Ki", "512Ki"),
        ("1000Ki", "1000Ki"),
        // BinarySI below 1024, or not whole: decimal.
        ("2Ki", "2Ki"),
        ("0.5Ki", "512"),
        ("500m", "500m"),
        ("0.3", "300m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("100G", "100G"),
        ("2E", "2E"),
        ("1E3", "1e3"),
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("12e2", "1200"),
        ("-2", "-2"),
    ] {
        assert_eq!(amount(input).canonical(), canonical, "{input}");
        // Canonical strings stay as they are.
        assert_eq!(amount(canonical).canonical(), canonical, "{canonical}");
    }
    assert_eq!(
        Amount {
            nano: 2_500_000_000,
            format: Format::BinarySI
        }
        .canonical(),
        "2500m"
    );
}

// TestCalculateConsumedCapacity: "empty", "min in range", "default in set",
// "more than min in range", "less than min in range", "with step (round
// up)", "with step (no remaining)", "valid value in set", "set (round up)",
// "larger than set", and the fractional steps.
#[test]
fn consumption_follows_the_request_policy() {
    let plain = capacity("40Gi", None);
    assert_eq!(
        consumed(None, plain.clone()).as_deref(),
        Ok("40Gi"),
        "the whole value"
    );
    assert_eq!(consumed(Some("10Gi"), plain).as_deref(), Ok("10Gi"));

    let stepped = ranged("4", Some("2"), range("2", Some("2"), Some("4")));
    assert_eq!(
        consumed(None, stepped.clone()).as_deref(),
        Ok("2"),
        "the default"
    );
    assert_eq!(
        consumed(Some("1"), stepped.clone()).as_deref(),
        Ok("2"),
        "up to the minimum"
    );
    assert_eq!(
        consumed(Some("3"), stepped.clone()).as_deref(),
        Ok("4"),
        "up to a step"
    );
    assert_eq!(
        consumed(Some("4"), stepped).as_deref(),
        Ok("4"),
        "on a step"
    );

    let open = ranged("10", None, range("1", None, None));
    assert_eq!(
        consumed(Some("7"), open).as_deref(),
        Ok("7"),
        "no step: as asked"
    );

    let fractional = ranged("1", Some("200m"), range("200m", Some("100m"), Some("1")));
    assert_eq!(
        consumed(Some("250m"), fractional.clone()).as_deref(),
        Ok("300m")
    );
    assert_eq!(consumed(Some("400m"), fractional).as_deref(), Ok("400m"));

    let binary_step = ranged("8Gi", None, range("1Gi", Some("1Gi"), None));
    assert_eq!(
        consumed(Some("1500Mi"), binary_step).as_deref(),
        Ok("2Gi"),
        "a computed amount takes the step's format"
    );

    let values = valued("8", "1", &["2", "4"]);
    assert_eq!(consumed(Some("2"), values.clone()).as_deref(), Ok("2"));
    assert_eq!(
        consumed(Some("3"), values.clone()).as_deref(),
        Ok("4"),
        "next valid value"
    );
    assert_eq!(
        consumed(Some("5"), values).as_deref(),
        Ok("5"),
        "above the set: as asked"
    );
}

// "request-above-maxint64-is-rejected", "requested value overflows milli
// representation", "fractional-step-request-not-milli-representable-is-rejected",
// and a negative request: errors, never a skipped device.
#[test]
fn unrepresentable_and_negative_amounts_are_errors() {
    // A minimum past the milli range: whole-unit arithmetic.
    let huge = ranged("1e20", None, range("1e16", Some("1"), None));
    let err = consumed(Some("1e19"), huge).expect_err("past MaxInt64");
    assert!(err.contains("exceeds MaxInt64"), "{err}");

    let fractional = ranged("1", None, range("200m", Some("100m"), None));
    let err = consumed(Some("0.2505"), fractional).expect_err("not milli");
    assert!(err.contains("not a representable milli value"), "{err}");

    let err = consumed(Some("-1"), capacity("4", None)).expect_err("negative");
    assert!(err.contains("capacity value is negative"), "{err}");
    assert!(
        err.starts_with("capacity \"bw\""),
        "names the capacity: {err}"
    );
}

// TestViolatesPolicy: "less than maximum", "more than maximum", "in set",
// "not in set", the fractional steps, and the default that always passes.
#[test]
fn policies_reject_amounts_off_their_range_or_set() {
    let stepped = ranged("10", Some("2"), range("2", Some("2"), Some("6")));
    let policy = stepped.request_policy.as_ref();
    assert_eq!(violates_policy(amount("4"), policy), Ok(false));
    assert_eq!(
        violates_policy(amount("8"), policy),
        Ok(true),
        "above the maximum"
    );
    assert_eq!(
        violates_policy(amount("3"), policy),
        Ok(true),
        "off the steps"
    );
    let fractional = ranged("1", None, range("200m", Some("100m"), None));
    let policy = fractional.request_policy.as_ref();
    assert_eq!(violates_policy(amount("300m"), policy), Ok(false));
    assert_eq!(violates_policy(amount("250m"), policy), Ok(true));
    let values = valued("8", "1", &["2", "4"]);
    let policy = values.request_policy.as_ref();
    assert_eq!(violates_policy(amount("4"), policy), Ok(false));
    assert_eq!(violates_policy(amount("3"), policy), Ok(true));
    assert_eq!(
        violates_policy(amount("1"), policy),
        Ok(false),
        "the default"
    );
    assert_eq!(violates_policy(amount("3"), None), Ok(false), "no policy");
}

#[test]
fn a_device_fits_while_its_capacity_holds_every_share() {
    let device = one_capacity(capacity("10", None));
    let four = requests(&[("bw", "4")]);
    assert_eq!(fits(&four, Some(&device), None, None), Ok(true));
    let held = Consumed::from([("bw".to_owned(), 4 * NANO)]);
    let taking = Consumed::from([("bw".to_owned(), 2 * NANO)]);
    assert_eq!(
        fits(&four, Some(&device), Some(&held), Some(&taking)),
        Ok(true),
        "10 of 10"
    );
    let more = Consumed::from([("bw".to_owned(), 3 * NANO)]);
    assert_eq!(
        fits(&four, Some(&device), Some(&held), Some(&more)),
        Ok(false),
        "11 of 10"
    );
    // A capacity the device does not have: another device may.
    let other = requests(&[("memory", "1")]);
    assert_eq!(fits(&other, Some(&device), None, None), Ok(false));
    assert_eq!(fits(&other, None, None, None), Ok(false));
    // Nothing asked: the whole value, so any share before blocks it.
    let nothing = CapacityRequests::default();
    assert_eq!(fits(&nothing, Some(&device), None, None), Ok(true));
    assert_eq!(fits(&nothing, Some(&device), Some(&held), None), Ok(false));
    // A filled value that breaks the policy (no default): the device does not fit.
    let strict = one_capacity(valued("8", "1", &["2"]));
    assert_eq!(
        fits(&nothing, Some(&strict), None, None),
        Ok(true),
        "the default"
    );
    let no_default = one_capacity(capacity(
        "8",
        Some(CapacityRequestPolicy {
            default: None,
            valid_range: None,
            valid_values: Some(vec![q("2")]),
        }),
    ));
    assert_eq!(fits(&nothing, Some(&no_default), None, None), Ok(false));
}

#[test]
fn only_devices_that_can_fail_are_checked() {
    let none = CapacityRequests::default();
    let plain = one_capacity(capacity("8", None));
    assert!(
        !needs_check(&none, Some(&plain), false),
        "consumed whole, once"
    );
    assert!(!needs_check(&none, None, false));
    assert!(needs_check(&none, Some(&plain), true), "shared");
    assert!(
        needs_check(&requests(&[("bw", "1")]), None, false),
        "asks for capacity"
    );
    let policed = one_capacity(valued("8", "1", &["2"]));
    assert!(needs_check(&none, Some(&policed), false), "a policy");
    let negative = one_capacity(capacity("-1", None));
    assert!(
        needs_check(&none, Some(&negative), false),
        "a negative value"
    );
}

#[test]
fn unparsable_requests_name_their_capacity() {
    let map = BTreeMap::from([("bw".to_owned(), q("lots"))]);
    let err = CapacityRequests::parse(Some(&map)).expect_err("does not parse");
    assert!(err.contains("capacity \"bw\""), "{err}");
}
