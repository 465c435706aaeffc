//! One scheduling attempt for one pod over one snapshot: PreFilter, Filter,
//! PreScore, Score, NormalizeScore and the choice of a node. No I/O: the loop
//! around it assumes, binds and reports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cache::ClusterState;
use crate::framework::{Code, CycleState, Framework, NodeInfo, PodInfo, Status};

/// Where the pod should go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The chosen node.
    pub node: String,
    /// Nodes evaluated.
    pub evaluated: usize,
    /// Nodes that fit.
    pub feasible: usize,
}

/// Why the pod could not be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No node fits: "0/N nodes are available: ...". Retried on cluster events.
    Unschedulable {
        /// kube-scheduler's FitError message.
        message: String,
    },
    /// A plugin failed (`Error` status); retried with backoff.
    Error {
        /// What failed.
        message: String,
    },
}

impl Failure {
    /// The message for the event and the pod condition.
    pub fn message(&self) -> &str {
        match self {
            Failure::Unschedulable { message } | Failure::Error { message } => message,
        }
    }
}

/// Picks among equally good nodes in turn, so equal nodes share the load
/// deterministically instead of the first one by name taking every pod.
#[derive(Debug, Default)]
pub struct TieRotation(AtomicUsize);

impl TieRotation {
    fn pick(&self, ties: usize) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed) % ties.max(1)
    }
}

/// kube-scheduler's FitError text: the failing reasons counted over all
/// nodes, sorted, as "0/N nodes are available: 2 reason-a, 1 reason-b.".
pub fn fit_error_message(total: usize, statuses: &[Status]) -> String {
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for s in statuses {
        for r in s.reasons() {
            *histogram.entry(r.as_str()).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = histogram
        .into_iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    parts.sort();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

/// Runs one attempt for `pod` on every node of `cluster`.
pub fn schedule_one(
    framework: &Framework,
    pod: &PodInfo,
    cluster: &ClusterState,
    rotation: &TieRotation,
) -> Result<Placement, Failure> {
    let mut nodes: Vec<Arc<NodeInfo>> = cluster.nodes().cloned().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let total = nodes.len();
    if total == 0 {
        return Err(Failure::Unschedulable {
            message: "0/0 nodes are available: no nodes available to schedule pods.".into(),
        });
    }
    let mut state = CycleState::new();
    let pre = framework.pre_filter(&mut state, pod, cluster);
    if let Some(rejection) = &pre.rejection {
        return Err(match rejection.code() {
            Code::Error => Failure::Error {
                message: format!(
                    "running PreFilter plugin {:?}: {}",
                    rejection.plugin(),
                    rejection.message()
                ),
            },
            // kube-scheduler states a PreFilter rejection once, not per node.
            _ => Failure::Unschedulable {
                message: format!("0/{total} nodes are available: {}.", rejection.message()),
            },
        });
    }
    let verdicts = framework.filter_nodes(&state, &pre, pod, &nodes, cluster);
    let mut failures = Vec::new();
    let mut feasible = Vec::new();
    for (node, verdict) in nodes.into_iter().zip(verdicts) {
        match verdict {
            None => feasible.push(node),
            Some(s) if s.code() == Code::Error => {
                return Err(Failure::Error {
                    message: format!("running Filter plugin {:?}: {}", s.plugin(), s.message()),
                });
            }
            Some(s) => failures.push(s),
        }
    }
    if feasible.is_empty() {
        return Err(Failure::Unschedulable {
            message: fit_error_message(total, &failures),
        });
    }
    let count = feasible.len();
    if count == 1 {
        // kube-scheduler skips scoring when only one node fits.
        return Ok(Placement {
            node: feasible[0].name.clone(),
            evaluated: total,
            feasible: 1,
        });
    }
    let table = framework
        .score(&mut state, pod, &feasible, cluster)
        .map_err(|s| Failure::Error {
            message: format!("running Score plugin {:?}: {}", s.plugin(), s.message()),
        })?;
    let best = table.totals.iter().copied().max().unwrap_or(0);
    let ties: Vec<usize> = (0..count).filter(|&i| table.totals[i] == best).collect();
    let chosen = ties[rotation.pick(ties.len())];
    Ok(Placement {
        node: feasible[chosen].name.clone(),
        evaluated: total,
        feasible: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CompiledPolicy, parse};

    fn framework(policy: &str) -> Arc<Framework> {
        let p = CompiledPolicy::new(parse(policy, "t").unwrap());
        p.profile("s").unwrap().clone()
    }

    const CAPABILITY_AND_ZONES: &str = "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n  - name: CapabilityFilter\n    args: {rules: [{podAnnotation: hw, nodeLabel: hw, reason: no hw}]}\n  - name: ZoneSpread\n";

    fn cluster(nodes: &[(&str, &str, bool)]) -> ClusterState {
        let fw_dims =
            CompiledPolicy::new(parse(CAPABILITY_AND_ZONES, "t").unwrap()).count_dimensions();
        let mut c = ClusterState::with_dimensions(&fw_dims);
        for (name, zone, hw) in nodes {
            let mut labels = vec![("topology.kubernetes.io/zone", *zone)];
            if *hw {
                labels.push(("hw", "true"));
            }
            c.apply_node(NodeInfo::new(name, labels));
        }
        c
    }

    fn pod(hw: bool) -> PodInfo {
        let mut p = PodInfo {
            name: "p".into(),
            namespace: "ns".into(),
            ..Default::default()
        };
        if hw {
            p.annotations.insert("hw".into(), "true".into());
        }
        p
    }

    #[test]
    fn fit_error_counts_and_sorts_reasons() {
        let statuses = vec![
            Status::unschedulable("Insufficient cpu"),
            Status::unresolvable("node(s) had untolerated taint {a: b}"),
            Status::unschedulable("Insufficient cpu").with_reason("Insufficient memory"),
        ];
        assert_eq!(
            fit_error_message(4, &statuses),
            "0/4 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
        );
    }

    #[test]
    fn no_fit_reports_every_node() {
        let f = framework(CAPABILITY_AND_ZONES);
        let c = cluster(&[("a", "z1", false), ("b", "z2", false)]);
        let err = schedule_one(&f, &pod(true), &c, &TieRotation::default()).unwrap_err();
        assert_eq!(
            err,
            Failure::Unschedulable {
                message: "0/2 nodes are available: 2 no hw.".into()
            }
        );
        let empty = ClusterState::default();
        assert!(
            schedule_one(&f, &pod(false), &empty, &TieRotation::default())
                .unwrap_err()
                .message()
                .starts_with("0/0 nodes")
        );
    }

    #[test]
    fn pre_filter_rejection_is_stated_once() {
        let f = framework(
            "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n  - name: VolumeBinding\n",
        );
        let c = cluster(&[("a", "z1", false), ("b", "z2", false)]);
        let mut p = pod(false);
        p.spec = Arc::new(crate::framework::pod::PodSpecInfo {
            pvc_claims: vec!["data".into()],
            ..Default::default()
        });
        let err = schedule_one(&f, &p, &c, &TieRotation::default()).unwrap_err();
        let reason = crate::plugins::volume_binding::REASON_PREFIX;
        assert_eq!(
            err,
            Failure::Unschedulable {
                message: format!("0/2 nodes are available: {reason}: claim data.")
            }
        );
    }

    #[test]
    fn single_fit_is_taken_and_ties_rotate() {
        let f = framework(CAPABILITY_AND_ZONES);
        let c = cluster(&[("a", "z1", false), ("b", "z2", true), ("c", "z3", false)]);
        let placed = schedule_one(&f, &pod(true), &c, &TieRotation::default()).unwrap();
        assert_eq!(
            (placed.node.as_str(), placed.feasible, placed.evaluated),
            ("b", 1, 3)
        );
        let rotation = TieRotation::default();
        let picks: Vec<String> = (0..4)
            .map(|_| schedule_one(&f, &pod(false), &c, &rotation).unwrap().node)
            .collect();
        assert_eq!(
            picks,
            ["a", "b", "c", "a"],
            "equal empty zones share pods in turn"
        );
    }
}
