//! The views of PersistentVolumeClaims, PersistentVolumes and StorageClasses
//! that VolumeBinding reads (standalone mode).

use k8s_openapi::api::core::v1::{NodeSelector, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::objects::{Keyed, namespace_and_name, object_key};

/// Annotation the PV controller sets once a claim's binding is complete.
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The storage class of claims written before `spec.storageClassName` existed.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimInfo {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.volumeName` (set when bound, or pre-bound by its author).
    pub volume_name: Option<String>,
    /// Bound and the binding completed (kube-scheduler's `isPVCFullyBound`).
    pub fully_bound: bool,
    /// `status.phase: Lost`.
    pub lost: bool,
    /// Has a deletion timestamp.
    pub deleting: bool,
    /// The storage class (`spec.storageClassName`, or the beta annotation).
    pub storage_class: String,
    /// UID of the controlling owner (a generic ephemeral volume's pod).
    pub controller_uid: Option<String>,
}

impl Keyed for ClaimInfo {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl From<&PersistentVolumeClaim> for ClaimInfo {
    fn from(c: &PersistentVolumeClaim) -> Self {
        let meta = &c.metadata;
        let volume_name = c
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty());
        let annotations = meta.annotations.as_ref();
        let (namespace, name) = namespace_and_name(meta);
        ClaimInfo {
            namespace,
            name,
            fully_bound: volume_name.is_some()
                && annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED)),
            volume_name,
            lost: c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost"),
            deleting: meta.deletion_timestamp.is_some(),
            // kube-scheduler's GetPersistentVolumeClaimClass: the annotation wins.
            storage_class: annotations
                .and_then(|a| a.get(BETA_STORAGE_CLASS).cloned())
                .or_else(|| c.spec.as_ref().and_then(|s| s.storage_class_name.clone()))
                .unwrap_or_default(),
            controller_uid: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
        }
    }
}

/// A PersistentVolume: where it can be attached.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeAffinity.required`: the nodes the volume is reachable from.
    pub node_affinity: Option<NodeSelector>,
}

impl Keyed for VolumeInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&PersistentVolume> for VolumeInfo {
    fn from(v: &PersistentVolume) -> Self {
        VolumeInfo {
            name: object_key(&v.metadata),
            node_affinity: v
                .spec
                .as_ref()
                .and_then(|s| s.node_affinity.as_ref())
                .and_then(|a| a.required.clone()),
        }
    }
}

/// A StorageClass: when its claims are bound.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageClassInfo {
    /// `metadata.name`.
    pub name: String,
    /// `volumeBindingMode`: `Some(true)` for `WaitForFirstConsumer`, `None` when unset.
    pub wait_for_first_consumer: Option<bool>,
}

impl Keyed for StorageClassInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&StorageClass> for StorageClassInfo {
    fn from(s: &StorageClass) -> Self {
        StorageClassInfo {
            name: object_key(&s.metadata),
            wait_for_first_consumer: s
                .volume_binding_mode
                .as_deref()
                .map(|m| m == "WaitForFirstConsumer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_keep_what_volume_binding_reads() {
        let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data", "namespace": "ns",
                         "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                              "uid": "u1", "controller": true}]},
            "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
            "status": {"phase": "Bound"}
        }))
        .unwrap();
        let c = ClaimInfo::from(&claim);
        assert_eq!(c.key(), "ns/data");
        assert!(c.fully_bound && !c.lost && !c.deleting);
        assert_eq!(c.volume_name.as_deref(), Some("pv-1"));
        assert_eq!(c.storage_class, "fast");
        assert_eq!(c.controller_uid.as_deref(), Some("u1"));
        // Named but without the completed-binding annotation: not bound yet.
        let pre_bound: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x", "namespace": "ns",
                         "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
            "spec": {"volumeName": "pv-2", "storageClassName": "new"},
            "status": {"phase": "Lost"}
        }))
        .unwrap();
        let c = ClaimInfo::from(&pre_bound);
        assert!(!c.fully_bound && c.lost);
        assert_eq!(c.storage_class, "old", "the beta annotation wins");

        let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
        }))
        .unwrap();
        let v = VolumeInfo::from(&pv);
        assert_eq!(v.key(), "pv-1");
        assert!(v.node_affinity.is_some());
        let sc: StorageClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "local"}, "provisioner": "x",
            "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .unwrap();
        assert_eq!(
            StorageClassInfo::from(&sc).wait_for_first_consumer,
            Some(true)
        );
    }
}
