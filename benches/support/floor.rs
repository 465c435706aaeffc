//! The cost floor of the full-node shape (`nodeCacheCapable: false`): a
//! deliberately minimal but correct `/filter` and `/prioritize` for the
//! shipped policy's extender profile, which decodes only the names and the
//! three labels it needs from each node and echoes the raw node objects. It
//! is the full-node twin of the shared floor tool (which only takes
//! `NodeNames`), a measuring instrument, not code for placer: placer's
//! full-node path is judged as a ratio to it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::value::RawValue;

const ZONE: &str = "topology.kubernetes.io/zone";
const HW: &str = "node.kubernetes.io/hw-encrypt";
const HW_REASON: &str = "node(s) lack hardware encryption";

/// Non-terminal pods per (zone, priority), counted once from the snapshot.
pub struct FullFloor {
    counts: HashMap<String, HashMap<i64, i64>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<&'a str>,
    #[serde(borrow, default)]
    labels: BTreeMap<&'a str, &'a str>,
    #[serde(borrow, default)]
    annotations: BTreeMap<&'a str, &'a str>,
}

#[derive(Deserialize)]
struct Spec {
    #[serde(default)]
    priority: Option<i64>,
}

#[derive(Deserialize)]
struct Pod<'a> {
    #[serde(borrow)]
    metadata: Meta<'a>,
    spec: Spec,
}

/// A node's name and labels only (its annotations carry escaped JSON).
#[derive(Deserialize)]
struct NodeMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    labels: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Node<'a> {
    #[serde(borrow)]
    metadata: NodeMeta<'a>,
}

#[derive(Deserialize)]
struct List<'a> {
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow)]
    items: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct Args<'a> {
    #[serde(borrow)]
    Pod: Pod<'a>,
    #[serde(borrow)]
    Nodes: List<'a>,
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

impl FullFloor {
    /// Counts from the nodes' zones and the pods' (node, priority, phase).
    pub fn new<'a>(
        zones: impl IntoIterator<Item = (&'a str, &'a str)>,
        pods: impl IntoIterator<Item = (&'a str, i64, bool)>,
    ) -> Self {
        let zone_of: HashMap<&str, &str> = zones.into_iter().collect();
        let mut counts = HashMap::new();
        for (node, priority, terminal) in pods {
            if terminal {
                continue;
            }
            if let Some(zone) = zone_of.get(node) {
                *counts
                    .entry(zone.to_string())
                    .or_insert_with(HashMap::new)
                    .entry(priority)
                    .or_insert(0) += 1;
            }
        }
        FullFloor { counts }
    }

    /// `/filter` for a full-node body.
    // A method like `prioritize`, so both verbs are served from one floor value;
    // filtering needs none of the counts.
    #[allow(clippy::unused_self)]
    pub fn filter(&self, body: &[u8]) -> Vec<u8> {
        let a: Args = serde_json::from_slice(body).expect("floor: body");
        let needs = a
            .Pod
            .metadata
            .annotations
            .get("myorg.io/require-hw-encrypt")
            == Some(&"true");
        let mut pass = Vec::new();
        let mut unres = Vec::new();
        for raw in &a.Nodes.items {
            let n: Node = serde_json::from_str(raw.get()).expect("floor: node");
            let name = n.metadata.name.unwrap_or_default();
            if needs && n.metadata.labels.get(HW).map(|v| v.as_ref()) != Some("true") {
                unres.push(name);
            } else {
                pass.push(*raw);
            }
        }
        let mut out = Vec::with_capacity(body.len());
        out.extend_from_slice(b"{\"Nodes\":{\"metadata\":");
        out.extend_from_slice(a.Nodes.metadata.map_or("null", |m| m.get()).as_bytes());
        out.extend_from_slice(b",\"items\":[");
        for (i, raw) in pass.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(raw.get().as_bytes());
        }
        out.extend_from_slice(
            b"]},\"NodeNames\":null,\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{",
        );
        for (i, n) in unres.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_str(&mut out, n);
            out.push(b':');
            push_str(&mut out, HW_REASON);
        }
        out.extend_from_slice(b"},\"Error\":\"\"}");
        out
    }

    /// `/prioritize` for a full-node body.
    pub fn prioritize(&self, body: &[u8]) -> Vec<u8> {
        let a: Args = serde_json::from_slice(body).expect("floor: body");
        let prio = a.Pod.spec.priority.unwrap_or(0);
        let ls = a.Pod.metadata.labels.get("qos") == Some(&"latency-sensitive");
        let nodes: Vec<Node> = a
            .Nodes
            .items
            .iter()
            .map(|r| serde_json::from_str(r.get()).expect("floor: node"))
            .collect();
        let counts: Vec<Option<i64>> = nodes
            .iter()
            .map(|n| {
                let zone = n.metadata.labels.get(ZONE)?;
                let count = self.counts.get(zone.as_ref()).and_then(|c| c.get(&prio));
                Some(count.copied().unwrap_or(0))
            })
            .collect();
        let (mut mx, mut mn) = (i64::MIN, i64::MAX);
        for c in counts.iter().flatten() {
            mx = mx.max(*c);
            mn = mn.min(*c);
        }
        let mut out = Vec::with_capacity(nodes.len() * 48);
        out.push(b'[');
        for (i, n) in nodes.iter().enumerate() {
            let zs = match counts[i] {
                None => 0,
                Some(_) if mx == 0 => 100,
                Some(c) => 100 * (mx + mn - c) / mx,
            };
            let (total, wsum) = if ls {
                let nq = match n.metadata.labels.get("net").map(|v| v.as_ref()) {
                    Some("high") => 100,
                    Some("low") => 0,
                    _ => 10,
                };
                (2 * zs + nq, 3)
            } else {
                (2 * zs, 2)
            };
            let score = (20 * total + 100 * wsum) / (200 * wsum);
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"Host\":");
            push_str(&mut out, n.metadata.name.as_deref().unwrap_or(""));
            out.extend_from_slice(b",\"Score\":");
            out.extend_from_slice(score.to_string().as_bytes());
            out.push(b'}');
        }
        out.push(b']');
        out
    }
}
