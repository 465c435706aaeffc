//! Turning an `ExtenderArgs` body into what the framework runs on: the pod,
//! its profile, and the requested nodes resolved against the cache.

use std::collections::HashSet;
use std::sync::Arc;

use crate::cache::ClusterState;
use crate::framework::Framework;
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::pod_spec;
use crate::policy::CompiledPolicy;
use crate::protocol::{self, ExtenderArgs, Raw};

use super::error::ApiError;

/// How the scheduler sent the nodes, which decides how we answer.
pub enum Shape {
    /// `NodeNames` (nodeCacheCapable: true).
    Names,
    /// Full `Nodes` (nodeCacheCapable: false); the list metadata to echo.
    Full {
        /// The list's `metadata`, echoed unchanged.
        metadata: Option<Raw>,
    },
}

/// One requested node.
pub struct Requested {
    /// The name as requested.
    pub name: String,
    /// Its record; `None` when a requested name is not in the cache.
    pub node: Option<Arc<NodeInfo>>,
    /// The raw node object (full shape), echoed back unchanged.
    pub raw: Option<Raw>,
}

/// A decoded request.
pub struct Request {
    /// The pod.
    pub pod: PodInfo,
    /// The requested nodes, duplicates removed, in request order.
    pub nodes: Vec<Requested>,
    /// How they came.
    pub shape: Shape,
}

/// Decodes the pod and the node list; full nodes are decoded from their own
/// JSON, names are looked up in `cluster`.
pub fn decode(args: ExtenderArgs, cluster: &ClusterState) -> Result<Request, ApiError> {
    let pod = decode_pod(args.pod)?;
    let mut seen = HashSet::new();
    let (nodes, shape) = match (args.node_names, args.nodes) {
        (Some(names), _) => {
            let mut fresh = Vec::with_capacity(names.len());
            {
                let mut seen_names: HashSet<&str, foldhash::fast::RandomState> =
                    HashSet::with_capacity_and_hasher(names.len(), Default::default());
                fresh.extend(names.iter().map(|n| seen_names.insert(n.as_str())));
            }
            let nodes = names
                .into_iter()
                .zip(fresh)
                .filter(|(_, fresh)| *fresh)
                .map(|(name, _)| Requested {
                    node: cluster.node(&name).cloned(),
                    name,
                    raw: None,
                })
                .collect();
            (nodes, Shape::Names)
        }
        (None, Some(list)) => {
            let mut nodes = Vec::with_capacity(list.items.len());
            for (i, raw) in list.items.into_iter().enumerate() {
                let info: NodeInfo = protocol::from_raw(&raw, &format!("Nodes.items[{i}]"))
                    .map_err(ApiError::bad_json)?;
                if info.name.is_empty() {
                    return Err(ApiError::bad_request(format!(
                        "Nodes.items[{i}]: metadata.name is missing"
                    )));
                }
                if seen.insert(info.name.clone()) {
                    nodes.push(Requested {
                        name: info.name.clone(),
                        node: Some(Arc::new(info)),
                        raw: Some(raw),
                    });
                }
            }
            (
                nodes,
                Shape::Full {
                    metadata: list.metadata,
                },
            )
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "request has neither NodeNames nor Nodes (one of them must be set)",
            ));
        }
    };
    Ok(Request { pod, nodes, shape })
}

/// Decodes the `Pod` field; it is required by every verb that carries it.
/// A pod the API server would refuse is a bad request (see [`pod_spec`]).
pub fn decode_pod(raw: Option<Raw>) -> Result<PodInfo, ApiError> {
    let raw =
        raw.ok_or_else(|| ApiError::bad_request("Pod: missing (the pod to schedule is required)"))?;
    let pod: PodInfo = protocol::from_raw(&raw, "Pod").map_err(ApiError::bad_json)?;
    pod_spec::validate(&pod).map_err(|e| ApiError::bad_request(format!("Pod.{e}")))?;
    Ok(pod)
}

/// Answer while the initial node and pod lists are not in yet: every name
/// would look unknown, so say why instead of rejecting every node.
pub const NOT_SYNCED: &str =
    "placer's cache has not synced with the API server yet; the pod will be retried";

/// The profile for `pod`, or the domain error the scheduler should show.
pub fn profile_for(policy: &CompiledPolicy, pod: &PodInfo) -> Result<Arc<Framework>, String> {
    policy
        .profile_for_extender(&pod.scheduler_name)
        .cloned()
        .ok_or_else(|| {
            format!(
                "placer has no profile for schedulerName {:?} and the policy sets no extender.defaultProfile",
                pod.scheduler_name
            )
        })
}

impl Request {
    /// The nodes the cache or the request could resolve.
    pub fn known_nodes(&self) -> Vec<Arc<NodeInfo>> {
        self.nodes.iter().filter_map(|r| r.node.clone()).collect()
    }
}
