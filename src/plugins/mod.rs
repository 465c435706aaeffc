//! placer's plugins, one file each, and the registry that builds them from
//! the policy.
//!
//! To add a plugin: write `plugins/<name>.rs` with its args type, its struct
//! and the framework traits it implements, then add one variant to
//! [`PluginArgs`] and one arm to each `match` below.

pub mod capability_filter;
pub mod net_qos;
pub mod zone_spread;

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::framework::Plugin;

pub use capability_filter::{CapabilityFilter, CapabilityFilterArgs};
pub use net_qos::{NetQos, NetQosArgs};
pub use zone_spread::{ZoneSpread, ZoneSpreadArgs};

/// Every plugin name the policy accepts.
pub const PLUGIN_NAMES: &[&str] = &[capability_filter::NAME, zone_spread::NAME, net_qos::NAME];

/// The typed arguments of one enabled plugin; the variant says which plugin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PluginArgs {
    /// CapabilityFilter.
    CapabilityFilter(CapabilityFilterArgs),
    /// ZoneSpread.
    ZoneSpread(ZoneSpreadArgs),
    /// NetQoS.
    NetQos(NetQosArgs),
}

impl PluginArgs {
    /// Decodes the `args` of plugin `name` (strictly: unknown keys are errors).
    /// `None` when `name` is not a known plugin.
    pub fn deserialize_for<'de, D: Deserializer<'de>>(
        name: &str,
        d: D,
    ) -> Option<Result<Self, D::Error>> {
        Some(match name {
            capability_filter::NAME => {
                CapabilityFilterArgs::deserialize(d).map(PluginArgs::CapabilityFilter)
            }
            zone_spread::NAME => ZoneSpreadArgs::deserialize(d).map(PluginArgs::ZoneSpread),
            net_qos::NAME => NetQosArgs::deserialize(d).map(PluginArgs::NetQos),
            _ => return None,
        })
    }

    /// The arguments plugin `name` gets when the policy gives none.
    pub fn default_for(name: &str) -> Option<Self> {
        Some(match name {
            capability_filter::NAME => PluginArgs::CapabilityFilter(Default::default()),
            zone_spread::NAME => PluginArgs::ZoneSpread(Default::default()),
            net_qos::NAME => PluginArgs::NetQos(Default::default()),
            _ => return None,
        })
    }

    /// The plugin's name.
    pub fn plugin_name(&self) -> &'static str {
        match self {
            PluginArgs::CapabilityFilter(_) => capability_filter::NAME,
            PluginArgs::ZoneSpread(_) => zone_spread::NAME,
            PluginArgs::NetQos(_) => net_qos::NAME,
        }
    }

    /// Builds the plugin.
    pub fn build(&self) -> Arc<dyn Plugin> {
        match self {
            PluginArgs::CapabilityFilter(a) => Arc::new(CapabilityFilter::new(a)),
            PluginArgs::ZoneSpread(a) => Arc::new(ZoneSpread::new(a)),
            PluginArgs::NetQos(a) => Arc::new(NetQos::new(a)),
        }
    }
}
