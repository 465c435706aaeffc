//! ImageLocality: prefer the node that already holds the pod's images, the
//! more so the larger they are and the fewer nodes hold them.
//! kube-scheduler's plugin of the same name
//! (`pkg/scheduler/framework/plugins/imagelocality/image_locality.go`), to
//! its integer score.
//!
//! **Score.** For each image of the pod's init containers, containers and
//! image volumes ([`crate::objects::pod::PodSpecInfo::images`], normalized:
//! an untagged name gets `:latest`) that the node holds (`status.images`),
//! the image's size times the share of the cluster's nodes holding it
//! (kube-scheduler's spread factor against "node heating"), truncated; the
//! sum is clamped to 23 MiB ..= 1000 MiB × the number of images and mapped
//! linearly onto 0..=100. The size is the one the first node to report the
//! image gave, as kube-scheduler's cache keeps it
//! ([`crate::cache::ImageState`]). No arguments.

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{CycleState, MAX_NODE_SCORE, NodeScore, ScorePlugin, Status};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "ImageLocality";

const MB: i64 = 1024 * 1024;
/// Below this sum a node scores 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per image, the sum at which a node scores 100.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// ImageLocality takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImageLocalityArgs {}

impl crate::framework::CacheNeeds for ImageLocalityArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct ImageLocality;

impl ImageLocality {
    /// Builds the plugin.
    pub fn new(_: &ImageLocalityArgs) -> Self {
        ImageLocality
    }
}

crate::plugin!(ImageLocality, NAME, [score]);

impl ScorePlugin for ImageLocality {
    fn score(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<NodeScore, Status> {
        Ok(PodImages::of(pod, cluster).score(node))
    }

    /// The pod's images are looked up in the cache's image table once per
    /// batch rather than on every node that holds them.
    fn score_batch(
        &self,
        _: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        cluster: &ClusterState,
        scores: &mut [NodeScore],
    ) -> Result<(), Status> {
        let images = PodImages::of(pod, cluster);
        for (slot, node) in scores.iter_mut().zip(nodes) {
            *slot = images.score(node);
        }
        Ok(())
    }
}

/// The pod's images, each with its size and how many nodes hold it when the
/// cache knows it, and the cluster's node count.
struct PodImages<'a> {
    images: Vec<(&'a str, Option<(i64, i64)>)>,
    /// The cluster's node count, at least 1, so that scoring against an
    /// empty cache never divides by zero.
    total: usize,
}

impl<'a> PodImages<'a> {
    fn of(pod: &'a PodInfo, cluster: &ClusterState) -> Self {
        let images = (pod.spec.images.iter())
            .map(|name| {
                let known = cluster.image(name).map(|s| (s.size, i64::from(s.nodes)));
                (&**name, known)
            })
            .collect();
        PodImages {
            images,
            total: cluster.node_count().max(1),
        }
    }

    /// `node`'s score: the spread-scaled sizes of the images it holds. An
    /// image the cache does not know counts the node's own size, on one node.
    fn score(&self, node: &NodeInfo) -> NodeScore {
        let sum: i64 = (self.images.iter())
            .filter(|(name, _)| node.images.contains(name))
            .map(|&(name, known)| {
                let (size, nodes) = known
                    .or_else(|| {
                        let own = node.images.iter().find(|(n, _)| &***n == name);
                        own.map(|(_, size)| (size, 1))
                    })
                    .unwrap_or((0, 0));
                scaled_image_score(size, nodes, self.total)
            })
            .sum();
        NodeScore::value(priority(sum, self.images.len()))
    }
}

/// `scaledImageScore`: the size times the spread, truncated as Go's `int64()`.
fn scaled_image_score(size: i64, nodes: i64, total: usize) -> i64 {
    let spread = nodes as f64 / total as f64;
    (size as f64 * spread) as i64
}

/// `calculatePriority`: the clamped sum mapped onto 0..=100.
fn priority(sum: i64, images: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD.saturating_mul(images as i64);
    let clamped = if sum < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else {
        sum.min(max)
    };
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::plugins::test_support::{self, pod_with_spec};

    /// A node with `status.images` given as `(names, size in MiB)`.
    fn node(name: &str, images: &[(&[&str], i64)]) -> NodeInfo {
        let images: Vec<Value> = images
            .iter()
            .map(|(names, mb)| json!({"names": names, "sizeBytes": mb * MB}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": name}, "status": {"images": images}}))
            .unwrap()
    }

    fn containers(images: &[&str]) -> Value {
        images
            .iter()
            .map(|i| json!({"name": "c", "image": i}))
            .collect()
    }

    fn scores(pod: &PodInfo, nodes: &[NodeInfo]) -> Vec<i64> {
        let mut c = ClusterState::default();
        for n in nodes {
            c.apply_node(n.clone());
        }
        let plugin = ImageLocality::new(&ImageLocalityArgs::default());
        let stored: Vec<Arc<NodeInfo>> = (nodes.iter())
            .map(|n| c.node(&n.name).map(Arc::clone).unwrap())
            .collect();
        let refs: Vec<&NodeInfo> = stored.iter().map(|n| &**n).collect();
        let state = CycleState::new();
        let scores = test_support::score_both_ways(&plugin, &state, pod, &refs, &c);
        scores.iter().map(|s| s.score).collect()
    }

    /// The cases of kube-scheduler's `TestImageLocalityPriority`
    /// (`image_locality_test.go`).
    #[test]
    fn scores_match_kube_schedulers_table() {
        let n403002000 = || {
            node(
                "node1",
                &[
                    (&["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
                    (&["gcr.io/300:latest", "gcr.io/300:v1"], 300),
                    (&["gcr.io/2000:latest"], 2000),
                ],
            )
        };
        let n25010 = || {
            node(
                "node2",
                &[
                    (&["gcr.io/250:latest"], 250),
                    (&["gcr.io/10:latest", "gcr.io/10:v1"], 10),
                ],
            )
        };
        let n60040900 = || {
            node(
                "node1",
                &[
                    (&["gcr.io/600:latest"], 600),
                    (&["gcr.io/40:latest"], 40),
                    (&["gcr.io/900:latest"], 900),
                ],
            )
        };
        let n300600900 = |name| {
            node(
                name,
                &[
                    (&["gcr.io/300:latest"], 300),
                    (&["gcr.io/600:latest"], 600),
                    (&["gcr.io/900:latest"], 900),
                ],
            )
        };
        let n400030 = |name| {
            node(
                name,
                &[(&["gcr.io/4000:latest"], 4000), (&["gcr.io/30:latest"], 30)],
            )
        };
        let n203040 = || {
            node(
                "node1",
                &[
                    (&["gcr.io/20:latest"], 20),
                    (&["gcr.io/30:latest"], 30),
                    (&["gcr.io/40:latest"], 40),
                ],
            )
        };
        let empty = || node("node3", &[]);
        let pod = |images: &[&str]| pod_with_spec(json!({"containers": containers(images)}));

        assert_eq!(
            scores(
                &pod(&["gcr.io/40", "gcr.io/250"]),
                &[n403002000(), n25010()]
            ),
            [0, 5]
        );
        assert_eq!(
            scores(
                &pod(&["gcr.io/40", "gcr.io/300"]),
                &[n403002000(), n25010()]
            ),
            [7, 0]
        );
        let min_max = pod(&["gcr.io/10", "gcr.io/4000"]);
        assert_eq!(scores(&min_max, &[n400030("node1"), n25010()]), [100, 0]);
        assert_eq!(
            scores(&min_max, &[n400030("node1"), n25010(), empty()]),
            [66, 0, 0]
        );
        let three = pod(&["gcr.io/300", "gcr.io/600", "gcr.io/900"]);
        assert_eq!(
            scores(&three, &[n60040900(), n300600900("node2"), empty()]),
            [32, 36, 0]
        );
        assert_eq!(
            scores(
                &pod(&["gcr.io/30", "gcr.io/40"]),
                &[n203040(), n400030("node2")]
            ),
            [1, 0]
        );
        // An image volume counts as an image, and so does an init container.
        let volume = pod_with_spec(json!({"containers": containers(&["gcr.io/30"]),
            "volumes": [{"name": "imageVolume", "image": {"reference": "gcr.io/300"}}]}));
        let as_containers = pod(&["gcr.io/30", "gcr.io/300"]);
        let init = pod_with_spec(json!({"containers": containers(&["gcr.io/30"]),
            "initContainers": containers(&["gcr.io/300"])}));
        for p in [volume, as_containers, init] {
            assert_eq!(scores(&p, &[n300600900("node1"), n400030("node2")]), [6, 0]);
        }
    }

    #[test]
    fn a_node_leaving_takes_its_share_of_the_spread() {
        let p = pod_with_spec(json!({"containers": containers(&["gcr.io/600"])}));
        let a = node("a", &[(&["gcr.io/600:latest"], 600)]);
        let b = node("b", &[(&["gcr.io/600:latest"], 600)]);
        let mut c = ClusterState::default();
        c.apply_node(a.clone());
        c.apply_node(b);
        let score = |c: &ClusterState| {
            let stored = c.node("a").map(Arc::clone).unwrap();
            ImageLocality
                .score(&CycleState::new(), &p, &stored, c)
                .unwrap()
                .score
        };
        // 600 MiB on both of two nodes: (600 - 23) / (1000 - 23).
        assert_eq!(score(&c), 59);
        assert_eq!(c.image("gcr.io/600:latest").map(|s| s.nodes), Some(2));
        // Names are one allocation across nodes.
        let name = |c: &ClusterState, n: &str| {
            let images = &c.node(n).unwrap().images;
            images.iter().next().map(|(s, _)| Arc::clone(s)).unwrap()
        };
        assert!(Arc::ptr_eq(&name(&c, "a"), &name(&c, "b")));
        c.delete_node("b");
        c.apply_node(node("b", &[]));
        // 600 MiB × 1/2 = 300: (300 - 23) / (1000 - 23).
        assert_eq!(score(&c), 28);
        c.delete_node("b");
        assert_eq!(score(&c), 59);
        c.delete_node("a");
        assert_eq!(c.image("gcr.io/600:latest"), None);
        // A relist counts the listed nodes' images afresh.
        c.apply_node(node("x", &[(&["gcr.io/600:latest"], 600)]));
        c.replace_nodes(vec![
            node("a", &[(&["gcr.io/600:latest"], 600)]),
            node("b", &[(&["gcr.io/600:latest"], 600)]),
        ]);
        assert_eq!(c.image("gcr.io/600:latest").map(|s| s.nodes), Some(2));
        assert!(Arc::ptr_eq(&name(&c, "a"), &name(&c, "b")));
    }

    #[test]
    fn no_images_scores_zero_and_args_are_strict() {
        let p = pod_with_spec(json!({"containers": []}));
        assert_eq!(scores(&p, &[node("n", &[(&["x:latest"], 500)])]), [0]);
        assert!(serde_yaml_ng::from_str::<ImageLocalityArgs>("x: 1").is_err());
    }
}
