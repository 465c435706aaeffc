//! Runs a profile's plugins over one pod and a set of nodes.
//!
//! The runner owns the order of extension points, the parallelism over nodes,
//! normalization, clamping and the weighted sum of design §6. Plugins only see
//! one pod and one node (or the node list in PreScore).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::cache::ClusterState;
use crate::framework::interface::{
    Diagnosis, MAX_NODE_SCORE, MIN_NODE_SCORE, NodeScore, Nominating, Plugin, PostFilterResult,
};
use crate::framework::{Code, CycleState, PreFilterResult, Status};
use crate::objects::{NodeInfo, PodInfo};

/// Below this many nodes the per-node work is cheaper than handing it to
/// another thread: on 2 cores rayon did not pay at 5,000 nodes (~0.08 µs per
/// node and plugin after the label-store change; see docs/benchmarks.md).
const PARALLEL_MIN_NODES: usize = 16_384;

/// Highest score the extender protocol allows (`MaxExtenderPriority`).
pub const MAX_EXTENDER_SCORE: i64 = 10;

/// A plugin enabled in a profile, with the weight of its score.
#[derive(Clone)]
pub struct WeightedPlugin {
    /// The plugin.
    pub plugin: Arc<dyn Plugin>,
    /// Multiplies its score; > 0 (checked by the policy loader).
    pub weight: i64,
}

/// An extension point, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionPoint {
    /// PreFilter.
    PreFilter,
    /// Filter (one observation covers every node of the request).
    Filter,
    /// PostFilter (standalone mode, when no node fits).
    PostFilter,
    /// PreScore.
    PreScore,
    /// Score (one observation covers every node of the request).
    Score,
    /// NormalizeScore.
    NormalizeScore,
}

impl ExtensionPoint {
    /// The name kube-scheduler uses for the point.
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionPoint::PreFilter => "PreFilter",
            ExtensionPoint::Filter => "Filter",
            ExtensionPoint::PostFilter => "PostFilter",
            ExtensionPoint::PreScore => "PreScore",
            ExtensionPoint::Score => "Score",
            ExtensionPoint::NormalizeScore => "NormalizeScore",
        }
    }
}

/// Receives how long each plugin took at each extension point (metrics).
pub trait Observer: Send + Sync {
    /// `plugin` spent `seconds` at `point` for one pod.
    fn plugin_duration(&self, plugin: &'static str, point: ExtensionPoint, seconds: f64);
}

/// The plugins of one profile, in policy order, and the logic that runs them.
#[derive(Clone)]
pub struct Framework {
    profile: String,
    plugins: Vec<WeightedPlugin>,
    observer: Option<Arc<dyn Observer>>,
}

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
    /// Per node, in request order.
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

impl Framework {
    /// A framework for profile `profile` running `plugins` in this order.
    pub fn new(profile: impl Into<String>, plugins: Vec<WeightedPlugin>) -> Self {
        Framework {
            profile: profile.into(),
            plugins,
            observer: None,
        }
    }

    /// Reports plugin durations to `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Runs `f`, reporting its duration as `plugin` at `point`.
    fn timed<T>(&self, plugin: &'static str, point: ExtensionPoint, f: impl FnOnce() -> T) -> T {
        let Some(observer) = &self.observer else {
            return f();
        };
        let start = Instant::now();
        let out = f();
        observer.plugin_duration(plugin, point, start.elapsed().as_secs_f64());
        out
    }

    /// The profile's scheduler name.
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// The enabled plugins with their weights.
    pub fn plugins(&self) -> &[WeightedPlugin] {
        &self.plugins
    }

    /// True if any enabled plugin filters.
    pub fn has_filters(&self) -> bool {
        self.plugins.iter().any(|p| p.plugin.as_filter().is_some())
    }

    /// True if any enabled plugin runs at PostFilter.
    pub fn has_post_filters(&self) -> bool {
        self.plugins
            .iter()
            .any(|p| p.plugin.as_post_filter().is_some())
    }

    /// Runs every PreFilter plugin; the first rejection stops the run.
    pub fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> PreFilterResult {
        self.run_pre_filter(state, pod, cluster, true)
    }

    /// [`Framework::pre_filter`] without timing: for background re-checks,
    /// which must not skew the per-plugin latency of real requests.
    pub fn pre_filter_unobserved(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> PreFilterResult {
        self.run_pre_filter(state, pod, cluster, false)
    }

    fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        observe: bool,
    ) -> PreFilterResult {
        let mut result = PreFilterResult::default();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_filter() else {
                continue;
            };
            let mut run = || p.pre_filter(state, pod, cluster);
            let status = if observe {
                self.timed(p.name(), ExtensionPoint::PreFilter, run)
            } else {
                run()
            }
            .with_plugin(p.name());
            match status.code() {
                Code::Success => {
                    if let Some(names) = p.pre_filter_nodes(pod) {
                        result.narrow(p.name(), names);
                        if result.rejection.is_some() {
                            break;
                        }
                    }
                }
                Code::Skip => result.skipped.push(status),
                _ => {
                    result.rejection = Some(status);
                    break;
                }
            }
        }
        result
    }

    /// Runs the Filter plugins on one node in order, handing each status to
    /// `visit` until it breaks.
    fn visit_filters(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
        mut visit: impl FnMut(Status) -> ControlFlow<()>,
    ) {
        if let Some(rejection) = &pre.rejection {
            let _ = visit(rejection.clone());
            return;
        }
        if let Some(status) = pre.ruled_out(&node.name) {
            let _ = visit(status);
            return;
        }
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_filter() else {
                continue;
            };
            if let Some(skip) = pre.skipped(p.name()) {
                if visit(skip.clone()).is_break() {
                    return;
                }
                continue;
            }
            let status = p.filter(state, pod, node, cluster).with_plugin(p.name());
            if visit(status).is_break() {
                return;
            }
        }
    }

    /// The first rejecting status for `node`, or `None` when it fits.
    pub fn filter_node(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Option<Status> {
        let mut failure = None;
        self.visit_filters(state, pre, pod, node, cluster, |s| {
            if s.is_success() {
                ControlFlow::Continue(())
            } else {
                failure = Some(s);
                ControlFlow::Break(())
            }
        });
        failure
    }

    /// PreFilter and Filter for `pod` on `node` alone, on a fresh cycle state:
    /// the first rejecting status, or `None` when it fits. PostFilter plugins
    /// use it on hypothetical cluster states, re-running PreFilter where (kube-scheduler's
    /// kube-scheduler updates it with `AddPod`/`RemovePod`; it is not
    /// timed, so simulations do not skew the per-plugin latency metrics.
    pub fn fits(&self, pod: &PodInfo, node: &NodeInfo, cluster: &ClusterState) -> Option<Status> {
        let mut state = CycleState::new();
        let pre = self.run_pre_filter(&mut state, pod, cluster, false);
        self.filter_node(&state, &pre, pod, node, cluster)
    }

    /// Runs the PostFilter plugins in order, as kube-scheduler's
    /// `RunPostFilterPlugins`: the first `Success`, `UnschedulableAndUnresolvable`
    /// or `Error` ends the run; otherwise the reasons of every plugin are
    /// joined and the last nomination change any of them asked for is kept.
    pub fn post_filter(
        &self,
        pod: &PodInfo,
        diagnosis: &Diagnosis<'_>,
        cluster: &mut ClusterState,
    ) -> PostFilterResult {
        let mut reasons: Vec<String> = Vec::new();
        let mut nominating = Nominating::Unchanged;
        let mut rejector = None;
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_post_filter() else {
                continue;
            };
            let mut r = self.timed(p.name(), ExtensionPoint::PostFilter, || {
                p.post_filter(self, pod, diagnosis, cluster)
            });
            r.status = r.status.with_plugin(p.name());
            match r.status.code() {
                Code::Success | Code::UnschedulableAndUnresolvable | Code::Error => return r,
                _ => {}
            }
            if r.nominating != Nominating::Unchanged {
                nominating = r.nominating;
            }
            reasons.extend(r.status.reasons().iter().cloned());
            rejector.get_or_insert(p.name());
        }
        let mut status = Status::from_reasons(Code::Unschedulable, reasons);
        if let Some(name) = rejector {
            status = status.with_plugin(name);
        }
        PostFilterResult { status, nominating }
    }

    /// Every Filter plugin's status for `node` (for explanations).
    pub fn filter_node_all(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Vec<Status> {
        let mut all = Vec::new();
        self.visit_filters(state, pre, pod, node, cluster, |s| {
            all.push(s);
            ControlFlow::Continue(())
        });
        all
    }

    /// The first rejecting status of every node (`None` = fits), in node order.
    ///
    /// Runs plugin by plugin over the nodes still feasible (the same verdicts
    /// as node by node, since each node stops at its first rejection), so each
    /// plugin's time is measured once per request, in parallel when the
    /// request is large.
    pub fn filter_nodes(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        cluster: &ClusterState,
    ) -> Vec<Option<Status>> {
        if let Some(rejection) = &pre.rejection {
            return vec![Some(rejection.clone()); nodes.len()];
        }
        let mut verdicts: Vec<Option<Status>> =
            nodes.iter().map(|n| pre.ruled_out(&n.name)).collect();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_filter() else {
                continue;
            };
            if pre.skipped(p.name()).is_some() {
                continue;
            }
            self.timed(p.name(), ExtensionPoint::Filter, || {
                let one = |(v, n): (&mut Option<Status>, &Arc<NodeInfo>)| {
                    if v.is_none() {
                        let s = p.filter(state, pod, n, cluster);
                        if !s.is_success() {
                            *v = Some(s.with_plugin(p.name()));
                        }
                    }
                };
                if nodes.len() >= PARALLEL_MIN_NODES {
                    verdicts.par_iter_mut().zip(nodes.par_iter()).for_each(one);
                } else {
                    verdicts.iter_mut().zip(nodes.iter()).for_each(one);
                }
            });
        }
        verdicts
    }

    /// Runs PreScore, Score and NormalizeScore over `nodes`, clamps every
    /// score to 0..=100 and sums them with their weights. An `Error` status
    /// from any plugin aborts scoring.
    pub fn score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        cluster: &ClusterState,
    ) -> Result<ScoreTable, Status> {
        let mut skipped: Vec<(&'static str, Status)> = Vec::new();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_score() else {
                continue;
            };
            let status = p
                .pre_score(state, pod, nodes, cluster)
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
            let one = |n: &Arc<NodeInfo>| {
                p.score(state, pod, n, cluster)
                    .map_err(|s| s.with_plugin(p.name()))
            };
            let mut scores: Vec<NodeScore> = self.timed(p.name(), ExtensionPoint::Score, || {
                if nodes.len() >= PARALLEL_MIN_NODES {
                    nodes.par_iter().map(one).collect::<Result<_, _>>()
                } else {
                    nodes.iter().map(one).collect::<Result<_, _>>()
                }
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
            table.plugins.push(PluginScores {
                name: p.name(),
                weight: wp.weight,
                skipped: None,
                scores,
            });
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::interface::{FilterPlugin, PreScorePlugin, ScorePlugin};

    /// A score plugin returning a fixed raw value per node name, for runner tests.
    struct Fixed {
        name: &'static str,
        raw: fn(&str) -> i64,
        skip: bool,
    }
    impl Plugin for Fixed {
        fn name(&self) -> &'static str {
            self.name
        }
        fn as_score(&self) -> Option<&dyn ScorePlugin> {
            Some(self)
        }
        fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
            Some(self)
        }
    }
    impl PreScorePlugin for Fixed {
        fn pre_score(
            &self,
            _: &mut CycleState,
            _: &PodInfo,
            _: &[Arc<NodeInfo>],
            _: &ClusterState,
        ) -> Status {
            if self.skip {
                Status::skip("not for this pod")
            } else {
                Status::success()
            }
        }
    }
    impl ScorePlugin for Fixed {
        fn score(
            &self,
            _: &CycleState,
            _: &PodInfo,
            n: &NodeInfo,
            _: &ClusterState,
        ) -> Result<NodeScore, Status> {
            Ok(NodeScore::value((self.raw)(&n.name)))
        }
    }

    struct RejectB;
    impl Plugin for RejectB {
        fn name(&self) -> &'static str {
            "RejectB"
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            Some(self)
        }
    }
    impl FilterPlugin for RejectB {
        fn filter(&self, _: &CycleState, _: &PodInfo, n: &NodeInfo, _: &ClusterState) -> Status {
            if n.name == "b" {
                Status::unresolvable("b is not allowed")
            } else {
                Status::success()
            }
        }
    }

    fn nodes(names: &[&str]) -> Vec<Arc<NodeInfo>> {
        names
            .iter()
            .map(|n| Arc::new(NodeInfo::new(n, Vec::<(String, String)>::new())))
            .collect()
    }

    /// A score plugin `name` with weight `weight`.
    fn fixed(
        name: &'static str,
        raw: fn(&str) -> i64,
        skip: bool,
        weight: i64,
    ) -> (Arc<dyn Plugin>, i64) {
        (Arc::new(Fixed { name, raw, skip }), weight)
    }

    /// Scores nodes `names` for an empty pod in an empty cluster.
    fn score(f: &Framework, names: &[&str]) -> ScoreTable {
        f.score(
            &mut CycleState::new(),
            &PodInfo::default(),
            &nodes(names),
            &ClusterState::default(),
        )
        .unwrap()
    }

    fn fw(plugins: Vec<(Arc<dyn Plugin>, i64)>) -> Framework {
        Framework::new(
            "p",
            plugins
                .into_iter()
                .map(|(plugin, weight)| WeightedPlugin { plugin, weight })
                .collect(),
        )
    }

    #[test]
    fn weighted_sum_clamps_and_rounds_half_up() {
        let f = fw(vec![
            fixed("A", |n| if n == "a" { 100 } else { 250 }, false, 2),
            fixed("B", |n| if n == "a" { -5 } else { 25 }, false, 1),
        ]);
        let t = score(&f, &["a", "b"]);
        // a: 2×100 + 1×0 (clamped from -5) = 200; b: 2×100 (clamped from 250) + 25 = 225.
        assert_eq!(t.totals, vec![200, 225]);
        assert_eq!(t.weight_sum, 3);
        // 10 × 200 / 300 = 6.67 → 7; 10 × 225 / 300 = 7.5 → 8 (half up).
        assert_eq!((t.extender_score(0), t.extender_score(1)), (7, 8));
        assert!((t.extender_score_exact(1) - 7.5).abs() < 1e-9);
        assert_eq!(t.plugins[1].scores[0].raw, Some(-5));
        assert_eq!(t.plugins[1].scores[0].score, 0);
    }

    #[test]
    fn skipped_plugins_leave_the_weight_sum() {
        let f = fw(vec![
            fixed("A", |_| 50, false, 1),
            fixed("S", |_| 100, true, 5),
        ]);
        let t = score(&f, &["a"]);
        assert_eq!(t.weight_sum, 1);
        assert_eq!(t.extender_score(0), 5);
        assert!(t.plugins[1].skipped.is_some());
        assert!(t.plugins[1].scores.is_empty());
    }

    #[test]
    fn all_skipped_scores_zero() {
        let f = fw(vec![fixed("S", |_| 100, true, 1)]);
        let t = score(&f, &["a"]);
        assert_eq!((t.extender_score(0), t.extender_score_exact(0)), (0, 0.0));
    }

    #[test]
    fn filter_reports_first_failure_with_plugin_name_in_parallel_too() {
        let f = fw(vec![(Arc::new(RejectB), 1)]);
        let names: Vec<String> = (0..PARALLEL_MIN_NODES + 1)
            .map(|i| if i == 7 { "b".into() } else { format!("n{i}") })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ns = nodes(&refs);
        let out = f.filter_nodes(
            &CycleState::new(),
            &PreFilterResult::default(),
            &PodInfo::default(),
            &ns,
            &ClusterState::default(),
        );
        assert_eq!(out.iter().filter(|s| s.is_some()).count(), 1);
        let s = out[7].as_ref().unwrap();
        assert_eq!(s.plugin(), "RejectB");
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    }
}
