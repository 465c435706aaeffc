//! The two plugins that read a node's resources, NodeResourcesFit
//! ([`fit`]) and NodeResourcesBalancedAllocation ([`balanced_allocation`]),
//! as kube-scheduler's `noderesources` package holds both: they share how a
//! pod's requests and a node's usage are scored per resource
//! ([`strategy`]), which neither owns.

pub mod balanced_allocation;
pub mod fit;
pub(crate) mod strategy;
