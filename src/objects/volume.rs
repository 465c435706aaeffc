//! The views of PersistentVolumeClaims, PersistentVolumes and StorageClasses
//! that the volume plugins read (standalone mode).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
    TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::objects::csi::migrated_driver;
use crate::objects::resources::parse_quantity;
use crate::objects::{Keyed, namespace_and_name, object_key};

/// Annotation the scheduler sets on a claim to have it provisioned for a node.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

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
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.accessModes`.
    pub access_modes: Vec<String>,
    /// `spec.resources.requests.storage` in bytes (`None` when absent).
    pub request: Option<i64>,
    /// `spec.selector`: the labels a static volume must have.
    pub selector: Option<LabelSelector>,
    /// `spec.volumeMode: Block`.
    pub block: bool,
    /// `spec.volumeAttributesClassName` ("" when unset).
    pub attributes_class: String,
    /// The [`SELECTED_NODE`] annotation.
    pub selected_node: Option<String>,
}

impl ClaimInfo {
    /// Whether the claim asks for `ReadWriteOncePod` access.
    pub fn read_write_once_pod(&self) -> bool {
        self.access_modes.iter().any(|m| m == "ReadWriteOncePod")
    }
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
            uid: meta.uid.clone().unwrap_or_default(),
            access_modes: c
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.clone())
                .unwrap_or_default(),
            request: c
                .spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .and_then(|q| parse_quantity(&q.0, 1).ok()),
            selector: c.spec.as_ref().and_then(|s| s.selector.clone()),
            block: c.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
            attributes_class: c
                .spec
                .as_ref()
                .and_then(|s| s.volume_attributes_class_name.clone())
                .unwrap_or_default(),
            selected_node: annotations.and_then(|a| a.get(SELECTED_NODE).cloned()),
        }
    }
}

/// A PersistentVolume: where it can be attached, and what claims it fits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeAffinity.required`: the nodes the volume is reachable from.
    pub node_affinity: Option<NodeSelector>,
    /// `metadata.labels` (claim selectors, VolumeZone's zone labels).
    pub labels: BTreeMap<String, String>,
    /// `spec.capacity.storage` in bytes (0 when absent).
    pub capacity: i64,
    /// `spec.accessModes`.
    pub access_modes: Vec<String>,
    /// The storage class (the beta annotation wins over `spec.storageClassName`).
    pub storage_class: String,
    /// `spec.volumeMode: Block`.
    pub block: bool,
    /// `spec.volumeAttributesClassName` ("" when unset).
    pub attributes_class: String,
    /// `spec.claimRef`: the claim it is bound or pre-bound to.
    pub claim_ref: Option<ClaimRef>,
    /// `status.phase: Available`.
    pub available: bool,
    /// Has a deletion timestamp.
    pub deleting: bool,
    /// The CSI driver and volume handle it is attached with (an in-tree
    /// volume's migrated driver), for NodeVolumeLimits.
    pub attach: Option<AttachSource>,
}

/// A volume's `spec.claimRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimRef {
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `uid` ("" when the author pre-bound by name only).
    pub uid: String,
}

/// How a volume is attached: by which CSI driver, under which handle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachSource {
    /// The CSI driver (for an in-tree volume, the driver it migrated to).
    pub driver: String,
    /// The volume handle.
    pub handle: String,
    /// The in-tree plugin, for a volume that is not CSI itself.
    pub in_tree: Option<&'static str>,
}

impl VolumeInfo {
    /// Whether it is bound or pre-bound to `claim` (`IsVolumeBoundToClaim`).
    pub fn is_bound_to(&self, claim: &ClaimInfo) -> bool {
        self.claim_ref.as_ref().is_some_and(|r| {
            r.name == claim.name
                && r.namespace == claim.namespace
                && (r.uid.is_empty() || r.uid == claim.uid)
        })
    }
}

/// The CSI source of a PV, or the one its in-tree source migrates to.
fn attach_source(spec: &PersistentVolumeSpec, zone: Option<&str>) -> Option<AttachSource> {
    if let Some(csi) = &spec.csi {
        return Some(AttachSource {
            driver: csi.driver.clone(),
            handle: csi.volume_handle.clone(),
            in_tree: None,
        });
    }
    let (plugin, handle) = if let Some(d) = &spec.aws_elastic_block_store {
        ("kubernetes.io/aws-ebs", ebs_volume_id(&d.volume_id))
    } else if let Some(d) = &spec.gce_persistent_disk {
        ("kubernetes.io/gce-pd", gce_pd_handle(zone, &d.pd_name))
    } else if let Some(d) = &spec.azure_disk {
        ("kubernetes.io/azure-disk", d.disk_uri.clone())
    } else if let Some(d) = &spec.cinder {
        ("kubernetes.io/cinder", d.volume_id.clone())
    } else if let Some(d) = &spec.portworx_volume {
        ("kubernetes.io/portworx-volume", d.volume_id.clone())
    } else {
        return None;
    };
    Some(AttachSource {
        driver: migrated_driver(plugin)?.to_string(),
        handle,
        in_tree: Some(plugin),
    })
}

/// csi-translation-lib's EBS volume ID: `aws://<zone>/vol-x` becomes `vol-x`.
pub fn ebs_volume_id(id: &str) -> String {
    id.rsplit('/').next().unwrap_or(id).to_string()
}

/// csi-translation-lib's GCE PD handle (`UNSPECIFIED` zone for in-line disks).
pub fn gce_pd_handle(zone: Option<&str>, pd_name: &str) -> String {
    let zone = zone.unwrap_or("UNSPECIFIED");
    format!("projects/UNSPECIFIED/zones/{zone}/disks/{pd_name}")
}

impl Keyed for VolumeInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&PersistentVolume> for VolumeInfo {
    fn from(v: &PersistentVolume) -> Self {
        let spec = v.spec.as_ref();
        let labels = v.metadata.labels.clone().unwrap_or_default();
        let zone = labels
            .get("topology.kubernetes.io/zone")
            .or_else(|| labels.get("failure-domain.beta.kubernetes.io/zone"))
            .map(String::as_str);
        VolumeInfo {
            name: object_key(&v.metadata),
            node_affinity: spec
                .and_then(|s| s.node_affinity.as_ref())
                .and_then(|a| a.required.clone()),
            capacity: spec
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"))
                .and_then(|q| parse_quantity(&q.0, 1).ok())
                .unwrap_or(0),
            access_modes: spec
                .and_then(|s| s.access_modes.clone())
                .unwrap_or_default(),
            // kube-scheduler's GetPersistentVolumeClass: the annotation wins.
            storage_class: v
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(BETA_STORAGE_CLASS).cloned())
                .or_else(|| spec.and_then(|s| s.storage_class_name.clone()))
                .unwrap_or_default(),
            block: spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block"),
            attributes_class: spec
                .and_then(|s| s.volume_attributes_class_name.clone())
                .unwrap_or_default(),
            claim_ref: spec.and_then(|s| s.claim_ref.as_ref()).map(|r| ClaimRef {
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                uid: r.uid.clone().unwrap_or_default(),
            }),
            available: v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"),
            deleting: v.metadata.deletion_timestamp.is_some(),
            attach: spec.and_then(|s| attach_source(s, zone)),
            labels,
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
    /// `provisioner`.
    pub provisioner: String,
    /// `allowedTopologies`: where it may provision (empty: anywhere).
    pub allowed_topologies: Vec<TopologySelectorTerm>,
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
            provisioner: s.provisioner.clone(),
            allowed_topologies: s.allowed_topologies.clone().unwrap_or_default(),
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
