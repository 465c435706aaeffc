//! "What would change the outcome", where it is cheap to tell: the nodes that
//! fail exactly one filter plugin (of either side) would pass every filter
//! if that one thing changed. For TaintToleration with a single untolerated
//! taint, the hint names the taint. Nothing is re-evaluated: the filters
//! already ran to the end on every node.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::report::{KUBE_SCHEDULER, LiveExplanation, PLACER};
use crate::k8s::taints::tolerates_taint;
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::taint_toleration;

/// The hints for an explanation whose filters ran on `nodes` (same order).
pub fn hints(e: &LiveExplanation, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Vec<String> {
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for (row, node) in e.nodes.iter().zip(nodes) {
        if row.feasible {
            continue;
        }
        let mut failing: Vec<(&'static str, &str, &str)> = Vec::new();
        let sides = row
            .kube_scheduler
            .iter()
            .map(|s| (KUBE_SCHEDULER, s))
            .chain([(PLACER, &row.placer)]);
        for (by, side) in sides {
            for f in side.filters.iter().filter(|f| !f.passed()) {
                if !failing.iter().any(|(b, p, _)| *b == by && *p == f.plugin) {
                    failing.push((by, f.plugin, &f.reason));
                }
            }
        }
        let [(by, plugin, reason)] = failing[..] else {
            continue;
        };
        let hint = if plugin == taint_toleration::NAME {
            let untolerated: Vec<String> = node
                .taints
                .iter()
                .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
                .filter(|t| !tolerates_taint(&pod.spec.tolerations, t))
                .map(|t| match &t.value {
                    Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
                    _ => format!("{}:{}", t.key, t.effect),
                })
                .collect();
            match &untolerated[..] {
                [one] => format!("if the pod tolerated taint {one}"),
                _ => format!("if the pod tolerated their taints ({by}'s {plugin}: {reason})"),
            }
        } else {
            format!("if {by}'s {plugin} passed them ({reason})")
        };
        *groups.entry(hint).or_default() += 1;
    }
    let mut out: Vec<(usize, String)> = groups.into_iter().map(|(h, n)| (n, h)).collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    out.into_iter()
        .map(|(n, h)| format!("{n} node(s) would pass every filter {h}"))
        .collect()
}
