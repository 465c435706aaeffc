//! Loads Nodes and Pods from a file instead of an API server: the zero-setup
//! way to run placer (`serve --snapshot`) and the input of `placer score`.
//!
//! Accepts multi-document YAML, a single JSON document, a `v1.List` (or
//! `NodeList`/`PodList`) with `items`, or a bare array of objects.
//!
//! The file is checked as the API server would check what placer reads of
//! it (see [`validate`]): errors name `file:line:column`, the document, the
//! object and the field. A pod bound to a node the file does not hold is kept
//! (kube-scheduler tolerates pods on nodes it has not seen) and reported by
//! [`Snapshot::unknown_node_warning`].

mod stream;
pub mod validate;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;

use crate::cache::{ClusterState, read_pod};
use crate::objects::{NodeInfo, PodInfo};
use crate::yaml::{self, FieldPath, Mark};

/// A snapshot file that could not be read or understood.
#[derive(Debug, thiserror::Error)]
pub struct SnapshotError {
    file: String,
    /// Where in the file, when the problem has a place.
    position: Option<Mark>,
    message: String,
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(m) => write!(f, "{}:{}:{}: {}", self.file, m.line, m.column, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
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

    /// How many pods are bound to a node the snapshot does not hold, and the
    /// first of them, as a warning; `None` when every bound pod's node is there.
    /// Such pods are kept, as kube-scheduler keeps them, and count toward no node.
    pub fn unknown_node_warning(&self) -> Option<String> {
        let nodes: std::collections::HashSet<&str> =
            self.nodes.iter().map(|n| n.name.as_str()).collect();
        let mut unknown = self.pods.iter().filter_map(|p| {
            p.node_name
                .as_deref()
                .filter(|n| !nodes.contains(n))
                .map(|n| (p, n))
        });
        let (first, node) = unknown.next()?;
        let count = 1 + unknown.count();
        Some(format!(
            "{count} pod(s) bound to nodes not in the snapshot (first: {} on {node:?}); kept, they count toward no node",
            first.key()
        ))
    }
}

/// Reads the snapshot at `path`.
pub fn load(path: &Path) -> Result<Snapshot, SnapshotError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SnapshotError {
        file: file.clone(),
        position: None,
        message: e.to_string(),
    })?;
    parse(&text, &file)
}

/// Parses snapshot text (YAML or JSON); `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Snapshot, SnapshotError> {
    let error = |position, message| SnapshotError {
        file: file.to_string(),
        position,
        message,
    };
    yaml::check_limits(text).map_err(|e| error(Some(e.mark), e.message))?;
    let mut reader = Reader {
        text,
        out: Snapshot::default(),
        node_names: HashMap::new(),
        failure: None,
    };
    for (document, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let seed = stream::Document {
            reader: &mut reader,
            document,
        };
        if let Err(e) = serde::de::DeserializeSeed::deserialize(seed, de) {
            if let Some((position, message)) = reader.failure.take() {
                return Err(error(position, message));
            }
            let (position, message) = yaml::split_error(&e);
            return Err(error(
                position,
                format!("document {}: {message}", document + 1),
            ));
        }
    }
    Ok(reader.out)
}

/// Where an object sits: its document (0-based) and its path inside it
/// (`items[2]` in a List, empty for a document that is the object).
struct Place {
    document: usize,
    within: FieldPath,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document + 1)?;
        if !self.within.0.is_empty() {
            write!(f, ", {}", self.within)?;
        }
        Ok(())
    }
}

/// A problem's position (when it has one) and message.
type Failure = (Option<Mark>, String);

struct Reader<'a> {
    text: &'a str,
    out: Snapshot,
    /// Each node name seen, with where it was first.
    node_names: HashMap<String, String>,
    /// The problem that stopped a streamed document (see [`stream`]).
    failure: Option<Failure>,
}

impl Reader<'_> {
    fn add(&mut self, value: Value, at: &Place) -> Result<(), Failure> {
        match value {
            Value::Null => Ok(()),
            Value::Sequence(items) => self.add_items(items, at, &at.within),
            Value::Mapping(_) => {
                let kind = value
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                match kind.as_str() {
                    "Node" => self.add_node(value, at),
                    "Pod" => self.add_pod(value, at),
                    k if k == "List" || k.ends_with("List") => match take_items(value) {
                        Some(Value::Sequence(items)) => {
                            self.add_items(items, at, &at.within.key("items"))
                        }
                        None | Some(Value::Null) => Ok(()),
                        Some(_) => Err(self.fail(
                            at,
                            k,
                            &FieldPath::default().key("items"),
                            "must be a list",
                        )),
                    },
                    "" => Err(self.fail(at, "", &FieldPath::default(), "object has no kind")),
                    other => Err(self.fail(
                        at,
                        "",
                        &FieldPath::default().key("kind"),
                        &format!("unsupported kind {other:?} (expected Node, Pod or List)"),
                    )),
                }
            }
            _ => Err(self.fail(
                at,
                "",
                &FieldPath::default(),
                "expected an object or a list",
            )),
        }
    }

    fn add_items(
        &mut self,
        items: Vec<Value>,
        at: &Place,
        list: &FieldPath,
    ) -> Result<(), Failure> {
        for (j, item) in items.into_iter().enumerate() {
            let place = Place {
                document: at.document,
                within: list.index(j),
            };
            self.add(item, &place)?;
        }
        Ok(())
    }

    fn add_node(&mut self, value: Value, at: &Place) -> Result<(), Failure> {
        let label = object_label("Node", &value, false);
        let node: Node = self.decode(value, at, &label)?;
        validate::node(&node).map_err(|p| self.fail(at, &label, &p.field, &p.message))?;
        let info = NodeInfo::from(&node);
        let here = format!("{at}");
        if let Some(first) = self.node_names.get(&info.name) {
            let message = format!("duplicate node name (first in {first})");
            return Err(self.fail(
                at,
                &label,
                &FieldPath::default().key("metadata").key("name"),
                &message,
            ));
        }
        self.node_names.insert(info.name.clone(), here);
        self.out.nodes.push(info);
        Ok(())
    }

    fn add_pod(&mut self, value: Value, at: &Place) -> Result<(), Failure> {
        let label = object_label("Pod", &value, true);
        let pod: Pod = self.decode(value, at, &label)?;
        validate::pod(&pod).map_err(|p| self.fail(at, &label, &p.field, &p.message))?;
        self.out.pods.push(read_pod(&pod));
        Ok(())
    }

    /// Decodes an object, naming the field that does not decode.
    fn decode<T: DeserializeOwned>(
        &self,
        value: Value,
        at: &Place,
        label: &str,
    ) -> Result<T, Failure> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let field = FieldPath::from_tracked(e.path());
            let (_, message) = yaml::split_error(e.inner());
            self.fail(at, label, &field, &message)
        })
    }

    /// `document N[, items[j]][, Kind "name"]: field: message`, at the
    /// field's position (or that of its closest ancestor in the file).
    fn fail(&self, at: &Place, label: &str, field: &FieldPath, message: &str) -> Failure {
        let position = yaml::locate(self.text, at.document, &at.within.join(field).0);
        let mut text = at.to_string();
        if !label.is_empty() {
            text.push_str(&format!(", {label}"));
        }
        if !field.0.is_empty() {
            text.push_str(&format!(": {field}"));
        }
        text.push_str(&format!(": {message}"));
        (position, text)
    }
}

/// A List's `items`, moved out rather than copied (a snapshot may be large).
fn take_items(list: Value) -> Option<Value> {
    match list {
        Value::Mapping(mut m) => m.remove("items"),
        _ => None,
    }
}

/// `Node "a"`, `Pod "ns/p"`, or the bare kind for an object without a name.
fn object_label(kind: &str, value: &Value, namespaced: bool) -> String {
    let meta = value.get("metadata");
    let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    match (text("name"), text("namespace")) {
        (Some(name), Some(ns)) if namespaced => format!("{kind} \"{ns}/{name}\""),
        (Some(name), _) => format!("{kind} {name:?}"),
        (None, _) => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Snapshot {
        parse(text, "s.yaml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> String {
        parse(text, "s.yaml").unwrap_err().to_string()
    }

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
        let s = ok(text);
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.pods[0].node_name.as_deref(), Some("a"));
        assert_eq!(s.unknown_node_warning(), None);
    }

    #[test]
    fn bound_pods_share_equal_specs_and_labels_as_they_are_read() {
        // Before the state holds them: a whole snapshot of copies, shared
        // only later, would leave the freed copies between live records.
        let pod = |name: &str, node: &str, app: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"n","labels":{{"app":"{app}"}}}},"spec":{{"nodeName":{node},"containers":[{{"name":"c","image":"i"}}]}}}}"#
            )
        };
        let s = ok(&format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{},{},{},{}]}}"#,
            pod("a", r#""n1""#, "web"),
            pod("b", r#""n2""#, "web"),
            pod("c", r#""n2""#, "db"),
            pod("pending", "null", "web"),
        ));
        let [a, b, c, pending] = &s.pods[..] else {
            panic!("{} pods", s.pods.len())
        };
        assert!(std::sync::Arc::ptr_eq(&a.spec, &b.spec));
        assert!(std::sync::Arc::ptr_eq(&a.labels, &b.labels));
        assert!(std::sync::Arc::ptr_eq(&a.spec, &c.spec));
        assert!(!std::sync::Arc::ptr_eq(&a.labels, &c.labels));
        assert_eq!(c.labels["app"], "db");
        // A pending pod is not counted, so it keeps its own records.
        assert!(!std::sync::Arc::ptr_eq(&a.labels, &pending.labels));
    }

    #[test]
    fn reads_json_list() {
        let s = ok(
            r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}]}"#,
        );
        assert_eq!(s.nodes[0].name, "x");
    }

    #[test]
    fn errors_name_position_document_object_and_field() {
        assert_eq!(
            err("kind: Node\nmetadata: {name: a}\n---\nkind: Service\n"),
            "s.yaml:4:7: document 2: kind: unsupported kind \"Service\" (expected Node, Pod or List)"
        );
        let e = err("kind: Pod\nmetadata: {name: 5}\nspec: {containers: []}\n");
        assert!(
            e.starts_with("s.yaml:2:18: document 1, Pod: metadata.name: invalid type: integer `5`"),
            "{e}"
        );
        assert_eq!(
            err("kind: List\nitems: {a: 1}\n"),
            "s.yaml:2:8: document 1, List: items: must be a list"
        );
        assert!(err("a: [1\n").starts_with("s.yaml:2:1: document 1: "));
    }

    #[test]
    fn bad_quantities_are_errors_at_their_value() {
        let text = "\
kind: Node
metadata: {name: a}
status:
  capacity: {cpu: '8', memory: abc}
";
        assert_eq!(
            err(text),
            "s.yaml:4:32: document 1, Node \"a\": status.capacity.memory: invalid quantity \"abc\""
        );
        let text = "\
kind: Node
metadata: {name: a}
status:
  allocatable:
    cpu: 1e9999
";
        assert_eq!(
            err(text),
            "s.yaml:5:10: document 1, Node \"a\": status.allocatable.cpu: invalid quantity \"1e9999\""
        );
        let text = "\
kind: List
items:
  - kind: Pod
    metadata: {name: ok, namespace: n}
    spec: {containers: []}
  - kind: Pod
    metadata: {name: p, namespace: n}
    spec:
      containers:
        - name: c
          resources:
            limits: {cpu: '1'}
            requests: {cpu: '-1'}
";
        assert_eq!(
            err(text),
            "s.yaml:13:29: document 1, items[1], Pod \"n/p\": spec.containers[0].resources.requests.cpu: invalid value \"-1\": must be greater than or equal to 0"
        );
        let text =
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: [], overhead: {memory: -5Mi}}\n";
        assert_eq!(
            err(text),
            "s.yaml:3:43: document 1, Pod \"p\": spec.overhead.memory: invalid value \"-5Mi\": must be greater than or equal to 0"
        );
    }

    #[test]
    fn node_names_are_required_and_unique() {
        let text = "kind: Node\nmetadata: {name: a}\n---\n[{kind: Node, metadata: {name: b}}, {kind: Node, metadata: {name: a}}]\n";
        assert_eq!(
            err(text),
            "s.yaml:4:67: document 2, [1], Node \"a\": metadata.name: duplicate node name (first in document 1)"
        );
        assert_eq!(
            err("kind: Node\nmetadata: {labels: {a: b}}\n"),
            "s.yaml:2:11: document 1, Node: metadata.name: required value: a Node needs a name"
        );
        assert_eq!(
            err("kind: Node\n"),
            "s.yaml:1:1: document 1, Node: metadata.name: required value: a Node needs a name"
        );
    }

    #[test]
    fn pods_on_unknown_nodes_are_kept_and_counted() {
        let text = "\
kind: Node
metadata: {name: a}
---
{kind: Pod, metadata: {name: p1, namespace: n}, spec: {nodeName: gone, containers: []}}
---
{kind: Pod, metadata: {name: p2, namespace: n}, spec: {nodeName: a, containers: []}}
---
{kind: Pod, metadata: {name: p3, namespace: n}, spec: {nodeName: also-gone, containers: []}}
";
        let s = ok(text);
        assert_eq!(s.pods.len(), 3);
        assert_eq!(
            s.unknown_node_warning().as_deref(),
            Some(
                "2 pod(s) bound to nodes not in the snapshot (first: n/p1 on \"gone\"); kept, they count toward no node"
            )
        );
    }

    #[test]
    fn nesting_and_aliases_are_bounded() {
        let depth = 100_000;
        let text = format!(
            "kind: Node\nmetadata: {{name: a}}\nspec: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        // The document is level 1, so the 64th `[` (column 6 + 64) is level 65.
        assert_eq!(
            err(&text),
            "s.yaml:3:70: mappings and sequences nest deeper than 64 levels"
        );
        let big = "x".repeat(1 << 20);
        let mut text = format!(
            "kind: Node\nmetadata:\n  name: a\n  labels: {{a: &big {big}}}\n  annotations:\n"
        );
        for i in 0..2000 {
            text.push_str(&format!("    k{i}: *big\n"));
        }
        let e = err(&text);
        assert!(
            e.starts_with(&format!(
                "s.yaml:7:9: aliases expand to more than {} bytes",
                text.len()
            )),
            "{e}"
        );
    }
}
