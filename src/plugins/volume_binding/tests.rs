//! Unit tests of VolumeBinding, with claims, volumes and classes in the cache.
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelector;

use super::*;
use crate::framework::{Code, Framework, WeightedPlugin};
use crate::objects::volume::{StorageClassInfo, VolumeInfo};
use crate::plugins::test_support::PodBuilder;

fn pod(claims: &[VolumeClaim]) -> PodInfo {
    PodBuilder::new("p").uid("pod-uid").claims(claims).build()
}

fn claim(name: &str, volume: Option<&str>, bound: bool) -> ClaimInfo {
    ClaimInfo {
        namespace: "ns".into(),
        name: name.into(),
        volume_name: volume.map(str::to_string),
        fully_bound: bound,
        ..Default::default()
    }
}

/// A volume reachable only from nodes labelled `zone=<zone>`.
fn zonal(name: &str, zone: &str) -> VolumeInfo {
    let selector: NodeSelector = serde_json::from_value(serde_json::json!({
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": [zone]}]}]
    }))
    .unwrap();
    VolumeInfo {
        name: name.into(),
        node_affinity: Some(selector),
        ..Default::default()
    }
}

fn node(name: &str, zone: &str) -> NodeInfo {
    NodeInfo::new(name, [("zone", zone)])
}

/// PreFilter, then (when it passes) Filter on each node.
fn run(p: &PodInfo, c: &ClusterState, nodes: &[NodeInfo]) -> Result<Vec<Status>, Status> {
    let mut state = CycleState::new();
    let pre = VolumeBinding::default().pre_filter(&mut state, p, c);
    if !pre.is_success() {
        return Err(pre);
    }
    Ok(nodes
        .iter()
        .map(|n| VolumeBinding::default().filter(&state, p, n, c))
        .collect())
}

#[test]
fn bound_volumes_pin_the_pod_to_their_nodes() {
    let mut c = ClusterState::default();
    c.objects_mut::<ClaimInfo>()
        .apply(claim("data", Some("pv-a"), true));
    c.objects_mut::<VolumeInfo>().apply(zonal("pv-a", "a"));
    let verdicts = run(
        &pod(&[VolumeClaim::named("data")]),
        &c,
        &[node("n1", "a"), node("n2", "b")],
    )
    .unwrap();
    assert!(verdicts[0].is_success());
    assert_eq!(verdicts[1].code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(verdicts[1].message(), ERR_NODE_CONFLICT);
    // A volume without node affinity goes anywhere; a missing one nowhere.
    c.objects_mut::<ClaimInfo>()
        .apply(claim("free", Some("pv-any"), true));
    c.objects_mut::<VolumeInfo>().apply(VolumeInfo {
        name: "pv-any".into(),
        node_affinity: None,
        ..Default::default()
    });
    c.objects_mut::<ClaimInfo>()
        .apply(claim("ghost", Some("pv-gone"), true));
    let any = run(&pod(&[VolumeClaim::named("free")]), &c, &[node("n2", "b")]).unwrap();
    assert!(any[0].is_success());
    let gone = run(&pod(&[VolumeClaim::named("ghost")]), &c, &[node("n1", "a")]).unwrap();
    assert_eq!(gone[0].message(), ERR_PV_NOT_EXIST);
}

#[test]
fn claims_must_exist_and_be_usable() {
    let mut c = ClusterState::default();
    let pre = |c: &ClusterState, want: VolumeClaim| run(&pod(&[want]), c, &[]).unwrap_err();
    let s = pre(&c, VolumeClaim::named("data"));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), r#"persistentvolumeclaim "data" not found"#);
    let eph = VolumeClaim {
        name: "p-scratch".into(),
        ephemeral: true,
    };
    assert_eq!(
        pre(&c, eph.clone()).message(),
        r#"waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch""#
    );
    c.objects_mut::<ClaimInfo>()
        .apply(claim("p-scratch", None, false));
    assert_eq!(
        pre(&c, eph).message(),
        "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)"
    );
    c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
        deleting: true,
        ..claim("old", Some("pv"), true)
    });
    assert_eq!(
        pre(&c, VolumeClaim::named("old")).message(),
        r#"persistentvolumeclaim "old" is being deleted"#
    );
    c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
        lost: true,
        ..claim("lost", Some("pv-x"), false)
    });
    assert_eq!(
        pre(&c, VolumeClaim::named("lost")).message(),
        r#"persistentvolumeclaim "lost" bound to non-existent persistentvolume "pv-x""#
    );
}

#[test]
fn unbound_claims_wait_for_the_pv_controller_or_are_refused() {
    let mut c = ClusterState::default();
    c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
        name: "fast".into(),
        wait_for_first_consumer: Some(false),
        ..Default::default()
    });
    c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
        name: "local".into(),
        wait_for_first_consumer: Some(true),
        ..Default::default()
    });
    c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
        name: "broken".into(),
        wait_for_first_consumer: None,
        ..Default::default()
    });
    let with_class = |name: &str, class: &str| ClaimInfo {
        storage_class: class.into(),
        ..claim(name, None, false)
    };
    c.objects_mut::<ClaimInfo>()
        .apply(with_class("now", "fast"));
    c.objects_mut::<ClaimInfo>()
        .apply(with_class("later", "local"));
    c.objects_mut::<ClaimInfo>()
        .apply(with_class("classless", ""));
    c.objects_mut::<ClaimInfo>()
        .apply(with_class("odd", "broken"));
    let pre = |names: &[&str]| {
        let claims: Vec<VolumeClaim> = names.iter().map(|n| VolumeClaim::named(n)).collect();
        run(&pod(&claims), &c, &[]).unwrap_err()
    };
    assert_eq!(pre(&["now"]).message(), ERR_UNBOUND_IMMEDIATE);
    assert_eq!(pre(&["classless"]).message(), ERR_UNBOUND_IMMEDIATE);
    assert_eq!(pre(&["later", "now"]).message(), ERR_UNBOUND_IMMEDIATE);
    // A WaitForFirstConsumer claim passes PreFilter: Filter looks for a volume.
    let claims = [VolumeClaim::named("later")];
    assert!(run(&pod(&claims), &c, &[]).is_ok());
    let odd = pre(&["odd"]);
    assert_eq!(odd.code(), Code::Error);
    assert_eq!(
        odd.message(),
        r#"VolumeBindingMode not set for StorageClass "broken""#
    );
}

#[test]
fn pods_without_claims_skip_and_rejections_reach_every_node() {
    let c = ClusterState::default();
    let mut state = CycleState::new();
    assert_eq!(
        VolumeBinding::default()
            .pre_filter(&mut state, &pod(&[]), &c)
            .code(),
        Code::Skip
    );
    let f = Framework::new(
        "p",
        vec![WeightedPlugin {
            plugin: Arc::new(VolumeBinding::default()),
            weight: 1,
        }],
    );
    let nodes: Vec<Arc<NodeInfo>> = ["a", "b"].iter().map(|n| Arc::new(node(n, "z"))).collect();
    let p = pod(&[VolumeClaim::named("data")]);
    let pre = f.pre_filter(&mut state, &p, &c);
    for v in f.filter_nodes(&state, &pre, &p, &nodes, &c) {
        let s = v.expect("rejected");
        assert_eq!(s.plugin(), NAME);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    }
    let free = pod(&[]);
    let pre = f.pre_filter(&mut state, &free, &c);
    assert!(
        f.filter_nodes(&state, &pre, &free, &nodes, &c)
            .iter()
            .all(Option::is_none)
    );
}

#[test]
fn args_take_kube_schedulers_keys_only() {
    assert!(serde_yaml_ng::from_str::<VolumeBindingArgs>("{}").is_ok());
    assert!(serde_yaml_ng::from_str::<VolumeBindingArgs>("bindTimeoutSeconds: 600").is_ok());
    assert!(serde_yaml_ng::from_str::<VolumeBindingArgs>("bindTimeout: 600").is_err());
}

#[path = "binding_tests.rs"]
mod binding;
