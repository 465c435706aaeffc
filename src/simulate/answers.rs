//! The answers of the capacity questions (`--add-nodes`, `--compare-profile`), as data: the
//! report ([`super::outcome`]) carries them and [`super::whatif`] computes them, so they live
//! below both.

use serde::Serialize;

/// The answer to `--add-nodes`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AddNodes {
    /// The node template's name.
    pub template: String,
    /// The smallest count that leaves no pod pending, if one up to
    /// `searched_up_to` does.
    pub count: Option<usize>,
    /// The largest count tried.
    pub searched_up_to: usize,
    /// Pods still pending with `searched_up_to` nodes added (when none fits).
    pub still_pending: usize,
}

/// The answer to `--compare-profile`: the other policy's run beside this one.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// The other policy file.
    pub policy: String,
    /// Placed with it.
    pub placed: usize,
    /// Pending with it.
    pub pending: usize,
    /// Evicted with it.
    pub evicted: usize,
    /// Pods that ended elsewhere (or in another state) with it.
    pub differences: Vec<Difference>,
}

/// One pod's two outcomes.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Difference {
    /// The pod.
    pub pod: String,
    /// Its node (or state) in this run.
    pub this: String,
    /// Its node (or state) with the other profile.
    pub other: String,
}
