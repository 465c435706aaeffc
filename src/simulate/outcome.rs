//! What a run reports: per pod the node or the FailedScheduling text, per
//! node and per zone the allocation of cpu, memory and extended resources,
//! and a summary (placed, pending by reason, evictions); as a table for the
//! terminal or as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::engine::Record;
use crate::cache::ClusterState;

/// The label nodes name their zone with.
const ZONE: &str = "topology.kubernetes.io/zone";

/// One pod's result.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodResult {
    /// `namespace/name`.
    pub pod: String,
    /// Where it runs at the end (ran, when it departed); absent when
    /// pending or evicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `Placed`, `Pending`, `Evicted` or `Departed`.
    pub state: &'static str,
    /// The FailedScheduling message of a pending pod; the preemptor of an
    /// evicted one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Requested and allocatable amounts of one resource.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Amount {
    /// Requested by the pods on it.
    pub requested: i64,
    /// Allocatable.
    pub allocatable: i64,
}

impl Amount {
    fn add(&mut self, other: Amount) {
        self.requested += other.requested;
        self.allocatable += other.allocatable;
    }
}

/// Allocation on one node or one zone. cpu in millicores, memory in bytes,
/// extended resources in their own units.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Allocation {
    /// The node's or the zone's name.
    pub name: String,
    /// The zone (nodes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Nodes (zones only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// Pods on it.
    pub pods: i64,
    /// Millicores.
    pub cpu: Amount,
    /// Bytes.
    pub memory: Amount,
    /// Extended resources by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, Amount>,
}

/// How many pending pods give one reason.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ReasonCount {
    /// The reason, without its node count ("Insufficient cpu").
    pub reason: String,
    /// Pending pods whose message gives it.
    pub pods: usize,
}

/// Totals of a run.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Pods of the workload.
    pub pods: usize,
    /// Placed and still there at the end.
    pub placed: usize,
    /// Never placed.
    pub pending: usize,
    /// Evicted by preemption.
    pub evicted: usize,
    /// Ran for their time and left (timed workloads).
    pub departed: usize,
    /// Pending pods by each reason their message gives ("Insufficient
    /// cpu"), most frequent first.
    pub pending_by_reason: Vec<ReasonCount>,
    /// Placed pods that waited (were not placed the moment they arrived).
    pub waited: usize,
    /// The longest wait of a placed pod, in simulated seconds.
    pub longest_wait_seconds: f64,
    /// Simulated time the run covered, in seconds.
    pub simulated_seconds: f64,
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Totals.
    pub summary: Summary,
    /// Every pod, in the order they arrived.
    pub pods: Vec<PodResult>,
    /// Every node, by name.
    pub nodes: Vec<Allocation>,
    /// Every zone, by name (nodes without the zone label under "").
    pub zones: Vec<Allocation>,
    /// `--max-of`: how many more copies of a pod fit afterwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_of: Option<super::capacity::MaxOf>,
    /// `--drain`: the nodes drained and the pods they held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drained: Option<Drained>,
    /// `--add-nodes`: how many nodes of a shape the workload needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub add_nodes: Option<super::answers::AddNodes>,
    /// `--compare-profile`: the same run with another policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<super::answers::Comparison>,
}

/// What `--drain` took away before the run.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Drained {
    /// Nodes cordoned.
    pub nodes: usize,
    /// Pods taken off them to be scheduled again.
    pub pods: usize,
}

impl Outcome {
    /// The report of `record` on the cluster as the run left it.
    pub fn new(record: &Record, cluster: &ClusterState) -> Self {
        let pods: Vec<PodResult> = record
            .pods
            .iter()
            .map(|r| {
                let (state, node, reason) = if r.departed {
                    ("Departed", r.node.clone(), None)
                } else if let Some(by) = &r.preempted_by {
                    ("Evicted", None, Some(format!("preempted by {by}")))
                } else if r.node.is_some() {
                    ("Placed", r.node.clone(), None)
                } else {
                    ("Pending", None, r.message.clone())
                };
                PodResult {
                    pod: r.key.clone(),
                    node,
                    state,
                    reason,
                }
            })
            .collect();
        let count = |s: &str| pods.iter().filter(|p| p.state == s).count();
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for p in pods.iter().filter(|p| p.state == "Pending") {
            for reason in reasons_of(p.reason.as_deref().unwrap_or("")) {
                *reasons.entry(reason).or_default() += 1;
            }
        }
        let mut pending_by_reason: Vec<ReasonCount> = reasons
            .into_iter()
            .map(|(reason, pods)| ReasonCount { reason, pods })
            .collect();
        pending_by_reason.sort_by(|a, b| b.pods.cmp(&a.pods).then_with(|| a.reason.cmp(&b.reason)));
        // A wait shorter than the queue's arrival spacing is no wait.
        let waits: Vec<f64> = record
            .pods
            .iter()
            .filter_map(|r| r.waited)
            .filter(|w| *w >= 0.001)
            .collect();
        let nodes = node_allocations(cluster);
        let zones = zone_allocations(&nodes);
        Outcome {
            summary: Summary {
                pods: pods.len(),
                placed: count("Placed"),
                pending: count("Pending"),
                evicted: count("Evicted"),
                departed: count("Departed"),
                pending_by_reason,
                waited: waits.len(),
                longest_wait_seconds: waits.iter().copied().fold(0.0, f64::max),
                simulated_seconds: record.simulated_seconds,
            },
            pods,
            nodes,
            zones,
            max_of: None,
            drained: None,
            add_nodes: None,
            compare: None,
        }
    }

    /// The report as aligned text.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let rows: Vec<Vec<String>> = self
            .pods
            .iter()
            .map(|p| {
                vec![
                    p.pod.clone(),
                    p.state.to_string(),
                    p.node.clone().unwrap_or_else(|| "-".into()),
                    p.reason.clone().unwrap_or_default(),
                ]
            })
            .collect();
        table(&mut out, &["POD", "STATE", "NODE", "REASON"], &rows);
        out.push('\n');
        let extended: Vec<String> = self
            .zones
            .iter()
            .flat_map(|z| z.extended.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut head = vec!["NODE", "ZONE", "PODS", "CPU", "MEMORY"];
        head.extend(extended.iter().map(String::as_str));
        let row = |a: &Allocation, first: Vec<String>| {
            let mut r = first;
            r.push(a.pods.to_string());
            r.push(cpu(a.cpu));
            r.push(memory(a.memory));
            for e in &extended {
                let x = a.extended.get(e).copied().unwrap_or_default();
                r.push(format!("{}/{}", x.requested, x.allocatable));
            }
            r
        };
        let rows: Vec<Vec<String>> = self
            .nodes
            .iter()
            .map(|n| {
                row(
                    n,
                    vec![n.name.clone(), n.zone.clone().unwrap_or_else(|| "-".into())],
                )
            })
            .collect();
        table(&mut out, &head, &rows);
        out.push('\n');
        head[0] = "ZONE";
        head[1] = "NODES";
        let rows: Vec<Vec<String>> = self
            .zones
            .iter()
            .map(|z| {
                let name = if z.name.is_empty() {
                    "-".into()
                } else {
                    z.name.clone()
                };
                row(z, vec![name, z.nodes.unwrap_or(0).to_string()])
            })
            .collect();
        table(&mut out, &head, &rows);
        let s = &self.summary;
        let _ = writeln!(
            out,
            "\n{} pods: {} placed, {} pending, {} evicted, {} departed",
            s.pods, s.placed, s.pending, s.evicted, s.departed
        );
        if s.waited > 0 {
            let _ = writeln!(
                out,
                "  {} waited for room, the longest {}",
                s.waited,
                duration(s.longest_wait_seconds)
            );
        }
        for r in &s.pending_by_reason {
            let _ = writeln!(out, "  {} pending: {}", r.pods, r.reason);
        }
        self.capacity_lines(&mut out);
        out
    }

    /// The answers of the capacity flags, one paragraph each.
    fn capacity_lines(&self, out: &mut String) {
        if let Some(d) = &self.drained {
            let _ = writeln!(
                out,
                "\ndrained {} nodes; their {} pods were scheduled again first",
                d.nodes, d.pods
            );
        }
        if let Some(a) = &self.add_nodes {
            let _ = match a.count {
                Some(n) => writeln!(
                    out,
                    "\nadding {n} nodes like {} leaves no pod pending",
                    a.template
                ),
                None => writeln!(
                    out,
                    "\neven {} nodes like {} leave {} pods pending",
                    a.searched_up_to, a.template, a.still_pending
                ),
            };
        }
        if let Some(c) = &self.compare {
            let _ = writeln!(
                out,
                "\nwith {}: {} placed, {} pending, {} evicted; {} pods end differently",
                c.policy,
                c.placed,
                c.pending,
                c.evicted,
                c.differences.len()
            );
            if !c.differences.is_empty() {
                let rows: Vec<Vec<String>> = c
                    .differences
                    .iter()
                    .map(|d| vec![d.pod.clone(), d.this.clone(), d.other.clone()])
                    .collect();
                table(out, &["POD", "THIS", "OTHER"], &rows);
            }
        }
        if let Some(m) = &self.max_of {
            let _ = writeln!(
                out,
                "\n{}{} more of {} fit ({} nodes; counted by {})",
                if m.at_least { "at least " } else { "" },
                m.count,
                m.pod,
                m.nodes.len(),
                m.method
            );
        }
    }
}

/// The reasons a FailedScheduling message gives, without their node
/// counts: "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had
/// untolerated taint {a: b}. preemption: ..." gives "Insufficient cpu" and
/// "node(s) had untolerated taint {a: b}". A message of another shape is
/// its own reason.
pub fn reasons_of(message: &str) -> Vec<String> {
    let Some((_, list)) = message.split_once(" nodes are available: ") else {
        return vec![message.to_string()];
    };
    let list = list
        .split(". ")
        .next()
        .unwrap_or(list)
        .trim_end_matches('.');
    list.split(", ")
        .map(|r| {
            let r = r.trim();
            match r.split_once(' ') {
                Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest.to_string(),
                _ => r.to_string(),
            }
        })
        .collect()
}

fn node_allocations(cluster: &ClusterState) -> Vec<Allocation> {
    let mut nodes: Vec<Allocation> = cluster
        .nodes()
        .map(|n| {
            let usage = cluster.usage_of(n);
            let requested = usage.map(|u| u.requested.clone()).unwrap_or_default();
            let amount = |r: i64, a: i64| Amount {
                requested: r,
                allocatable: a,
            };
            let mut extended = BTreeMap::new();
            for (name, a) in &n.allocatable.scalar {
                let r = requested.scalar.get(name).copied().unwrap_or(0);
                extended.insert(name.clone(), amount(r, *a));
            }
            for (name, r) in &requested.scalar {
                extended.entry(name.clone()).or_insert(amount(*r, 0));
            }
            Allocation {
                name: n.name.clone(),
                zone: Some(n.labels.get(ZONE).unwrap_or("").to_string()).filter(|z| !z.is_empty()),
                nodes: None,
                pods: usage.map_or(0, |u| u.pods),
                cpu: amount(requested.milli_cpu, n.allocatable.milli_cpu),
                memory: amount(requested.memory, n.allocatable.memory),
                extended,
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

fn zone_allocations(nodes: &[Allocation]) -> Vec<Allocation> {
    let mut zones: BTreeMap<String, Allocation> = BTreeMap::new();
    for n in nodes {
        let name = n.zone.clone().unwrap_or_default();
        let z = zones.entry(name.clone()).or_insert_with(|| Allocation {
            name,
            nodes: Some(0),
            ..Allocation::default()
        });
        z.nodes = Some(z.nodes.unwrap_or(0) + 1);
        z.pods += n.pods;
        z.cpu.add(n.cpu);
        z.memory.add(n.memory);
        for (k, v) in &n.extended {
            z.extended.entry(k.clone()).or_default().add(*v);
        }
    }
    zones.into_values().collect()
}

/// `1.5/4` cores.
fn cpu(a: Amount) -> String {
    let cores = |m: i64| {
        if m % 1000 == 0 {
            (m / 1000).to_string()
        } else {
            format!("{}", m as f64 / 1000.0)
        }
    };
    format!("{}/{}", cores(a.requested), cores(a.allocatable))
}

/// `3Gi/8Gi`, in the largest binary unit that keeps one decimal honest.
fn memory(a: Amount) -> String {
    let unit = |b: i64| {
        const GI: f64 = (1u64 << 30) as f64;
        const MI: f64 = (1u64 << 20) as f64;
        let b = b as f64;
        if b == 0.0 {
            "0".to_string()
        } else if b >= GI {
            trim(format!("{:.1}", b / GI)) + "Gi"
        } else {
            trim(format!("{:.1}", b / MI)) + "Mi"
        }
    };
    format!("{}/{}", unit(a.requested), unit(a.allocatable))
}

/// `1h2m3s`, to the second.
fn duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

fn trim(s: String) -> String {
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

/// Left-aligned columns two spaces apart; the last column is not padded.
fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, c) in cells.enumerate() {
            if i + 1 < widths.len() {
                let _ = write!(text, "{c:<w$}  ", w = widths[i]);
            } else {
                text.push_str(c);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut head.iter().copied());
    for r in rows {
        line(&mut r.iter().map(String::as_str));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_drop_node_counts_and_preemption() {
        let m = "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {a: b}. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
        assert_eq!(
            reasons_of(m),
            ["Insufficient cpu", "node(s) had untolerated taint {a: b}"]
        );
        assert_eq!(reasons_of("no profile"), ["no profile"]);
    }

    #[test]
    fn amounts_print_in_cores_and_binary_units() {
        let a = |requested, allocatable| Amount {
            requested,
            allocatable,
        };
        assert_eq!(cpu(a(1500, 4000)), "1.5/4");
        assert_eq!(memory(a(3 << 30, 512 << 20)), "3Gi/512Mi");
        assert_eq!(memory(a(0, 1536 << 20)), "0/1.5Gi");
    }
}
