//! Cases of kube-scheduler's `csi_test.go`, on placer's views.
use std::collections::BTreeMap;

use super::*;
use crate::framework::Code;
use crate::objects::pod::{InlineDisk, VolumeClaim};
use crate::objects::volume::AttachSource;
use crate::plugins::test_support::PodBuilder;

const EBS: &str = "ebs.csi.aws.com";
const GCE: &str = "pd.csi.storage.gke.io";

/// A cluster with node `n`, CSI claims `csi-<i>` bound to `pv-<i>` of
/// driver EBS, an in-tree EBS claim, and classes for unbound claims.
fn cluster(limit: Option<i32>) -> ClusterState {
    let mut c = ClusterState::default();
    c.apply_node(NodeInfo::new("n", [("k", "v")]));
    if let Some(limit) = limit {
        c.objects_mut::<CsiNodeInfo>().apply(CsiNodeInfo {
            name: "n".into(),
            drivers: BTreeMap::from([(EBS.to_string(), Some(limit)), (GCE.to_string(), None)]),
            ..Default::default()
        });
    }
    for i in 0..4 {
        claim(&mut c, &format!("csi-{i}"), Some(&format!("pv-{i}")), "");
        c.objects_mut::<VolumeInfo>().apply(VolumeInfo {
            name: format!("pv-{i}"),
            attach: Some(AttachSource {
                driver: EBS.into(),
                handle: format!("vol-{i}"),
                in_tree: None,
            }),
            ..Default::default()
        });
    }
    claim(&mut c, "in-tree", Some("pv-tree"), "");
    c.objects_mut::<VolumeInfo>().apply(VolumeInfo {
        name: "pv-tree".into(),
        attach: Some(AttachSource {
            driver: EBS.into(),
            handle: "vol-tree".into(),
            in_tree: Some("kubernetes.io/aws-ebs"),
        }),
        ..Default::default()
    });
    for (name, provisioner) in [("csi-sc", EBS), ("tree-sc", "kubernetes.io/aws-ebs")] {
        c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
            name: name.into(),
            provisioner: provisioner.into(),
            wait_for_first_consumer: Some(true),
            ..Default::default()
        });
    }
    claim(&mut c, "unbound", None, "csi-sc");
    claim(&mut c, "unbound-tree", None, "tree-sc");
    c
}

fn claim(c: &mut ClusterState, name: &str, volume: Option<&str>, class: &str) {
    c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
        namespace: "default".into(),
        name: name.into(),
        volume_name: volume.map(str::to_string),
        storage_class: class.into(),
        ..Default::default()
    });
}

fn pod(name: &str, claims: &[&str]) -> PodInfo {
    let claims: Vec<VolumeClaim> = claims.iter().map(|c| VolumeClaim::named(c)).collect();
    PodBuilder::new(name)
        .namespace("default")
        .claims(&claims)
        .build()
}

fn verdict(c: &ClusterState, p: &PodInfo) -> Status {
    let mut state = CycleState::new();
    let pre = NodeVolumeLimits.pre_filter(&mut state, p, c);
    if !pre.is_success() || pre.code() == Code::Skip {
        return pre;
    }
    let node = c.node("n").cloned().unwrap();
    NodeVolumeLimits.filter(&state, p, &node, c)
}

fn place(c: &mut ClusterState, name: &str, claims: &[&str]) {
    let mut p = pod(name, claims);
    p.node_name = Some("n".into());
    c.apply_pod(p);
}

#[test]
fn counts_new_existing_and_attached_volumes_per_driver() {
    let mut c = cluster(Some(2));
    assert!(verdict(&c, &pod("p", &["csi-0", "csi-1"])).is_success());
    let over = verdict(&c, &pod("p", &["csi-0", "csi-1", "csi-2"]));
    assert_eq!(over.code(), Code::Unschedulable);
    assert_eq!(over.message(), ERR_REASON);
    place(&mut c, "old", &["csi-0"]);
    assert!(
        verdict(&c, &pod("p", &["csi-0", "csi-1"])).is_success(),
        "a volume already on the node counts once"
    );
    assert_eq!(
        verdict(&c, &pod("p", &["csi-1", "csi-2"])).code(),
        Code::Unschedulable
    );
    // A VolumeAttachment of another CSI volume fills the last slot.
    c.objects_mut::<AttachmentInfo>().apply(AttachmentInfo {
        name: "va".into(),
        node: "n".into(),
        attacher: EBS.into(),
        volume: Some("pv-3".into()),
    });
    assert_eq!(
        verdict(&c, &pod("p", &["csi-1"])).code(),
        Code::Unschedulable
    );
    // As in kube-scheduler, only the node's pods' volumes are taken out of the
    // new ones, not the attachments': the attached volume counts twice.
    assert_eq!(
        verdict(&c, &pod("p", &["csi-3"])).code(),
        Code::Unschedulable
    );
}

#[test]
fn unbound_in_tree_and_in_line_volumes_count_under_their_csi_driver() {
    let c = cluster(Some(1));
    assert!(verdict(&c, &pod("p", &["unbound"])).is_success());
    assert_eq!(
        verdict(&c, &pod("p", &["unbound", "csi-0"])).code(),
        Code::Unschedulable,
        "an unbound claim counts as a volume of its provisioner"
    );
    assert_eq!(
        verdict(&c, &pod("p", &["in-tree", "unbound-tree"])).code(),
        Code::Unschedulable,
        "in-tree EBS volumes count under ebs.csi.aws.com"
    );
    let inline = PodBuilder::new("p")
        .namespace("default")
        .claims(&[VolumeClaim::named("csi-0")])
        .disks(&[InlineDisk::AwsEbs {
            volume_id: "aws://z/vol-x".into(),
        }])
        .build();
    assert_eq!(verdict(&c, &inline).code(), Code::Unschedulable);
    // Without a CSINode no migration is on, and no limit applies.
    let none = cluster(None);
    assert!(verdict(&none, &pod("p", &["csi-0", "csi-1", "in-tree"])).is_success());
}

#[test]
fn missing_claims_and_missing_drivers() {
    let mut c = cluster(Some(5));
    let s = verdict(&c, &pod("p", &["gone"]));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        s.message(),
        r#"looking up PVC default/gone: persistentvolumeclaim "gone" not found"#
    );
    assert_eq!(verdict(&c, &pod("p", &[])).code(), Code::Skip);
    c.objects_mut::<CsiDriverInfo>().apply(CsiDriverInfo {
        name: "other.csi".into(),
        prevent_scheduling_if_missing: true,
        ..Default::default()
    });
    c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
        name: "other-sc".into(),
        provisioner: "other.csi".into(),
        ..Default::default()
    });
    claim(&mut c, "needs-driver", None, "other-sc");
    let s = verdict(&c, &pod("p", &["needs-driver"]));
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(
        s.message(),
        "other.csi CSI driver is not installed on the node"
    );
}

#[test]
fn hints() {
    let p = pod("p", &["csi-0"]);
    let deleted = |q: PodInfo| Change::Pod {
        old: Some(std::sync::Arc::new(q)),
        new: None,
    };
    let mut placed = pod("old", &["x"]);
    placed.node_name = Some("n".into());
    assert_eq!(
        deleted_pod_may_help(&p, &deleted(placed)),
        QueueingHint::Queue
    );
    assert_eq!(
        deleted_pod_may_help(&p, &deleted(pod("old", &["x"]))),
        QueueingHint::Skip
    );
    let mut empty = pod("old", &[]);
    empty.node_name = Some("n".into());
    assert_eq!(
        deleted_pod_may_help(&p, &deleted(empty)),
        QueueingHint::Skip
    );
}

#[test]
fn csi_node_updates_queue_only_when_a_limit_grows() {
    use crate::plugins::test_support::{hint, object_event};
    let p = pod("p", &["csi-0"]);
    let moves = |event| hint(&NodeVolumeLimits, &p, event) == QueueingHint::Queue;
    let node = |limits: &[(&str, Option<i32>)]| CsiNodeInfo {
        name: "n".into(),
        drivers: limits.iter().map(|(d, l)| (d.to_string(), *l)).collect(),
        ..Default::default()
    };
    let csi_node = kinds::CSI_NODE;
    assert!(
        moves(object_event(csi_node, None, Some(node(&[])))),
        "any new CSINode"
    );
    assert!(moves(object_event(
        csi_node,
        Some(node(&[(EBS, Some(1))])),
        Some(node(&[(EBS, Some(2))]))
    )));
    assert!(
        moves(object_event(
            csi_node,
            Some(node(&[])),
            Some(node(&[(GCE, Some(1))]))
        )),
        "a new driver"
    );
    assert!(!moves(object_event(
        csi_node,
        Some(node(&[(EBS, Some(2))])),
        Some(node(&[(EBS, Some(1))]))
    )));
    assert!(
        !moves(object_event(
            csi_node,
            Some(node(&[(EBS, Some(2))])),
            Some(node(&[(EBS, None)]))
        )),
        "no limit counts as 0, as kube-scheduler compares them"
    );
    assert!(!moves(object_event(
        csi_node,
        Some(node(&[(EBS, Some(1))])),
        Some(node(&[(EBS, Some(1))]))
    )));
}
