//! Per-zone counts of assigned pods, kept current on every watch event.
//!
//! ZoneSpread asks "how many pods like this one run in zone Z?" for every node
//! of a request. Counting pods at request time would cost O(pods); instead each
//! ZoneSpread configuration declares a [`CountDimension`] (which zone label,
//! which pods count as "like this one") and the index keeps, per dimension,
//! `key → zone → count`. A lookup is then two hash probes, independent of the
//! number of pods in the cluster.

use std::collections::HashMap;

use serde::Serialize;

use crate::objects::{NodeInfo, PodInfo};

/// Which pods count as "like the incoming pod" for a ZoneSpread configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum CountSelector {
    /// Every counted pod.
    All,
    /// Pods whose priority equals the incoming pod's (missing priority = 0).
    SamePriority,
    /// Pods whose values for these label keys equal the incoming pod's. A key
    /// absent on both pods counts as equal; absent on one only, as different.
    MatchLabelKeys(Vec<String>),
}

/// One way of counting pods per zone; the index keeps one table per dimension.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CountDimension {
    /// The node label whose value names the zone.
    pub zone_label: String,
    /// Which pods are alike.
    pub selector: CountSelector,
    /// Count only pods in the incoming pod's namespace.
    pub same_namespace: bool,
}

/// The bucket a pod falls into under one dimension. Two pods are "alike"
/// exactly when their keys are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountKey {
    namespace: Option<String>,
    value: KeyValue,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyValue {
    Any,
    Priority(i32),
    Labels(Vec<Option<String>>),
}

impl CountKey {
    /// A human-readable form for `/debug/zones`.
    pub fn describe(&self) -> String {
        let value = match &self.value {
            KeyValue::Any => "all".to_string(),
            KeyValue::Priority(p) => format!("priority={p}"),
            KeyValue::Labels(values) => values
                .iter()
                .map(|v| v.as_deref().unwrap_or("<absent>"))
                .collect::<Vec<_>>()
                .join(","),
        };
        match &self.namespace {
            Some(ns) => format!("{ns}/{value}"),
            None => value,
        }
    }
}

impl CountDimension {
    /// The bucket `pod` falls into under this dimension.
    pub fn key_for(&self, pod: &PodInfo) -> CountKey {
        let value = match &self.selector {
            CountSelector::All => KeyValue::Any,
            CountSelector::SamePriority => KeyValue::Priority(pod.priority),
            CountSelector::MatchLabelKeys(keys) => {
                KeyValue::Labels(keys.iter().map(|k| pod.labels.get(k).cloned()).collect())
            }
        };
        CountKey {
            namespace: self.same_namespace.then(|| pod.namespace.clone()),
            value,
        }
    }
}

/// Zone → count for one key of one dimension.
pub type ZoneCounts = HashMap<String, u64, foldhash::fast::RandomState>;

/// The counts of every configured dimension.
#[derive(Debug, Default, Clone)]
pub struct ZoneIndex {
    tables: HashMap<CountDimension, HashMap<CountKey, ZoneCounts>>,
}

impl ZoneIndex {
    /// The dimensions currently indexed.
    pub fn dimensions(&self) -> impl Iterator<Item = &CountDimension> {
        self.tables.keys()
    }

    /// True when exactly these dimensions are indexed.
    pub fn has_dimensions(&self, dims: &[CountDimension]) -> bool {
        dims.len() == self.tables.len() && dims.iter().all(|d| self.tables.contains_key(d))
    }

    /// Starts over with `dims` and no counts; the caller re-adds every pod.
    pub fn reset(&mut self, dims: &[CountDimension]) {
        self.tables = dims.iter().map(|d| (d.clone(), HashMap::new())).collect();
    }

    /// Drops all counts but keeps the dimensions.
    pub fn clear_counts(&mut self) {
        for table in self.tables.values_mut() {
            table.clear();
        }
    }

    /// Counts `pod` (running on `node`) in every dimension where the node has a zone.
    pub fn add(&mut self, pod: &PodInfo, node: &NodeInfo) {
        self.update(pod, node, true);
    }

    /// Reverses a previous [`ZoneIndex::add`] with the same pod and node.
    pub fn remove(&mut self, pod: &PodInfo, node: &NodeInfo) {
        self.update(pod, node, false);
    }

    fn update(&mut self, pod: &PodInfo, node: &NodeInfo, add: bool) {
        for (dim, table) in &mut self.tables {
            let Some(zone) = node.label(&dim.zone_label) else {
                continue;
            };
            let key = dim.key_for(pod);
            if add {
                *table
                    .entry(key)
                    .or_default()
                    .entry(zone.to_string())
                    .or_default() += 1;
            } else if let Some(zones) = table.get_mut(&key) {
                if let Some(count) = zones.get_mut(zone) {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        zones.remove(zone);
                    }
                }
                if zones.is_empty() {
                    table.remove(&key);
                }
            }
        }
    }

    /// Zone → count of the pods alike to `pod` under `dim`; `None` when no
    /// such pod is counted anywhere (or `dim` is not indexed).
    pub fn counts(&self, dim: &CountDimension, pod: &PodInfo) -> Option<&ZoneCounts> {
        self.tables.get(dim)?.get(&dim.key_for(pod))
    }

    /// Every key and its zone counts under `dim` (for `/debug/zones`).
    pub fn table(&self, dim: &CountDimension) -> Option<&HashMap<CountKey, ZoneCounts>> {
        self.tables.get(dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, prio: i32, labels: &[(&str, &str)]) -> PodInfo {
        PodInfo {
            name: "p".into(),
            namespace: ns.into(),
            priority: prio,
            labels: std::sync::Arc::new(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn dim(selector: CountSelector, same_namespace: bool) -> CountDimension {
        CountDimension {
            zone_label: "zone".into(),
            selector,
            same_namespace,
        }
    }

    #[test]
    fn counts_per_priority_and_removes_back_to_nothing() {
        let d = dim(CountSelector::SamePriority, false);
        let mut ix = ZoneIndex::default();
        ix.reset(std::slice::from_ref(&d));
        let a = NodeInfo::new("a", [("zone", "z1")]);
        let b = NodeInfo::new("b", [("zone", "z2")]);
        let unzoned = NodeInfo::new("c", [("other", "x")]);
        ix.add(&pod("n", 0, &[]), &a);
        ix.add(&pod("n", 0, &[]), &a);
        ix.add(&pod("n", 5, &[]), &b);
        ix.add(&pod("n", 0, &[]), &unzoned);
        let c = ix.counts(&d, &pod("x", 0, &[])).unwrap();
        assert_eq!(c.get("z1"), Some(&2));
        assert_eq!(c.get("z2"), None);
        ix.remove(&pod("n", 0, &[]), &a);
        ix.remove(&pod("n", 0, &[]), &a);
        assert!(ix.counts(&d, &pod("x", 0, &[])).is_none());
        assert_eq!(ix.counts(&d, &pod("x", 5, &[])).unwrap()["z2"], 1);
    }

    #[test]
    fn label_keys_and_namespace_partition_pods() {
        let d = dim(CountSelector::MatchLabelKeys(vec!["app".into()]), true);
        let mut ix = ZoneIndex::default();
        ix.reset(std::slice::from_ref(&d));
        let a = NodeInfo::new("a", [("zone", "z1")]);
        ix.add(&pod("n1", 0, &[("app", "web")]), &a);
        ix.add(&pod("n2", 0, &[("app", "web")]), &a);
        ix.add(&pod("n1", 0, &[("app", "db")]), &a);
        ix.add(&pod("n1", 0, &[]), &a);
        assert_eq!(
            ix.counts(&d, &pod("n1", 9, &[("app", "web")])).unwrap()["z1"],
            1
        );
        assert_eq!(ix.counts(&d, &pod("n1", 9, &[])).unwrap()["z1"], 1);
        assert!(ix.counts(&d, &pod("n3", 0, &[("app", "web")])).is_none());
    }

    #[test]
    fn all_selector_counts_everything() {
        let d = dim(CountSelector::All, false);
        let mut ix = ZoneIndex::default();
        ix.reset(std::slice::from_ref(&d));
        let a = NodeInfo::new("a", [("zone", "z1")]);
        ix.add(&pod("n1", 1, &[]), &a);
        ix.add(&pod("n2", 2, &[("app", "x")]), &a);
        assert_eq!(ix.counts(&d, &pod("q", 3, &[])).unwrap()["z1"], 2);
        assert!(ix.has_dimensions(std::slice::from_ref(&d)));
        ix.clear_counts();
        assert!(ix.counts(&d, &pod("q", 3, &[])).is_none());
    }
}
