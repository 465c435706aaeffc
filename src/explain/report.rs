//! The shape of `/explain/pods/{namespace}/{name}`'s answer: the whole
//! explanation, one verdict per node, and who gave each verdict. [`super::live`]
//! fills it, [`super::hints`] reads it, [`super::table`] prints it.

use serde::Serialize;

use crate::framework::explain::{FilterRow, ScoreRow};

/// Who gave a verdict or a score.
pub const KUBE_SCHEDULER: &str = "kube-scheduler";
/// placer's verdicts and scores.
pub const PLACER: &str = "placer";

/// The whole answer of `/explain/pods/{namespace}/{name}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveExplanation {
    /// `namespace/name`.
    pub pod: String,
    /// The pod's UID.
    pub uid: String,
    /// `spec.schedulerName`.
    pub scheduler_name: String,
    /// `extender` (kube-scheduler calls placer) or `standalone` (placer schedules).
    pub deployment: &'static str,
    /// placer's profile.
    pub profile: String,
    /// kube-scheduler's side, in extender deployments.
    pub kube_scheduler: Option<InTreeSummary>,
    /// The node the pod is bound to, when it is: it is then evaluated as if it were not.
    pub bound_node: Option<String>,
    /// Nodes evaluated (every cached node).
    pub nodes_total: usize,
    /// Nodes that pass every filter.
    pub feasible: usize,
    /// kube-scheduler's FailedScheduling text when nothing fits, else who wins.
    pub summary: String,
    /// The node with the highest total (the first by name among equals).
    pub winner: Option<String>,
    /// The next one.
    pub runner_up: Option<String>,
    /// Nodes with an equally high total (the scheduler picks among them).
    pub tied_with_winner: Vec<String>,
    /// What would change the outcome, where cheap to tell.
    pub hints: Vec<String>,
    /// The score plugins of both sides, with weights and skips.
    pub score_plugins: Vec<ScorePlugin>,
    /// Set when scoring failed as a whole.
    pub error: Option<String>,
    /// One row per node, by name.
    pub nodes: Vec<NodeVerdict>,
}

/// kube-scheduler's part.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InTreeSummary {
    /// `kube-scheduler defaults` or the configuration file.
    pub source: String,
    /// The profile used.
    pub profile: String,
    /// Its plugins placer does not implement: their verdicts are missing here.
    pub not_evaluated: Vec<String>,
    /// Weight of placer's score in kube-scheduler's total.
    pub extender_weight: i64,
}

/// A score plugin of either side.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScorePlugin {
    /// `kube-scheduler` or `placer`.
    pub by: &'static str,
    /// Plugin name.
    pub name: &'static str,
    /// Weight.
    pub weight: i64,
    /// Why it was skipped for this pod, if it was.
    pub skipped: Option<String>,
}

/// The first failure of a node, as FailedScheduling counts it.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// `kube-scheduler` or `placer`.
    pub by: &'static str,
    /// Plugin name.
    pub plugin: &'static str,
    /// Status code name.
    pub status: &'static str,
    /// The reason.
    pub reason: String,
}

/// One side's verdicts and scores on a node.
#[derive(Debug, Default, Serialize)]
pub struct Side {
    /// Every filter plugin's status.
    pub filters: Vec<FilterRow>,
    /// Every non-skipped score plugin's values (feasible nodes only).
    pub scores: Vec<ScoreRow>,
    /// Σ weight × score of this side.
    pub total: i64,
}

/// One node.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    /// Node name.
    pub node: String,
    /// Passes every filter of both sides.
    pub feasible: bool,
    /// The failure the scheduler reports for it.
    pub failure: Option<Failure>,
    /// kube-scheduler's in-tree side (extender deployments).
    pub kube_scheduler: Option<Side>,
    /// placer's side.
    pub placer: Side,
    /// placer's `/prioritize` score, 0–10 (extender deployments).
    pub placer_extender_score: Option<i64>,
    /// The total the scheduler compares.
    pub total: i64,
    /// 1 = best; equal totals share a rank; `None` when infeasible.
    pub rank: Option<usize>,
}
