//! The scheduler extender wire protocol, as kube-scheduler speaks it
//! (`k8s.io/kube-scheduler/extender/v1`).
//!
//! The Go types have no JSON tags, so keys are Go field names in PascalCase.
//! Every type here serializes every field, in Go's declaration order, and
//! decodes like Go: keys case-insensitively, unknown keys ignored, `null` the
//! same as absent. Kubernetes objects inside (Pod, Node) stay raw JSON until a
//! verb needs them, so nodes can be echoed back byte for byte.

pub mod borrowed;
pub mod decode;
pub mod encode;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;

pub use borrowed::{ExtenderArgsRef, NodeListRef};
use decode::wire_struct;
pub use decode::{DecodeError, from_raw, from_slice};

/// A raw JSON value kept as received.
pub type Raw = Box<RawValue>;

/// Node name → failure message.
pub type FailedNodesMap = BTreeMap<String, String>;

wire_struct! {
    /// A `v1.NodeList` as the scheduler sends it (`{"metadata":{},"items":[...]}`).
    pub struct NodeList {
        /// The list's metadata, echoed back unchanged.
        "metadata" => metadata: Option<Raw>,
        /// The Node objects, kept raw.
        "items" => items: Vec<Raw>,
    }
}

wire_struct! {
    /// The body of `/filter`, `/prioritize` and `/explain`.
    pub struct ExtenderArgs {
        /// The pod being scheduled (raw v1.Pod).
        "Pod" => pod: Option<Raw>,
        /// Full nodes (`nodeCacheCapable: false`).
        "Nodes" => nodes: Option<NodeList>,
        /// Node names (`nodeCacheCapable: true`).
        "NodeNames" => node_names: Option<Vec<String>>,
    }
}

wire_struct! {
    /// The answer to `/filter`.
    pub struct ExtenderFilterResult {
        /// The nodes that passed, when full nodes came in.
        "Nodes" => nodes: Option<NodeList>,
        /// The names that passed, when names came in.
        "NodeNames" => node_names: Option<Vec<String>>,
        /// Nodes that failed but that preemption could help.
        "FailedNodes" => failed_nodes: Option<FailedNodesMap>,
        /// Nodes that failed and that preemption cannot help.
        "FailedAndUnresolvableNodes" => failed_and_unresolvable_nodes: Option<FailedNodesMap>,
        /// A domain error; the scheduler shows it in the pod's event.
        "Error" => error: String,
    }
}

wire_struct! {
    /// One node's score in the `/prioritize` answer (a bare JSON array of these).
    #[derive(PartialEq, Eq)]
    pub struct HostPriority {
        /// Node name.
        "Host" => host: String,
        /// 0..=10.
        "Score" => score: i64,
    }
}

/// The answer to `/prioritize`.
pub type HostPriorityList = Vec<HostPriority>;

wire_struct! {
    /// The body of `/bind`.
    #[derive(PartialEq, Eq)]
    pub struct ExtenderBindingArgs {
        /// Pod name.
        "PodName" => pod_name: String,
        /// Pod namespace.
        "PodNamespace" => pod_namespace: String,
        /// Pod UID (a precondition of the binding).
        "PodUID" => pod_uid: String,
        /// Target node.
        "Node" => node: String,
    }
}

wire_struct! {
    /// The answer to `/bind`: empty `Error` = bound.
    #[derive(PartialEq, Eq)]
    pub struct ExtenderBindingResult {
        /// Why binding failed.
        "Error" => error: String,
    }
}

wire_struct! {
    /// A pod referenced by UID only.
    #[derive(PartialEq, Eq)]
    pub struct MetaPod {
        /// Pod UID.
        "UID" => uid: String,
    }
}

wire_struct! {
    /// Victims on one node, by UID.
    #[derive(PartialEq, Eq)]
    pub struct MetaVictims {
        /// The pods to evict.
        "Pods" => pods: Vec<MetaPod>,
        /// PodDisruptionBudget violations the eviction causes.
        "NumPDBViolations" => num_pdb_violations: i64,
    }
}

wire_struct! {
    /// Victims on one node, as full pods (`nodeCacheCapable: false`).
    pub struct Victims {
        /// The pods to evict (raw v1.Pod).
        "Pods" => pods: Vec<Raw>,
        /// PodDisruptionBudget violations the eviction causes.
        "NumPDBViolations" => num_pdb_violations: i64,
    }
}

wire_struct! {
    /// The body of `/preempt`.
    pub struct ExtenderPreemptionArgs {
        /// The preemptor (raw v1.Pod).
        "Pod" => pod: Option<Raw>,
        /// Candidates with full victim pods.
        "NodeNameToVictims" => node_name_to_victims: Option<BTreeMap<String, Victims>>,
        /// Candidates with victim UIDs.
        "NodeNameToMetaVictims" => node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
    }
}

wire_struct! {
    /// The answer to `/preempt`: the candidates placer keeps.
    #[derive(PartialEq, Eq)]
    pub struct ExtenderPreemptionResult {
        /// Node → victims; never `null` values.
        "NodeNameToMetaVictims" => node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
    }
}

/// `{"Error": "..."}`: the body of every non-200 answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// What went wrong.
    #[serde(rename = "Error")]
    pub error: &'a str,
}

#[cfg(test)]
mod tests;
