//! How each node filters and scores for one pod: the record behind
//! `POST /explain` and `placer score`, and its text-table rendering.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cache::ClusterState;
use crate::framework::{Code, CycleState, Framework, ScoreTable, Status};
use crate::objects::{NodeInfo, PodInfo};

/// Reason given for a node name that placer's cache does not know.
pub const NODE_NOT_FOUND: &str = "node not found in placer cache";

/// The whole explanation for one pod.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The profile that evaluated it.
    pub profile: String,
    /// The score plugins, their weights and whether they were skipped.
    pub score_plugins: Vec<ScorePluginSummary>,
    /// Σ weight of the score plugins that were not skipped.
    pub weight_sum: i64,
    /// Set when scoring failed as a whole (an `Error` status).
    pub error: Option<String>,
    /// One row per requested node, in request order.
    pub nodes: Vec<NodeExplanation>,
}

/// A score plugin's part in the explanation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScorePluginSummary {
    /// Plugin name.
    pub name: &'static str,
    /// Weight in the profile.
    pub weight: i64,
    /// Why it was skipped for this pod, if it was.
    pub skipped: Option<String>,
}

/// One node's verdicts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExplanation {
    /// Node name as requested.
    pub node: String,
    /// True when every filter passed.
    pub feasible: bool,
    /// Every filter plugin's status.
    pub filters: Vec<FilterRow>,
    /// Every non-skipped score plugin's values (empty for infeasible nodes).
    pub scores: Vec<ScoreRow>,
    /// Σ weight × score.
    pub total: i64,
    /// `10 × total / (100 × weight_sum)` before rounding.
    pub extender_score_exact: f64,
    /// The 0..=10 score `/prioritize` reports.
    pub extender_score: i64,
    /// 1 = best; nodes with equal totals share a rank; `None` when infeasible.
    pub rank: Option<usize>,
}

/// One filter plugin's verdict on one node.
#[derive(Debug, Serialize)]
pub struct FilterRow {
    /// Plugin name.
    pub plugin: &'static str,
    /// Status code name.
    pub status: &'static str,
    /// Reason text ("" on success).
    pub reason: String,
}

/// One score plugin's values on one node.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreRow {
    /// Plugin name.
    pub plugin: &'static str,
    /// Raw value before normalization (`None` = no value for this node).
    pub raw: Option<i64>,
    /// Score after normalization and clamping, 0..=100.
    pub normalized: i64,
    /// `weight × normalized`.
    pub weighted: i64,
    /// Why, when not obvious.
    pub note: Option<String>,
}

impl FilterRow {
    /// True when this plugin let the node through (Success, or skipped for the pod).
    pub fn passed(&self) -> bool {
        self.status == Code::Success.as_str() || self.status == Code::Skip.as_str()
    }

    fn from_status(s: &Status, plugin: &'static str) -> Self {
        FilterRow {
            plugin: if s.plugin().is_empty() {
                plugin
            } else {
                s.plugin()
            },
            status: s.code().as_str(),
            reason: s.message(),
        }
    }
}

/// Evaluates `pod` against `nodes` (a `None` node is a name the cache does not
/// know) and records every plugin's verdict.
pub fn explain(
    framework: &Framework,
    pod: &PodInfo,
    nodes: &[(String, Option<&NodeInfo>)],
    cluster: &ClusterState,
) -> Explanation {
    let mut state = CycleState::new();
    let pre = framework.pre_filter(&mut state, pod, cluster);
    let mut rows: Vec<NodeExplanation> = nodes
        .iter()
        .map(|(name, node)| {
            let filters: Vec<FilterRow> = match node {
                None => vec![FilterRow {
                    plugin: "placer",
                    status: Code::Unschedulable.as_str(),
                    reason: NODE_NOT_FOUND.to_string(),
                }],
                Some(n) => framework
                    .filter_node_all(&state, &pre, pod, n, cluster)
                    .iter()
                    .map(|s| FilterRow::from_status(s, "placer"))
                    .collect(),
            };
            NodeExplanation {
                node: name.clone(),
                feasible: node.is_some() && filters.iter().all(FilterRow::passed),
                filters,
                scores: Vec::new(),
                total: 0,
                extender_score_exact: 0.0,
                extender_score: 0,
                rank: None,
            }
        })
        .collect();

    let feasible: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].feasible).collect();
    let feasible_nodes: Vec<&NodeInfo> = feasible.iter().filter_map(|&i| nodes[i].1).collect();
    let mut explanation = Explanation {
        pod: pod.key(),
        profile: framework.profile().to_string(),
        score_plugins: Vec::new(),
        weight_sum: 0,
        error: None,
        nodes: Vec::new(),
    };
    match framework.score(&mut state, pod, &feasible_nodes, cluster) {
        Err(status) => explanation.error = Some(status.attributed_message()),
        Ok(table) => {
            explanation.weight_sum = table.weight_sum;
            explanation.score_plugins = table
                .plugins
                .iter()
                .map(|p| ScorePluginSummary {
                    name: p.name,
                    weight: p.weight,
                    skipped: p.skipped.as_ref().map(Status::message),
                })
                .collect();
            for (k, &i) in feasible.iter().enumerate() {
                let row = &mut rows[i];
                row.total = table.totals[k];
                row.extender_score_exact = table.extender_score_exact(k);
                row.extender_score = table.extender_score(k);
                row.scores = score_rows(&table, k);
            }
            let totals: Vec<i64> = feasible.iter().map(|&i| rows[i].total).collect();
            for &i in &feasible {
                let higher = totals.iter().filter(|&&t| t > rows[i].total).count();
                rows[i].rank = Some(higher + 1);
            }
        }
    }
    explanation.nodes = rows;
    explanation
}

impl Explanation {
    /// Renders the explanation as an aligned text table for terminals.
    ///
    /// Node names longer than [`MAX_CELL_CHARS`] are shortened (the table
    /// says so); the JSON form always carries them whole.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "pod {}  profile {}", self.pod, self.profile);
        for p in &self.score_plugins {
            match &p.skipped {
                Some(why) => {
                    let _ = writeln!(out, "  {} (weight {}): skipped: {}", p.name, p.weight, why);
                }
                None => {
                    let _ = writeln!(out, "  {} (weight {})", p.name, p.weight);
                }
            }
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "  scoring failed: {e}");
        }
        let active: Vec<&ScorePluginSummary> = self
            .score_plugins
            .iter()
            .filter(|p| p.skipped.is_none())
            .collect();
        let mut header = vec!["NODE".to_string(), "FILTER".to_string()];
        header.extend(
            active
                .iter()
                .map(|p| format!("{} raw/norm/weighted", p.name)),
        );
        header.extend(["TOTAL", "SCORE", "RANK"].map(String::from));
        let mut table = vec![header];
        let mut notes = Vec::new();
        let mut shortened = false;
        for n in &self.nodes {
            let node = shorten(&n.node);
            shortened |= node.len() != n.node.len();
            let failed: Vec<&FilterRow> = n.filters.iter().filter(|f| !f.passed()).collect();
            let filter = if failed.is_empty() { "pass" } else { "FAIL" };
            for f in &failed {
                notes.push(format!("{node}: {} {}: {}", f.plugin, f.status, f.reason));
            }
            let mut row = vec![node.clone(), filter.to_string()];
            for p in &active {
                row.push(match n.scores.iter().find(|s| s.plugin == p.name) {
                    Some(s) => {
                        if let Some(note) = &s.note {
                            notes.push(format!("{node}: {}: {}", s.plugin, note));
                        }
                        let raw = s.raw.map_or("-".to_string(), |r| r.to_string());
                        format!("{raw}/{}/{}", s.normalized, s.weighted)
                    }
                    None => "-".to_string(),
                });
            }
            if n.feasible {
                row.push(n.total.to_string());
                row.push(format!(
                    "{:.2} ({})",
                    n.extender_score_exact, n.extender_score
                ));
                row.push(n.rank.map_or("-".to_string(), |r| r.to_string()));
            } else {
                row.extend(["-", "-", "-"].map(String::from));
            }
            table.push(row);
        }
        write_aligned(&mut out, &table);
        write_notes(&mut out, &notes, shortened);
        out
    }
}

/// The values of every plugin that scored the `k`-th feasible node of `table`.
pub(crate) fn score_rows(table: &ScoreTable, k: usize) -> Vec<ScoreRow> {
    table
        .plugins
        .iter()
        .filter(|p| p.skipped.is_none())
        .map(|p| {
            let s = &p.scores[k];
            ScoreRow {
                plugin: p.name,
                raw: s.raw,
                normalized: s.score,
                weighted: p.weight * s.score,
                note: s.note.as_deref().map(str::to_string),
            }
        })
        .collect()
}

/// The lines under a table: its `notes`, then, if a name was `shortened`,
/// where to find it whole.
pub(crate) fn write_notes(out: &mut String, notes: &[String], shortened: bool) {
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    if shortened {
        let _ = writeln!(
            out,
            "(node names over {MAX_CELL_CHARS} characters are shortened with \"...\"; the JSON form has them whole)"
        );
    }
}

/// The longest node name the table prints whole. Kubernetes names are at most
/// 253 characters, but a hand-written body may carry anything.
pub const MAX_CELL_CHARS: usize = 64;

/// `name`, or its first characters and "..." when it is over [`MAX_CELL_CHARS`].
pub(crate) fn shorten(name: &str) -> String {
    match name.char_indices().nth(MAX_CELL_CHARS) {
        None => name.to_string(),
        Some(_) => {
            let keep: String = name.chars().take(MAX_CELL_CHARS - 3).collect();
            keep + "..."
        }
    }
}

/// Writes `rows` as left-aligned columns two spaces apart. Pads by hand:
/// `format!`'s width argument is limited to `u16` and panics beyond it.
pub(crate) fn write_aligned(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            if !line.is_empty() {
                line.push_str("  ");
            }
            line.push_str(cell);
            line.extend(std::iter::repeat_n(
                ' ',
                width.saturating_sub(cell.chars().count()),
            ));
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_row(name: &str) -> NodeExplanation {
        NodeExplanation {
            node: name.to_string(),
            feasible: false,
            filters: vec![FilterRow {
                plugin: "CapabilityFilter",
                status: Code::UnschedulableAndUnresolvable.as_str(),
                reason: "node(s) lack hardware encryption".into(),
            }],
            scores: Vec::new(),
            total: 0,
            extender_score_exact: 0.0,
            extender_score: 0,
            rank: None,
        }
    }

    fn explanation(names: &[&str]) -> Explanation {
        Explanation {
            pod: "default/web".into(),
            profile: "extender".into(),
            score_plugins: Vec::new(),
            weight_sum: 0,
            error: None,
            nodes: names.iter().map(|n| node_row(n)).collect(),
        }
    }

    #[test]
    fn names_beyond_format_width_limits_are_shortened_not_a_panic() {
        // 65,536 characters and more overflow format!'s u16 width argument.
        let long = "n".repeat(70_000);
        let table = explanation(&[&long, "node-a"]).to_table();
        let shown = format!("{}...", "n".repeat(MAX_CELL_CHARS - 3));
        assert!(table.contains(&format!("{shown}  FAIL")), "{table}");
        assert!(!table.contains(&long), "the whole name is not printed");
        assert!(table.contains("node names over 64 characters are shortened"));
        assert!(table.contains(&format!(
            "{shown}: CapabilityFilter UnschedulableAndUnresolvable"
        )));
    }

    #[test]
    fn columns_stay_aligned_by_characters() {
        let table = explanation(&["ñode-ü", "node-long-name"]).to_table();
        let rows: Vec<&str> = table.lines().filter(|l| l.contains("FAIL")).collect();
        assert_eq!(rows.len(), 2, "{table}");
        let column = |row: &str| row.chars().position(|c| c == 'F');
        assert_eq!(column(rows[0]), column(rows[1]), "{table}");
        assert!(
            !table.contains("shortened"),
            "short names are printed whole"
        );
    }
}
