//! Score helpers several plugins share, as kube-scheduler's
//! `pkg/scheduler/framework/plugins/helper` is shared: normalization and
//! the piecewise-linear utilization shape.

use serde::{Deserialize, Serialize};

use crate::framework::{MAX_NODE_SCORE, NodeScore};

/// kube-scheduler's `helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)`:
/// maps `0..=max` onto `0..=100` (integer division), reversed if asked; when
/// every score is 0 they stay 0, or all become 100 when reversed.
pub fn default_normalize_score(scores: &mut [NodeScore], reverse: bool) {
    let max = scores.iter().map(|s| s.score).fold(0, i64::max);
    if max == 0 {
        if reverse {
            for s in scores {
                s.score = MAX_NODE_SCORE;
            }
        }
        return;
    }
    for s in scores {
        let v = MAX_NODE_SCORE * s.score / max;
        s.score = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// One point of a `RequestedToCapacityRatio` shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilization in percent, 0..=100.
    pub utilization: i32,
    /// Score at that utilization, 0..=10.
    pub score: i32,
}

/// Highest score of a shape point (kube-scheduler's `MaxCustomPriorityScore`).
pub(crate) const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;

/// kube-scheduler's `validateFunctionShape`, first error only, naming the
/// shape's field `at` (NodeResourcesFit's `requestedToCapacityRatio.shape` and VolumeBinding's `shape`).
pub(crate) fn validate_shape(at: &str, shape: &[UtilizationShapePoint]) -> Result<(), String> {
    if shape.is_empty() {
        return Err(format!("{at}: at least one point must be specified"));
    }
    for i in 1..shape.len() {
        if shape[i - 1].utilization >= shape[i].utilization {
            return Err(format!(
                "{at}[{i}].utilization: {}: values must be sorted in increasing order",
                shape[i].utilization
            ));
        }
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            return Err(format!(
                "{at}[{i}].utilization: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            return Err(format!(
                "{at}[{i}].score: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                p.score
            ));
        }
    }
    Ok(())
}

/// kube-scheduler's `BuildBrokenLinearFunction`: the shape's score at
/// utilization `p`, interpolated between points (integer division), flat
/// before the first and after the last.
pub(crate) fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, score)) in shape.iter().enumerate() {
        if p <= u {
            let Some(&(u0, s0)) = i.checked_sub(1).and_then(|j| shape.get(j)) else {
                return score;
            };
            return s0 + (score - s0) * (p - u0) / (u - u0);
        }
    }
    shape.last().map_or(0, |&(_, s)| s)
}
