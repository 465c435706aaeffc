//! The in-line disks of a pod's volumes that VolumeRestrictions and
//! NodeVolumeLimits read (both decoders build them with [`InlineDisk::of`]).

use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, AzureDiskVolumeSource, GCEPersistentDiskVolumeSource,
    ISCSIVolumeSource, PortworxVolumeSource, RBDVolumeSource,
};

use crate::objects::csi::migrated_driver;
use crate::objects::volume::{AttachSource, ebs_volume_id, gce_pd_handle};

/// A disk named in-line in a pod's volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InlineDisk {
    /// `gcePersistentDisk`.
    GcePd {
        /// `pdName`.
        pd_name: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// `awsElasticBlockStore`.
    AwsEbs {
        /// `volumeID`.
        volume_id: String,
    },
    /// `iscsi`.
    Iscsi {
        /// `iqn`.
        iqn: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// `rbd`.
    Rbd {
        /// `monitors`.
        monitors: Vec<String>,
        /// `pool` (default `rbd`).
        pool: String,
        /// `image`.
        image: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// `azureDisk`.
    AzureDisk {
        /// `diskURI`.
        disk_uri: String,
    },
    /// `portworxVolume`.
    Portworx {
        /// `volumeID`.
        volume_id: String,
    },
}

/// The in-line sources one volume may carry (as both decoders see them).
#[derive(Default)]
pub(crate) struct Sources<'a> {
    pub gce: Option<&'a GCEPersistentDiskVolumeSource>,
    pub ebs: Option<&'a AWSElasticBlockStoreVolumeSource>,
    pub iscsi: Option<&'a ISCSIVolumeSource>,
    pub rbd: Option<&'a RBDVolumeSource>,
    pub azure: Option<&'a AzureDiskVolumeSource>,
    pub portworx: Option<&'a PortworxVolumeSource>,
}

impl InlineDisk {
    /// The disk of one volume's sources, if it names one.
    pub(crate) fn of(s: Sources<'_>) -> Option<Self> {
        Some(if let Some(d) = s.gce {
            InlineDisk::GcePd {
                pd_name: d.pd_name.clone(),
                read_only: d.read_only == Some(true),
            }
        } else if let Some(d) = s.ebs {
            InlineDisk::AwsEbs {
                volume_id: d.volume_id.clone(),
            }
        } else if let Some(d) = s.iscsi {
            InlineDisk::Iscsi {
                iqn: d.iqn.clone(),
                read_only: d.read_only == Some(true),
            }
        } else if let Some(d) = s.rbd {
            InlineDisk::Rbd {
                monitors: d.monitors.clone(),
                pool: d.pool.clone().unwrap_or_else(|| "rbd".into()),
                image: d.image.clone(),
                read_only: d.read_only == Some(true),
            }
        } else if let Some(d) = s.azure {
            InlineDisk::AzureDisk {
                disk_uri: d.disk_uri.clone(),
            }
        } else if let Some(d) = s.portworx {
            InlineDisk::Portworx {
                volume_id: d.volume_id.clone(),
            }
        } else {
            return None;
        })
    }

    /// Whether VolumeRestrictions checks it (`needsRestrictionsCheck`).
    pub fn needs_restrictions_check(&self) -> bool {
        matches!(
            self,
            InlineDisk::GcePd { .. }
                | InlineDisk::AwsEbs { .. }
                | InlineDisk::Iscsi { .. }
                | InlineDisk::Rbd { .. }
        )
    }

    /// Whether `self` and `other` may not be mounted by two pods on one
    /// node (kube-scheduler's `isVolumeConflict`).
    pub fn conflicts_with(&self, other: &InlineDisk) -> bool {
        use InlineDisk::*;
        match (self, other) {
            (
                GcePd { pd_name, read_only },
                GcePd {
                    pd_name: p2,
                    read_only: r2,
                },
            ) => pd_name == p2 && !(*read_only && *r2),
            (AwsEbs { volume_id }, AwsEbs { volume_id: v2 }) => volume_id == v2,
            (
                Iscsi { iqn, read_only },
                Iscsi {
                    iqn: i2,
                    read_only: r2,
                },
            ) => iqn == i2 && !(*read_only && *r2),
            (
                Rbd {
                    monitors,
                    pool,
                    image,
                    read_only,
                },
                Rbd {
                    monitors: m2,
                    pool: p2,
                    image: i2,
                    read_only: r2,
                },
            ) => {
                monitors.iter().any(|m| m2.contains(m))
                    && pool == p2
                    && image == i2
                    && !(*read_only && *r2)
            }
            _ => false,
        }
    }

    /// The CSI driver and handle NodeVolumeLimits counts it under (in-tree
    /// plugins migrated to CSI), `None` for disks it does not count.
    pub fn attach_source(&self) -> Option<AttachSource> {
        let (plugin, handle) = match self {
            InlineDisk::GcePd { pd_name, .. } => {
                ("kubernetes.io/gce-pd", gce_pd_handle(None, pd_name))
            }
            InlineDisk::AwsEbs { volume_id } => ("kubernetes.io/aws-ebs", ebs_volume_id(volume_id)),
            InlineDisk::AzureDisk { disk_uri } => ("kubernetes.io/azure-disk", disk_uri.clone()),
            InlineDisk::Portworx { volume_id } => {
                ("kubernetes.io/portworx-volume", volume_id.clone())
            }
            InlineDisk::Iscsi { .. } | InlineDisk::Rbd { .. } => return None,
        };
        Some(AttachSource {
            driver: migrated_driver(plugin)?.to_string(),
            handle,
            in_tree: Some(plugin),
        })
    }
}
