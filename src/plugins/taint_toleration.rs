//! TaintToleration: a pod may only land on a node whose `NoSchedule` and
//! `NoExecute` taints it tolerates, and prefers nodes with fewer untolerated
//! `PreferNoSchedule` taints (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`, with
//! toleration matching from `k8s.io/api/core/v1/toleration.go`
//! (`Toleration.ToleratesTaint`) and score normalization from
//! `plugins/helper/normalize_score.go` (`DefaultNormalizeScore`). The toleration
//! helpers here are shared with NodeUnschedulable.
//!
//! Queueing hints: a node added or whose taints changed that the pod now
//! tolerates and did not before (Node Add|UpdateNodeTaint), and the pod
//! itself gaining a toleration (TargetPod UpdatePodToleration).
//!
//! Not replicated: the PreFilter `Skip` for pods whose in-place resize is
//! deferred (`InPlacePodVerticalScalingSchedulerPreemption`), which needs pod
//! status placer does not keep.

use k8s_openapi::api::core::v1::Toleration;
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, EventResource, QueueingHint};
use crate::framework::scoring::default_normalize_score;
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, NodeScore, PreScorePlugin, ScorePlugin,
    Status, queue_if,
};
use crate::k8s::taints::{has_untolerated_taint, tolerates_taint};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "TaintToleration";

/// Filter reason (kube-scheduler v1.37 `Filter`: since v1.35 the message no
/// longer names the taint; it is only logged).
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

/// TaintToleration takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TaintTolerationArgs {}

impl crate::framework::CacheNeeds for TaintTolerationArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct TaintToleration;

impl TaintToleration {
    /// Builds the plugin.
    pub fn new(_: &TaintTolerationArgs) -> Self {
        TaintToleration
    }
}

/// The pod's tolerations that can tolerate a `PreferNoSchedule` taint
/// (effect `PreferNoSchedule` or empty), written in PreScore.
struct PreferNoScheduleTolerations(Vec<Toleration>);

crate::plugin!(
    TaintToleration,
    NAME,
    [filter, pre_score, score, enqueue_extensions]
);

impl FilterPlugin for TaintToleration {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        if has_untolerated_taint(&node.taints, &pod.spec.tolerations) {
            Status::unresolvable(ERR_REASON_UNTOLERATED)
        } else {
            Status::success()
        }
    }
}

impl EnqueueExtensions for TaintToleration {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                |pod, change| {
                    let Some((old, Some(new))) = change.nodes() else {
                        return QueueingHint::Queue;
                    };
                    let untolerated =
                        |n: &NodeInfo| has_untolerated_taint(&n.taints, &pod.spec.tolerations);
                    queue_if(old.is_none_or(untolerated) && !untolerated(new))
                },
            ),
            EventHint::always(EventResource::TargetPod, ActionType::UPDATE_POD_TOLERATION),
        ]
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        _: &ClusterState,
    ) -> Status {
        let tolerations = pod
            .spec
            .tolerations
            .iter()
            .filter(|t| matches!(t.effect.as_deref(), None | Some("" | "PreferNoSchedule")))
            .cloned()
            .collect();
        state.write(PreferNoScheduleTolerations(tolerations));
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    crate::score_from_pre_score!(PreferNoScheduleTolerations, fn untolerated_preferences);

    /// Fewer untolerated taints score higher.
    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(scores, true);
        Status::success()
    }
}

/// Score's raw value: how many of the node's `PreferNoSchedule` taints the
/// pod does not tolerate.
fn untolerated_preferences(
    PreferNoScheduleTolerations(tolerations): &PreferNoScheduleTolerations,
    node: &NodeInfo,
    _: &ClusterState,
) -> NodeScore {
    let count = node
        .taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !tolerates_taint(tolerations, t))
        .count();
    NodeScore::value(count as i64)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::framework::Code;
    use crate::k8s::taints::{toleration_tolerates, tolerations_tolerate};
    use crate::plugins::test_support::{
        hint, node_added, node_updated, pod_with_spec, score, score_without_pre_score,
        target_pod_updated,
    };
    use k8s_openapi::api::core::v1::Taint;
    use serde_json::json;

    fn tol(v: serde_json::Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn pod(tolerations: serde_json::Value) -> PodInfo {
        pod_with_spec(json!({ "tolerations": tolerations }))
    }

    fn node(taints: Vec<Taint>) -> NodeInfo {
        NodeInfo {
            name: "n".into(),
            taints,
            ..Default::default()
        }
    }

    fn filter(pod: &PodInfo, node: &NodeInfo) -> Status {
        TaintToleration.filter(&CycleState::new(), pod, node, &ClusterState::default())
    }

    fn scores(pod: &PodInfo, nodes: &[NodeInfo]) -> Vec<(i64, i64)> {
        let nodes: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        let (s, out) = score(&TaintToleration, pod, &nodes, &ClusterState::default());
        assert!(s.is_success());
        out.iter().map(|s| (s.raw.unwrap(), s.score)).collect()
    }

    /// Cases of kube-scheduler's `TestIsSchedulableAfterNodeChange` and
    /// `Test_isSchedulableAfterTargetPodTolerationChange` (`taint_toleration_test.go`).
    #[test]
    fn hints_queue_the_pod_when_a_node_turns_tolerable_or_it_gains_a_toleration() {
        let pod = pod(
            json!([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]),
        );
        let dedicated = |users: &[&str]| {
            node(
                users
                    .iter()
                    .map(|u| taint("dedicated", u, "NoSchedule"))
                    .collect(),
            )
        };
        let on_node = |event| hint(&TaintToleration, &pod, event);
        assert_eq!(
            on_node(node_added(dedicated(&["user1"]))),
            QueueingHint::Skip
        );
        assert_eq!(
            on_node(node_added(dedicated(&["user2"]))),
            QueueingHint::Queue
        );
        assert_eq!(
            on_node(node_updated(
                dedicated(&["user1"]),
                dedicated(&["user1", "user3"])
            )),
            QueueingHint::Skip,
            "still untolerated"
        );
        assert_eq!(
            on_node(node_updated(dedicated(&["user1"]), dedicated(&["user2"]))),
            QueueingHint::Queue
        );
        assert_eq!(
            on_node(node_updated(dedicated(&["user2"]), dedicated(&[]))),
            QueueingHint::Skip,
            "tolerated before: the pod was not rejected for this node"
        );

        let event = target_pod_updated(PodInfo::default(), pod.clone());
        assert_eq!(hint(&TaintToleration, &pod, event), QueueingHint::Queue);
    }

    #[test]
    fn matching_rules_follow_tolerates_taint() {
        let t = |v| toleration_tolerates(&tol(v), "k", "v", "NoSchedule", false);
        // Equal (explicit or by default) needs the exact value.
        assert!(t(
            json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"})
        ));
        assert!(t(json!({"key": "k", "value": "v"})));
        assert!(!t(json!({"key": "k", "value": "V"})));
        assert!(
            !t(json!({"key": "k"})),
            "empty value only matches an empty taint value"
        );
        // Exists matches every value; an empty key with Exists matches every taint.
        assert!(t(json!({"key": "k", "operator": "Exists"})));
        assert!(t(json!({"operator": "Exists"})));
        assert!(!t(json!({"key": "other", "operator": "Exists"})));
        // An empty effect matches every effect; a set one must be equal.
        assert!(t(json!({"key": "k", "operator": "Exists", "effect": ""})));
        assert!(!t(
            json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})
        ));
        assert!(!t(
            json!({"operator": "Exists", "effect": "PreferNoSchedule"})
        ));
        // Keys and values are case-sensitive; unknown operators match nothing.
        assert!(!t(json!({"key": "K", "operator": "Exists"})));
        assert!(!t(json!({"key": "k", "operator": "exists"})));
        // Empty key with Equal (invalid in the API) matches taints whose value equals.
        assert!(toleration_tolerates(
            &tol(json!({"value": ""})),
            "any",
            "",
            "NoSchedule",
            false
        ));
        assert!(!t(json!({"value": ""})));
    }

    #[test]
    fn comparison_operators_need_the_gate_and_strict_integers() {
        let t = |op: &str, tv: &str, taint_v: &str, gate: bool| {
            toleration_tolerates(
                &tol(json!({"key": "k", "operator": op, "value": tv})),
                "k",
                taint_v,
                "NoSchedule",
                gate,
            )
        };
        assert!(!t("Gt", "5", "10", false), "gate off by default: no match");
        assert!(t("Gt", "5", "10", true));
        let gt5 = tol(json!({"key": "k", "operator": "Gt", "value": "5"}));
        assert!(
            !tolerations_tolerate(&[gt5], "k", "10", "NoSchedule"),
            "the plugins run with the default gates"
        );
        assert!(!t("Gt", "5", "5", true));
        assert!(t("Lt", "5", "4", true));
        assert!(t("Lt", "0", "-3", true));
        assert!(!t("Lt", "5", "5", true));
        for bad in [
            "",
            "05",
            "+5",
            "-0",
            "-",
            "5.0",
            " 5",
            "99999999999999999999",
        ] {
            assert!(!t("Gt", bad, "10", true), "toleration value {bad:?}");
            assert!(!t("Lt", "10", bad, true), "taint value {bad:?}");
        }
    }

    #[test]
    fn filter_rejects_untolerated_no_schedule_and_no_execute() {
        let none = pod(json!([]));
        for effect in ["NoSchedule", "NoExecute"] {
            let s = filter(&none, &node(vec![taint("k", "v", effect)]));
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
            assert_eq!(s.message(), "node(s) had untolerated taint(s)");
        }
        assert!(filter(&none, &node(vec![taint("k", "v", "PreferNoSchedule")])).is_success());
        assert!(filter(&none, &node(vec![])).is_success());
    }

    #[test]
    fn filter_needs_every_taint_tolerated() {
        let n = node(vec![
            taint("a", "1", "NoSchedule"),
            taint("b", "", "NoExecute"),
            taint("c", "x", "PreferNoSchedule"),
        ]);
        let only_a = pod(json!([{"key": "a", "value": "1", "effect": "NoSchedule"}]));
        assert_eq!(
            filter(&only_a, &n).message(),
            "node(s) had untolerated taint(s)"
        );
        let both = pod(json!([
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "operator": "Exists"}
        ]));
        assert!(filter(&both, &n).is_success());
        let everything = pod(json!([{"operator": "Exists"}]));
        assert!(filter(&everything, &n).is_success());
        let wrong_effect = pod(
            json!([{"key": "a", "operator": "Exists", "effect": "NoExecute"},
                                      {"key": "b", "operator": "Exists"}]),
        );
        assert!(filter(&wrong_effect, &n).is_rejection());
    }

    #[test]
    fn score_counts_untolerated_prefer_no_schedule_reversed() {
        let nodes = [
            node(vec![]),
            node(vec![taint("a", "", "PreferNoSchedule")]),
            node(vec![
                taint("a", "", "PreferNoSchedule"),
                taint("b", "", "PreferNoSchedule"),
                taint("c", "", "NoSchedule"),
            ]),
        ];
        assert_eq!(scores(&pod(json!([])), &nodes), [(0, 100), (1, 50), (2, 0)]);
        // Tolerating `a` (effect PreferNoSchedule or empty) removes it from the count;
        // a toleration with another effect does not count.
        let p = pod(
            json!([{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"},
                           {"key": "b", "operator": "Exists", "effect": "NoSchedule"}]),
        );
        assert_eq!(scores(&p, &nodes), [(0, 100), (0, 100), (1, 0)]);
        let p = pod(json!([{"operator": "Exists"}]));
        assert_eq!(scores(&p, &nodes), [(0, 100), (0, 100), (0, 100)]);
    }

    #[test]
    fn normalize_matches_default_normalize_score() {
        let mut s: Vec<NodeScore> = [0, 1, 3].map(NodeScore::value).to_vec();
        default_normalize_score(&mut s, false);
        assert_eq!(s.iter().map(|s| s.score).collect::<Vec<_>>(), [0, 33, 100]);
        let mut s: Vec<NodeScore> = [0, 1, 3].map(NodeScore::value).to_vec();
        default_normalize_score(&mut s, true);
        assert_eq!(s.iter().map(|s| s.score).collect::<Vec<_>>(), [100, 67, 0]);
        let mut s: Vec<NodeScore> = [0, 0].map(NodeScore::value).to_vec();
        default_normalize_score(&mut s, false);
        assert_eq!(s.iter().map(|s| s.score).collect::<Vec<_>>(), [0, 0]);
        default_normalize_score(&mut s, true);
        assert_eq!(s.iter().map(|s| s.score).collect::<Vec<_>>(), [100, 100]);
    }

    #[test]
    fn score_without_pre_score_is_an_error() {
        assert_eq!(
            score_without_pre_score(&TaintToleration).code(),
            Code::Error
        );
    }

    #[test]
    fn args_are_strict_and_empty() {
        assert_eq!(
            serde_yaml_ng::from_str::<TaintTolerationArgs>("{}").unwrap(),
            TaintTolerationArgs::default()
        );
        assert!(serde_yaml_ng::from_str::<TaintTolerationArgs>("{x: 1}").is_err());
        assert_eq!(
            serde_json::to_string(&TaintTolerationArgs::default()).unwrap(),
            "{}"
        );
    }
}
