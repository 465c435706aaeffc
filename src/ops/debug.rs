//! `/policy` (the policy in force, defaults filled), `/debug/zones` (what
//! the zone index holds) and `/debug/snapshot` (what the extender's
//! published snapshots cost), for operators checking what placer sees.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use std::sync::Arc;

use crate::cache::{Cache, ClusterState, CountDimension, PublishStats};
use crate::policy::Policy;
use crate::state::LivePolicy;

/// The effective policy as JSON.
pub async fn policy(State(policy): State<LivePolicy>) -> Json<Policy> {
    Json(policy.load().policy().clone())
}

/// One counting dimension and its zones.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DimensionView {
    /// The dimension (zone label, selector, namespace scoping).
    pub dimension: CountDimension,
    /// Zone → its numbers.
    pub zones: BTreeMap<String, ZoneView>,
    /// Nodes without the zone label.
    pub unzoned_nodes: usize,
}

/// One zone's numbers.
#[derive(Debug, Default, Serialize)]
pub struct ZoneView {
    /// Nodes in the zone.
    pub nodes: usize,
    /// Counted pods per key (priority, label values, namespace).
    pub pods: BTreeMap<String, u64>,
}

/// Per dimension and zone: node count and counted pods.
pub async fn zones(State(cache): State<Arc<Cache>>) -> Json<Vec<DimensionView>> {
    Json(zone_views(&cache.read()))
}

/// What publishing the extender's snapshots cost so far (how often a
/// request still held the spare buffer, how many nodes the syncs copied).
pub async fn snapshot(State(cache): State<Arc<Cache>>) -> Json<PublishStats> {
    Json(cache.publish_stats())
}

/// Builds the `/debug/zones` view (O(nodes + keys); not on the request path).
pub fn zone_views(cluster: &ClusterState) -> Vec<DimensionView> {
    let mut views: Vec<DimensionView> = cluster
        .zones()
        .dimensions()
        .map(|dim| {
            let mut zones: BTreeMap<String, ZoneView> = BTreeMap::new();
            let mut unzoned_nodes = 0;
            for node in cluster.nodes() {
                match node.label(&dim.zone_label) {
                    Some(z) => zones.entry(z.to_string()).or_default().nodes += 1,
                    None => unzoned_nodes += 1,
                }
            }
            for (key, counts) in cluster.zones().table(dim).into_iter().flatten() {
                for (zone, n) in counts {
                    zones
                        .entry(zone.clone())
                        .or_default()
                        .pods
                        .insert(key.describe(), *n);
                }
            }
            DimensionView {
                dimension: dim.clone(),
                zones,
                unzoned_nodes,
            }
        })
        .collect();
    views.sort_by(|a, b| format!("{:?}", a.dimension).cmp(&format!("{:?}", b.dimension)));
    views
}
