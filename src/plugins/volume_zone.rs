//! VolumeZone: a pod whose bound volumes carry zone or region labels only
//! goes to nodes in those zones (design §5.2). kube-scheduler v1.37's
//! `volumezone` plugin:
//!
//! - PreFilter reads each `persistentVolumeClaim` volume's claim and its
//!   volume's `topology.kubernetes.io/{zone,region}` and legacy
//!   `failure-domain.beta.kubernetes.io/{zone,region}` labels (a value may
//!   list several zones joined by `__`). An unbound claim of a
//!   `WaitForFirstConsumer` class is left to VolumeBinding; any other unbound
//!   claim, or a missing claim, volume or class, rejects the pod with
//!   kube-scheduler's message. No labelled volume: Skip.
//! - Filter: a node without any of the four labels passes; otherwise each
//!   labelled key (or its GA name) must be on the node with one of the
//!   volume's values ([`ERR_REASON`], unresolvable).
//!
//! Queueing hints: StorageClass Add, Node Add/label update, a claim of the
//! pod added or updated, PersistentVolume Add/Update. placer's events for
//! kinds kept by key carry the key only, so the StorageClass and volume
//! hints cannot look at the binding mode or compare topologies as
//! kube-scheduler's do: they queue (more retries, never a missed one).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::cache::events::kinds;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint, claim_of_pod};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, Status, queue_if,
};
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "VolumeZone";

/// kube-scheduler's `ErrReasonConflict`.
pub const ERR_REASON: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The labels read, in kube-scheduler's order.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// VolumeZone takes no arguments (any key is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeZoneArgs {}

impl crate::framework::CacheNeeds for VolumeZoneArgs {}

/// The plugin.
pub struct VolumeZone;

impl VolumeZone {
    /// Builds the plugin.
    pub fn new(_: &VolumeZoneArgs) -> Self {
        VolumeZone
    }
}

crate::plugin!(VolumeZone, NAME, [pre_filter, filter, enqueue_extensions]);

/// One labelled key of one volume and the values it allows.
#[derive(Debug, Clone, PartialEq)]
struct VolumeTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

/// PreFilter's state: every labelled key of the pod's volumes.
struct Topologies(Vec<VolumeTopology>);

/// The legacy label's GA name.
fn ga_label(key: &str) -> &str {
    match key {
        BETA_REGION => REGION,
        BETA_ZONE => ZONE,
        other => other,
    }
}

/// `LabelZonesToSet`: `a__b` is `{a, b}`; an empty part makes the label
/// unreadable, and kube-scheduler then ignores it.
fn zones(value: &str) -> Option<BTreeSet<String>> {
    value
        .split("__")
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_string())
        })
        .collect()
}

/// The topologies of one volume (`getPVTopologies`).
fn volume_topologies(v: &VolumeInfo) -> impl Iterator<Item = VolumeTopology> + '_ {
    TOPOLOGY_LABELS.into_iter().filter_map(|key| {
        let values = zones(v.labels.get(key)?)?;
        Some(VolumeTopology { key, values })
    })
}

/// kube-scheduler's `getPVbyPod`.
fn pod_topologies(pod: &PodInfo, cluster: &ClusterState) -> Result<Vec<VolumeTopology>, Status> {
    let mut out = Vec::new();
    for want in pod.spec.pvc_claims.iter().filter(|c| !c.ephemeral) {
        if want.name.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let key = format!("{}/{}", pod.namespace, want.name);
        let Some(claim) = cluster.objects::<ClaimInfo>().get(&key) else {
            return Err(Status::unresolvable(format!(
                "persistentvolumeclaim {:?} not found",
                want.name
            )));
        };
        let Some(volume_name) = claim.volume_name.as_deref() else {
            if claim.storage_class.is_empty() {
                return Err(Status::unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let Some(class) = cluster
                .objects::<StorageClassInfo>()
                .get(&claim.storage_class)
            else {
                return Err(Status::unresolvable(format!(
                    "storageclass.storage.k8s.io {:?} not found",
                    claim.storage_class
                )));
            };
            match class.wait_for_first_consumer {
                None => {
                    return Err(Status::unresolvable(format!(
                        "VolumeBindingMode not set for StorageClass {:?}",
                        claim.storage_class
                    )));
                }
                // VolumeBinding picks or provisions the volume for the node.
                Some(true) => continue,
                Some(false) => return Err(Status::unresolvable("PersistentVolume had no name")),
            }
        };
        let Some(volume) = cluster.objects::<VolumeInfo>().get(volume_name) else {
            return Err(Status::unresolvable(format!(
                "persistentvolume {volume_name:?} not found"
            )));
        };
        out.extend(volume_topologies(volume));
    }
    Ok(out)
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status {
        match pod_topologies(pod, cluster) {
            Err(status) => status,
            Ok(t) if t.is_empty() => Status::skip("no volume with zone labels"),
            Ok(t) => {
                state.write(Topologies(t));
                Status::success()
            }
        }
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let Topologies(topologies) = match state.from_pre_filter::<Topologies>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        if !TOPOLOGY_LABELS.iter().any(|k| node.labels.contains_key(k)) {
            return Status::success();
        }
        for t in topologies {
            let value = node
                .labels
                .get(t.key)
                .or_else(|| node.labels.get(ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON);
            }
        }
        Status::success()
    }
}

impl EnqueueExtensions for VolumeZone {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::Kind(kinds::STORAGE_CLASS),
                ActionType::ADD,
                waiting_class_added,
            ),
            EventHint::always(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            EventHint::when(
                EventResource::Kind(kinds::PERSISTENT_VOLUME_CLAIM),
                ActionType::ADD | ActionType::UPDATE,
                |pod, change| claim_of_pod(pod, change, false),
            ),
            EventHint::when(
                EventResource::Kind(kinds::PERSISTENT_VOLUME),
                ActionType::ADD | ActionType::UPDATE,
                volume_topology_changed,
            ),
        ]
    }
}

/// `isSchedulableAfterStorageClassAdded`: only a `WaitForFirstConsumer`
/// class lets an unbound claim through.
fn waiting_class_added(_: &PodInfo, change: &Change) -> QueueingHint {
    match change.objects::<StorageClassInfo>() {
        Some((_, Some(class))) => queue_if(class.wait_for_first_consumer == Some(true)),
        _ => QueueingHint::Queue,
    }
}

/// `isSchedulableAfterPersistentVolumeChange`: a new volume, or one whose
/// zone or region labels changed.
fn volume_topology_changed(_: &PodInfo, change: &Change) -> QueueingHint {
    match change.objects::<VolumeInfo>() {
        Some((Some(old), Some(new))) => {
            queue_if(!volume_topologies(old).eq(volume_topologies(new)))
        }
        _ => QueueingHint::Queue,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::framework::Code;
    use crate::objects::pod::VolumeClaim;
    use crate::plugins::test_support::PodBuilder;

    fn cluster() -> ClusterState {
        let mut c = ClusterState::default();
        let volume = |name: &str, labels: &[(&str, &str)]| VolumeInfo {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        };
        for v in [
            volume("Vol_1", &[(BETA_ZONE, "us-west1-a")]),
            volume(
                "Vol_2",
                &[(BETA_REGION, "us-west1-b"), ("uselessLabel", "none")],
            ),
            volume("Vol_3", &[(BETA_REGION, "us-west1-c")]),
            volume("Vol_Stable_1", &[(ZONE, "us-west1-a")]),
            volume(
                "Vol_Stable_2",
                &[(REGION, "us-west1-b"), ("uselessLabel", "none")],
            ),
            volume("Vol_Multi", &[(ZONE, "us-west1-a__us-west1-b")]),
        ] {
            c.objects_mut::<VolumeInfo>().apply(v);
        }
        let claim = |name: &str, volume: &str, class: &str| ClaimInfo {
            namespace: "default".into(),
            name: name.into(),
            volume_name: (!volume.is_empty()).then(|| volume.to_string()),
            storage_class: class.into(),
            ..Default::default()
        };
        for (name, volume) in [
            ("PVC_1", "Vol_1"),
            ("PVC_2", "Vol_2"),
            ("PVC_3", "Vol_3"),
            ("PVC_4", "Vol_not_exist"),
            ("PVC_Stable_1", "Vol_Stable_1"),
            ("PVC_Stable_2", "Vol_Stable_2"),
            ("PVC_Multi", "Vol_Multi"),
        ] {
            c.objects_mut::<ClaimInfo>().apply(claim(name, volume, ""));
        }
        c.objects_mut::<ClaimInfo>()
            .apply(claim("PVC_NoSC", "", ""));
        c.objects_mut::<ClaimInfo>()
            .apply(claim("PVC_EmptySC", "", "Class_0"));
        c.objects_mut::<ClaimInfo>()
            .apply(claim("PVC_WFFC", "", "Class_Wait"));
        c.objects_mut::<ClaimInfo>()
            .apply(claim("PVC_Immediate", "", "Class_Immediate"));
        c.objects_mut::<ClaimInfo>()
            .apply(claim("PVC_Unset", "", "Class_Unset"));
        for (name, wffc) in [
            ("Class_Wait", Some(true)),
            ("Class_Immediate", Some(false)),
            ("Class_Unset", None),
        ] {
            c.objects_mut::<StorageClassInfo>().apply(StorageClassInfo {
                name: name.into(),
                wait_for_first_consumer: wffc,
                ..Default::default()
            });
        }
        c
    }

    fn run(claims: &[&str], labels: &[(&str, &str)]) -> Status {
        let c = cluster();
        let claims: Vec<VolumeClaim> = claims.iter().map(|n| VolumeClaim::named(n)).collect();
        let pod = PodBuilder::new("p")
            .namespace("default")
            .claims(&claims)
            .build();
        let mut state = CycleState::new();
        let pre = VolumeZone.pre_filter(&mut state, &pod, &c);
        if !pre.is_success() || pre.code() == Code::Skip {
            return pre;
        }
        let node = NodeInfo::new("n", labels.iter().copied());
        VolumeZone.filter(&state, &pod, &node, &c)
    }

    /// kube-scheduler's `TestSingleZone` and `TestMultiZone` tables.
    #[test]
    fn volumes_pin_pods_to_their_zones() {
        for (claims, labels, ok) in [
            (
                &["PVC_1"][..],
                &[(BETA_ZONE, "us-west1-a"), ("uselessLabel", "none")][..],
                true,
            ),
            (&["PVC_1"], &[("uselessLabel", "none")], true),
            (&["PVC_2"], &[(BETA_REGION, "us-west1-b")], true),
            (&["PVC_1"], &[(BETA_ZONE, "no_us-west1-a")], false),
            (&["PVC_2"], &[(BETA_REGION, "no_us-west1-b")], false),
            (&["PVC_Stable_1"], &[(ZONE, "us-west1-a")], true),
            (&["PVC_Stable_1"], &[(BETA_ZONE, "us-west1-a")], false),
            (&["PVC_1"], &[(ZONE, "us-west1-a")], true),
            (&["PVC_Stable_2"], &[(REGION, "no_us-west1-b")], false),
            (
                &["PVC_1", "PVC_2"],
                &[(BETA_ZONE, "us-west1-a"), (BETA_REGION, "us-west1-b")],
                true,
            ),
            (
                &["PVC_1", "PVC_3"],
                &[(BETA_ZONE, "us-west1-a"), (BETA_REGION, "us-west1-b")],
                false,
            ),
            (&["PVC_Multi"], &[(ZONE, "us-west1-b")], true),
            (&["PVC_Multi"], &[(ZONE, "us-west1-c")], false),
            // An unbound WaitForFirstConsumer claim is VolumeBinding's.
            (&["PVC_WFFC"], &[(ZONE, "anywhere")], true),
        ] {
            let s = run(claims, labels);
            assert_eq!(
                s.is_success() || s.code() == Code::Skip,
                ok,
                "{claims:?} {labels:?}"
            );
            if !ok {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
                assert_eq!(s.message(), ERR_REASON);
            }
        }
    }

    #[test]
    fn missing_objects_reject_with_kube_schedulers_messages() {
        for (claim, message) in [
            (
                "PVC_NoSC",
                "PersistentVolumeClaim had no pv name and storageClass name",
            ),
            (
                "PVC_EmptySC",
                r#"storageclass.storage.k8s.io "Class_0" not found"#,
            ),
            ("PVC_Immediate", "PersistentVolume had no name"),
            (
                "PVC_Unset",
                r#"VolumeBindingMode not set for StorageClass "Class_Unset""#,
            ),
            ("PVC_4", r#"persistentvolume "Vol_not_exist" not found"#),
            ("PVC_gone", r#"persistentvolumeclaim "PVC_gone" not found"#),
        ] {
            let s = run(&[claim], &[(ZONE, "a")]);
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{claim}");
            assert_eq!(s.message(), message);
        }
        assert_eq!(run(&[], &[]).code(), Code::Skip);
    }

    #[test]
    fn class_and_volume_events_queue_only_what_can_help() {
        use crate::plugins::test_support::{hint, object_event};
        let pod = PodBuilder::new("p")
            .namespace("default")
            .claims(&[VolumeClaim::named("data")])
            .build();
        let moves = |event| hint(&VolumeZone, &pod, event) == QueueingHint::Queue;
        let class = |waits: Option<bool>| StorageClassInfo {
            name: "c".into(),
            wait_for_first_consumer: waits,
            ..Default::default()
        };
        let sc = kinds::STORAGE_CLASS;
        assert!(moves(object_event(sc, None, Some(class(Some(true))))));
        assert!(
            !moves(object_event(sc, None, Some(class(Some(false))))),
            "Immediate"
        );
        assert!(
            !moves(object_event(sc, None, Some(class(None)))),
            "no binding mode"
        );
        assert!(
            !moves(object_event(sc, Some(class(None)), Some(class(Some(true))))),
            "update"
        );
        let volume = |labels: &[(&str, &str)]| VolumeInfo {
            name: "v".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let pv = kinds::PERSISTENT_VOLUME;
        assert!(moves(object_event(pv, None, Some(volume(&[])))));
        assert!(moves(object_event(
            pv,
            Some(volume(&[(ZONE, "a")])),
            Some(volume(&[(ZONE, "b")]))
        )));
        assert!(moves(object_event(
            pv,
            Some(volume(&[])),
            Some(volume(&[(BETA_REGION, "r")]))
        )));
        assert!(
            !moves(object_event(
                pv,
                Some(volume(&[(ZONE, "a")])),
                Some(volume(&[(ZONE, "a"), ("x", "y")]))
            )),
            "a label outside the topology keys cannot help"
        );
    }

    #[test]
    fn claim_events_queue_only_the_pods_claims() {
        let pod = PodBuilder::new("p")
            .namespace("default")
            .claims(&[VolumeClaim::named("data")])
            .build();
        let change = |key: &str| Change::object::<VolumeInfo>(key, None, None);
        assert_eq!(
            claim_of_pod(&pod, &change("default/data"), false),
            QueueingHint::Queue
        );
        assert_eq!(
            claim_of_pod(&pod, &change("other/data"), false),
            QueueingHint::Skip
        );
        assert_eq!(
            claim_of_pod(&pod, &change("default/x"), false),
            QueueingHint::Skip
        );
    }
}
