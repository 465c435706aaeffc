//! Shares of a device that allows multiple allocations (consumable
//! capacity), on the cache alone: a share Reserve keeps in flight and a
//! share the cache shows both take their bandwidth from the next pod, and
//! Unreserve gives it back.

use k8s_openapi::api::resource::v1::DeviceClass;

use super::*;

/// A cluster with class `nic` and one shareable NIC of 10G on n1, and
/// `claims`.
fn nic_cluster(claims: Vec<ResourceClaim>) -> ClusterState {
    let mut c = cluster(claims);
    let class: DeviceClass =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "nic"}, "spec": {}}))
            .unwrap();
    c.dra_mut().apply_class(Arc::new(class));
    let slice: ResourceSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1-nics"},
        "spec": {"driver": "nic.example.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "nic-0", "allowMultipleAllocations": true,
                              "capacity": {"bandwidth": {"value": "10G"}}}]},
    }))
    .unwrap();
    c.dra_mut().replace_slices(vec![Arc::new(slice)]);
    c
}

/// Claim `name` asking for `bandwidth` of one NIC.
fn asking(name: &str, bandwidth: &str) -> ResourceClaim {
    let mut c = claim(name);
    c.spec = serde_json::from_value(serde_json::json!({"devices": {"requests": [
        {"name": "nic", "exactly": {"deviceClassName": "nic", "allocationMode": "ExactCount",
         "count": 1, "capacity": {"requests": {"bandwidth": bandwidth}}}}
    ]}}))
    .unwrap();
    c
}

fn claiming(pod_name: &str, claim: &str) -> PodInfo {
    PodInfo {
        name: pod_name.into(),
        uid: format!("{pod_name}-uid"),
        ..pod(vec![named(claim)])
    }
}

#[test]
fn shares_in_flight_and_in_the_cache_take_their_capacity() {
    let plugin = DynamicResources::default();
    let cluster = nic_cluster(vec![
        asking("a", "6G"),
        asking("b", "6G"),
        asking("c", "4G"),
    ]);
    let (pa, pb, pc) = (
        claiming("pa", "a"),
        claiming("pb", "b"),
        claiming("pc", "c"),
    );
    let filter = |p: &PodInfo, cluster: &ClusterState| {
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, p, cluster).is_success());
        let s = plugin.filter(&state, p, &node("n1"), cluster);
        (state, s)
    };
    let (mut state_a, s) = filter(&pa, &cluster);
    assert!(s.is_success(), "{}", s.message());
    assert!(plugin.reserve(&mut state_a, &pa, "n1").is_success());
    let held = plugin.in_flight.lock()["ns/a"].devices.clone();
    let [HeldDevice::Share(id, consumed)] = held.as_slice() else {
        panic!("not one share: {held:?}");
    };
    assert_eq!(id.device, "nic-0");
    assert_eq!(consumed["bandwidth"], 6_000_000_000 * 1_000_000_000);
    // 6G in flight: another 6G does not fit, 4G does.
    let (_, s) = filter(&pb, &cluster);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), ERR_CANNOT_ALLOCATE);
    assert!(filter(&pc, &cluster).1.is_success());
    // Unreserve gives the 6G back.
    assert!(plugin.unreserve(&mut state_a, &pa, "n1").is_empty());
    assert!(filter(&pb, &cluster).1.is_success());

    // The same share, written and seen by the watch: the cache holds it.
    let (state_a, _) = filter(&pa, &cluster);
    let chosen = state_a.read::<DraCycle>().and_then(|cycle| {
        let by_node = cycle.by_node.lock();
        by_node
            .get("n1")
            .and_then(|choice| choice.results.first().cloned())
    });
    let mut written = asking("a", "6G");
    written.status = Some(ResourceClaimStatus {
        allocation: chosen,
        ..ResourceClaimStatus::default()
    });
    let cluster = nic_cluster(vec![written, asking("b", "6G"), asking("c", "4G")]);
    let (_, s) = filter(&pb, &cluster);
    assert_eq!(s.message(), ERR_CANNOT_ALLOCATE);
    assert!(filter(&pc, &cluster).1.is_success());
}
