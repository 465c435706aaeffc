//! One live pod against every cached node, the way its scheduler sees it.
//!
//! - **Extender deployment**: kube-scheduler runs its in-tree plugins
//!   ([`super::InTree`]) over every node, sends the survivors to placer's
//!   `/filter`, scores what is left with its plugins plus placer's
//!   `/prioritize` (0–10, times the extender weight, times 10), and, when
//!   nothing fits, runs its PostFilter (DefaultPreemption) over both kinds of
//!   failure. A node's first failure is kube-scheduler's, else placer's.
//! - **Standalone deployment**: placer's own profile does all of it, as one
//!   standalone attempt does (nominated pods aside).
//!
//! Filters are run to the end on every node (not stopped at the first
//! failure), so the explanation also knows which nodes fail one plugin only:
//! the "what would change the outcome" hints.

use std::sync::Arc;

use crate::cache::ClusterState;
use crate::framework::explain::{FilterRow, score_rows};
use crate::framework::{
    Code, CycleState, Diagnosis, Framework, MAX_EXTENDER_SCORE, MAX_NODE_SCORE, PreFilterResult,
    ScoreTable, Status, fit_error_message,
};
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::dynamic_resources;

use super::report::{
    Failure, InTreeSummary, KUBE_SCHEDULER, LiveExplanation, NodeVerdict, PLACER, ScorePlugin, Side,
};

/// The frameworks to run for one pod.
pub struct Frameworks<'a> {
    /// kube-scheduler's plugins as placer runs them (extender deployments).
    pub in_tree: Option<InTreeRun<'a>>,
    /// placer's profile for the pod.
    pub placer: &'a Framework,
}

/// The in-tree part of an extender deployment.
pub struct InTreeRun<'a> {
    /// The plugins.
    pub framework: &'a Framework,
    /// kube-scheduler's plugins placer cannot run.
    pub not_evaluated: &'a [String],
    /// The extender weight kube-scheduler applies to placer's score.
    pub extender_weight: i64,
    /// Where the configuration came from.
    pub source: &'a str,
}

/// Failed nodes with the status the scheduler holds for each.
pub type FailedNodes = Vec<(Arc<NodeInfo>, Status)>;

/// An evaluation that still needs PostFilter (exclusive access to the cluster).
pub struct Evaluated {
    /// The explanation so far.
    pub explanation: LiveExplanation,
    /// The failed nodes with the status kube-scheduler holds for each, and
    /// the message before PostFilter; `None` when a node fits or no
    /// PostFilter runs.
    pub post_filter: Option<(FailedNodes, String)>,
}

/// The plugin a status names, or placer itself for the runner's own
/// statuses (a node missing from the cache, a PreFilter rejection).
fn plugin_of(s: &Status) -> &'static str {
    if s.plugin().is_empty() {
        PLACER
    } else {
        s.plugin()
    }
}

fn row(s: &Status) -> FilterRow {
    FilterRow {
        plugin: plugin_of(s),
        status: s.code().as_str(),
        reason: s.message(),
    }
}

fn passed(s: &Status) -> bool {
    matches!(s.code(), Code::Success | Code::Skip)
}

/// PreFilter, then every Filter on every node (not timed: explanations must
/// not skew the request metrics).
fn filter_all(
    framework: &Framework,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    cluster: &ClusterState,
) -> (CycleState, PreFilterResult, Vec<Vec<Status>>) {
    let mut state = CycleState::new();
    let pre = framework.pre_filter_unobserved(&mut state, pod, cluster);
    let all = nodes
        .iter()
        .map(|n| framework.filter_node_all(&state, &pre, pod, n, cluster))
        .collect();
    (state, pre, all)
}

/// Evaluates `pod` on every node of `cluster`.
pub fn evaluate(fw: &Frameworks<'_>, pod: &PodInfo, cluster: &ClusterState) -> Evaluated {
    let mut nodes: Vec<Arc<NodeInfo>> = cluster.nodes().cloned().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let total = nodes.len();
    let in_tree = fw
        .in_tree
        .as_ref()
        .map(|t| filter_all(t.framework, pod, &nodes, cluster));
    let (mut placer_state, placer_pre, placer_all) = filter_all(fw.placer, pod, &nodes, cluster);

    // The status the scheduler holds for each node: kube-scheduler's first
    // failure, else placer's, which kube-scheduler sees as the extender's
    // message under FailedNodes (resolvable) or FailedAndUnresolvableNodes.
    let mut failures: Vec<Option<(Failure, Status)>> = Vec::with_capacity(total);
    for (i, _) in nodes.iter().enumerate() {
        let kube = in_tree
            .as_ref()
            .and_then(|(_, _, all)| all[i].iter().find(|s| !passed(s)));
        let failure = match kube {
            Some(s) => Some((failure(KUBE_SCHEDULER, s), s.clone())),
            None => placer_all[i].iter().find(|s| !passed(s)).map(|s| {
                let f = failure(PLACER, s);
                let status = if fw.in_tree.is_some() {
                    let code = match s.code() {
                        Code::UnschedulableAndUnresolvable => Code::UnschedulableAndUnresolvable,
                        Code::Error => Code::Error,
                        _ => Code::Unschedulable,
                    };
                    Status::new(code, s.message()).with_plugin(s.plugin())
                } else {
                    s.clone()
                };
                (f, status)
            }),
        };
        failures.push(failure);
    }
    let feasible: Vec<usize> = (0..total).filter(|&i| failures[i].is_none()).collect();
    let feasible_nodes: Vec<Arc<NodeInfo>> = feasible.iter().map(|&i| nodes[i].clone()).collect();

    let mut explanation = LiveExplanation {
        pod: pod.key(),
        uid: pod.uid.clone(),
        scheduler_name: pod.scheduler_name.clone(),
        deployment: if fw.in_tree.is_some() {
            "extender"
        } else {
            "standalone"
        },
        profile: fw.placer.profile().to_string(),
        kube_scheduler: fw.in_tree.as_ref().map(|t| InTreeSummary {
            source: t.source.to_string(),
            profile: t.framework.profile().to_string(),
            not_evaluated: t.not_evaluated.to_vec(),
            extender_weight: t.extender_weight,
        }),
        bound_node: pod.node_name.clone(),
        nodes_total: total,
        feasible: feasible.len(),
        summary: String::new(),
        winner: None,
        runner_up: None,
        tied_with_winner: Vec::new(),
        hints: Vec::new(),
        score_plugins: Vec::new(),
        error: None,
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeVerdict {
                node: n.name.clone(),
                feasible: failures[i].is_none(),
                failure: failures[i].as_ref().map(|(f, _)| f.clone()),
                kube_scheduler: in_tree.as_ref().map(|(_, _, all)| Side {
                    filters: all[i].iter().map(row).collect(),
                    ..Side::default()
                }),
                placer: Side {
                    filters: placer_all[i].iter().map(row).collect(),
                    ..Side::default()
                },
                placer_extender_score: None,
                total: 0,
                rank: None,
            })
            .collect(),
    };

    if feasible.is_empty() {
        let pre_rejection = match &in_tree {
            // placer's own rejection reaches kube-scheduler per node, as the
            // extender's message, and is counted like any other failure.
            Some((_, pre, _)) => pre.rejection.as_ref(),
            None => placer_pre.rejection.as_ref(),
        };
        let message = if total == 0 {
            "0/0 nodes are available: no nodes available to schedule pods.".to_string()
        } else {
            match pre_rejection {
                // Stated once, not per node, as kube-scheduler does.
                Some(r) => format!("0/{total} nodes are available: {}.", r.message()),
                None => fit_error_message(total, failures.iter().flatten().map(|(_, s)| s)),
            }
        };
        explanation.hints = super::hints::hints(&explanation, pod, &nodes);
        // A request of the pod's claims that no node can satisfy.
        explanation
            .hints
            .extend(dynamic_resources::unsatisfiable_requests(pod, cluster));
        let scheduler = fw.in_tree.as_ref().map_or(fw.placer, |t| t.framework);
        let failed: FailedNodes = nodes
            .iter()
            .zip(failures)
            .filter_map(|(n, f)| f.map(|(_, s)| (n.clone(), s)))
            .collect();
        let post = (total > 0 && scheduler.has_post_filters()).then_some((failed, message.clone()));
        explanation.summary = message;
        return Evaluated {
            explanation,
            post_filter: post,
        };
    }

    // Scores, over the nodes that pass both sides (kube-scheduler scores
    // after the extender's filter, and placer normalizes over what it is sent).
    let in_tree_scores = match (&fw.in_tree, in_tree) {
        (Some(t), Some((mut state, _, _))) => {
            Some(t.framework.score(&mut state, pod, &feasible_nodes, cluster))
        }
        _ => None,
    };
    let placer_scores = fw
        .placer
        .score(&mut placer_state, pod, &feasible_nodes, cluster);
    let tables = match (in_tree_scores.transpose(), placer_scores) {
        (Ok(k), Ok(p)) => Some((k, p)),
        (Err(s), _) | (_, Err(s)) => {
            explanation.error = Some(s.attributed_message());
            None
        }
    };
    if let Some((kube, placer)) = tables {
        let weight = fw.in_tree.as_ref().map(|t| t.extender_weight);
        fill_scores(&mut explanation, &feasible, kube.as_ref(), &placer, weight);
    }
    let mut ranked: Vec<&NodeVerdict> = explanation.nodes.iter().filter(|n| n.feasible).collect();
    ranked.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.node.cmp(&b.node)));
    let winner = ranked.first().map(|n| (n.node.clone(), n.total));
    let runner_up = ranked.get(1).map(|n| (n.node.clone(), n.total));
    if let Some((w, t)) = &winner {
        explanation.tied_with_winner = ranked
            .iter()
            .skip(1)
            .filter(|n| n.total == *t)
            .map(|n| n.node.clone())
            .collect();
        explanation.summary = format!(
            "{}/{total} nodes are available; winner {w} (total {t}){}",
            feasible.len(),
            match &runner_up {
                Some((r, rt)) => format!(", runner-up {r} (total {rt})"),
                None => String::new(),
            }
        );
    }
    explanation.winner = winner.map(|w| w.0);
    explanation.runner_up = runner_up.map(|r| r.0);
    Evaluated {
        explanation,
        post_filter: None,
    }
}

/// Runs PostFilter (DefaultPreemption's dry run, which needs exclusive
/// access) and appends its message, as kube-scheduler's FitError does.
pub fn post_filter(
    fw: &Frameworks<'_>,
    pod: &PodInfo,
    evaluated: Evaluated,
    cluster: &mut ClusterState,
) -> LiveExplanation {
    let mut explanation = evaluated.explanation;
    let Some((failed, message)) = evaluated.post_filter else {
        return explanation;
    };
    let scheduler = fw.in_tree.as_ref().map_or(fw.placer, |t| t.framework);
    // The explanation keeps no cycle state: plugins that read their own
    // PreFilter state at PostFilter answer as if it had run.
    let diagnosis = Diagnosis {
        total: explanation.nodes_total,
        failed: &failed,
        state: None,
    };
    let post = scheduler.post_filter(pod, &diagnosis, cluster);
    let extra = post.status.message();
    explanation.summary = if extra.is_empty() {
        message
    } else {
        format!("{message} {extra}")
    };
    explanation
}

fn failure(by: &'static str, s: &Status) -> Failure {
    Failure {
        by,
        plugin: plugin_of(s),
        status: s.code().as_str(),
        reason: s.message(),
    }
}

fn summaries<'t>(
    by: &'static str,
    table: &'t ScoreTable,
) -> impl Iterator<Item = ScorePlugin> + 't {
    table.plugins.iter().map(move |p| ScorePlugin {
        by,
        name: p.name,
        weight: p.weight,
        skipped: p.skipped.as_ref().map(Status::message),
    })
}

/// Fills scores, totals and ranks of the feasible rows.
fn fill_scores(
    e: &mut LiveExplanation,
    feasible: &[usize],
    kube: Option<&ScoreTable>,
    placer: &ScoreTable,
    extender_weight: Option<i64>,
) {
    if let Some(k) = kube {
        e.score_plugins.extend(summaries(KUBE_SCHEDULER, k));
    }
    e.score_plugins.extend(summaries(PLACER, placer));
    for (k, &i) in feasible.iter().enumerate() {
        let row = &mut e.nodes[i];
        row.placer.scores = score_rows(placer, k);
        row.placer.total = placer.totals[k];
        row.total = match (kube, extender_weight) {
            (Some(t), Some(w)) => {
                let side = Side {
                    filters: std::mem::take(
                        &mut row.kube_scheduler.get_or_insert_with(Side::default).filters,
                    ),
                    scores: score_rows(t, k),
                    total: t.totals[k],
                };
                row.kube_scheduler = Some(side);
                let extender = placer.extender_score(k);
                row.placer_extender_score = Some(extender);
                // prioritizeNodes: score × weight × (MaxNodeScore / MaxExtenderPriority).
                t.totals[k] + extender * w * (MAX_NODE_SCORE / MAX_EXTENDER_SCORE)
            }
            _ => placer.totals[k],
        };
    }
    let totals: Vec<i64> = feasible.iter().map(|&i| e.nodes[i].total).collect();
    for &i in feasible {
        let higher = totals.iter().filter(|&&t| t > e.nodes[i].total).count();
        e.nodes[i].rank = Some(higher + 1);
    }
}
