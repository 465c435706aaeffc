//! Unbound `WaitForFirstConsumer` claims: static matching, provisioning,
//! Reserve, Score and args (cases after kube-scheduler's binder tests).

use k8s_openapi::api::core::v1::{NodeSelector, TopologySelectorTerm};

use super::super::*;
use crate::framework::{Code, PreBindPlugin, PreScorePlugin, ReservePlugin};
use crate::objects::csi::{CsiDriverInfo, StorageCapacityInfo};
use crate::objects::volume::ClaimRef;
use crate::plugins::test_support::{self, PodBuilder};

const GI: i64 = 1 << 30;

fn on_node(node: &str) -> NodeSelector {
    serde_json::from_value(
        serde_json::json!({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}),
    )
    .unwrap()
}

fn local_pv(name: &str, node: &str, size: i64) -> VolumeInfo {
    VolumeInfo {
        name: name.into(),
        node_affinity: Some(on_node(node)),
        capacity: size * GI,
        access_modes: vec!["ReadWriteOnce".into()],
        storage_class: "local".into(),
        available: true,
        ..Default::default()
    }
}

fn wffc_claim(name: &str, class: &str, size: i64) -> ClaimInfo {
    ClaimInfo {
        namespace: "ns".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        storage_class: class.into(),
        access_modes: vec!["ReadWriteOnce".into()],
        request: Some(size * GI),
        ..Default::default()
    }
}

fn class(name: &str, provisioner: &str) -> StorageClassInfo {
    StorageClassInfo {
        name: name.into(),
        wait_for_first_consumer: Some(true),
        provisioner: provisioner.into(),
        ..Default::default()
    }
}

fn node(name: &str) -> NodeInfo {
    NodeInfo::new(name, [("kubernetes.io/hostname", name), ("zone", "a")])
}

fn cluster() -> ClusterState {
    let mut c = ClusterState::default();
    c.objects_mut::<StorageClassInfo>()
        .apply(class("local", "kubernetes.io/no-provisioner"));
    c.objects_mut::<StorageClassInfo>()
        .apply(class("fast", "csi.example.com"));
    for v in [
        local_pv("pv-a-big", "a", 10),
        local_pv("pv-a-small", "a", 2),
        local_pv("pv-b", "b", 5),
    ] {
        c.objects_mut::<VolumeInfo>().apply(v);
    }
    c
}

fn pod_with(claims: &[&str]) -> PodInfo {
    let claims: Vec<VolumeClaim> = claims.iter().map(|n| VolumeClaim::named(n)).collect();
    PodBuilder::new("p").namespace("ns").claims(&claims).build()
}

/// PreFilter, then Filter on each node; the state for Reserve and Score.
fn filter_all(
    vb: &VolumeBinding,
    p: &PodInfo,
    c: &ClusterState,
    nodes: &[NodeInfo],
) -> (CycleState, Vec<Status>) {
    let mut state = CycleState::new();
    let pre = vb.pre_filter(&mut state, p, c);
    assert!(pre.is_success(), "{}", pre.message());
    let verdicts = nodes.iter().map(|n| vb.filter(&state, p, n, c)).collect();
    (state, verdicts)
}

#[test]
fn static_volumes_smallest_first_on_reachable_nodes() {
    let mut c = cluster();
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("data", "local", 1));
    let vb = VolumeBinding::default();
    let p = pod_with(&["data"]);
    let (state, v) = filter_all(&vb, &p, &c, &[node("a"), node("b"), node("c")]);
    assert!(v[0].is_success() && v[1].is_success());
    assert_eq!(v[2].code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(v[2].message(), ERR_BIND_CONFLICT);
    let on_a = state.read::<ClaimsState>().unwrap().on("a").unwrap();
    assert_eq!(on_a.static_bindings[0].1.name, "pv-a-small");
    // /explain shows which volume each node would bind.
    let mut state = state;
    assert!(vb.pre_score(&mut state, &p, &[], &c).is_success());
    let (a, b) = (node("a"), node("b"));
    let scores = test_support::score_both_ways(&vb, &state, &p, &[&a, &b], &c);
    assert_eq!(scores[0].note.as_deref(), Some("ns/data -> pv-a-small"));
    // Too big for every volume on b; access modes must be offered.
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("huge", "local", 6));
    let (_, v) = filter_all(&vb, &pod_with(&["huge"]), &c, &[node("a"), node("b")]);
    assert!(v[0].is_success());
    assert_eq!(v[1].message(), ERR_BIND_CONFLICT);
    c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
        access_modes: vec!["ReadWriteMany".into()],
        ..wffc_claim("rwx", "local", 1)
    });
    let (_, v) = filter_all(&vb, &pod_with(&["rwx"]), &c, &[node("a")]);
    assert_eq!(v[0].message(), ERR_BIND_CONFLICT);
}

#[test]
fn reserve_keeps_the_next_pod_off_the_chosen_volume_until_unreserve() {
    let mut c = cluster();
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("one", "local", 1));
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("two", "local", 1));
    let vb = VolumeBinding::default();
    let first = pod_with(&["one"]);
    let (mut state, _) = filter_all(&vb, &first, &c, &[node("b")]);
    assert!(vb.reserve(&mut state, &first, "b").is_success());
    assert!(vb.pre_bind_pre_flight(&state, &first, "b").is_success());
    let second = pod_with(&["two"]);
    let (_, v) = filter_all(&vb, &second, &c, &[node("b")]);
    assert_eq!(
        v[0].message(),
        ERR_BIND_CONFLICT,
        "pv-b is assumed for ns/one"
    );
    vb.unreserve(&mut state, &first, "b");
    let (_, v) = filter_all(&vb, &second, &c, &[node("b")]);
    assert!(v[0].is_success());
    // A volume bound to another claim is never a candidate; one pre-bound to
    // this claim is the only one.
    c.objects_mut::<VolumeInfo>().apply(VolumeInfo {
        claim_ref: Some(ClaimRef {
            namespace: "ns".into(),
            name: "one".into(),
            uid: String::new(),
        }),
        ..local_pv("pv-b", "b", 5)
    });
    let (_, v) = filter_all(&vb, &second, &c, &[node("b")]);
    assert_eq!(v[0].message(), ERR_BIND_CONFLICT);
    let (state, v) = filter_all(&vb, &pod_with(&["one"]), &c, &[node("a"), node("b")]);
    assert_eq!(v[0].message(), ERR_BIND_CONFLICT, "pre-bound to pv-b on b");
    assert!(v[1].is_success());
    let on_b = state.read::<ClaimsState>().unwrap().on("b").unwrap();
    assert_eq!(on_b.static_bindings[0].1.name, "pv-b");
}

#[test]
fn provisioning_follows_class_topology_capacity_and_selected_node() {
    let mut c = cluster();
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("dyn", "fast", 3));
    let vb = VolumeBinding::default();
    let p = pod_with(&["dyn"]);
    let (mut state, v) = filter_all(&vb, &p, &c, &[node("a")]);
    assert!(v[0].is_success());
    assert!(vb.reserve(&mut state, &p, "a").is_success());
    assert!(
        vb.pre_bind_pre_flight(&state, &p, "a").is_success(),
        "must provision"
    );
    // The class allows zone b only.
    c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
        allowed_topologies: vec![
            serde_json::from_value::<TopologySelectorTerm>(serde_json::json!(
                {"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}))
            .unwrap(),
        ],
        ..class("fast", "csi.example.com")
    });
    let (_, v) = filter_all(&vb, &p, &c, &[node("a")]);
    assert_eq!(v[0].message(), ERR_BIND_CONFLICT);
    c.objects_mut::<StorageClassInfo>()
        .apply(class("fast", "csi.example.com"));
    // The driver publishes capacity: 2Gi on zone a is not enough for 3Gi.
    c.objects_mut::<CsiDriverInfo>().apply(CsiDriverInfo {
        name: "csi.example.com".into(),
        storage_capacity: true,
        ..Default::default()
    });
    let capacity = |size: i64| StorageCapacityInfo {
        namespace: "kube-system".into(),
        name: "cap-a".into(),
        storage_class: "fast".into(),
        node_topology: Some(
            serde_json::from_value(serde_json::json!({"matchLabels": {"zone": "a"}})).unwrap(),
        ),
        capacity: Some(size * GI),
        maximum_volume_size: None,
    };
    c.objects_mut::<StorageCapacityInfo>().apply(capacity(2));
    let (_, v) = filter_all(&vb, &p, &c, &[node("a")]);
    assert_eq!(v[0].message(), ERR_NOT_ENOUGH_SPACE);
    c.objects_mut::<StorageCapacityInfo>().apply(capacity(12));
    let (state, v) = filter_all(&vb, &p, &c, &[node("a")]);
    assert!(v[0].is_success());
    // Score: 3 of 12 Gi used is 25 % utilization; the default shape gives 75.
    let on_a = state.read::<ClaimsState>().unwrap().on("a").unwrap();
    assert_eq!(vb.utilization_score(&on_a), 75);
    assert_eq!(plan(&on_a).as_deref(), Some("ns/dyn provisioned here"));
    // A claim already selected for node b fits b only.
    c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
        selected_node: Some("b".into()),
        ..wffc_claim("dyn", "fast", 3)
    });
    let (_, v) = filter_all(&vb, &p, &c, &[node("a")]);
    assert_eq!(v[0].message(), ERR_BIND_CONFLICT);
}

#[test]
fn a_claim_being_provisioned_for_a_reserved_pod_keeps_a_second_pod_on_that_node() {
    let mut c = cluster();
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("shared", "fast", 1));
    let vb = VolumeBinding::default();
    let (first, second) = (pod_with(&["shared"]), pod_with(&["shared"]));
    let (mut state, v) = filter_all(&vb, &first, &c, &[node("a"), node("b")]);
    assert!(
        v.iter().all(Status::is_success),
        "either node can provision"
    );
    assert!(vb.reserve(&mut state, &first, "a").is_success());
    // kube-scheduler's Reserve assumes the claim with selected-node a: until
    // PreBind's write shows in the cache, the second pod fits a only.
    let (_, v) = filter_all(&vb, &second, &c, &[node("a"), node("b")]);
    assert!(v[0].is_success(), "{}", v[0].message());
    assert_eq!(
        v[1].message(),
        ERR_BIND_CONFLICT,
        "ns/shared is provisioned on a"
    );
    vb.unreserve(&mut state, &first, "a");
    let (_, v) = filter_all(&vb, &second, &c, &[node("a"), node("b")]);
    assert!(v.iter().all(Status::is_success), "given back at Unreserve");
    // Reserved on b instead: the second pod now fits b only.
    let (mut state, _) = filter_all(&vb, &first, &c, &[node("b")]);
    assert!(vb.reserve(&mut state, &first, "b").is_success());
    let (_, v) = filter_all(&vb, &second, &c, &[node("a")]);
    assert_eq!(v[0].message(), ERR_BIND_CONFLICT, "now provisioned on b");
}

#[test]
fn bound_and_unbound_reasons_come_together_in_kube_schedulers_order() {
    let mut c = cluster();
    c.objects_mut::<VolumeInfo>().apply(VolumeInfo {
        name: "pv-bound".into(),
        node_affinity: Some(on_node("b")),
        ..Default::default()
    });
    c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
        volume_name: Some("pv-bound".into()),
        fully_bound: true,
        ..wffc_claim("bound", "local", 1)
    });
    c.objects_mut::<ClaimInfo>()
        .apply(wffc_claim("huge", "local", 50));
    let (_, v) = filter_all(
        &VolumeBinding::default(),
        &pod_with(&["bound", "huge"]),
        &c,
        &[node("a")],
    );
    assert_eq!(
        v[0].reasons()
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>(),
        [ERR_NODE_CONFLICT, ERR_BIND_CONFLICT]
    );
}

#[test]
fn static_bindings_score_by_utilization_through_the_shape() {
    let vb = VolumeBinding::default();
    let volumes = PodVolumes {
        static_bindings: vec![(wffc_claim("c", "local", 1), local_pv("v", "a", 4))],
        provisions: vec![],
    };
    assert_eq!(vb.utilization_score(&volumes), 75, "25 % used");
    let packing: VolumeBindingArgs = serde_json::from_value(serde_json::json!({
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    }))
    .unwrap();
    assert_eq!(VolumeBinding::new(&packing).utilization_score(&volumes), 25);
    assert_eq!(vb.utilization_score(&PodVolumes::default()), 0);
}

#[test]
fn args_are_parsed_strictly() {
    let parse = |v: serde_json::Value| serde_json::from_value::<VolumeBindingArgs>(v);
    let d = parse(serde_json::json!({})).unwrap();
    assert_eq!(d, VolumeBindingArgs::default());
    assert_eq!(d.bind_timeout_seconds, 600);
    assert_eq!(
        parse(serde_json::json!({"bindTimeoutSeconds": 5}))
            .unwrap()
            .bind_timeout_seconds,
        5
    );
    let e = parse(serde_json::json!({"bindTimeoutSeconds": -1}))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("invalid BindTimeoutSeconds, should not be a negative value"),
        "{e}"
    );
    let e = parse(serde_json::json!({"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("shape[1].utilization: 10: values must be sorted in increasing order"),
        "{e}"
    );
    let e = parse(serde_json::json!({"shape": [{"utilization": 0, "score": 11}]}))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("shape[0].score: 11: not in valid range [0, 10]"),
        "{e}"
    );
    assert!(parse(serde_json::json!({"nope": 1})).is_err());
}
