//! Turning an `ExtenderArgs` body into what the framework runs on: the pod,
//! its profile, and the requested nodes resolved against the cache.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::cache::ClusterState;
use crate::framework::Framework;
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::pod_spec;
use crate::policy::CompiledPolicy;
use crate::protocol::{self, ExtenderArgsRef};

use super::error::ApiError;

/// How the scheduler sent the nodes, which decides how we answer.
pub enum Shape<'a> {
    /// `NodeNames` (nodeCacheCapable: true).
    Names,
    /// Full `Nodes` (nodeCacheCapable: false); the list metadata to echo.
    Full {
        /// The list's `metadata`, echoed unchanged.
        metadata: Option<&'a RawValue>,
    },
}

/// One requested node.
pub struct Requested<'a> {
    /// The name as requested (borrowed from the body unless it had escapes).
    pub name: Cow<'a, str>,
    /// Its record; `None` when a requested name is not in the cache.
    pub node: Option<Arc<NodeInfo>>,
    /// The raw node object (full shape), echoed back unchanged.
    pub raw: Option<&'a RawValue>,
}

/// A decoded request, borrowing from its body.
pub struct Request<'a> {
    /// The pod.
    pub pod: PodInfo,
    /// The requested nodes, duplicates removed, in request order.
    pub nodes: Vec<Requested<'a>>,
    /// How they came.
    pub shape: Shape<'a>,
}

/// Which of `names` are first occurrences (kube-scheduler never repeats a
/// name, but a repeated one must not be answered twice).
fn first_occurrences<'n>(names: impl ExactSizeIterator<Item = &'n str>) -> Vec<bool> {
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(names.len(), Default::default());
    names.map(|n| seen.insert(n)).collect()
}

/// Decodes the pod and the node list; full nodes are decoded from their own
/// JSON, names are looked up in `cluster`.
pub fn decode<'a>(
    args: ExtenderArgsRef<'a>,
    cluster: &ClusterState,
) -> Result<Request<'a>, ApiError> {
    let pod = decode_pod(args.pod)?;
    let (nodes, shape) = match (args.node_names, args.nodes) {
        (Some(names), _) => {
            // Known names are deduplicated by their record (an integer
            // hash, not a second hash of every name); only unknown names,
            // rare, are compared as strings.
            let mut seen: HashSet<usize, foldhash::fast::RandomState> =
                HashSet::with_capacity_and_hasher(names.len(), Default::default());
            let mut unknown: HashSet<String> = HashSet::new();
            let mut nodes = Vec::with_capacity(names.len());
            for name in names {
                let node = cluster.node(&name);
                let fresh = match node {
                    Some(n) => seen.insert(Arc::as_ptr(n) as usize),
                    None => unknown.insert(name.to_string()),
                };
                if fresh {
                    nodes.push(Requested {
                        node: node.cloned(),
                        name,
                        raw: None,
                    });
                }
            }
            (nodes, Shape::Names)
        }
        (None, Some(list)) => {
            let mut infos = Vec::with_capacity(list.items.len());
            for (i, raw) in list.items.iter().enumerate() {
                let info: NodeInfo =
                    protocol::decode::from_raw_lazy(raw, || format!("Nodes.items[{i}]"))
                        .map_err(ApiError::bad_json)?;
                if info.name.is_empty() {
                    return Err(ApiError::bad_request(format!(
                        "Nodes.items[{i}]: metadata.name is missing"
                    )));
                }
                infos.push(info);
            }
            let fresh = first_occurrences(infos.iter().map(|n| n.name.as_str()));
            let nodes = infos
                .into_iter()
                .zip(list.items)
                .zip(fresh)
                .filter(|(_, fresh)| *fresh)
                .map(|((info, raw), _)| Requested {
                    name: Cow::Owned(info.name.clone()),
                    node: Some(Arc::new(info)),
                    raw: Some(raw),
                })
                .collect();
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
pub fn decode_pod(raw: Option<&RawValue>) -> Result<PodInfo, ApiError> {
    let raw =
        raw.ok_or_else(|| ApiError::bad_request("Pod: missing (the pod to schedule is required)"))?;
    let pod: PodInfo = protocol::from_raw(raw, "Pod").map_err(ApiError::bad_json)?;
    pod_spec::validate(&pod).map_err(|e| ApiError::bad_request(format!("Pod.{e}")))?;
    Ok(pod)
}

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

impl Request<'_> {
    /// The nodes the cache or the request could resolve.
    pub fn known_nodes(&self) -> Vec<Arc<NodeInfo>> {
        self.nodes.iter().filter_map(|r| r.node.clone()).collect()
    }
}
