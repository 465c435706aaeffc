//! The text form of a live explanation (`?format=table`, `placer explain`):
//! a header with the summary, winner and hints, one row per node with its
//! verdict and every score, and the reasons of failed nodes below. Long node
//! names are shortened as in `POST /explain`'s table.

use std::fmt::Write as _;

use super::report::{KUBE_SCHEDULER, LiveExplanation, NodeVerdict};
use crate::framework::explain::{shorten, write_aligned, write_notes};

impl LiveExplanation {
    /// Renders the explanation as aligned text.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "pod {}  schedulerName {}  {} deployment, placer profile {}",
            self.pod, self.scheduler_name, self.deployment, self.profile
        );
        if let Some(k) = &self.kube_scheduler {
            let _ = writeln!(
                out,
                "kube-scheduler: {} (profile {}), placer's score weighs {} x 10",
                k.source, k.profile, k.extender_weight
            );
            if !k.not_evaluated.is_empty() {
                let _ = writeln!(
                    out,
                    "not evaluated (placer does not implement them): {}",
                    k.not_evaluated.join(", ")
                );
            }
        }
        if let Some(node) = &self.bound_node {
            let _ = writeln!(out, "bound to {node}; evaluated as if it were not");
        }
        let _ = writeln!(out, "{}", self.summary);
        if !self.tied_with_winner.is_empty() {
            let _ = writeln!(
                out,
                "tied with the winner (the scheduler picks among them): {}",
                self.tied_with_winner.join(", ")
            );
        }
        for h in &self.hints {
            let _ = writeln!(out, "  {h}");
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "scoring failed: {e}");
        }
        for p in &self.score_plugins {
            if let Some(why) = &p.skipped {
                let _ = writeln!(out, "{} {} skipped: {why}", p.by, p.name);
            }
        }
        let active: Vec<(&str, &str, i64)> = self
            .score_plugins
            .iter()
            .filter(|p| p.skipped.is_none())
            .map(|p| (p.by, p.name, p.weight))
            .collect();
        let mut header = vec!["NODE".to_string(), "RESULT".to_string()];
        header.extend(active.iter().map(|(by, name, w)| {
            let side = if *by == KUBE_SCHEDULER { "k" } else { "p" };
            format!("{side}:{name}x{w}")
        }));
        if self.kube_scheduler.is_some() {
            header.push("PLACER(0-10)".into());
        }
        header.extend(["TOTAL", "RANK"].map(String::from));
        let mut table = vec![header];
        let mut notes = Vec::new();
        let mut shortened = false;
        for n in &self.nodes {
            let node = shorten(&n.node);
            shortened |= node.len() != n.node.len();
            let result = match &n.failure {
                None => "fits".to_string(),
                Some(f) => {
                    notes.push(format!(
                        "{node}: {} {} {}: {}",
                        f.by, f.plugin, f.status, f.reason
                    ));
                    format!("{}:{}", f.by, f.plugin)
                }
            };
            let mut row = vec![node, result];
            for (by, name, _) in &active {
                row.push(cell(n, by, name));
            }
            if self.kube_scheduler.is_some() {
                row.push(
                    n.placer_extender_score
                        .map_or("-".into(), |s| s.to_string()),
                );
            }
            if n.feasible {
                row.push(n.total.to_string());
                row.push(n.rank.map_or("-".into(), |r| r.to_string()));
            } else {
                row.extend(["-", "-"].map(String::from));
            }
            table.push(row);
        }
        write_aligned(&mut out, &table);
        if !active.is_empty() {
            let _ = writeln!(
                out,
                "(score cells: raw/normalized/weighted; k: kube-scheduler, p: placer)"
            );
        }
        write_notes(&mut out, &notes, shortened);
        out
    }
}

fn cell(n: &NodeVerdict, by: &str, name: &str) -> String {
    let side = if by == KUBE_SCHEDULER {
        n.kube_scheduler.as_ref()
    } else {
        Some(&n.placer)
    };
    side.and_then(|s| s.scores.iter().find(|r| r.plugin == name))
        .map_or("-".to_string(), |s| {
            let raw = s.raw.map_or("-".to_string(), |r| r.to_string());
            format!("{raw}/{}/{}", s.normalized, s.weighted)
        })
}
