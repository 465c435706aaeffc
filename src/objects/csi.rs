//! The views of the storage.k8s.io kinds the volume plugins read
//! (standalone mode): CSINodes (per-driver volume limits), CSIDrivers
//! (whether a pod may go where the driver is missing, whether it publishes
//! capacity), VolumeAttachments (volumes already attached to a node) and
//! CSIStorageCapacities (what a class can still provision where), plus the
//! in-tree plugins kube-scheduler counts under their CSI drivers' names.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::objects::resources::parse_quantity;
use crate::objects::{Keyed, namespace_and_name, object_key};

/// In-tree volume plugins whose volumes kube-scheduler counts under a CSI
/// driver (csi-translation-lib, limited to those `isCSIMigrationOn` accepts):
/// `(in-tree plugin name, CSI driver name)`.
const MIGRATED: [(&str, &str); 5] = [
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

/// The CSI driver that took over in-tree plugin `plugin`, if one did.
pub fn migrated_driver(plugin: &str) -> Option<&'static str> {
    MIGRATED
        .iter()
        .find(|(p, _)| *p == plugin)
        .map(|(_, driver)| *driver)
}

/// The CSINode annotation listing the in-tree plugins migrated on the node.
pub const MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// A CSINode: the drivers installed on a node and their volume limits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CsiNodeInfo {
    /// `metadata.name` (the node's name).
    pub name: String,
    /// Each installed driver's `allocatable.count` (`None`: no limit).
    pub drivers: BTreeMap<String, Option<i32>>,
    /// The `storage.alpha.kubernetes.io/migrated-plugins` annotation: the
    /// in-tree plugins migrated to CSI on the node (VolumeBinding's queueing
    /// hint retries a pod when it changes).
    pub migrated_plugins: Option<String>,
}

impl Keyed for CsiNodeInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&CSINode> for CsiNodeInfo {
    fn from(n: &CSINode) -> Self {
        CsiNodeInfo {
            name: object_key(&n.metadata),
            drivers: n
                .spec
                .drivers
                .iter()
                .map(|d| (d.name.clone(), d.allocatable.as_ref().and_then(|a| a.count)))
                .collect(),
            migrated_plugins: n
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MIGRATED_PLUGINS))
                .cloned(),
        }
    }
}

impl CsiNodeInfo {
    /// The drivers with a limit (kube-scheduler's `getVolumeLimits`).
    pub fn limits(&self) -> impl Iterator<Item = (&str, i32)> {
        self.drivers
            .iter()
            .filter_map(|(d, l)| l.map(|l| (d.as_str(), l)))
    }
}

/// A CSIDriver: what the scheduler reads of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CsiDriverInfo {
    /// `metadata.name`.
    pub name: String,
    /// `spec.preventPodSchedulingIfMissing`: pods using it only go to nodes
    /// whose CSINode lists it.
    pub prevent_scheduling_if_missing: bool,
    /// `spec.storageCapacity`: it publishes CSIStorageCapacity objects.
    pub storage_capacity: bool,
}

impl Keyed for CsiDriverInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&CSIDriver> for CsiDriverInfo {
    fn from(d: &CSIDriver) -> Self {
        CsiDriverInfo {
            name: object_key(&d.metadata),
            prevent_scheduling_if_missing: d.spec.prevent_pod_scheduling_if_missing == Some(true),
            storage_capacity: d.spec.storage_capacity == Some(true),
        }
    }
}

/// A VolumeAttachment: a persistent volume a driver attached to a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttachmentInfo {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeName`.
    pub node: String,
    /// `spec.attacher` (the CSI driver).
    pub attacher: String,
    /// `spec.source.persistentVolumeName`.
    pub volume: Option<String>,
}

impl Keyed for AttachmentInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&VolumeAttachment> for AttachmentInfo {
    fn from(a: &VolumeAttachment) -> Self {
        AttachmentInfo {
            name: object_key(&a.metadata),
            node: a.spec.node_name.clone(),
            attacher: a.spec.attacher.clone(),
            volume: a.spec.source.persistent_volume_name.clone(),
        }
    }
}

/// A CSIStorageCapacity: how much a class can provision on the nodes its
/// topology selects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageCapacityInfo {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `storageClassName`.
    pub storage_class: String,
    /// `nodeTopology` (`None` selects no node).
    pub node_topology: Option<LabelSelector>,
    /// `capacity` in bytes (`None` when unset or unparsable).
    pub capacity: Option<i64>,
    /// `maximumVolumeSize` in bytes, when set.
    pub maximum_volume_size: Option<i64>,
}

impl Keyed for StorageCapacityInfo {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl From<&CSIStorageCapacity> for StorageCapacityInfo {
    fn from(c: &CSIStorageCapacity) -> Self {
        let (namespace, name) = namespace_and_name(&c.metadata);
        let bytes = |q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            q.and_then(|q| parse_quantity(&q.0, 1).ok())
        };
        StorageCapacityInfo {
            namespace,
            name,
            storage_class: c.storage_class_name.clone(),
            node_topology: c.node_topology.clone(),
            capacity: bytes(c.capacity.as_ref()),
            maximum_volume_size: bytes(c.maximum_volume_size.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_keep_what_the_volume_plugins_read() {
        let node: CSINode = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": [
                {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                {"name": "other", "nodeID": "x"}]}
        }))
        .unwrap();
        let n = CsiNodeInfo::from(&node);
        assert_eq!(n.key(), "n1");
        assert_eq!(n.limits().collect::<Vec<_>>(), [("ebs.csi.aws.com", 25)]);
        assert!(n.drivers.contains_key("other"));
        let driver: CSIDriver = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d"},
            "spec": {"storageCapacity": true, "preventPodSchedulingIfMissing": true}
        }))
        .unwrap();
        let d = CsiDriverInfo::from(&driver);
        assert!(d.storage_capacity && d.prevent_scheduling_if_missing);
        let va: VolumeAttachment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "va"},
            "spec": {"attacher": "d", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}
        }))
        .unwrap();
        let a = AttachmentInfo::from(&va);
        assert_eq!((a.node.as_str(), a.volume.as_deref()), ("n1", Some("pv")));
        let cap: CSIStorageCapacity = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "kube-system"},
            "storageClassName": "fast", "capacity": "10Gi", "maximumVolumeSize": "1Gi",
            "nodeTopology": {"matchLabels": {"zone": "a"}}
        }))
        .unwrap();
        let c = StorageCapacityInfo::from(&cap);
        assert_eq!(c.key(), "kube-system/c");
        assert_eq!(c.capacity, Some(10 << 30));
        assert_eq!(c.maximum_volume_size, Some(1 << 30));
        assert_eq!(
            migrated_driver("kubernetes.io/gce-pd"),
            Some("pd.csi.storage.gke.io")
        );
        assert_eq!(migrated_driver("kubernetes.io/nfs"), None);
    }
}
