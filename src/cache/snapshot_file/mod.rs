//! Loads Nodes and Pods from a file instead of an API server: the zero-setup
//! way to run placer (`serve --snapshot`) and the input of `placer score`.
//!
//! Accepts multi-document YAML, a single JSON document, a `v1.List` (or
//! `NodeList`/`PodList`) with `items`, or a bare array of objects.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_yaml_ng::Value;

use crate::cache::ClusterState;
use crate::framework::{NodeInfo, PodInfo};

/// A snapshot file that could not be read or understood.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct SnapshotError {
    file: String,
    message: String,
}

/// The nodes and pods of a snapshot file.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Every Node.
    pub nodes: Vec<NodeInfo>,
    /// Every Pod (assigned or not).
    pub pods: Vec<PodInfo>,
}

impl Snapshot {
    /// Puts the nodes and pods into `state`.
    pub fn fill(self, state: &mut ClusterState) {
        state.replace_nodes(self.nodes);
        state.replace_pods(self.pods);
    }
}

/// Reads the snapshot at `path`.
pub fn load(path: &Path) -> Result<Snapshot, SnapshotError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SnapshotError {
        file: file.clone(),
        message: e.to_string(),
    })?;
    parse(&text).map_err(|message| SnapshotError { file, message })
}

/// Parses snapshot text (YAML or JSON).
pub fn parse(text: &str) -> Result<Snapshot, String> {
    let mut out = Snapshot::default();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = <Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| format!("document {}: {e}", i + 1))?;
        add(&mut out, value, &format!("document {}", i + 1))?;
    }
    Ok(out)
}

fn add(out: &mut Snapshot, value: Value, at: &str) -> Result<(), String> {
    match value {
        Value::Null => Ok(()),
        Value::Sequence(items) => {
            for (j, item) in items.into_iter().enumerate() {
                add(out, item, &format!("{at}, item {j}"))?;
            }
            Ok(())
        }
        Value::Mapping(_) => {
            let kind = value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match kind.as_str() {
                "Node" => {
                    let node: Node = serde_yaml_ng::from_value(value)
                        .map_err(|e| format!("{at} (Node): {e}"))?;
                    out.nodes.push(NodeInfo::from(&node));
                }
                "Pod" => {
                    let pod: Pod =
                        serde_yaml_ng::from_value(value).map_err(|e| format!("{at} (Pod): {e}"))?;
                    out.pods.push(PodInfo::from(&pod));
                }
                k if k == "List" || k.ends_with("List") => {
                    let items = value.get("items").cloned().unwrap_or(Value::Null);
                    if !matches!(items, Value::Sequence(_) | Value::Null) {
                        return Err(format!("{at} ({k}): items must be a list"));
                    }
                    add(out, items, at)?;
                }
                "" => return Err(format!("{at}: object has no kind")),
                other => {
                    return Err(format!(
                        "{at}: unsupported kind {other:?} (expected Node, Pod or List)"
                    ));
                }
            }
            Ok(())
        }
        _ => Err(format!("{at}: expected an object or a list")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_multi_document_yaml_and_lists() {
        let text = r#"
apiVersion: v1
kind: Node
metadata: {name: a, labels: {zone: z1}}
---
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: n}, spec: {nodeName: a, containers: []}}
  - {apiVersion: v1, kind: Node, metadata: {name: b}}
---
"#;
        let s = parse(text).unwrap();
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.pods[0].node_name.as_deref(), Some("a"));
    }

    #[test]
    fn reads_json_list() {
        let s = parse(r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}]}"#).unwrap();
        assert_eq!(s.nodes[0].name, "x");
    }

    #[test]
    fn errors_name_the_document() {
        let e = parse("kind: Node\nmetadata: {name: a}\n---\nkind: Service\n").unwrap_err();
        assert_eq!(
            e,
            "document 2: unsupported kind \"Service\" (expected Node, Pod or List)"
        );
        let e = parse("kind: Pod\nmetadata: {name: 5}\nspec: {containers: []}\n").unwrap_err();
        assert!(e.starts_with("document 1 (Pod):"), "{e}");
    }
}
