//! Result annotations in kube-scheduler-simulator's format
//! (`--simulator-annotations`, standalone mode, off by default), so its UI
//! and people's own tools can read placer's verdicts off the pod:
//!
//! - `kube-scheduler-simulator.sigs.k8s.io/filter-result`: node → Filter
//!   plugin → `"passed"` or the reason, for the plugins that ran on the node
//!   (up to its first rejection, as the scheduler stops there);
//! - `.../score-result`: node → Score plugin → the plugin's raw score;
//! - `.../finalscore-result`: node → Score plugin → normalized × weight;
//! - `.../selected-node`: the chosen node (placements only).
//!
//! Values are JSON objects of strings, as the simulator writes them. The
//! scheduling loop reports each outcome ([`Outcome`]) on a bounded channel;
//! a task explains the pod (on the cache as it is then: close to, not
//! exactly, what the attempt saw) and patches the annotations. Outcomes
//! beyond the channel's room are dropped and logged, never waited for.
//! Needs `pods` `patch`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{Explainer, LiveExplanation};
use crate::objects::PodInfo;

/// Annotation key prefix of kube-scheduler-simulator.
pub const PREFIX: &str = "kube-scheduler-simulator.sigs.k8s.io/";
/// Outcomes waiting for their annotations at most.
pub const QUEUE: usize = 1024;

/// One attempt's outcome: the pod and the node it was placed on, if any.
pub type Outcome = (Arc<PodInfo>, Option<String>);

/// The annotations for `e` (`selected`: the node the attempt chose).
pub fn annotations(e: &LiveExplanation, selected: Option<&str>) -> BTreeMap<String, String> {
    let mut filter: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
    let mut score: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
    let mut final_score: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
    for n in &e.nodes {
        let row = filter.entry(&n.node).or_default();
        for f in n.placer.filters.iter().filter(|f| f.status != "Skip") {
            let passed = f.passed();
            row.insert(
                f.plugin,
                if passed {
                    "passed".into()
                } else {
                    f.reason.clone()
                },
            );
            if !passed {
                break;
            }
        }
        if n.feasible {
            for s in &n.placer.scores {
                let raw = s.raw.unwrap_or(s.normalized);
                score
                    .entry(&n.node)
                    .or_default()
                    .insert(s.plugin, raw.to_string());
                final_score
                    .entry(&n.node)
                    .or_default()
                    .insert(s.plugin, s.weighted.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    out.insert(format!("{PREFIX}filter-result"), json!(filter).to_string());
    out.insert(format!("{PREFIX}score-result"), json!(score).to_string());
    out.insert(
        format!("{PREFIX}finalscore-result"),
        json!(final_score).to_string(),
    );
    if let Some(node) = selected {
        out.insert(format!("{PREFIX}selected-node"), node.to_string());
    }
    out
}

/// Annotates every reported outcome until the channel closes.
pub async fn annotate(client: Client, explainer: Arc<Explainer>, mut rx: mpsc::Receiver<Outcome>) {
    while let Some((pod, selected)) = rx.recv().await {
        // A placed pod is in the cache (assumed): explain it as bound there,
        // which takes it out while the nodes are evaluated.
        let as_seen = Arc::new(PodInfo {
            node_name: selected.clone(),
            ..(*pod).clone()
        });
        let e = explainer.clone();
        let Ok(Ok(answer)) = tokio::task::spawn_blocking(move || e.explain(as_seen)).await else {
            debug!(pod = %pod.key(), "no explanation for the simulator annotations");
            continue;
        };
        let patch = json!({ "metadata": { "annotations":
            annotations(&answer.explanation, selected.as_deref()) } });
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
        if let Err(e) = api
            .patch(&pod.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            warn!(pod = %pod.key(), error = %e, "could not write the simulator annotations");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::report::{NodeVerdict, Side};
    use crate::framework::explain::{FilterRow, ScoreRow};

    fn node(name: &str, feasible: bool) -> NodeVerdict {
        let filters = vec![
            FilterRow {
                plugin: "NodeName",
                status: "Skip",
                reason: String::new(),
            },
            FilterRow {
                plugin: "TaintToleration",
                status: if feasible {
                    "Success"
                } else {
                    "UnschedulableAndUnresolvable"
                },
                reason: if feasible {
                    String::new()
                } else {
                    "node(s) had untolerated taint(s)".into()
                },
            },
            FilterRow {
                plugin: "NodeResourcesFit",
                status: "Success",
                reason: String::new(),
            },
        ];
        let scores = if feasible {
            vec![ScoreRow {
                plugin: "TaintToleration",
                raw: Some(1),
                normalized: 50,
                weighted: 150,
                note: None,
            }]
        } else {
            Vec::new()
        };
        NodeVerdict {
            node: name.into(),
            feasible,
            failure: None,
            kube_scheduler: None,
            placer: Side {
                filters,
                scores,
                total: 150,
            },
            placer_extender_score: None,
            total: 150,
            rank: None,
        }
    }

    #[test]
    fn the_simulators_shapes() {
        let e: LiveExplanation = LiveExplanation {
            pod: "ns/p".into(),
            uid: String::new(),
            scheduler_name: "placer".into(),
            deployment: "standalone",
            profile: "placer".into(),
            kube_scheduler: None,
            bound_node: None,
            nodes_total: 2,
            feasible: 1,
            summary: String::new(),
            winner: Some("a".into()),
            runner_up: None,
            tied_with_winner: Vec::new(),
            hints: Vec::new(),
            score_plugins: Vec::new(),
            error: None,
            nodes: vec![node("a", true), node("b", false)],
        };
        let a = annotations(&e, Some("a"));
        assert_eq!(
            a[&format!("{PREFIX}filter-result")],
            r#"{"a":{"NodeResourcesFit":"passed","TaintToleration":"passed"},"b":{"TaintToleration":"node(s) had untolerated taint(s)"}}"#,
            "skipped plugins did not run; a node stops at its first rejection"
        );
        assert_eq!(
            a[&format!("{PREFIX}score-result")],
            r#"{"a":{"TaintToleration":"1"}}"#
        );
        assert_eq!(
            a[&format!("{PREFIX}finalscore-result")],
            r#"{"a":{"TaintToleration":"150"}}"#
        );
        assert_eq!(a[&format!("{PREFIX}selected-node")], "a");
        assert!(!annotations(&e, None).contains_key(&format!("{PREFIX}selected-node")));
    }
}
