//! placer's plugins, one file each, and the registry that builds them from
//! the policy.
//!
//! To add a plugin: write `plugins/<name>.rs` with its `NAME`, its args type
//! (with its [`CacheNeeds`]: what the cache must keep for it, nothing by
//! default), its struct with `new(&args)`, the framework traits it
//! implements and [`crate::plugin!`] naming its extension points; then
//! declare its module below and add one line to the `registry!` list.
//!
//! A plugin is a leaf: it never names another plugin's module; what two
//! plugins share lives below, in [`crate::k8s`] or [`crate::framework`]
//! (the `floors` test checks it, and that this folder is at most two
//! levels deep).

#[cfg(test)]
pub(crate) mod test_support;

// The plugins' modules, declared here rather than by `registry!`: `cargo fmt`
// finds a module only through a `mod` item outside macros.
pub mod capability_filter;
pub mod default_binder;
pub mod default_preemption;
pub mod dynamic_resources;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod net_qos;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod scheduling_gates;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;
pub mod zone_spread;

// The registry names each plugin by a module of this one.
pub use node_resources::{balanced_allocation, fit as node_resources_fit};

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

pub use crate::framework::CacheNeeds;
use crate::framework::{Plugin, QueueSort};

/// Declares the plugins: each entry `module: Type(ArgsType)` re-exports the
/// plugin and its args from `module` (declared above), and adds the
/// [`PluginArgs`] variant `Type` with its arms in [`PLUGIN_NAMES`],
/// [`PluginArgs::deserialize_for`], [`PluginArgs::default_for`],
/// [`PluginArgs::plugin_name`], [`PluginArgs::build`] and
/// [`PluginArgs::cache_needs`]. A module provides `NAME`,
/// `Type::new(&ArgsType)` and `ArgsType: Deserialize + Default + CacheNeeds`.
macro_rules! registry {
    ($($(#[$doc:meta])* $module:ident: $ty:ident($args:ident);)*) => {
        $(pub use $module::{$ty, $args};)*

        /// Every plugin name the policy accepts.
        pub const PLUGIN_NAMES: &[&str] = &[$($module::NAME),*];

        /// The typed arguments of one enabled plugin; the variant says which plugin.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum PluginArgs {
            $($(#[$doc])* $ty($args),)*
        }

        impl PluginArgs {
            /// Decodes the `args` of plugin `name` (strictly: unknown keys are errors).
            /// `None` when `name` is not a known plugin.
            pub fn deserialize_for<'de, D: Deserializer<'de>>(
                name: &str,
                d: D,
            ) -> Option<Result<Self, D::Error>> {
                Some(match name {
                    $($module::NAME => $args::deserialize(d).map(PluginArgs::$ty),)*
                    _ => return None,
                })
            }

            /// The arguments plugin `name` gets when the policy gives none.
            pub fn default_for(name: &str) -> Option<Self> {
                Some(match name {
                    $($module::NAME => PluginArgs::$ty($args::default()),)*
                    _ => return None,
                })
            }

            /// The plugin's name.
            pub fn plugin_name(&self) -> &'static str {
                match self {
                    $(PluginArgs::$ty(_) => $module::NAME,)*
                }
            }

            /// Builds the plugin.
            pub fn build(&self) -> Arc<dyn Plugin> {
                match self {
                    $(PluginArgs::$ty(a) => Arc::new($ty::new(a)),)*
                }
            }

            /// What this configuration asks the cache to keep.
            pub fn cache_needs(&self) -> &dyn CacheNeeds {
                match self {
                    $(PluginArgs::$ty(a) => a,)*
                }
            }
        }
    };
}

// The plugins, in the order `PLUGIN_NAMES` lists them.
registry! {
    /// CapabilityFilter.
    capability_filter: CapabilityFilter(CapabilityFilterArgs);
    /// ZoneSpread.
    zone_spread: ZoneSpread(ZoneSpreadArgs);
    /// NetQoS.
    net_qos: NetQos(NetQosArgs);
    /// PrioritySort (queue sort, standalone mode).
    priority_sort: PrioritySort(PrioritySortArgs);
    /// SchedulingGates (pre-enqueue, standalone mode).
    scheduling_gates: SchedulingGates(SchedulingGatesArgs);
    /// NodeUnschedulable.
    node_unschedulable: NodeUnschedulable(NodeUnschedulableArgs);
    /// NodeName.
    node_name: NodeName(NodeNameArgs);
    /// TaintToleration.
    taint_toleration: TaintToleration(TaintTolerationArgs);
    /// NodeAffinity.
    node_affinity: NodeAffinity(NodeAffinityArgs);
    /// NodeResourcesFit.
    node_resources_fit: NodeResourcesFit(NodeResourcesFitArgs);
    /// NodePorts.
    node_ports: NodePorts(NodePortsArgs);
    /// VolumeBinding (Filter, Score, Reserve and PreBind).
    volume_binding: VolumeBinding(VolumeBindingArgs);
    /// VolumeRestrictions.
    volume_restrictions: VolumeRestrictions(VolumeRestrictionsArgs);
    /// NodeVolumeLimits.
    node_volume_limits: NodeVolumeLimits(NodeVolumeLimitsArgs);
    /// VolumeZone.
    volume_zone: VolumeZone(VolumeZoneArgs);
    /// PodTopologySpread.
    pod_topology_spread: PodTopologySpread(PodTopologySpreadArgs);
    /// InterPodAffinity.
    inter_pod_affinity: InterPodAffinity(InterPodAffinityArgs);
    /// DynamicResources (ResourceClaims: PreEnqueue to PreBind).
    dynamic_resources: DynamicResources(DynamicResourcesArgs);
    /// DefaultPreemption (PostFilter, standalone mode).
    default_preemption: DefaultPreemption(DefaultPreemptionArgs);
    /// DefaultBinder (Bind, standalone mode; added to a profile that lists no Bind plugin).
    default_binder: DefaultBinder(DefaultBinderArgs);
    /// NodeResourcesBalancedAllocation.
    balanced_allocation: BalancedAllocation(BalancedAllocationArgs);
    /// ImageLocality.
    image_locality: ImageLocality(ImageLocalityArgs);
    /// NodeDeclaredFeatures.
    node_declared_features: NodeDeclaredFeatures(NodeDeclaredFeaturesArgs);
}

/// The queue order when no profile enables a QueueSort plugin: PrioritySort,
/// as in kube-scheduler's default profile.
pub fn default_queue_sort() -> QueueSort {
    QueueSort::from_sort(Arc::new(PrioritySort))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Adding a plugin is its module and its `registry!` line: a module
    /// declared here without a line, or a line whose module is not
    /// declared (directly or through a `pub use` of a shared folder), fails
    /// this test, whatever the number of plugins.
    #[test]
    fn every_plugin_module_has_one_registry_line() {
        let text = include_str!("mod.rs");
        let text = &text[..text.find("#[cfg(test)]\nmod tests").unwrap()];
        let declared: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
            .collect();
        let registered: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                let (module, rest) = l.trim().split_once(": ")?;
                let plain = module.chars().all(|c| c.is_ascii_lowercase() || c == '_');
                (plain && rest.ends_with(");")).then_some(module)
            })
            .collect();
        let reexports: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("pub use ") && l.contains("::{"))
            .collect();
        assert_eq!(registered.len(), PLUGIN_NAMES.len(), "one line per plugin");
        for module in &registered {
            let reexported = reexports
                .iter()
                .any(|l| l.contains(&format!(" {module}")) || l.contains(&format!("{{{module}")));
            assert!(
                declared.contains(module) || reexported,
                "registry line {module} has no `pub mod {module};`"
            );
        }
        for module in &declared {
            let shared = reexports
                .iter()
                .any(|l| l.starts_with(&format!("pub use {module}::")));
            assert!(
                registered.contains(module) || shared,
                "plugin module {module} has no registry! line"
            );
        }
    }

    #[test]
    fn every_listed_plugin_defaults_builds_and_names_itself() {
        for &name in PLUGIN_NAMES {
            let args = PluginArgs::default_for(name).unwrap();
            assert_eq!(args.plugin_name(), name);
            assert_eq!(args.build().name(), name);
            let decoded = PluginArgs::deserialize_for(name, serde_json::json!({})).unwrap();
            assert_eq!(
                decoded.unwrap(),
                args,
                "{name}: empty args are the defaults"
            );
        }
        assert!(PluginArgs::default_for("Nope").is_none());
        assert!(PluginArgs::deserialize_for("Nope", serde_json::json!({})).is_none());
        assert_eq!(default_queue_sort().name(), priority_sort::NAME);
    }
}
