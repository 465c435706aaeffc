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
use crate::k8s::pod_spec;
use crate::objects::{NodeInfo, PodInfo};
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

/// The pod decoded last, with its JSON. kube-scheduler sends one pod's
/// `/filter` and `/prioritize` one after the other with the pod's JSON
/// byte for byte the same, so the second decode is a compare and a clone.
/// Decoding is most of what a verb costs at 500 names when it starts from
/// cold caches, as it does between kube-scheduler's calls.
#[derive(Debug, Default)]
pub struct LastPod(parking_lot::Mutex<Option<(Box<str>, PodInfo)>>);

impl LastPod {
    /// [`decode_pod`], answered from the last pod when `raw` is its JSON.
    pub fn decode(&self, raw: Option<&RawValue>) -> Result<PodInfo, ApiError> {
        if let Some(raw) = raw
            && let Some((seen, pod)) = &*self.0.lock()
            && **seen == *raw.get()
        {
            return Ok(pod.clone());
        }
        let pod = decode_pod(raw)?;
        if let Some(raw) = raw {
            *self.0.lock() = Some((raw.get().into(), pod.clone()));
        }
        Ok(pod)
    }

    /// Forgets the last pod (benchmarks: a verb that must decode its pod,
    /// as the first of a pod's cycle does).
    pub fn forget(&self) {
        *self.0.lock() = None;
    }
}

/// Decodes the pod (through `last`) and the node list (full nodes from
/// their own JSON).
pub fn decode<'a>(args: ExtenderArgsRef<'a>, last: &LastPod) -> Result<Request<'a>, ApiError> {
    let pod = last.decode(args.pod)?;
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
        let req = decode(protocol::from_slice(body).unwrap(), &LastPod::default()).unwrap();
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
        let req = decode(protocol::from_slice(body).unwrap(), &LastPod::default()).unwrap();
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

    #[test]
    fn the_same_pod_json_is_decoded_once_and_other_json_anew() {
        let last = LastPod::default();
        let a = br#"{"Pod":{"metadata":{"name":"p","uid":"u1"},"spec":{"containers":[{"name":"c"}]}},"NodeNames":["x"]}"#;
        let b = br#"{"Pod":{"metadata":{"name":"p","uid":"u2"},"spec":{"containers":[{"name":"c"}]}},"NodeNames":["y"]}"#;
        let decode_with = |body: &[u8]| {
            decode(protocol::from_slice(body).unwrap(), &last)
                .unwrap()
                .pod
        };
        let first = decode_with(a);
        let again = decode_with(a);
        assert_eq!(first, again);
        // A clone of the memo shares its spec; a decode builds a new one.
        assert!(
            Arc::ptr_eq(&first.spec, &again.spec),
            "the same JSON is not decoded again"
        );
        let other = decode_with(b);
        assert_eq!(other.uid, "u2");
        assert!(!Arc::ptr_eq(&first.spec, &other.spec));
        // A pod that does not decode is refused each time: it is never
        // stored.
        let bad = br#"{"Pod":{"metadata":{"name":5}},"NodeNames":["x"]}"#;
        for _ in 0..2 {
            assert!(decode(protocol::from_slice(bad).unwrap(), &last).is_err());
        }
        assert_eq!(decode_with(b).uid, "u2");
    }
}
