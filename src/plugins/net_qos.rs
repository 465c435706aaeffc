//! NetQoS: latency-sensitive pods prefer nodes with a fast network (design §5.1).
//!
//! Unlike the seed article, pods without the latency-sensitive label are not
//! steered at all: the plugin skips them in PreScore, so it contributes
//! neither a score nor its weight.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{CycleState, NodeScore, PreScorePlugin, ScorePlugin, Status};
use crate::k8s::fields::{NonEmpty, Score};
use crate::objects::inputs::{LabelSlot, NodeLabel};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NetQoS";

/// Arguments of NetQoS, with defaults filled.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", from = "RawArgs")]
pub struct NetQosArgs {
    /// Pod label that marks a latency-sensitive pod.
    pub pod_label: NonEmpty,
    /// Its value.
    pub pod_value: String,
    /// Node label naming the network tier.
    pub node_label: NonEmpty,
    /// Tier value → score.
    pub tiers: BTreeMap<String, Score>,
    /// Score of a node without `nodeLabel`.
    pub unlabeled_score: Score,
    /// Score of a node whose tier is not in `tiers`.
    pub unknown_tier_score: Score,
}

/// The tier label is read on every node of a request.
impl crate::framework::CacheNeeds for NetQosArgs {
    fn node_label_keys(&self) -> Vec<String> {
        vec![self.node_label.to_string()]
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    pod_label: Option<NonEmpty>,
    pod_value: Option<String>,
    node_label: Option<NonEmpty>,
    tiers: Option<BTreeMap<String, Score>>,
    unlabeled_score: Option<Score>,
    unknown_tier_score: Option<Score>,
}

impl From<RawArgs> for NetQosArgs {
    fn from(r: RawArgs) -> Self {
        let unlabeled_score = r.unlabeled_score.unwrap_or(Score::new_const(10));
        NetQosArgs {
            pod_label: r.pod_label.unwrap_or_else(|| NonEmpty::from_static("qos")),
            pod_value: r
                .pod_value
                .unwrap_or_else(|| "latency-sensitive".to_string()),
            node_label: r.node_label.unwrap_or_else(|| NonEmpty::from_static("net")),
            tiers: r.tiers.unwrap_or_else(|| {
                BTreeMap::from([
                    ("high".to_string(), Score::new_const(100)),
                    ("low".to_string(), Score::new_const(0)),
                ])
            }),
            unlabeled_score,
            unknown_tier_score: r.unknown_tier_score.unwrap_or(unlabeled_score),
        }
    }
}

impl Default for NetQosArgs {
    fn default() -> Self {
        RawArgs {
            pod_label: None,
            pod_value: None,
            node_label: None,
            tiers: None,
            unlabeled_score: None,
            unknown_tier_score: None,
        }
        .into()
    }
}

/// The plugin.
pub struct NetQos {
    args: NetQosArgs,
    not_affected: String,
    unlabeled: Arc<str>,
    unknown_tier: Arc<str>,
}

impl NetQos {
    /// Builds the plugin from its arguments.
    pub fn new(args: &NetQosArgs) -> Self {
        NetQos {
            not_affected: format!("pod is not labelled {}={}", args.pod_label, args.pod_value),
            unlabeled: format!("node has no {} label", args.node_label).into(),
            unknown_tier: format!("node's {} value is not a known tier", args.node_label).into(),
            args: args.clone(),
        }
    }
}

crate::plugin!(NetQos, NAME, [pre_score, score]);

impl PreScorePlugin for NetQos {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status {
        if pod.labels.get(self.args.pod_label.as_str()) != Some(&self.args.pod_value) {
            return Status::skip(self.not_affected.clone());
        }
        let slots = cluster.label_slots();
        if let Some(slot) = slots.slot(&self.args.node_label) {
            let tiers = self
                .args
                .tiers
                .iter()
                .filter_map(|(tier, score)| Some((slots.id(slot, tier)?, score.get())))
                .collect();
            state.write(TierIds { slot, tiers });
        }
        Status::success()
    }
}

/// The tiers by the cache's interned id of their value (written in PreScore
/// when the cache keeps the node label inline).
struct TierIds {
    slot: LabelSlot,
    tiers: Vec<(u32, i64)>,
}

impl NetQos {
    /// The score of a node whose label is `tier` (`None`: unlabeled), with its note.
    fn tier_score(&self, tier: Option<Option<i64>>) -> NodeScore {
        let a = &self.args;
        match tier {
            None => NodeScore::value(a.unlabeled_score.get()).with_note(self.unlabeled.clone()),
            Some(Some(score)) => NodeScore::value(score),
            Some(None) => {
                NodeScore::value(a.unknown_tier_score.get()).with_note(self.unknown_tier.clone())
            }
        }
    }
}

impl ScorePlugin for NetQos {
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<NodeScore, Status> {
        if let Some(ids) = state.read::<TierIds>() {
            match node.inputs.get(ids.slot) {
                NodeLabel::Value(id) => {
                    let score = ids.tiers.iter().find(|(t, _)| *t == id).map(|(_, s)| *s);
                    return Ok(self.tier_score(Some(score)));
                }
                NodeLabel::Absent => return Ok(self.tier_score(None)),
                NodeLabel::Unknown => {}
            }
        }
        let a = &self.args;
        Ok(self.tier_score(
            node.label(&a.node_label)
                .map(|tier| a.tiers.get(tier).map(|s| s.get())),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::labels;

    fn pod(pairs: &[(&str, &str)]) -> PodInfo {
        PodInfo {
            labels: labels(pairs).into(),
            ..Default::default()
        }
    }

    fn score(p: &NetQos, node_labels: &[(&str, &str)]) -> i64 {
        let n = NodeInfo::new("n", node_labels.iter().copied());
        p.score(
            &CycleState::new(),
            &PodInfo::default(),
            &n,
            &ClusterState::default(),
        )
        .unwrap()
        .score
    }

    fn pre(p: &NetQos, pod: &PodInfo) -> Code {
        p.pre_score(&mut CycleState::new(), pod, &[], &ClusterState::default())
            .code()
    }

    #[test]
    fn defaults_score_tiers() {
        let p = NetQos::new(&NetQosArgs::default());
        assert_eq!(score(&p, &[("net", "high")]), 100);
        assert_eq!(score(&p, &[("net", "low")]), 0);
        assert_eq!(score(&p, &[]), 10);
        assert_eq!(
            score(&p, &[("net", "medium")]),
            10,
            "unknown tier defaults to unlabeledScore"
        );
        assert_eq!(
            score(&p, &[("net", "HIGH")]),
            10,
            "values are case-sensitive"
        );
        assert_eq!(score(&p, &[("Net", "high")]), 10, "keys are case-sensitive");
    }

    #[test]
    fn only_latency_sensitive_pods_are_scored() {
        let p = NetQos::new(&NetQosArgs::default());
        assert_eq!(
            pre(&p, &pod(&[("qos", "latency-sensitive")])),
            Code::Success
        );
        assert_eq!(pre(&p, &pod(&[])), Code::Skip);
        assert_eq!(pre(&p, &pod(&[("qos", "batch")])), Code::Skip);
        assert_eq!(pre(&p, &pod(&[("QoS", "latency-sensitive")])), Code::Skip);
    }

    #[test]
    fn configured_tiers_and_unknown_score() {
        let a: NetQosArgs = serde_yaml_ng::from_str(
            "{podLabel: tier, podValue: rt, nodeLabel: nic, tiers: {x100: 90, x10: 40}, unlabeledScore: 5, unknownTierScore: 20}",
        )
        .unwrap();
        let p = NetQos::new(&a);
        assert_eq!(score(&p, &[("nic", "x100")]), 90);
        assert_eq!(score(&p, &[("nic", "x1")]), 20);
        assert_eq!(score(&p, &[]), 5);
        assert_eq!(pre(&p, &pod(&[("tier", "rt")])), Code::Success);
    }

    #[test]
    fn rejects_out_of_range_and_unknown_fields() {
        assert!(serde_yaml_ng::from_str::<NetQosArgs>("tiers: {high: 101}").is_err());
        assert!(serde_yaml_ng::from_str::<NetQosArgs>("unlabeledScore: -1").is_err());
        assert!(serde_yaml_ng::from_str::<NetQosArgs>("nodeLabels: net").is_err());
    }
}
