//! Views of API objects: the fields scheduling reads, taken once from a
//! k8s-openapi object (or straight from the wire) and kept small.
//!
//! This is the ground floor. The cache stores these views, the framework
//! hands them to plugins, and nothing here imports either of them.
//! [`PodInfo`] and [`NodeInfo`] are what every plugin reads; the other views
//! ([`DisruptionBudget`], [`volume`], [`csi`], [`namespace`], [`workload`]) back the
//! in-tree plugins that look objects up by key.

mod budget;
pub mod csi;
pub mod features;
pub mod images;
pub mod inputs;
mod keys;
pub mod namespace;
mod node;
pub mod pod;
pub mod resources;
pub mod volume;
pub mod workload;

pub use budget::DisruptionBudget;
pub use keys::{Keyed, namespace_and_name, object_key};
pub use node::{Labels, NodeIndex, NodeInfo};
pub use pod::PodInfo;
pub use resources::Resources;
