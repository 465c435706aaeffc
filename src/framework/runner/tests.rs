//! Runner tests: the weighted sum, skips, and the parallel Filter and Score paths.

use std::sync::Arc;

use super::*;
use crate::cache::ClusterState;
use crate::framework::interface::{
    FilterPlugin, PreEnqueuePlugin, PreScorePlugin, QueueSortPlugin, QueuedPodInfo, ScorePlugin,
};
use crate::framework::{Code, CycleState, NodeScore, PreFilterResult, Status};
use crate::objects::{NodeInfo, PodInfo};

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
        _: &[&NodeInfo],
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

/// Rejects the nodes whose name starts with its own name.
struct Prefix(&'static str);
impl Plugin for Prefix {
    fn name(&self) -> &'static str {
        self.0
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}
impl FilterPlugin for Prefix {
    fn filter(&self, _: &CycleState, _: &PodInfo, n: &NodeInfo, _: &ClusterState) -> Status {
        if n.name.starts_with(self.0) {
            Status::unschedulable("prefix")
        } else {
            Status::success()
        }
    }
}

#[test]
fn filter_nodes_each_reports_every_rejected_node_once_with_its_first_rejection() {
    let f = fw(vec![
        (Arc::new(Prefix("a")), 1),
        (Arc::new(Prefix("ab")), 1),
    ]);
    for n in [5, PARALLEL_MIN_NODES + 5] {
        let names: Vec<String> = (0..n)
            .map(|i| match i % 5 {
                1 => format!("ab{i}"),
                2 => format!("a{i}"),
                _ => format!("x{i}"),
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ns = nodes(&refs);
        let (state, pre, pod, cluster) = (
            CycleState::new(),
            PreFilterResult::default(),
            PodInfo::default(),
            ClusterState::default(),
        );
        let mut calls: Vec<(usize, &'static str)> = Vec::new();
        f.filter_nodes_each(&state, &pre, &pod, &ns, &cluster, |i, s| {
            calls.push((i, s.plugin()))
        });
        let expected: Vec<(usize, &'static str)> = (0..n)
            .filter(|i| matches!(i % 5, 1 | 2))
            .map(|i| (i, "a"))
            .collect();
        assert_eq!(
            calls, expected,
            "{n} nodes: once each, by the first plugin, in order"
        );
        // The borrowed form gives the same verdicts as the shared one.
        let borrowed: Vec<&NodeInfo> = ns.iter().map(|n| &**n).collect();
        let verdicts = f.filter_nodes(&state, &pre, &pod, &borrowed, &cluster);
        let rejected: Vec<(usize, &'static str)> = verdicts
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i, v.as_ref()?.plugin())))
            .collect();
        assert_eq!(rejected, expected);
    }
}

#[test]
fn score_totals_are_the_full_tables_totals_without_per_plugin_scores() {
    let f = fw(vec![
        fixed("A", |n| if n == "a" { 100 } else { 250 }, false, 2),
        fixed("S", |_| 100, true, 5),
        fixed("B", |n| if n == "a" { -5 } else { 25 }, false, 1),
    ]);
    let full = score(&f, &["a", "b"]);
    let shared = nodes(&["a", "b"]);
    let borrowed: Vec<&NodeInfo> = shared.iter().map(|n| &**n).collect();
    let (pod, cluster) = (PodInfo::default(), ClusterState::default());
    let totals = f
        .score_totals(&mut CycleState::new(), &pod, &borrowed, &cluster)
        .unwrap();
    assert_eq!(totals.totals, full.totals);
    assert_eq!(totals.totals, vec![200, 225]);
    assert_eq!(totals.weight_sum, full.weight_sum);
    let summary = |t: &ScoreTable| -> Vec<(&'static str, bool)> {
        t.plugins
            .iter()
            .map(|p| (p.name, p.skipped.is_some()))
            .collect()
    };
    assert_eq!(summary(&totals), summary(&full));
    assert!(totals.plugins.iter().all(|p| p.scores.is_empty()));
    // A scheduling attempt needs only the totals too.
    let attempt = f
        .score_attempt(&mut CycleState::new(), &pod, &borrowed, &cluster)
        .unwrap();
    assert_eq!(attempt.totals, full.totals);
    assert!(attempt.plugins.iter().all(|p| p.scores.is_empty()));
    assert!(
        full.plugins
            .iter()
            .filter(|p| p.skipped.is_none())
            .all(|p| p.scores.len() == 2)
    );
}

/// Records every observation, for the timing tests.
#[derive(Default)]
struct Recorder(parking_lot::Mutex<Vec<(&'static str, ExtensionPoint)>>);
impl Observer for Recorder {
    fn plugin_duration(&self, plugin: &'static str, point: ExtensionPoint, _: f64) {
        self.0.lock().push((plugin, point));
    }
}

#[test]
fn every_scoring_point_is_timed_including_pre_score() {
    let recorder = Arc::new(Recorder::default());
    let f = fw(vec![
        fixed("A", |_| 50, false, 1),
        fixed("S", |_| 50, true, 1),
    ])
    .with_observer(recorder.clone());
    score(&f, &["a", "b"]);
    assert_eq!(
        *recorder.0.lock(),
        [
            ("A", ExtensionPoint::PreScore),
            ("S", ExtensionPoint::PreScore),
            ("A", ExtensionPoint::Score),
            ("A", ExtensionPoint::NormalizeScore),
        ],
        "one observation per plugin and point; a skipped plugin is not scored"
    );
}

/// A PreEnqueue plugin that holds back pods labelled with its name.
struct Gate(&'static str);
impl Plugin for Gate {
    fn name(&self) -> &'static str {
        self.0
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
}
impl PreEnqueuePlugin for Gate {
    fn pre_enqueue(&self, pod: &PodInfo, _: &ClusterState) -> Status {
        if pod.labels.contains_key(self.0) {
            Status::unresolvable(format!("held by {}", self.0))
        } else {
            Status::success()
        }
    }
}

/// A QueueSort plugin: lower names first.
struct ByName;
impl Plugin for ByName {
    fn name(&self) -> &'static str {
        "ByName"
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}
impl QueueSortPlugin for ByName {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        a.pod.name < b.pod.name
    }
}

#[test]
fn pre_enqueue_stops_at_the_first_gate_names_it_and_is_timed() {
    let recorder = Arc::new(Recorder::default());
    let f = fw(vec![
        (Arc::new(Gate("g1")), 1),
        fixed("A", |_| 0, false, 1),
        (Arc::new(Gate("g2")), 1),
    ])
    .with_observer(recorder.clone());
    let mut pod = PodInfo::default();
    let cluster = ClusterState::default();
    assert!(f.pre_enqueue(&pod, &cluster).is_success());
    std::sync::Arc::make_mut(&mut pod.labels).insert("g1".into(), String::new());
    std::sync::Arc::make_mut(&mut pod.labels).insert("g2".into(), String::new());
    let s = f.pre_enqueue(&pod, &cluster);
    assert_eq!((s.plugin(), s.message().as_str()), ("g1", "held by g1"));
    assert_eq!(
        *recorder.0.lock(),
        [
            ("g1", ExtensionPoint::PreEnqueue),
            ("g2", ExtensionPoint::PreEnqueue),
            ("g1", ExtensionPoint::PreEnqueue),
        ]
    );
}

#[test]
fn queue_sort_is_the_profiles_plugin() {
    assert!(fw(vec![fixed("A", |_| 0, false, 1)]).queue_sort().is_none());
    let sort = fw(vec![fixed("A", |_| 0, false, 1), (Arc::new(ByName), 1)])
        .queue_sort()
        .unwrap();
    assert_eq!(sort.name(), "ByName");
    let queued = |name: &str| QueuedPodInfo {
        pod: Arc::new(PodInfo {
            name: name.into(),
            ..Default::default()
        }),
        timestamp: std::time::Instant::now(),
        attempts: 0,
    };
    assert!(sort.less(&queued("a"), &queued("b")));
    assert!(!sort.less(&queued("b"), &queued("a")));
    assert!(QueueSort::new(Arc::new(RejectB)).is_none());
}

#[test]
fn plugin_errors_name_the_point_and_the_plugin() {
    let e = PluginError {
        point: ExtensionPoint::PreFilter,
        status: Status::error("state missing").with_plugin("X"),
    };
    assert_eq!(
        e.to_string(),
        r#"running PreFilter plugin "X": state missing"#
    );
    let e = PluginError {
        point: ExtensionPoint::Filter,
        status: Status::error("node n1: timed out trying to allocate devices").with_plugin("X"),
    };
    assert_eq!(
        e.to_string(),
        r#"running "X" filter plugin: node n1: timed out trying to allocate devices"#
    );
}

/// Rejects the nodes whose name starts with "r", counting how it was called.
#[derive(Default)]
struct Counted {
    batches: std::sync::atomic::AtomicUsize,
    singles: std::sync::atomic::AtomicUsize,
}
impl Plugin for Counted {
    fn name(&self) -> &'static str {
        "Counted"
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}
impl FilterPlugin for Counted {
    fn filter(&self, _: &CycleState, _: &PodInfo, n: &NodeInfo, _: &ClusterState) -> Status {
        self.singles
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n.name.starts_with('r') {
            Status::unschedulable("r")
        } else {
            Status::success()
        }
    }
    fn filter_batch(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        candidates: &[bool],
        cluster: &ClusterState,
        reject: &mut dyn FnMut(usize, Status),
    ) {
        self.batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (i, n) in crate::framework::candidates(nodes, candidates) {
            let s = self.filter(state, pod, n, cluster);
            if !s.is_success() {
                reject(i, s);
            }
        }
    }
}

#[test]
fn filter_nodes_each_calls_each_plugin_once_per_batch_on_the_nodes_still_feasible() {
    use std::sync::atomic::Ordering::Relaxed;
    for (n, batches) in [(6, 1), (PARALLEL_MIN_NODES + 5, 17)] {
        let counted = Arc::new(Counted::default());
        let f = fw(vec![(Arc::new(Prefix("ra")), 1), (counted.clone(), 1)]);
        let names: Vec<String> = (0..n)
            .map(|i| match i % 3 {
                0 => format!("ra{i}"),
                1 => format!("r{i}"),
                _ => format!("x{i}"),
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let ns = nodes(&refs);
        let mut calls: Vec<(usize, &'static str)> = Vec::new();
        f.filter_nodes_each(
            &CycleState::new(),
            &PreFilterResult::default(),
            &PodInfo::default(),
            &ns,
            &ClusterState::default(),
            |i, s| calls.push((i, s.plugin())),
        );
        let by = |rest: usize, plugin| {
            (0..n)
                .filter(move |i| i % 3 == rest)
                .map(move |i| (i, plugin))
        };
        let expected: Vec<_> = by(0, "ra").chain(by(1, "Counted")).collect();
        assert_eq!(calls, expected, "{n} nodes");
        assert_eq!(counted.batches.load(Relaxed), batches, "{n} nodes");
        assert_eq!(
            counted.singles.load(Relaxed),
            n - n.div_ceil(3),
            "{n} nodes: only the nodes the first plugin let through"
        );
    }
}

/// Scores a node by the number in its name, fails on "bad", and counts its
/// batches.
#[derive(Default)]
struct Numbered {
    batches: std::sync::atomic::AtomicUsize,
}
impl Plugin for Numbered {
    fn name(&self) -> &'static str {
        "Numbered"
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}
impl ScorePlugin for Numbered {
    fn score(
        &self,
        _: &CycleState,
        _: &PodInfo,
        n: &NodeInfo,
        _: &ClusterState,
    ) -> Result<NodeScore, Status> {
        match n.name[1..].parse() {
            Ok(number) => Ok(NodeScore::value(number)),
            Err(_) => Err(Status::error(format!("no number in {}", n.name))),
        }
    }
    fn score_batch(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        cluster: &ClusterState,
        scores: &mut [NodeScore],
    ) -> Result<(), Status> {
        self.batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (slot, node) in scores.iter_mut().zip(nodes) {
            *slot = self.score(state, pod, node, cluster)?;
        }
        Ok(())
    }
}

#[test]
fn score_writes_every_node_in_its_slot_with_one_batch_per_plugin_or_chunk() {
    use std::sync::atomic::Ordering::Relaxed;
    for (n, batches) in [(6, 1), (PARALLEL_MIN_NODES + 5, 17)] {
        let numbered = Arc::new(Numbered::default());
        let f = fw(vec![(numbered.clone(), 1), fixed("F", |_| 1, false, 2)]);
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let t = score(&f, &refs);
        let raws: Vec<Option<i64>> = t.plugins[0].scores.iter().map(|s| s.raw).collect();
        let expected: Vec<Option<i64>> = (0..n as i64).map(Some).collect();
        assert_eq!(raws, expected, "{n} nodes");
        // Clamped to 100, plus F's 2 × 1.
        assert_eq!(t.totals[5], 7, "{n} nodes");
        assert_eq!(t.totals[n - 1], (n as i64 - 1).min(100) + 2, "{n} nodes");
        assert_eq!(t.plugins[1].scores.len(), n, "{n} nodes");
        assert_eq!(numbered.batches.load(Relaxed), batches, "{n} nodes");
    }
}

#[test]
fn score_error_names_its_plugin_serially_and_in_parallel() {
    for n in [6, PARALLEL_MIN_NODES + 5] {
        let f = fw(vec![(Arc::new(Numbered::default()), 1)]);
        let names: Vec<String> = (0..n)
            .map(|i| {
                if i == n - 2 {
                    "bad".into()
                } else {
                    format!("n{i}")
                }
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let err = f
            .score_totals(
                &mut CycleState::new(),
                &PodInfo::default(),
                &nodes(&refs),
                &ClusterState::default(),
            )
            .unwrap_err();
        assert_eq!(
            (err.code(), err.plugin()),
            (Code::Error, "Numbered"),
            "{n} nodes"
        );
        assert_eq!(err.message(), "no number in bad", "{n} nodes");
    }
}
