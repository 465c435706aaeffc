//! Node declared features (`status.declaredFeatures`) and the features a pod
//! needs from its node, as `k8s.io/component-helpers/nodedeclaredfeatures`
//! v0.37 infers them for scheduling. A set is a bitmask over the library's
//! registry, sorted by name as its `FeatureMapper` sorts it.

/// The registry's features, sorted by name (`features.AllFeatures` through
/// `nodedeclaredfeatures.New`): bit `i` of a [`FeatureSet`] is `KNOWN[i]`.
pub const KNOWN: [&str; 9] = [
    "DRANodeAllocatableResources",
    "DRAOptionalNodeOperations",
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "InPlacePodVerticalScalingMemoryBackedVolumes",
    "RestartAllContainersOnContainerExits",
    "UserNamespacesHostNetworkSupport",
    "VolumeBindMountOptions",
];

const RESTART_ALL_CONTAINERS: usize = 6;
const USER_NAMESPACES_HOST_NETWORK: usize = 7;
const VOLUME_BIND_MOUNT_OPTIONS: usize = 8;

/// A set of [`KNOWN`] features.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FeatureSet(u16);

impl FeatureSet {
    /// The empty set.
    pub const EMPTY: FeatureSet = FeatureSet(0);

    fn with(self, index: usize, on: bool) -> Self {
        if on {
            FeatureSet(self.0 | 1 << index)
        } else {
            self
        }
    }

    /// `FeatureMapper.TryMap`: the known features of a list the node keeps
    /// sorted, walked against the sorted registry as the library walks it
    /// (unknown names are skipped; a list out of order loses what the walk
    /// passes by, as it does in kube-scheduler).
    pub fn try_map<S: AsRef<str>>(sorted: &[S]) -> Self {
        let (mut i, mut j, mut set) = (0, 0, FeatureSet::EMPTY);
        while i < sorted.len() && j < KNOWN.len() {
            let name = sorted[i].as_ref();
            match name.cmp(KNOWN[j]) {
                std::cmp::Ordering::Equal => {
                    set = set.with(j, true);
                    i += 1;
                    j += 1;
                }
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
            }
        }
        set
    }

    /// True with no feature.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Every feature of `self` is in `other`.
    pub fn is_subset(self, other: FeatureSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The names of the features, in registry order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        KNOWN
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & 1 << i != 0)
            .map(|(_, n)| *n)
    }
}

/// What of a pod spec the inference reads, filled by both pod decoders.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodFeatureInputs {
    /// A container or init container has a `restartPolicyRules` entry with
    /// action `RestartAllContainers`.
    pub restart_all_containers: bool,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// `spec.hostUsers` is `false` (a user namespace).
    pub host_users_false: bool,
    /// A container, init container or ephemeral container mounts a volume
    /// with `bindMountOptions`.
    pub bind_mount_options: bool,
}

impl PodFeatureInputs {
    /// `InferForPodScheduling`: the features the pod needs from its node
    /// (no feature has a `MaxVersion`, so the version check never drops one).
    pub fn infer(self) -> FeatureSet {
        FeatureSet::EMPTY
            .with(RESTART_ALL_CONTAINERS, self.restart_all_containers)
            .with(
                USER_NAMESPACES_HOST_NETWORK,
                self.host_network && self.host_users_false,
            )
            .with(VOLUME_BIND_MOUNT_OPTIONS, self.bind_mount_options)
    }
}

/// The restart rule action that needs `RestartAllContainersOnContainerExits`.
pub const RESTART_ALL_CONTAINERS_ACTION: &str = "RestartAllContainers";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_sorted_as_the_library_sorts_it() {
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn try_map_walks_a_sorted_list_and_skips_unknown_names() {
        let set = FeatureSet::try_map(&[
            "AAA",
            "RestartAllContainersOnContainerExits",
            "Unknown",
            "VolumeBindMountOptions",
        ]);
        assert_eq!(
            set.names().collect::<Vec<_>>(),
            [
                "RestartAllContainersOnContainerExits",
                "VolumeBindMountOptions"
            ]
        );
        // Out of order, the walk has passed the first name when it meets it.
        let unsorted =
            FeatureSet::try_map(&["VolumeBindMountOptions", "DRANodeAllocatableResources"]);
        assert_eq!(
            unsorted.names().collect::<Vec<_>>(),
            ["VolumeBindMountOptions"]
        );
        assert!(FeatureSet::try_map::<&str>(&[]).is_empty());
    }

    #[test]
    fn inference_follows_each_feature() {
        let none = PodFeatureInputs::default();
        assert!(none.infer().is_empty());
        let host_network_only = PodFeatureInputs {
            host_network: true,
            ..none
        };
        assert!(host_network_only.infer().is_empty());
        let user_ns = PodFeatureInputs {
            host_network: true,
            host_users_false: true,
            ..none
        };
        assert_eq!(
            user_ns.infer().names().collect::<Vec<_>>(),
            ["UserNamespacesHostNetworkSupport"]
        );
        let all = PodFeatureInputs {
            restart_all_containers: true,
            bind_mount_options: true,
            ..user_ns
        };
        assert_eq!(all.infer().names().count(), 3);
        assert!(user_ns.infer().is_subset(all.infer()));
        assert!(!all.infer().is_subset(user_ns.infer()));
    }
}
