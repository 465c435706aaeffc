//! Score helpers several plugins share, as kube-scheduler's
//! `pkg/scheduler/framework/plugins/helper` is shared: normalization and
//! the piecewise-linear utilization shape.

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
