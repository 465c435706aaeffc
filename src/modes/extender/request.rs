//! Turning an `ExtenderArgs` body into what the framework runs on: the pod,
//! its profile, and the requested nodes resolved against the cache.
//!
//! Two steps: [`decode`] needs no cache (the pod, the names or full nodes as
//! sent), so a verb runs it before taking the cache's read lock;
//! [`Request::resolve`] then looks the names up under the lock and hands out
//! the cache's records by reference, so a request touches no reference count
//! per node.

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

/// A decoded request, borrowing from its body; its nodes are not looked up yet.
pub struct Request<'a> {
    /// The pod.
    pub pod: PodInfo,
    /// How the nodes came.
    pub shape: Shape<'a>,
    sent: Sent<'a>,
}

/// The nodes as the request sent them.
enum Sent<'a> {
    /// `NodeNames`, as in the body (duplicates are removed by `resolve`).
    Names(Vec<Cow<'a, str>>),
    /// Full `Nodes`, decoded, first occurrences only.
    Full(Vec<FullNode<'a>>),
}

/// A node sent whole.
struct FullNode<'a> {
    /// Its name, owned: it was decoded, so it is escaped again on the way out.
    name: Cow<'a, str>,
    info: NodeInfo,
    raw: &'a RawValue,
}

/// One requested node.
pub struct Requested<'q> {
    /// The name as requested (borrowed from the body unless it had escapes).
    pub name: &'q Cow<'q, str>,
    /// False when a requested name is not in the cache.
    pub known: bool,
    /// The raw node object (full shape), echoed back unchanged.
    pub raw: Option<&'q RawValue>,
}

/// A request's nodes resolved: borrowing the request (`'q`) and the cache's
/// records (`'c`, the read guard), so a verb can let go of the guard once the
/// plugins ran and still answer from `nodes`.
pub struct Resolved<'q, 'c> {
    /// The requested nodes, duplicates removed, in request order.
    pub nodes: Vec<Requested<'q>>,
    /// The known ones' records, in the same order: what the plugins run on.
    pub known: Vec<&'c NodeInfo>,
}

/// Each of `nodes` with its position in [`Resolved::known`] (`None`: unknown).
pub fn with_positions<'r, 'q>(
    nodes: &'r [Requested<'q>],
) -> impl Iterator<Item = (&'r Requested<'q>, Option<usize>)> {
    let mut next = 0;
    nodes.iter().map(move |r| {
        let at = r.known.then(|| {
            next += 1;
            next - 1
        });
        (r, at)
    })
}

/// Which of `names` are first occurrences (kube-scheduler never repeats a
/// name, but a repeated one must not be answered twice).
fn first_occurrences<'n>(names: impl ExactSizeIterator<Item = &'n str>) -> Vec<bool> {
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(names.len(), Default::default());
    names.map(|n| seen.insert(n)).collect()
}

/// Sets bit `i` of `bits`; true if it was not set yet (or is out of range,
/// which the cache's index bound rules out).
fn first_time(bits: &mut [u64], i: usize) -> bool {
    let Some(word) = bits.get_mut(i / 64) else {
        return true;
    };
    let bit = 1u64 << (i % 64);
    let fresh = *word & bit == 0;
    *word |= bit;
    fresh
}

/// Decodes the pod and the node list (full nodes from their own JSON).
pub fn decode(args: ExtenderArgsRef<'_>) -> Result<Request<'_>, ApiError> {
    let pod = decode_pod(args.pod)?;
    let (sent, shape) = match (args.node_names, args.nodes) {
        (Some(names), _) => (Sent::Names(names), Shape::Names),
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
                .map(|((info, raw), _)| FullNode {
                    name: Cow::Owned(info.name.clone()),
                    info,
                    raw,
                })
                .collect();
            (
                Sent::Full(nodes),
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
    Ok(Request { pod, shape, sent })
}

impl Request<'_> {
    /// Looks the requested names up in `cluster` (full nodes are their own
    /// records) and drops repeated ones.
    pub fn resolve<'q, 'c>(&'q self, cluster: &'c ClusterState) -> Resolved<'q, 'c>
    where
        'q: 'c,
    {
        match &self.sent {
            Sent::Names(names) => {
                // Known names are deduplicated by their node's index in the
                // cache, one bit each; only unknown names, rare, are
                // compared as strings.
                let mut seen = vec![0u64; cluster.node_index_bound().div_ceil(64)];
                let mut unknown: HashSet<&str> = HashSet::new();
                let mut nodes = Vec::with_capacity(names.len());
                let mut known = Vec::with_capacity(names.len());
                cluster.nodes_indexed_each(names, |name, node| {
                    let fresh = match node {
                        Some((i, _)) => first_time(&mut seen, i),
                        None => unknown.insert(&**name),
                    };
                    if fresh {
                        known.extend(node.map(|(_, n)| &**n));
                        nodes.push(Requested {
                            name,
                            known: node.is_some(),
                            raw: None,
                        });
                    }
                });
                Resolved { nodes, known }
            }
            Sent::Full(full) => Resolved {
                nodes: full
                    .iter()
                    .map(|f| Requested {
                        name: &f.name,
                        known: true,
                        raw: Some(f.raw),
                    })
                    .collect(),
                known: full.iter().map(|f| &f.info).collect(),
            },
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> NodeInfo {
        NodeInfo::new(name, Vec::<(String, String)>::new())
    }

    #[test]
    fn repeated_names_resolve_once_also_after_a_deleted_nodes_index_is_reused() {
        let mut cluster = ClusterState::default();
        cluster.apply_node(node("a"));
        cluster.apply_node(node("b"));
        cluster.delete_node("a");
        // "c" takes the index "a" had: a request naming both must still
        // tell them apart.
        cluster.apply_node(node("c"));
        let body = br#"{"Pod":{"metadata":{"name":"p"}},"NodeNames":["c","a","c","b","a","b"]}"#;
        let req = decode(protocol::from_slice(body).unwrap()).unwrap();
        let resolved = req.resolve(&cluster);
        let nodes: Vec<(&str, bool)> = resolved
            .nodes
            .iter()
            .map(|r| (&**r.name, r.known))
            .collect();
        assert_eq!(nodes, [("c", true), ("a", false), ("b", true)]);
        let known: Vec<&str> = resolved.known.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(known, ["c", "b"]);
        let at: Vec<Option<usize>> = with_positions(&resolved.nodes).map(|(_, at)| at).collect();
        assert_eq!(at, [Some(0), None, Some(1)]);
    }

    #[test]
    fn full_nodes_are_their_own_records_first_occurrence_kept() {
        let body = br#"{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[
            {"metadata":{"name":"x","labels":{"k":"1"}}},
            {"metadata":{"name":"x","labels":{"k":"2"}}},
            {"metadata":{"name":"y"}}]}}"#;
        let req = decode(protocol::from_slice(body).unwrap()).unwrap();
        let empty = ClusterState::default();
        let resolved = req.resolve(&empty);
        let known: Vec<(&str, Option<&str>)> = resolved
            .known
            .iter()
            .map(|n| (n.name.as_str(), n.label("k")))
            .collect();
        assert_eq!(known, [("x", Some("1")), ("y", None)]);
        assert!(resolved.nodes.iter().all(|r| r.known && r.raw.is_some()));
        assert!(matches!(resolved.nodes[0].name, Cow::Owned(_)));
    }
}
