//! PreScore, Score and NormalizeScore, and the weighted sum of design §6.

use rayon::prelude::*;

use super::{
    ExtensionPoint, Framework, MAX_EXTENDER_SCORE, NodeRef, PARALLEL_CHUNK, PARALLEL_MIN_NODES,
    PluginError,
};
use crate::cache::ClusterState;
use crate::framework::interface::{MAX_NODE_SCORE, MIN_NODE_SCORE, NodeScore};
use crate::framework::{Code, CycleState, Status};
use crate::objects::PodInfo;

/// The scores of every score plugin for the nodes of one request.
#[derive(Debug, Default)]
pub struct ScoreTable {
    /// One entry per score plugin, in policy order.
    pub plugins: Vec<PluginScores>,
    /// Per node: Σ weight × score over the plugins that were not skipped.
    pub totals: Vec<i64>,
    /// Σ weight over the plugins that were not skipped.
    pub weight_sum: i64,
}

/// One score plugin's results.
#[derive(Debug)]
pub struct PluginScores {
    /// The plugin's name.
    pub name: &'static str,
    /// Its weight in the profile.
    pub weight: i64,
    /// Set when the plugin was skipped for this pod (then `scores` is empty).
    pub skipped: Option<Status>,
    /// Per node, in request order; empty after [`Framework::score_totals`].
    pub scores: Vec<NodeScore>,
}

impl ScoreTable {
    /// The extender score of node `i` before rounding: `10 × total / (100 × Σ weight)`.
    pub fn extender_score_exact(&self, i: usize) -> f64 {
        if self.weight_sum == 0 {
            return 0.0;
        }
        (MAX_EXTENDER_SCORE * self.totals[i]) as f64 / (MAX_NODE_SCORE * self.weight_sum) as f64
    }

    /// The extender score of node `i`, rounded half up to an integer in 0..=10.
    pub fn extender_score(&self, i: usize) -> i64 {
        if self.weight_sum == 0 {
            return 0;
        }
        let num = MAX_EXTENDER_SCORE * self.totals[i];
        let den = MAX_NODE_SCORE * self.weight_sum;
        ((2 * num + den) / (2 * den)).clamp(0, MAX_EXTENDER_SCORE)
    }
}

/// What a score run keeps of each plugin's per-node scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Every plugin's scores (explanations, the simulator annotations).
    PerPlugin,
    /// Only the weighted totals: one buffer serves every plugin in turn
    /// (extender `/prioritize` and standalone attempts, on every cycle).
    TotalsOnly,
}

impl Framework {
    /// Runs PreScore, Score and NormalizeScore over `nodes`, clamps every
    /// score to 0..=100 and sums them with their weights. An `Error` status
    /// from any plugin aborts scoring.
    pub fn score<N: NodeRef>(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
    ) -> Result<ScoreTable, Status> {
        self.run_score(state, pod, nodes, cluster, Keep::PerPlugin)
    }

    /// [`Framework::score`] keeping only the totals (and which plugins were
    /// skipped): every `PluginScores::scores` is left empty, so a request
    /// allocates one score buffer instead of one per plugin.
    pub fn score_totals<N: NodeRef>(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
    ) -> Result<ScoreTable, Status> {
        self.run_score(state, pod, nodes, cluster, Keep::TotalsOnly)
    }

    fn run_score<N: NodeRef>(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
        keep: Keep,
    ) -> Result<ScoreTable, Status> {
        let mut skipped: Vec<(&'static str, Status)> = Vec::new();
        let refs = N::as_refs(nodes);
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_score() else {
                continue;
            };
            let status = self
                .timed(p.name(), ExtensionPoint::PreScore, || {
                    p.pre_score(state, pod, &refs, cluster)
                })
                .with_plugin(p.name());
            match status.code() {
                Code::Success => {}
                Code::Skip => skipped.push((p.name(), status)),
                _ => return Err(status),
            }
        }
        let state = &*state;
        let mut table = ScoreTable {
            totals: vec![0; nodes.len()],
            ..Default::default()
        };
        let mut scratch: Vec<NodeScore> = Vec::new();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_score() else {
                continue;
            };
            if let Some(pos) = skipped.iter().position(|(n, _)| *n == p.name()) {
                table.plugins.push(PluginScores {
                    name: p.name(),
                    weight: wp.weight,
                    skipped: Some(skipped.swap_remove(pos).1),
                    scores: Vec::new(),
                });
                continue;
            }
            let mut scores = match keep {
                Keep::PerPlugin => Vec::new(),
                Keep::TotalsOnly => std::mem::take(&mut scratch),
            };
            self.timed(p.name(), ExtensionPoint::Score, || {
                // Every slot is written in place: one call per plugin, or per
                // chunk in parallel, and no result moved or collected per node.
                scores.clear();
                scores.resize(nodes.len(), NodeScore::default());
                if nodes.len() >= PARALLEL_MIN_NODES {
                    scores
                        .par_chunks_mut(PARALLEL_CHUNK)
                        .zip(refs.par_chunks(PARALLEL_CHUNK))
                        .try_for_each(|(out, chunk)| p.score_batch(state, pod, chunk, cluster, out))
                } else {
                    p.score_batch(state, pod, &refs, cluster, &mut scores)
                }
                .map_err(|s| s.with_plugin(p.name()))
            })?;
            let status = self.timed(p.name(), ExtensionPoint::NormalizeScore, || {
                p.normalize(state, pod, &mut scores)
            });
            if !status.is_success() {
                return Err(status.with_plugin(p.name()));
            }
            for (total, s) in table.totals.iter_mut().zip(&mut scores) {
                s.score = s.score.clamp(MIN_NODE_SCORE, MAX_NODE_SCORE);
                *total += wp.weight * s.score;
            }
            table.weight_sum += wp.weight;
            let scores = match keep {
                Keep::PerPlugin => scores,
                Keep::TotalsOnly => {
                    scratch = scores;
                    Vec::new()
                }
            };
            table.plugins.push(PluginScores {
                name: p.name(),
                weight: wp.weight,
                skipped: None,
                scores,
            });
        }
        Ok(table)
    }

    /// [`Framework::score_totals`] for a scheduling attempt, which picks the
    /// node by its total alone (`/explain` and the simulator annotations
    /// build their per-plugin tables with [`Framework::score`]): a failure is
    /// a [`PluginError`]. It keeps the Score wording for PreScore and
    /// NormalizeScore errors too, as standalone events have always said.
    pub fn score_attempt<N: NodeRef>(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
    ) -> Result<ScoreTable, PluginError> {
        self.score_totals(state, pod, nodes, cluster)
            .map_err(|status| PluginError {
                point: ExtensionPoint::Score,
                status,
            })
    }
}
