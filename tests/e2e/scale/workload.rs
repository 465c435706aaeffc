//! The cluster and the pods of the scale runs: kwok-managed nodes labelled like the shipped
//! policy expects, the initial pods bound to them, the measured pods, and the floor's snapshot.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::harness::kwok::KWOK_ANNOTATION;
use crate::harness::{PodBuilder, RUN_LABEL, TestEnv, ZONE_LABEL};

/// The shipped policy's capability: pods annotated so run only on nodes labelled so.
pub const HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";
pub const HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";
/// Zones the nodes are spread over, round-robin.
pub const ZONES: usize = 3;
/// Allocatable of every node: room for every size's pods with the requests below.
pub const NODE_PODS: usize = 110;
pub const NODE_MILLICPU: u64 = 32_000;
/// Requests of every pod.
pub const POD_MILLICPU: u64 = 100;
/// API creates in flight at once.
const CREATES_IN_FLIGHT: usize = 64;

/// How many nodes and measured pods a run has.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    pub nodes: usize,
    pub pods: usize,
}

impl Size {
    /// `NxM`, e.g. `1000x3000`.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let (n, m) = text
            .split_once('x')
            .with_context(|| format!("size {text:?} is not NODESxPODS"))?;
        Ok(Self {
            nodes: n
                .trim()
                .parse()
                .with_context(|| format!("nodes in {text:?}"))?,
            pods: m
                .trim()
                .parse()
                .with_context(|| format!("pods in {text:?}"))?,
        })
    }

    /// Initial pods, bound before any scheduler runs: one per five nodes (scheduler_perf's
    /// SchedulingBasic at 5,000 nodes starts with 1,000).
    pub fn initial_pods(self) -> usize {
        self.nodes / 5
    }

    /// How long one run may take to bind every pod: 60 s plus 20 ms per pod.
    pub fn run_timeout(self) -> Duration {
        Duration::from_secs(60) + Duration::from_millis(20 * self.pods as u64)
    }
}

/// The name of node `i` of the test.
pub fn node_name(env: &TestEnv, i: usize) -> String {
    env.name(&format!("n{i:05}"))
}

/// The zone (0 to [`ZONES`] − 1) of node `i`.
pub fn zone_of(i: usize) -> usize {
    i % ZONES
}

/// Whether node `i` has hardware encryption (every other node).
pub fn node_has_hw(i: usize) -> bool {
    i.is_multiple_of(2)
}

/// Node `i`: kwok's (annotation), no taints, no conditions yet (kwok's node-initialize stage makes
/// it Ready), zone round-robin, `net` high / low / unset in turn, hw-encrypt on every other node.
fn node(env: &TestEnv, i: usize) -> Node {
    let mut builder = env
        .node(&format!("n{i:05}"))
        .cpu(&(NODE_MILLICPU / 1000).to_string())
        .memory("256Gi")
        .label(ZONE_LABEL, &env.name(&format!("z{}", zone_of(i))));
    match i % 3 {
        0 => builder = builder.label("net", "high"),
        1 => builder = builder.label("net", "low"),
        _ => {}
    }
    if node_has_hw(i) {
        builder = builder.label(HW_LABEL, "true");
    }
    let mut node = builder.build();
    node.metadata.annotations = Some(BTreeMap::from([(
        KWOK_ANNOTATION.to_owned(),
        "fake".to_owned(),
    )]));
    if let Some(status) = node.status.as_mut() {
        status.conditions = None;
        for resources in [status.capacity.as_mut(), status.allocatable.as_mut()]
            .into_iter()
            .flatten()
        {
            resources.insert(
                "pods".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(NODE_PODS.to_string()),
            );
        }
    }
    node
}

/// Creates the objects of `items` with at most [`CREATES_IN_FLIGHT`] requests at once.
pub async fn create_all<K>(api: &Api<K>, items: Vec<K>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(items)
        .map(|item| {
            let api = api.clone();
            async move {
                let name = item.meta().name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &item)
                    .await
                    .with_context(|| format!("create {name}"))
            }
        })
        .buffer_unordered(CREATES_IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Creates the nodes and waits until kwok reports every one Ready.
pub async fn create_nodes(env: &TestEnv, size: Size) -> anyhow::Result<()> {
    let api = Api::<Node>::all(env.client().clone());
    create_all(&api, (0..size.nodes).map(|i| node(env, i)).collect()).await?;
    let params = ListParams::default().labels(&format!("{RUN_LABEL}={}", env.run_id()));
    let timeout = Duration::from_secs(60) + Duration::from_millis(20 * size.nodes as u64);
    env.poll("kwok to make every node Ready", timeout, || async {
        let ready = api
            .list(&params)
            .await?
            .items
            .iter()
            .filter(|n| is_ready(n))
            .count();
        Ok(if ready == size.nodes {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(format!("{ready} of {} Ready", size.nodes))
        })
    })
    .await
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Deletes the test's nodes (best effort: the control plane is thrown away at exit anyway, but
/// tests running after this one should not list thousands of foreign nodes).
pub async fn delete_nodes(env: &TestEnv) {
    let api = Api::<Node>::all(env.client().clone());
    let params = ListParams::default().labels(&format!("{RUN_LABEL}={}", env.run_id()));
    if let Err(e) = api
        .delete_collection(&DeleteParams::default(), &params)
        .await
    {
        eprintln!("scale: deleting the nodes failed: {e}");
    }
}

/// A measured pod `i` for `scheduler`: 100m CPU, 128 MiB, confined to the test's nodes; every
/// fourth latency-sensitive (NetQoS), every fifth asking for hardware encryption.
pub fn pod(env: &TestEnv, scheduler: &str, i: usize) -> Pod {
    let mut pod = PodBuilder::new(&format!("p-{i:05}"))
        .scheduler(scheduler)
        .node_selector(RUN_LABEL, env.run_id())
        .request("cpu", &format!("{POD_MILLICPU}m"))
        .request("memory", "128Mi");
    if i.is_multiple_of(4) {
        pod = pod.label("qos", "latency-sensitive");
    }
    if wants_hw(i) {
        pod = pod.annotation(HW_ANNOTATION, "true");
    }
    pod.build()
}

/// Whether measured pod `i` asks for hardware encryption (every fifth).
fn wants_hw(i: usize) -> bool {
    i.is_multiple_of(5)
}

/// Whether the measured pod named `name` asks for hardware encryption.
pub fn pod_wants_hw(name: &str) -> bool {
    name.strip_prefix("p-")
        .and_then(|i| i.parse::<usize>().ok())
        .is_some_and(wants_hw)
}

/// Creates the initial pods in `namespace`, already bound round-robin (no scheduler sees them),
/// and waits until kwok runs them all.
pub async fn create_initial_pods(env: &TestEnv, namespace: &str, size: Size) -> anyhow::Result<()> {
    env.create_namespace(namespace).await?;
    let api: Api<Pod> = Api::namespaced(env.client().clone(), namespace);
    let pods = (0..size.initial_pods())
        .map(|i| {
            PodBuilder::new(&format!("init-{i:05}"))
                .bound_to(&node_name(env, i % size.nodes))
                .request("cpu", &format!("{POD_MILLICPU}m"))
                .request("memory", "128Mi")
                .build()
        })
        .collect();
    create_all(&api, pods).await?;
    wait_running(env, namespace, size.initial_pods(), size.run_timeout()).await
}

/// Waits until `expected` pods of `namespace` are Running (kwok's pod-ready stage).
pub async fn wait_running(
    env: &TestEnv,
    namespace: &str,
    expected: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(env.client().clone(), namespace);
    let params = ListParams::default().fields("status.phase=Running");
    env.poll(
        &format!("{expected} pods Running in {namespace}"),
        timeout,
        || async {
            let running = api.list(&params).await?.items.len();
            Ok(if running >= expected {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("{running} Running"))
            })
        },
    )
    .await
}

/// Writes the test's nodes and the pods of `namespace` as a JSON `v1.List` (the floor's input).
pub async fn write_snapshot(env: &TestEnv, namespace: &str, path: &Path) -> anyhow::Result<()> {
    let params = ListParams::default().labels(&format!("{RUN_LABEL}={}", env.run_id()));
    let nodes = Api::<Node>::all(env.client().clone()).list(&params).await?;
    let pods = Api::<Pod>::namespaced(env.client().clone(), namespace)
        .list(&ListParams::default())
        .await?;
    ensure!(!nodes.items.is_empty(), "no nodes to snapshot");
    let mut items = Vec::new();
    for node in nodes.items {
        let mut v = serde_json::to_value(node)?;
        v["apiVersion"] = json!("v1");
        v["kind"] = json!("Node");
        items.push(v);
    }
    for pod in pods.items {
        let mut v = serde_json::to_value(pod)?;
        v["apiVersion"] = json!("v1");
        v["kind"] = json!("Pod");
        items.push(v);
    }
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": items });
    std::fs::write(path, serde_json::to_vec(&list)?)
        .with_context(|| format!("write {}", path.display()))
}
