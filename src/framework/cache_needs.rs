//! What a plugin's configuration asks of the cache: the one trait every
//! plugin's args type implements, kept on this floor so that plugins name
//! the framework, never the registry above them.

use crate::cache::CountDimension;

/// What a plugin's configuration asks the cache to keep for it beyond what
/// every plugin gets (nodes, pods, keyed kinds). Each args type implements
/// it; the defaults ask for nothing.
pub trait CacheNeeds {
    /// Node label keys the plugin reads on every node of a request: the
    /// cache keeps their values inline per node ([`crate::objects::inputs`]).
    fn node_label_keys(&self) -> Vec<String> {
        Vec::new()
    }

    /// Pod counts per zone the plugin reads (the zone index's dimensions).
    fn count_dimensions(&self) -> Vec<CountDimension> {
        Vec::new()
    }

    /// Whether the plugin reads Dynamic Resource Allocation's objects
    /// (ResourceClaims, ResourceSlices, DeviceClasses, DeviceTaintRules):
    /// only then are they watched.
    fn dra(&self) -> bool {
        false
    }
}
