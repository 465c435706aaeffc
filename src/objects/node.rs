//! The view of a node that plugins read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::objects::Resources;
use crate::objects::features::FeatureSet;
use crate::objects::images::NodeImages;
use crate::objects::inputs::NodeInputs;
use crate::objects::resources::LenientResources;

/// The fields of a node that placer's plugins use. Shared as `Arc<NodeInfo>`
/// between the cache and every request that looks at the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: Labels,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// `status.images`: names and sizes (names shared between nodes by the cache).
    pub images: NodeImages,
    /// `status.declaredFeatures`, as listed (the queueing hint compares lists).
    pub declared_features: Box<[String]>,
    /// The known features among them (`FeatureMapper.TryMap`).
    pub features: FeatureSet,
    /// The policy's label values as interned ids, filled by the cache.
    pub inputs: NodeInputs,
    /// Where the cache that stored this record keeps it, set by the cache.
    pub index: NodeIndex,
}

/// A node record's dense index in the cache that stored it, so that what
/// the cache keeps per node (the pods' usage) is one array access away from
/// the record instead of a hash of the name and a compare against a cold key
/// string per node and plugin in every attempt. Set by the cache while the
/// record is fresh and not shared yet; readers go through the cache, which
/// checks that the record at that index is this very record, so a record the
/// cache did not store (tests, dry runs, decoded requests) only costs the
/// name lookup.
#[derive(Debug, Clone, Copy)]
pub struct NodeIndex(u32);

impl NodeIndex {
    /// No cache stored the record.
    const UNSET: u32 = u32::MAX;

    /// Index `index` (the cache's).
    pub(crate) fn at(index: u32) -> Self {
        NodeIndex(index.min(Self::UNSET - 1))
    }

    /// The index, if a cache set one.
    pub fn get(self) -> Option<u32> {
        (self.0 != Self::UNSET).then_some(self.0)
    }
}

impl Default for NodeIndex {
    fn default() -> Self {
        NodeIndex(Self::UNSET)
    }
}

/// Where a record is kept says nothing about the node: the same node decoded
/// again compares equal to the stored record (a heartbeat changes nothing).
impl PartialEq for NodeIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl NodeInfo {
    /// A node with the given name and labels (tests and fixtures).
    pub fn new<K, V>(name: &str, labels: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        NodeInfo {
            name: name.to_string(),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            ..Default::default()
        }
    }

    /// The value of label `key`, if the node carries it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}

/// A node's labels in one allocation, sorted by key: a lookup binary-searches
/// keys that sit next to each other in memory instead of chasing one heap
/// pointer per compared key as a `BTreeMap<String, String>` does.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Every key followed by its value, in key order.
    text: Box<str>,
    /// Per label: (key start, value start, value end) in `text`.
    index: Box<[(u32, u32, u32)]>,
}

impl Labels {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let i = self
            .index
            .binary_search_by(|&(k, v, _)| self.text[k as usize..v as usize].cmp(key))
            .ok()?;
        let (_, v, e) = self.index[i];
        Some(&self.text[v as usize..e as usize])
    }

    /// Every (key, value), in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.index.iter().map(|&(k, v, e)| {
            (
                &self.text[k as usize..v as usize],
                &self.text[v as usize..e as usize],
            )
        })
    }

    /// True if the node carries label `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True without labels.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(map: BTreeMap<String, String>) -> Self {
        let mut text = String::with_capacity(map.iter().map(|(k, v)| k.len() + v.len()).sum());
        let mut index = Vec::with_capacity(map.len());
        for (k, v) in &map {
            let ks = text.len() as u32;
            text.push_str(k);
            let vs = text.len() as u32;
            text.push_str(v);
            index.push((ks, vs, text.len() as u32));
        }
        Labels {
            text: text.into_boxed_str(),
            index: index.into_boxed_slice(),
        }
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        iter.into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect::<BTreeMap<String, String>>()
            .into()
    }
}

impl From<&Node> for NodeInfo {
    /// A node the API server accepted; a quantity that still fails to parse
    /// counts as zero rather than failing the watch.
    fn from(node: &Node) -> Self {
        let spec = node.spec.as_ref();
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| Resources::from_list(a.iter().map(|(k, q)| (k.as_str(), q.0.as_str()))))
            .and_then(Result::ok)
            .unwrap_or_default();
        let images = NodeImages::from_entries(
            node.status
                .as_ref()
                .and_then(|s| s.images.as_ref())
                .into_iter()
                .flatten()
                .map(|i| (i.names.as_deref().unwrap_or(&[]), i.size_bytes.unwrap_or(0))),
        );
        let declared_features: Box<[String]> = node
            .status
            .as_ref()
            .and_then(|s| s.declared_features.clone())
            .unwrap_or_default()
            .into();
        NodeInfo {
            name: node.metadata.name.clone().unwrap_or_default(),
            features: FeatureSet::try_map(&declared_features),
            declared_features,
            labels: node.metadata.labels.clone().unwrap_or_default().into(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            allocatable,
            images,
            inputs: NodeInputs::default(),
            index: NodeIndex::default(),
        }
    }
}

/// Decodes a Node in Kubernetes' JSON form, keeping only what plugins need.
/// An unparsable allocatable quantity is an error with its position (an
/// extender request's node).
impl<'de> Deserialize<'de> for NodeInfo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        decode::<D, Resources, IgnoredAny>(d).map(|(node, _)| node)
    }
}

impl NodeInfo {
    /// Decodes a watched Node straight into its record, with its
    /// `metadata.resourceVersion`, skipping every field no plugin reads
    /// (conditions, addresses, `nodeInfo`, managed fields...). Reads what
    /// [`NodeInfo::from`] reads from k8s-openapi's `Node`, and as leniently:
    /// an unparsable allocatable quantity counts the whole list as zero.
    pub fn deserialize_watched<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<(Self, Option<String>), D::Error> {
        decode::<D, LenientResources, String>(d)
    }
}

impl From<LenientResources> for Resources {
    fn from(r: LenientResources) -> Self {
        r.0
    }
}

/// The fields of a Node's JSON that [`NodeInfo`] keeps, and the resource
/// version; `A` decodes the allocatable list (strictly as [`Resources`] or
/// leniently as [`LenientResources`]), `V` the version (`IgnoredAny` for an
/// extender request's nodes, which need none).
fn decode<'de, D, A, V>(d: D) -> Result<(NodeInfo, Option<V>), D::Error>
where
    D: serde::Deserializer<'de>,
    A: Into<Resources> + Deserialize<'de>,
    V: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(expecting = "a Node object")]
    #[serde(bound = "A: Deserialize<'de>, V: Deserialize<'de>")]
    struct Wire<A, V> {
        metadata: Option<Meta<V>>,
        spec: Option<Spec>,
        status: Option<Status<A>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[serde(bound = "V: Deserialize<'de>")]
    struct Meta<V> {
        name: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        resource_version: Option<V>,
    }
    #[derive(Deserialize)]
    struct Spec {
        unschedulable: Option<bool>,
        taints: Option<Vec<Taint>>,
    }
    #[derive(Deserialize)]
    #[serde(bound = "A: Deserialize<'de>")]
    struct Status<A> {
        allocatable: Option<A>,
        images: Option<Vec<Image>>,
        #[serde(rename = "declaredFeatures")]
        declared_features: Option<Vec<String>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Image {
        names: Option<Vec<String>>,
        size_bytes: Option<i64>,
    }
    let wire = Wire::<A, V>::deserialize(d)?;
    let (allocatable, images, declared_features) = match wire.status {
        Some(s) => (s.allocatable, s.images, s.declared_features),
        None => (None, None, None),
    };
    let declared_features: Box<[String]> = declared_features.unwrap_or_default().into();
    let images = NodeImages::from_entries(
        images
            .iter()
            .flatten()
            .map(|i| (i.names.as_deref().unwrap_or(&[]), i.size_bytes.unwrap_or(0))),
    );
    let (name, labels, resource_version) = match wire.metadata {
        Some(m) => (m.name, m.labels, m.resource_version),
        None => (None, None, None),
    };
    let spec = wire.spec;
    let node = NodeInfo {
        features: FeatureSet::try_map(&declared_features),
        declared_features,
        name: name.unwrap_or_default(),
        labels: labels.unwrap_or_default().into(),
        unschedulable: spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        taints: spec.and_then(|s| s.taints).unwrap_or_default(),
        allocatable: allocatable.map(Into::into).unwrap_or_default(),
        images,
        inputs: NodeInputs::default(),
        index: NodeIndex::default(),
    };
    Ok((node, resource_version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_node_json_ignoring_status() {
        let n: NodeInfo = serde_json::from_str(
            r#"{"metadata":{"name":"a","labels":{"net":"high"}},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}}}"#,
        )
        .unwrap();
        assert_eq!(n, NodeInfo::new("a", [("net", "high")]));
        assert_eq!(n.label("net"), Some("high"));
        assert_eq!(n.label("zone"), None);
    }

    #[test]
    fn wire_and_api_nodes_agree() {
        let json = serde_json::json!({
            "metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"},
                       "images": [{"names": ["reg/app@sha256:1", "reg/app:v1"], "sizeBytes": 300},
                                  {"names": ["pause:3.10"], "sizeBytes": 1}, {"sizeBytes": 5}],
                       "declaredFeatures": ["ExtendWebSocketsToKubelet", "NotYetKnown"]}
        });
        let wire: NodeInfo = serde_json::from_value(json.clone()).unwrap();
        let api: Node = serde_json::from_value(json).unwrap();
        assert_eq!(wire, NodeInfo::from(&api));
        assert!(wire.unschedulable);
        assert_eq!(wire.taints[0].effect, "NoSchedule");
        assert_eq!(
            (wire.allocatable.milli_cpu, wire.allocatable.pods),
            (7800, 110)
        );
        assert_eq!(
            wire.features.names().collect::<Vec<_>>(),
            ["ExtendWebSocketsToKubelet"]
        );
        assert_eq!(wire.declared_features.len(), 2);
        let images: Vec<(&str, i64)> = wire.images.iter().map(|(n, s)| (&**n, s)).collect();
        assert_eq!(
            images,
            [
                ("pause:3.10", 1),
                ("reg/app:v1", 300),
                ("reg/app@sha256:1", 300)
            ]
        );
    }
}
