//! Standalone mode: placer as a scheduler of its own.
//!
//! Not available in this build: the safety plugins kube-scheduler runs
//! (resources, taints, affinity, ports, ...) are not implemented yet, and a
//! scheduler without them would place pods where they must not run. `serve`
//! refuses `--mode standalone|both` with [`UNAVAILABLE`] rather than
//! pretending.

/// The message `serve` prints when standalone scheduling is requested.
pub const UNAVAILABLE: &str = "standalone mode is not yet available in this build: \
    it needs kube-scheduler's safety plugins (NodeResourcesFit, TaintToleration, NodeAffinity, ...) \
    before it may bind pods; run with --mode extender";

pub mod queue;
