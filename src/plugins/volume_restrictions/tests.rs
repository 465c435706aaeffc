//! kube-scheduler's `volume_restrictions_test.go` cases, on placer's views.
use super::*;
use crate::framework::Code;
use crate::objects::pod::{InlineDisk, VolumeClaim};
use crate::plugins::test_support::PodBuilder;

fn gce(name: &str, read_only: bool) -> InlineDisk {
    InlineDisk::GcePd {
        pd_name: name.into(),
        read_only,
    }
}

fn iscsi(iqn: &str, read_only: bool) -> InlineDisk {
    InlineDisk::Iscsi {
        iqn: iqn.into(),
        read_only,
    }
}

fn rbd(monitors: &[&str], image: &str, read_only: bool) -> InlineDisk {
    InlineDisk::Rbd {
        monitors: monitors.iter().map(|m| m.to_string()).collect(),
        pool: "rbd".into(),
        image: image.into(),
        read_only,
    }
}

fn ebs(id: &str) -> InlineDisk {
    InlineDisk::AwsEbs {
        volume_id: id.into(),
    }
}

/// PreFilter then Filter of a pod with `disks` on a node running a pod with `existing`.
fn disk_verdict(disks: &[InlineDisk], existing: &[InlineDisk]) -> Status {
    let mut c = ClusterState::default();
    c.apply_node(NodeInfo::new("n", [("k", "v")]));
    c.apply_pod(PodBuilder::new("old").on("n").disks(existing).build());
    let pod = PodBuilder::new("new").disks(disks).build();
    let mut state = CycleState::new();
    let pre = VolumeRestrictions.pre_filter(&mut state, &pod, &c);
    if !pre.is_success() || pre.code() == Code::Skip {
        return pre;
    }
    let node = c.node("n").cloned().unwrap();
    VolumeRestrictions.filter(&state, &pod, &node, &c)
}

#[test]
fn in_line_disks_conflict_as_in_kube_scheduler() {
    for (disks, existing, conflict) in [
        (vec![gce("foo", false)], vec![], false),
        (vec![gce("foo", false)], vec![gce("foo", false)], true),
        (vec![gce("foo", true)], vec![gce("foo", true)], false),
        (vec![gce("foo", true)], vec![gce("foo", false)], true),
        (vec![gce("foo", false)], vec![gce("bar", false)], false),
        (vec![ebs("foo")], vec![ebs("foo")], true),
        (vec![ebs("foo")], vec![ebs("bar")], false),
        (
            vec![iscsi("iqn.a", false)],
            vec![iscsi("iqn.a", false)],
            true,
        ),
        (
            vec![iscsi("iqn.a", true)],
            vec![iscsi("iqn.a", true)],
            false,
        ),
        (
            vec![iscsi("iqn.a", false)],
            vec![iscsi("iqn.b", false)],
            false,
        ),
        (
            vec![rbd(&["a", "b"], "foo", false)],
            vec![rbd(&["b", "c"], "foo", false)],
            true,
        ),
        (
            vec![rbd(&["a"], "foo", false)],
            vec![rbd(&["c"], "foo", false)],
            false,
        ),
        (
            vec![rbd(&["a"], "foo", true)],
            vec![rbd(&["a"], "foo", true)],
            false,
        ),
        (
            vec![rbd(&["a"], "foo", false)],
            vec![rbd(&["a"], "bar", false)],
            false,
        ),
        // Different kinds never conflict.
        (vec![gce("foo", false)], vec![ebs("foo")], false),
    ] {
        let s = disk_verdict(&disks, &existing);
        if conflict {
            assert_eq!(s.code(), Code::Unschedulable, "{disks:?} vs {existing:?}");
            assert_eq!(s.message(), ERR_DISK_CONFLICT);
        } else {
            assert!(s.is_success(), "{disks:?} vs {existing:?}: {}", s.message());
        }
    }
    assert_eq!(disk_verdict(&[], &[gce("foo", false)]).code(), Code::Skip);
}

fn rwop_cluster() -> ClusterState {
    let mut c = ClusterState::default();
    c.apply_node(NodeInfo::new("n", [("k", "v")]));
    for (name, modes) in [("once", "ReadWriteOncePod"), ("many", "ReadWriteMany")] {
        c.objects_mut::<ClaimInfo>().apply(ClaimInfo {
            namespace: "default".into(),
            name: name.into(),
            access_modes: vec![modes.into()],
            ..Default::default()
        });
    }
    c
}

fn user(name: &str, claim: &str) -> PodInfo {
    PodBuilder::new(name)
        .namespace("default")
        .on("n")
        .claims(&[VolumeClaim::named(claim)])
        .build()
}

#[test]
fn a_read_write_once_pod_claim_in_use_rejects_every_node_until_its_user_goes() {
    let mut c = rwop_cluster();
    let pod = PodBuilder::new("p")
        .namespace("default")
        .claims(&[VolumeClaim::named("once"), VolumeClaim::named("many")])
        .build();
    let mut state = CycleState::new();
    assert_eq!(
        VolumeRestrictions.pre_filter(&mut state, &pod, &c).code(),
        Code::Skip,
        "no user yet"
    );
    c.apply_pod(user("other", "many"));
    assert_eq!(
        VolumeRestrictions.pre_filter(&mut state, &pod, &c).code(),
        Code::Skip,
        "a ReadWriteMany claim may be shared"
    );
    let holder = user("holder", "once");
    c.apply_pod(holder.clone());
    let mut state = CycleState::new();
    assert!(
        VolumeRestrictions
            .pre_filter(&mut state, &pod, &c)
            .is_success()
    );
    let node = c.node("n").cloned().unwrap();
    let s = VolumeRestrictions.filter(&state, &pod, &node, &c);
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.message(), ERR_RWOP_CONFLICT);
    // Preemption removing the holder frees the claim.
    VolumeRestrictions.remove_pod(&mut state, &pod, &holder, &node, &c);
    assert!(
        VolumeRestrictions
            .filter(&state, &pod, &node, &c)
            .is_success()
    );
    VolumeRestrictions.add_pod(&mut state, &pod, &holder, &node, &c);
    assert_eq!(
        VolumeRestrictions.filter(&state, &pod, &node, &c).code(),
        Code::Unschedulable
    );
}

#[test]
fn a_missing_claim_is_unresolvable() {
    let c = rwop_cluster();
    let pod = PodBuilder::new("p")
        .namespace("default")
        .claims(&[VolumeClaim::named("gone")])
        .build();
    let s = VolumeRestrictions.pre_filter(&mut CycleState::new(), &pod, &c);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), r#"persistentvolumeclaim "gone" not found"#);
}

#[test]
fn hints_queue_for_the_disk_or_claim_holder_only() {
    let pod = PodBuilder::new("p")
        .namespace("default")
        .disks(&[gce("foo", false)])
        .claims(&[VolumeClaim::named("once")])
        .build();
    let deleted = |p: PodInfo| Change::Pod {
        old: Some(std::sync::Arc::new(p)),
        new: None,
    };
    let with_disk = PodBuilder::new("o")
        .namespace("default")
        .on("n")
        .disks(&[gce("foo", false)])
        .build();
    assert_eq!(
        deleted_pod_may_help(&pod, &deleted(with_disk)),
        QueueingHint::Queue
    );
    assert_eq!(
        deleted_pod_may_help(&pod, &deleted(user("o", "once"))),
        QueueingHint::Queue
    );
    assert_eq!(
        deleted_pod_may_help(&pod, &deleted(user("o", "many"))),
        QueueingHint::Skip
    );
    let elsewhere = PodBuilder::new("o")
        .namespace("other")
        .disks(&[gce("foo", false)])
        .build();
    assert_eq!(
        deleted_pod_may_help(&pod, &deleted(elsewhere)),
        QueueingHint::Skip
    );
}
