//! The two ways placer runs: as an extender of kube-scheduler (HTTP verbs)
//! and as a standalone scheduler.

pub mod binder;
pub mod extender;
pub mod standalone;
