//! The view of a node that plugins read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;

/// The fields of a node that placer's plugins use. Shared as `Arc<NodeInfo>`
/// between the cache and every request that looks at the node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
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
        }
    }

    /// The value of label `key`, if the node carries it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

impl From<&Node> for NodeInfo {
    fn from(node: &Node) -> Self {
        NodeInfo {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
        }
    }
}

/// Decodes a Node in Kubernetes' JSON form, keeping only what plugins need.
impl<'de> Deserialize<'de> for NodeInfo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(expecting = "a Node object")]
        struct Wire {
            metadata: Option<Meta>,
        }
        #[derive(Deserialize)]
        struct Meta {
            name: Option<String>,
            labels: Option<BTreeMap<String, String>>,
        }
        let meta = Wire::deserialize(d)?.metadata;
        Ok(NodeInfo {
            name: meta
                .as_ref()
                .and_then(|m| m.name.clone())
                .unwrap_or_default(),
            labels: meta.and_then(|m| m.labels).unwrap_or_default(),
        })
    }
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
}
