//! ZoneSpread: prefer nodes whose zone holds the fewest pods like this one
//! (or the most, with `reverse: true`, for bin-packing). design §5.1.
//!
//! Unlike the seed article, the count is per *zone* (not per node), it comes
//! from the cache's zone index (O(1) per node, whatever the number of pods),
//! it never saturates, and a node without the zone label scores 0 instead of
//! failing the cycle.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::{ClusterState, CountDimension, CountSelector};
use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin, Status,
};
use crate::k8s::fields::NonEmpty;
use crate::objects::inputs::{LabelSlot, NodeLabel};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "ZoneSpread";

/// Which pods are counted (policy spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum CountPods {
    /// Pods whose priority equals the incoming pod's.
    #[default]
    SamePriority,
    /// Every assigned, non-terminal pod.
    All,
    /// Pods whose `matchLabelKeys` values equal the incoming pod's.
    MatchLabelKeys,
}

/// Arguments of ZoneSpread, with defaults filled.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct ZoneSpreadArgs {
    /// Node label naming the zone.
    pub zone_label: NonEmpty,
    /// Prefer the fullest zone instead of the emptiest.
    pub reverse: bool,
    /// Which pods are counted.
    pub count_pods: CountPods,
    /// Label keys for `countPods: MatchLabelKeys`.
    pub match_label_keys: Vec<NonEmpty>,
    /// Count only pods in the incoming pod's namespace.
    pub same_namespace: bool,
}

impl Default for ZoneSpreadArgs {
    fn default() -> Self {
        ZoneSpreadArgs {
            zone_label: NonEmpty::from_static("topology.kubernetes.io/zone"),
            reverse: false,
            count_pods: CountPods::SamePriority,
            match_label_keys: Vec::new(),
            same_namespace: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    zone_label: Option<NonEmpty>,
    #[serde(default)]
    reverse: bool,
    #[serde(default)]
    count_pods: CountPods,
    #[serde(default)]
    match_label_keys: Vec<NonEmpty>,
    #[serde(default)]
    same_namespace: bool,
}

impl TryFrom<RawArgs> for ZoneSpreadArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        match (r.count_pods, r.match_label_keys.is_empty()) {
            (CountPods::MatchLabelKeys, true) => {
                return Err(
                    "matchLabelKeys: must list at least one key when countPods is MatchLabelKeys"
                        .into(),
                );
            }
            (CountPods::SamePriority | CountPods::All, false) => {
                return Err("matchLabelKeys: only allowed when countPods is MatchLabelKeys".into());
            }
            _ => {}
        }
        Ok(ZoneSpreadArgs {
            zone_label: r
                .zone_label
                .unwrap_or_else(|| ZoneSpreadArgs::default().zone_label),
            reverse: r.reverse,
            count_pods: r.count_pods,
            match_label_keys: r.match_label_keys,
            same_namespace: r.same_namespace,
        })
    }
}

impl ZoneSpreadArgs {
    /// The zone-index dimension these arguments count in.
    pub fn dimension(&self) -> CountDimension {
        CountDimension {
            zone_label: self.zone_label.to_string(),
            selector: match self.count_pods {
                CountPods::All => CountSelector::All,
                CountPods::SamePriority => CountSelector::SamePriority,
                CountPods::MatchLabelKeys => CountSelector::MatchLabelKeys(
                    self.match_label_keys
                        .iter()
                        .map(|k| k.to_string())
                        .collect(),
                ),
            },
            same_namespace: self.same_namespace,
        }
    }
}

/// The zone label is read on every node; the zone index counts in this
/// configuration's dimension.
impl crate::framework::CacheNeeds for ZoneSpreadArgs {
    fn node_label_keys(&self) -> Vec<String> {
        vec![self.zone_label.to_string()]
    }

    fn count_dimensions(&self) -> Vec<CountDimension> {
        vec![self.dimension()]
    }
}

/// The plugin.
pub struct ZoneSpread {
    dimension: CountDimension,
    reverse: bool,
    no_zone: Arc<str>,
}

/// Zone → count of pods alike to the current pod (written in PreScore), and
/// the same by the cache's interned zone id when it keeps the zone label inline.
struct ZoneCountsForPod {
    counts: crate::cache::zone_index::ZoneCounts,
    by_id: Option<(LabelSlot, Vec<(u32, u64)>)>,
}

impl ZoneSpread {
    /// Builds the plugin from its arguments.
    pub fn new(args: &ZoneSpreadArgs) -> Self {
        ZoneSpread {
            dimension: args.dimension(),
            reverse: args.reverse,
            no_zone: format!("node has no {} label: scores 0", args.zone_label).into(),
        }
    }

    /// A node's raw score: the pod's peers in its zone (no value without a zone).
    fn zone_count(
        &self,
        ZoneCountsForPod { counts, by_id }: &ZoneCountsForPod,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> NodeScore {
        if let Some((slot, ids)) = by_id {
            match node.inputs.get(*slot) {
                NodeLabel::Value(id) => {
                    let n = ids.iter().find(|(z, _)| *z == id).map_or(0, |(_, n)| *n);
                    return NodeScore::value(n as i64);
                }
                NodeLabel::Absent => return NodeScore::none(self.no_zone.clone()),
                NodeLabel::Unknown => {}
            }
        }
        match node.label(&self.dimension.zone_label) {
            None => NodeScore::none(self.no_zone.clone()),
            Some(zone) => NodeScore::value(counts.get(zone).copied().unwrap_or(0) as i64),
        }
    }
}

crate::plugin!(ZoneSpread, NAME, [pre_score, score]);

impl PreScorePlugin for ZoneSpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status {
        let counts = cluster
            .zones()
            .counts(&self.dimension, pod)
            .cloned()
            .unwrap_or_default();
        let slots = cluster.label_slots();
        let by_id = slots.slot(&self.dimension.zone_label).map(|slot| {
            let ids = counts
                .iter()
                .filter_map(|(zone, &n)| Some((slots.id(slot, zone)?, n)))
                .collect();
            (slot, ids)
        });
        state.write(ZoneCountsForPod { counts, by_id });
        Status::success()
    }
}

impl ScorePlugin for ZoneSpread {
    crate::score_from_pre_score!(ZoneCountsForPod, zone_count);

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let zoned = || scores.iter().filter_map(|s| s.raw);
        let (Some(max), Some(min)) = (zoned().max(), zoned().min()) else {
            return Status::success();
        };
        for s in scores.iter_mut() {
            let Some(c) = s.raw else { continue };
            s.score = match (max, self.reverse) {
                (0, _) => MAX_NODE_SCORE,
                (_, false) => MAX_NODE_SCORE * (max + min - c) / max,
                (_, true) => MAX_NODE_SCORE * c / max,
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_support::{PodBuilder, raw_and_score, score};

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn args(yaml: &str) -> ZoneSpreadArgs {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn pod(name: &str, node: &str, prio: i32) -> PodInfo {
        PodBuilder::new(name).priority(prio).on(node).build()
    }

    /// Zones z1..z3 with one node each, plus an unzoned node; `pods[i]` pods of
    /// priority 0 in zone i+1 and one pod of priority 9 in z3.
    fn cluster(a: &ZoneSpreadArgs, pods: [usize; 3]) -> (ClusterState, Vec<Arc<NodeInfo>>) {
        let mut c = ClusterState::with_dimensions(&[a.dimension()]);
        let mut nodes = Vec::new();
        for (i, n) in pods.iter().enumerate() {
            let node = NodeInfo::new(&format!("n{}", i + 1), [(ZONE, format!("z{}", i + 1))]);
            c.apply_node(node.clone());
            nodes.push(Arc::new(node));
            for k in 0..*n {
                c.apply_pod(pod(&format!("p{i}-{k}"), &format!("n{}", i + 1), 0));
            }
        }
        c.apply_pod(pod("other-priority", "n3", 9));
        let bare = NodeInfo::new("bare", [("x", "y")]);
        c.apply_node(bare.clone());
        nodes.push(Arc::new(bare));
        (c, nodes)
    }

    fn scores(
        a: &ZoneSpreadArgs,
        c: &ClusterState,
        nodes: &[Arc<NodeInfo>],
        p: &PodInfo,
    ) -> Vec<(Option<i64>, i64)> {
        let (s, scores) = score(&ZoneSpread::new(a), p, nodes, c);
        assert!(s.is_success());
        raw_and_score(&scores)
    }

    #[test]
    fn emptiest_zone_wins_and_counts_are_per_zone() {
        let a = ZoneSpreadArgs::default();
        let (c, nodes) = cluster(&a, [4, 1, 2]);
        let s = scores(&a, &c, &nodes, &pod("new", "", 0));
        // M=4, m=1: 100*(5-c)/4 → c=4:25, c=1:100, c=2:75; unzoned 0.
        assert_eq!(
            s,
            vec![(Some(4), 25), (Some(1), 100), (Some(2), 75), (None, 0)]
        );
    }

    #[test]
    fn reverse_prefers_the_fullest_zone() {
        let a = args("reverse: true");
        let (c, nodes) = cluster(&a, [4, 1, 2]);
        let s = scores(&a, &c, &nodes, &pod("new", "", 0));
        assert_eq!(
            s,
            vec![(Some(4), 100), (Some(1), 25), (Some(2), 50), (None, 0)]
        );
    }

    #[test]
    fn other_priorities_do_not_count_but_all_does() {
        let a = ZoneSpreadArgs::default();
        let (c, nodes) = cluster(&a, [0, 0, 0]);
        let s = scores(&a, &c, &nodes, &pod("new", "", 0));
        assert_eq!(
            s[..3],
            [(Some(0), 100), (Some(0), 100), (Some(0), 100)],
            "M = 0: every zoned node 100"
        );
        let s = scores(&a, &c, &nodes, &pod("new", "", 9));
        assert_eq!(
            s[2],
            (Some(1), 0),
            "the priority-9 pod counts for priority-9 pods"
        );
        let all = args("countPods: All");
        let (c, nodes) = cluster(&all, [1, 1, 1]);
        let s = scores(&all, &c, &nodes, &pod("new", "", 5));
        assert_eq!(s[2], (Some(2), 50));
    }

    #[test]
    fn no_saturation_at_one_hundred_pods() {
        let a = ZoneSpreadArgs::default();
        let (c, nodes) = cluster(&a, [150, 120, 0]);
        let s = scores(&a, &c, &nodes, &pod("new", "", 0));
        assert_eq!(s[..3], [(Some(150), 0), (Some(120), 20), (Some(0), 100)]);
    }

    #[test]
    fn unzoned_node_scores_zero_with_a_note() {
        let a = ZoneSpreadArgs::default();
        let (c, nodes) = cluster(&a, [1, 1, 1]);
        let plugin = ZoneSpread::new(&a);
        let mut state = CycleState::new();
        let p = pod("new", "", 0);
        plugin.pre_score(&mut state, &p, &[&*nodes[3]], &c);
        let s = plugin.score(&state, &p, &nodes[3], &c).unwrap();
        assert_eq!(s.score, 0);
        assert!(
            s.note
                .unwrap()
                .contains("no topology.kubernetes.io/zone label")
        );
    }

    #[test]
    fn args_validate_match_label_keys() {
        assert!(serde_yaml_ng::from_str::<ZoneSpreadArgs>("countPods: MatchLabelKeys").is_err());
        assert!(serde_yaml_ng::from_str::<ZoneSpreadArgs>("matchLabelKeys: [app]").is_err());
        assert!(serde_yaml_ng::from_str::<ZoneSpreadArgs>("zoneLabl: x").is_err());
        assert!(serde_yaml_ng::from_str::<ZoneSpreadArgs>("countPods: Some").is_err());
        let a = args("countPods: MatchLabelKeys\nmatchLabelKeys: [app]\nsameNamespace: true");
        assert_eq!(
            a.dimension().selector,
            CountSelector::MatchLabelKeys(vec!["app".into()])
        );
        assert!(a.dimension().same_namespace);
    }
}
