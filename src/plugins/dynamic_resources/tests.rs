//! DynamicResources' points on claims in the cache. Cases after
//! kube-scheduler's `TestPlugin` table (`dynamicresources_test.go`):
//! "claim-template" / "missing-claim" (PreEnqueue), "deleted-claim",
//! "not-owned-claim", "allocated-claim-other-node" style node selector
//! checks, and the in-flight allocations of `TestPlugin`'s Reserve /
//! Unreserve steps.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
    ResourceClaimConsumerReference, ResourceClaimStatus, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::bind::with_reservation;
use super::cycle::DraCycle;
use super::*;
use crate::framework::{Code, CycleState, FilterPlugin, NodeScore, PreFilterPlugin, ReservePlugin};
use crate::objects::NodeInfo;
use crate::objects::pod::{PodResourceClaim, PodSpecInfo};
use crate::plugins::test_support;

fn pod(claims: Vec<PodResourceClaim>) -> PodInfo {
    PodInfo {
        name: "p".into(),
        namespace: "ns".into(),
        uid: "pod-uid".into(),
        spec: Arc::new(PodSpecInfo {
            resource_claims: claims,
            ..PodSpecInfo::default()
        }),
        ..PodInfo::default()
    }
}

fn named(claim: &str) -> PodResourceClaim {
    PodResourceClaim::resolve("gpu", Some(claim), None, std::iter::empty())
}

fn from_template(status: Option<&str>) -> PodResourceClaim {
    let statuses: Vec<(&str, Option<&str>)> =
        status.map(|s| ("gpu", Some(s))).into_iter().collect();
    PodResourceClaim::resolve("gpu", None, Some("tmpl"), statuses.into_iter())
}

fn claim(name: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("{name}-uid")),
            ..ObjectMeta::default()
        },
        ..ResourceClaim::default()
    }
}

fn allocation(device: &str, node: Option<&str>) -> AllocationResult {
    AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(vec![DeviceRequestAllocationResult {
                driver: "gpu.example.com".into(),
                pool: "pool".into(),
                device: device.into(),
                request: "req".into(),
                ..DeviceRequestAllocationResult::default()
            }]),
            ..DeviceAllocationResult::default()
        }),
        node_selector: node.map(|n| NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![n.into()]),
                }]),
                ..NodeSelectorTerm::default()
            }],
        }),
        ..AllocationResult::default()
    }
}

fn allocated(mut c: ResourceClaim, device: &str, node: Option<&str>) -> ResourceClaim {
    c.status = Some(ResourceClaimStatus {
        allocation: Some(allocation(device, node)),
        ..ResourceClaimStatus::default()
    });
    c
}

fn cluster(claims: Vec<ResourceClaim>) -> ClusterState {
    let mut s = ClusterState::default();
    s.dra_mut().set_watched();
    s.dra_mut()
        .replace_claims(claims.into_iter().map(Arc::new).collect());
    s
}

fn node(name: &str) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        ..NodeInfo::default()
    }
}

#[test]
fn pre_enqueue_waits_for_every_claim() {
    let plugin = DynamicResources::default();
    let c = cluster(vec![claim("shared")]);
    // "claim-template": the controller has not named the claim yet.
    let s = plugin.pre_enqueue(&pod(vec![from_template(None)]), &c);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), "pod \"ns/p\": ResourceClaim not created yet");
    // "missing-claim".
    let s = plugin.pre_enqueue(&pod(vec![named("other")]), &c);
    assert_eq!(s.message(), "could not find ResourceClaim \"ns/other\"");
    assert!(
        plugin
            .pre_enqueue(&pod(vec![named("shared")]), &c)
            .is_success()
    );
    // A template's claim must be the pod's.
    let s = plugin.pre_enqueue(&pod(vec![from_template(Some("shared"))]), &c);
    assert_eq!(
        s.message(),
        "ResourceClaim ns/shared was not created for Pod ns/p (Pod is not owner)"
    );
    let mut owned = claim("p-gpu");
    owned.metadata.owner_references = Some(vec![OwnerReference {
        controller: Some(true),
        uid: "pod-uid".into(),
        ..OwnerReference::default()
    }]);
    let c = cluster(vec![owned.clone()]);
    assert!(
        plugin
            .pre_enqueue(&pod(vec![from_template(Some("p-gpu"))]), &c)
            .is_success()
    );
    // "deleted-claim".
    owned.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let c = cluster(vec![owned]);
    let s = plugin.pre_enqueue(&pod(vec![from_template(Some("p-gpu"))]), &c);
    assert_eq!(s.message(), "resourceclaim \"p-gpu\" is being deleted");
    // Without the DRA watches (extender mode) the pod is kube-scheduler's to allocate.
    let s = plugin.pre_enqueue(&pod(vec![named("x")]), &ClusterState::default());
    assert!(s.is_success());
}

#[test]
fn a_template_claim_not_needed_is_left_out() {
    let statuses = vec![("gpu", None)];
    let c = PodResourceClaim::resolve("gpu", None, Some("t"), statuses.into_iter());
    assert_eq!(c.claim, ClaimRef::NotNeeded);
    let mut state = CycleState::new();
    let s = DynamicResources::default().pre_filter(&mut state, &pod(vec![c]), &cluster(vec![]));
    assert_eq!(s.code(), Code::Skip);
}

#[test]
fn filter_keeps_an_allocated_claim_to_its_nodes() {
    let plugin = DynamicResources::default();
    let c = cluster(vec![allocated(claim("shared"), "gpu-0", Some("n1"))]);
    let p = pod(vec![named("shared")]);
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
    assert!(plugin.filter(&state, &p, &node("n1"), &c).is_success());
    let s = plugin.filter(&state, &p, &node("n2"), &c);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), ERR_NOT_AVAILABLE);
    // An allocated claim has no alternative to score: 0 on its node.
    let (n1, n2) = (node("n1"), node("n2"));
    let scores = test_support::score_both_ways(&plugin, &state, &p, &[&n1, &n2], &c);
    assert_eq!(
        scores.iter().map(|s| s.raw).collect::<Vec<_>>(),
        [Some(0); 2]
    );
    // An allocation without a node selector is available everywhere.
    let c = cluster(vec![allocated(claim("shared"), "gpu-0", None)]);
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
    assert!(plugin.filter(&state, &p, &node("n2"), &c).is_success());
}

#[test]
fn a_pod_without_claims_is_skipped() {
    let mut state = CycleState::new();
    let s = DynamicResources::default().pre_filter(&mut state, &pod(vec![]), &cluster(vec![]));
    assert_eq!(s.code(), Code::Skip);
    // Then it scores 0 everywhere, in a batch too.
    let (plugin, n1) = (DynamicResources::default(), node("n1"));
    let scores =
        test_support::score_both_ways(&plugin, &state, &pod(vec![]), &[&n1], &cluster(vec![]));
    assert_eq!(scores, [NodeScore::value(0)]);
}

#[test]
fn reserve_keeps_the_devices_in_flight_until_the_watch_shows_them() {
    let plugin = DynamicResources::default();
    let c = cluster(vec![claim("shared")]);
    let p = pod(vec![named("shared")]);
    let mut state = CycleState::new();
    state.write(DraCycle::chosen(
        vec![Arc::new(claim("shared"))],
        vec![0],
        "n1",
        vec![allocation("gpu-0", Some("n1"))],
    ));
    assert!(plugin.reserve(&mut state, &p, "n1").is_success());
    assert_eq!(
        plugin.in_flight.lock()["ns/shared"].devices,
        [HeldDevice::Whole(crate::dra::DeviceId::new(
            "gpu.example.com",
            "pool",
            "gpu-0"
        ))]
    );
    // A second pod sharing the claim waits for the allocation in flight.
    let mut other = pod(vec![named("shared")]);
    other.name = "q".into();
    let s = plugin.pre_filter(&mut CycleState::new(), &other, &c);
    assert_eq!(
        s.message(),
        "resource claim ns/shared is in the process of being allocated"
    );
    // Unreserve gives the devices back.
    plugin.unreserve(&mut state, &p, "n1");
    assert!(plugin.in_flight.lock().is_empty());
    // Reserved again and written: Unreserve keeps what the API has; once
    // the watch shows the allocation, the cache counts it and the entry goes.
    assert!(plugin.reserve(&mut state, &p, "n1").is_success());
    let written = Arc::new(allocated(claim("shared"), "gpu-0", Some("n1")));
    if let Some(f) = plugin.in_flight.lock().get_mut("ns/shared") {
        f.written = Some(written);
    }
    plugin.unreserve(&mut state, &p, "n1");
    assert_eq!(plugin.in_flight.lock().len(), 1);
    // Until then a later pod reads the claim as written: allocated on n1.
    let mut later = CycleState::new();
    assert!(plugin.pre_filter(&mut later, &other, &c).is_success());
    assert!(!plugin.filter(&later, &other, &node("n2"), &c).is_success());
    let shown = cluster(vec![allocated(claim("shared"), "gpu-0", Some("n1"))]);
    assert!(
        plugin
            .pre_filter(&mut CycleState::new(), &other, &shown)
            .is_success()
    );
    assert!(plugin.in_flight.lock().is_empty());
}

#[test]
fn reserve_without_a_choice_for_the_node_is_an_error() {
    let plugin = DynamicResources::default();
    let mut state = CycleState::new();
    state.write(DraCycle::chosen(
        vec![Arc::new(claim("c"))],
        vec![0],
        "n1",
        vec![allocation("gpu-0", None)],
    ));
    let s = plugin.reserve(&mut state, &pod(vec![named("c")]), "n2");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "claim allocation not found for node");
}

#[test]
fn pre_bind_writes_the_allocation_and_the_reservation() {
    let p = pod(vec![named("c")]);
    let a = allocation("gpu-0", Some("n1"));
    let written = with_reservation(claim("c"), Some(&a), &p).unwrap();
    let status = written.status.unwrap();
    // "bind-failure" et al.: PreBind stamps the allocation (binding conditions time from it).
    let mut stamped = status.allocation.clone().unwrap();
    assert!(stamped.allocation_timestamp.take().is_some());
    assert_eq!(stamped, a);
    let reserved = status.reserved_for.unwrap();
    assert_eq!(reserved.len(), 1);
    assert_eq!(
        (
            reserved[0].resource.as_str(),
            reserved[0].name.as_str(),
            reserved[0].uid.as_str()
        ),
        ("pods", "p", "pod-uid")
    );
    // A shared claim already allocated only gains the reservation.
    let shared = allocated(claim("c"), "gpu-0", Some("n1"));
    let written = with_reservation(shared.clone(), None, &p).unwrap();
    assert_eq!(written.status.unwrap().reserved_for.unwrap().len(), 1);
    // Allocated by someone else since the cycle read it.
    let e = with_reservation(shared, Some(&a), &p).unwrap_err();
    assert_eq!(e, "claim ns/c got allocated elsewhere in the meantime");
    let mut gone = claim("c");
    gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let e = with_reservation(gone, Some(&a), &p).unwrap_err();
    assert_eq!(e, "claim ns/c got deleted in the meantime");
    // A shared claim PostFilter (or anyone) deallocated since the cycle read it.
    let e = with_reservation(claim("c"), None, &p).unwrap_err();
    assert_eq!(e, "claim ns/c got deallocated elsewhere in the meantime");
}

/// PostFilter as kube-scheduler's: when an earlier PreFilter rejected the pod
/// (say VolumeBinding's unbound immediate claims), this plugin's PreFilter
/// never ran, and its PostFilter fails with the cycle state's "not found",
/// which ends PostFilter before DefaultPreemption (the differential e2e
/// compares the resulting FailedScheduling texts). After its own PreFilter it
/// lets the next PostFilter plugin run.
#[test]
fn post_filter_fails_only_when_pre_filter_never_ran() {
    let fw = crate::framework::Framework::new(
        "p",
        vec![crate::framework::WeightedPlugin {
            plugin: Arc::new(DynamicResources::default()),
            weight: 1,
        }],
    );
    let mut c = cluster(vec![]);
    let post = |state: Option<&CycleState>, c: &mut ClusterState| {
        let diagnosis = crate::framework::Diagnosis {
            total: 0,
            failed: &[],
            state,
        };
        fw.post_filter(&pod(vec![]), &diagnosis, c).status
    };
    let never_ran = CycleState::new();
    let s = post(Some(&never_ran), &mut c);
    assert_eq!(
        (s.code(), s.message()),
        (Code::Error, "not found".to_owned())
    );

    let mut ran = CycleState::new();
    DynamicResources::default().pre_filter(&mut ran, &pod(vec![]), &c);
    let s = post(Some(&ran), &mut c);
    assert_eq!(
        (s.code(), s.message()),
        (Code::Unschedulable, String::new())
    );
    // Without the DRA watches (extender mode) the plugin is not in play.
    let s = post(Some(&never_ran), &mut ClusterState::default());
    assert_eq!(s.code(), Code::Unschedulable);
}

/// A framework with the plugin only, and its PostFilter on `state`.
fn post_filter_on(
    plugin: DynamicResources,
    p: &PodInfo,
    state: &CycleState,
    c: &mut ClusterState,
) -> crate::framework::PostFilterResult {
    let fw = crate::framework::Framework::new(
        "p",
        vec![crate::framework::WeightedPlugin {
            plugin: Arc::new(plugin),
            weight: 1,
        }],
    );
    let diagnosis = crate::framework::Diagnosis {
        total: 2,
        failed: &[],
        state: Some(state),
    };
    fw.post_filter(p, &diagnosis, c)
}

fn reserved(mut c: ResourceClaim, pods: &[&str]) -> ResourceClaim {
    let status = c.status.get_or_insert_with(ResourceClaimStatus::default);
    status.reserved_for = Some(
        pods.iter()
            .map(|uid| ResourceClaimConsumerReference {
                resource: "pods".into(),
                name: (*uid).into(),
                uid: (*uid).into(),
                ..ResourceClaimConsumerReference::default()
            })
            .collect(),
    );
    c
}

/// kube-scheduler's "claim-deallocate" and `deallocateOrDeletePodClaims`: a
/// claim allocated for a node the pod cannot use, and that no other pod
/// holds, is deallocated in PostFilter; one another pod holds is left.
#[test]
fn post_filter_deallocates_a_claim_only_the_pod_would_use() {
    let p = pod(vec![named("c")]);
    for (holders, deallocates) in [
        (&[][..], true),
        (&["pod-uid"][..], true),
        (&["other"][..], false),
        (&["pod-uid", "other"][..], false),
    ] {
        let plugin = DynamicResources::default();
        let mut c = cluster(vec![reserved(
            allocated(claim("c"), "gpu-0", Some("n1")),
            holders,
        )]);
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
        let s = plugin.filter(&state, &p, &node("n2"), &c);
        assert_eq!(s.message(), ERR_NOT_AVAILABLE);
        let post = post_filter_on(plugin, &p, &state, &mut c);
        assert_eq!(post.status.code(), Code::Unschedulable, "{holders:?}");
        if deallocates {
            assert_eq!(
                post.status.message(),
                "deallocation of ResourceClaim completed"
            );
            let what: Vec<&str> = post.writes.iter().map(|w| w.what()).collect();
            assert_eq!(what, ["deallocate ResourceClaim ns/c"]);
        } else {
            assert_eq!(post.status.message(), "", "{holders:?}");
            assert!(post.writes.is_empty());
        }
    }
    // No node rejected the claim (the pod failed elsewhere): nothing to do.
    let plugin = DynamicResources::default();
    let mut c = cluster(vec![allocated(claim("c"), "gpu-0", Some("n1"))]);
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
    assert!(plugin.filter(&state, &p, &node("n1"), &c).is_success());
    assert!(post_filter_on(plugin, &p, &state, &mut c).writes.is_empty());
}

/// kube-scheduler's Filter runs the allocator for the claims still to
/// allocate before it rejects a node for an allocated claim's selector, so
/// the allocator's verdict is the node's reason when both fail.
#[test]
fn the_allocator_speaks_before_an_unavailable_claim() {
    let mut pending = claim("new");
    pending.spec = serde_json::from_value(serde_json::json!({
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}
    }))
    .unwrap();
    let mut c = cluster(vec![allocated(claim("old"), "gpu-0", Some("n1")), pending]);
    c.dra_mut().replace_classes(vec![Arc::new(
        serde_json::from_value(serde_json::json!({"metadata": {"name": "gpu"}, "spec": {}}))
            .unwrap(),
    )]);
    let plugin = DynamicResources::default();
    let p = pod(vec![named("old"), named("new")]);
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
    // n2 has no devices: the allocator fails first, and the claim is not noted.
    let s = plugin.filter(&state, &p, &node("n2"), &c);
    assert_eq!(s.message(), ERR_CANNOT_ALLOCATE);
    assert!(post_filter_on(plugin, &p, &state, &mut c).writes.is_empty());
}

/// "bind-failure": Unreserve after a failed Bind takes the pod out of the
/// `reservedFor` PreBind wrote; a claim the pod does not hold is left.
#[test]
fn unreserve_takes_the_pod_out_of_what_pre_bind_reserved() {
    let plugin = DynamicResources::default();
    let p = pod(vec![named("a"), named("b")]);
    let mut state = CycleState::new();
    state.write(DraCycle::chosen(
        vec![
            Arc::new(allocated(claim("a"), "gpu-0", Some("n1"))),
            Arc::new(allocated(claim("b"), "gpu-1", Some("n1"))),
        ],
        vec![],
        "n1",
        vec![],
    ));
    assert!(plugin.unreserve(&mut state, &p, "n1").is_empty());
    let written = with_reservation(allocated(claim("a"), "gpu-0", Some("n1")), None, &p).unwrap();
    if let Some(cycle) = state.read::<DraCycle>() {
        cycle.written.lock().insert(0, Arc::new(written));
    }
    let writes = plugin.unreserve(&mut state, &p, "n1");
    let what: Vec<&str> = writes.iter().map(|w| w.what()).collect();
    assert_eq!(
        what,
        ["take pod ns/p out of ResourceClaim ns/a's reservedFor"]
    );
}

/// `/explain`'s hint: a claim wanting two GPUs on a cluster whose nodes
/// have one each (one of them in use) is named, with what the cluster has;
/// one GPU is not (some node has it free).
#[test]
fn explain_names_the_request_no_node_can_satisfy() {
    let slice = |node: &str| -> Arc<ResourceSlice> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("{node}-gpus")},
                "spec": {"driver": "gpu.example.com", "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}]},
            }))
            .unwrap(),
        )
    };
    let wanting = |name: &str, count: i64| {
        let mut c = claim(name);
        c.spec = serde_json::from_value(serde_json::json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}
        ]}}))
        .unwrap();
        c
    };
    let mut used = allocated(claim("used"), "gpu-0", Some("n1"));
    if let Some(results) = used
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .and_then(|a| a.devices.as_mut())
        .and_then(|d| d.results.as_mut())
    {
        results[0].pool = "n1".into();
    }
    let mut c = cluster(vec![wanting("two", 2), wanting("one", 1), used]);
    c.dra_mut()
        .replace_slices(vec![slice("n1"), slice("n2"), slice("n3")]);
    c.dra_mut().replace_classes(vec![Arc::new(
        serde_json::from_value(serde_json::json!({"metadata": {"name": "gpu"}, "spec": {}}))
            .unwrap(),
    )]);
    assert_eq!(
        unsatisfiable_requests(&pod(vec![named("two")]), &c),
        [
            "no node can satisfy claim ns/two: request gpu (class gpu): 3 device(s) match, 2 free, \
          at most 1 on one node; it asks for 2"
        ]
    );
    assert!(unsatisfiable_requests(&pod(vec![named("one")]), &c).is_empty());
    // Without the DRA watches there is nothing to say.
    assert!(unsatisfiable_requests(&pod(vec![named("two")]), &ClusterState::default()).is_empty());
}

/// Filter reads the cluster's DeviceTaintRules: a rule tainting the node's
/// one device leaves the claim nowhere to go; once deleted, it fits again.
#[test]
fn filter_honours_device_taint_rules() {
    use crate::cache::dra_taints::RuleTaint;
    use crate::cache::dra_taints::tests::rule;
    use k8s_openapi::api::resource::v1::{
        Device, DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec,
        ResourcePool, ResourceSlice, ResourceSliceSpec,
    };

    let mut c = claim("gpu");
    c.spec = Some(ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(vec![DeviceRequest {
                name: "req".into(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: "gpu".into(),
                    ..ExactDeviceRequest::default()
                }),
                first_available: None,
            }]),
            ..DeviceClaim::default()
        }),
    });
    let mut cluster = cluster(vec![c]);
    cluster.dra_mut().apply_class(Arc::new(DeviceClass {
        metadata: ObjectMeta {
            name: Some("gpu".into()),
            ..ObjectMeta::default()
        },
        ..DeviceClass::default()
    }));
    cluster
        .dra_mut()
        .replace_slices(vec![Arc::new(ResourceSlice {
            metadata: ObjectMeta {
                name: Some("n1-gpus".into()),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: "gpu.example.com".into(),
                node_name: Some("n1".into()),
                pool: ResourcePool {
                    name: "n1".into(),
                    generation: 1,
                    resource_slice_count: 1,
                },
                devices: Some(vec![Device {
                    name: "gpu-0".into(),
                    ..Device::default()
                }]),
                ..ResourceSliceSpec::default()
            },
        })]);
    let plugin = DynamicResources::default();
    let p = pod(vec![named("gpu")]);
    let filter = |cluster: &ClusterState| {
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, &p, cluster).is_success());
        plugin.filter(&state, &p, &node("n1"), cluster)
    };
    assert!(filter(&cluster).is_success());
    let tainted = rule("broken", Some((None, Some("n1"), None)));
    cluster
        .dra_mut()
        .apply_taint_rule("broken".into(), RuleTaint::of(&tainted));
    let s = filter(&cluster);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), ERR_CANNOT_ALLOCATE);
    cluster.dra_mut().delete_taint_rule("broken");
    assert!(filter(&cluster).is_success());
}

#[path = "extended_tests.rs"]
mod extended;
#[path = "hints_tests.rs"]
mod hints;
#[path = "limits_tests.rs"]
mod limits;
#[path = "shares_tests.rs"]
mod shares;
