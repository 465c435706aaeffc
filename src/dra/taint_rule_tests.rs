//! The allocator with DeviceTaintRules: their taints count as the slices'
//! own (kube-scheduler hands its allocator the slices with the rules'
//! taints appended). Cases after the taint cases of Go's allocator table
//! (`structured/internal/allocatortesting/allocator_testing.go`) and the
//! tracker's `TestListPatchedResourceSlices`
//! (`resourceslice/tracker/tracker_test.go`), named in comments.

use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceRequest, DeviceTaint, DeviceTaintRule, DeviceToleration,
};

use super::AllocatedDevices;
use super::tests::{DRIVER, allocate_tainted, claim, device, picked, request, slice, triple};
use crate::cache::dra_taints::tests::rule;
use crate::cache::dra_taints::{RuleTaint, TaintRules};

/// Rules from `rules`, each named after its taint key.
fn rules(all: &[DeviceTaintRule]) -> TaintRules {
    let mut r = TaintRules::default();
    r.replace(
        all.iter()
            .map(|x| (x.spec.taint.key.clone(), RuleTaint::of(x))),
    );
    r
}

/// `rule` with effect `effect`.
fn with_effect(mut r: DeviceTaintRule, effect: &str) -> DeviceTaintRule {
    r.spec.taint.effect = effect.to_owned();
    r
}

/// One request for `count` devices, tolerating the taint keys `keys`.
fn tolerating(count: i64, keys: &[&str]) -> DeviceRequest {
    let mut r = request("req-0", count);
    if let Some(e) = r.exactly.as_mut() {
        e.tolerations = (!keys.is_empty()).then(|| {
            keys.iter()
                .map(|k| DeviceToleration {
                    key: Some((*k).to_owned()),
                    operator: Some("Exists".to_owned()),
                    ..Default::default()
                })
                .collect()
        });
    }
    r
}

/// Allocates one claim with `request` from pool-1's gpu-0 and gpu-1 on
/// node-1 under `rules`: the devices picked, or `None` when it does not fit.
fn pick(request: DeviceRequest, rules: &TaintRules) -> Option<Vec<String>> {
    let slices = vec![slice(
        "s1",
        "node-1",
        "pool-1",
        vec![device("gpu-0"), device("gpu-1")],
    )];
    let results: Vec<AllocationResult> = allocate_tainted(
        vec![claim("c1", vec![request])],
        slices,
        &AllocatedDevices::new(),
        rules,
    )
    .expect("no error")?;
    Some(
        picked(&results)
            .concat()
            .into_iter()
            .map(|(_, _, d)| d)
            .collect(),
    )
}

fn gpu0_rule(key: &str) -> DeviceTaintRule {
    rule(key, Some((Some(DRIVER), Some("pool-1"), Some("gpu-0"))))
}

// "tainted-two-devices" with the taint from a rule ("add-taint-for-device").
#[test]
fn a_rule_tainting_one_device_blocks_it() {
    assert_eq!(
        pick(tolerating(1, &[]), &TaintRules::default()).as_deref(),
        Some(&["gpu-0".to_owned()][..])
    );
    let r = rules(&[gpu0_rule("broken")]);
    assert_eq!(pick(tolerating(1, &[]), &r), Some(vec!["gpu-1".to_owned()]));
    assert_eq!(
        pick(tolerating(2, &[]), &r),
        None,
        "one of two devices is left"
    );
}

// "tainted-two-devices-tolerated".
#[test]
fn a_toleration_lets_the_device_through() {
    let r = rules(&[gpu0_rule("broken")]);
    assert_eq!(
        pick(tolerating(2, &["broken"]), &r),
        Some(vec!["gpu-0".to_owned(), "gpu-1".to_owned()])
    );
    assert_eq!(pick(tolerating(2, &["other"]), &r), None);
}

// "add-taint-for-driver" / "add-taint-for-pool": a rule for another driver
// or pool, or naming another device, changes nothing; "nil-selector-
// matches-none"; "patch-all-slices": the empty selector taints every
// device.
#[test]
fn a_rule_for_other_devices_changes_nothing() {
    let elsewhere = rules(&[
        rule("driver", Some((Some("other.example.com"), None, None))),
        rule("pool", Some((None, Some("pool-2"), None))),
        rule(
            "device",
            Some((Some(DRIVER), Some("pool-1"), Some("gpu-9"))),
        ),
        rule("no-selector", None),
    ]);
    assert_eq!(
        pick(tolerating(2, &[]), &elsewhere).map(|d| d.len()),
        Some(2)
    );
    let everything = rules(&[rule("all", Some((None, None, None)))]);
    assert_eq!(pick(tolerating(1, &[]), &everything), None);
    let this_pool = rules(&[rule("pool", Some((None, Some("pool-1"), None)))]);
    assert_eq!(pick(tolerating(1, &[]), &this_pool), None);
}

// "tainted-two-devices" (NoExecute) and "tainted-no-effect": NoExecute
// blocks like NoSchedule; None (and an effect this version does not know)
// does not.
#[test]
fn no_execute_blocks_and_none_does_not() {
    let r = rules(&[with_effect(gpu0_rule("evict"), "NoExecute")]);
    assert_eq!(pick(tolerating(2, &[]), &r), None);
    for effect in ["None", "SomeFutureEffect"] {
        let r = rules(&[with_effect(gpu0_rule("note"), effect)]);
        assert_eq!(
            pick(tolerating(2, &[]), &r).map(|d| d.len()),
            Some(2),
            "{effect}"
        );
    }
}

// "remove-patch-known-deleted-rule": once the rule is gone, so is its taint.
#[test]
fn deleting_the_rule_frees_the_device() {
    let mut r = rules(&[rule("all", Some((Some(DRIVER), None, None)))]);
    assert_eq!(pick(tolerating(1, &[]), &r), None);
    r.delete("all");
    assert_eq!(pick(tolerating(1, &[]), &r), Some(vec!["gpu-0".to_owned()]));
}

// "merge-taints" with "tainted-one-device-two-taints-both-tolerated": a
// device keeps its slice's taints next to the rule's; a request must
// tolerate both.
#[test]
fn the_slice_taints_and_the_rule_taints_both_count() {
    let mut gpu = device("gpu-0");
    gpu.taints = Some(vec![DeviceTaint {
        key: "own".to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Default::default()
    }]);
    let r = rules(&[gpu0_rule("rule")]);
    let run = |keys: &[&str]| {
        allocate_tainted(
            vec![claim("c1", vec![tolerating(1, keys)])],
            vec![slice("s1", "node-1", "pool-1", vec![gpu.clone()])],
            &AllocatedDevices::new(),
            &r,
        )
        .expect("no error")
        .map(|results| picked(&results))
    };
    assert_eq!(run(&["own"]), None);
    assert_eq!(run(&["rule"]), None);
    assert_eq!(
        run(&["own", "rule"]),
        Some(vec![vec![triple("req-0", "pool-1", "gpu-0")]])
    );
}
