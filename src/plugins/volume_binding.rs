//! VolumeBinding (stand-in): pods with PersistentVolumeClaims are refused,
//! loudly, until placer can place them correctly (SPEC §5.2).
//!
//! kube-scheduler's VolumeBinding plugin
//! (`pkg/scheduler/framework/plugins/volumebinding/volume_binding.go`) needs
//! PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSI storage
//! capacity to decide anything: whether a claim is bound, which nodes its
//! volume's node affinity allows ("node(s) had volume node affinity
//! conflict"), which nodes have a matching unbound volume ("node(s) didn't
//! find available persistent volumes to bind") or enough free storage for
//! `WaitForFirstConsumer` provisioning, and it binds the claims before the
//! pod. placer's cache holds none of those objects yet. Filtering as if the
//! claims did not exist would put a pod on a node its zonal disk cannot
//! attach to, where it would hang in `ContainerCreating`; so the stand-in
//! rejects every pod that has a `persistentVolumeClaim` volume in PreFilter,
//! as `UnschedulableAndUnresolvable` (preempting pods cannot fix it), naming
//! the claims. The pod's FailedScheduling event says exactly that, and it is
//! never placed silently.
//!
//! Pods without claims are not affected (PreFilter Skip). Once the cache
//! watches PVs, PVCs and StorageClasses, this file becomes the real plugin
//! under the same name, so policies enabling it need no change.

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{CycleState, PodInfo, PreFilterPlugin, Status};

/// Plugin name in the policy.
pub const NAME: &str = "VolumeBinding";

/// Start of the rejection reason; the claim names follow.
pub const REASON_PREFIX: &str =
    "placer cannot place pods with PersistentVolumeClaims yet (volume binding is not implemented)";

/// VolumeBinding takes no arguments yet (any key is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeBindingArgs {}

/// The plugin.
pub struct VolumeBinding;

impl VolumeBinding {
    /// Builds the plugin.
    pub fn new(_: &VolumeBindingArgs) -> Self {
        VolumeBinding
    }
}

crate::plugin!(VolumeBinding, NAME, [pre_filter]);

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &ClusterState) -> Status {
        match pod.spec.pvc_claims.as_slice() {
            [] => Status::skip("pod has no PersistentVolumeClaims"),
            [one] => Status::unresolvable(format!("{REASON_PREFIX}: claim {one}")),
            many => Status::unresolvable(format!("{REASON_PREFIX}: claims {}", many.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::framework::pod::PodSpecInfo;
    use crate::framework::{Code, Framework, NodeInfo, WeightedPlugin};

    fn pod(claims: &[&str]) -> PodInfo {
        PodInfo {
            name: "p".into(),
            namespace: "ns".into(),
            spec: Arc::new(PodSpecInfo {
                pvc_claims: claims.iter().map(|c| c.to_string()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pre(p: &PodInfo) -> Status {
        VolumeBinding.pre_filter(&mut CycleState::new(), p, &ClusterState::default())
    }

    #[test]
    fn pods_with_claims_are_rejected_naming_them() {
        let s = pre(&pod(&["data"]));
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.message(),
            "placer cannot place pods with PersistentVolumeClaims yet \
             (volume binding is not implemented): claim data"
        );
        let s = pre(&pod(&["data", "logs"]));
        assert_eq!(s.message(), format!("{REASON_PREFIX}: claims data, logs"));
    }

    #[test]
    fn pods_without_claims_skip() {
        assert_eq!(pre(&pod(&[])).code(), Code::Skip);
    }

    #[test]
    fn the_rejection_reaches_every_node() {
        let f = Framework::new(
            "p",
            vec![WeightedPlugin {
                plugin: Arc::new(VolumeBinding),
                weight: 1,
            }],
        );
        let nodes: Vec<Arc<NodeInfo>> = ["a", "b"]
            .iter()
            .map(|n| Arc::new(NodeInfo::new(n, Vec::<(String, String)>::new())))
            .collect();
        let cluster = ClusterState::default();
        let p = pod(&["data"]);
        let mut state = CycleState::new();
        let pre = f.pre_filter(&mut state, &p, &cluster);
        let verdicts = f.filter_nodes(&state, &pre, &p, &nodes, &cluster);
        for v in verdicts {
            let s = v.expect("rejected");
            assert_eq!(s.plugin(), NAME);
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        }
        let free = pod(&[]);
        let pre = f.pre_filter(&mut state, &free, &cluster);
        assert!(
            f.filter_nodes(&state, &pre, &free, &nodes, &cluster)
                .iter()
                .all(Option::is_none)
        );
    }

    #[test]
    fn args_take_no_keys() {
        assert!(serde_yaml_ng::from_str::<VolumeBindingArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<VolumeBindingArgs>("bindTimeoutSeconds: 600").is_err());
    }
}
