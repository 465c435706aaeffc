//! The watches' lean decoders against k8s-openapi's, on the bytes a real API server sends.
//!
//! placer's watches decode nodes straight into its records (`LeanNode`) and pods without their
//! managed fields (`Lean<Pod>`); both must give exactly what the full API objects give. The test
//! makes a node and a bound pod with every field those records read, then decodes every node
//! and pod the shared cluster holds at that moment (the other tests' objects too) both ways.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Resource;
use placer::cache::lean::{Lean, LeanNode};
use placer::objects::{NodeInfo, PodInfo};

use crate::harness::TestEnv;

/// Every item of the cluster-wide list at `path`, each as the API server's own bytes.
async fn listed(env: &TestEnv, path: &str) -> anyhow::Result<Vec<String>> {
    let request = http::Request::get(path).body(Vec::new())?;
    let text = env.client().request_text(request).await?;
    let list: serde_json::Value = serde_json::from_str(&text)?;
    let items = list["items"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("{path}: no items in {text:.200}"))?;
    Ok(items.iter().map(|i| i.to_string()).collect())
}

#[tokio::test]
async fn lean_decoders_give_what_the_api_objects_give() -> anyhow::Result<()> {
    let env = TestEnv::new("lean").await?;
    let node = env
        .node("n1")
        .label("topology.kubernetes.io/zone", &env.name("z"))
        .taint("dedicated", "batch", "NoSchedule")
        .cpu("7800m")
        .memory("31Gi")
        .image(
            &["reg.example/app@sha256:1", "reg.example/app:v1"],
            300_000_000,
        );
    let names = env.create_nodes([node]).await?;
    env.create_pod(
        &env.pod("p1")
            .bound_to(&names[0])
            .label("app", "web")
            .annotation("example.com/note", "kept")
            .request("cpu", "250m")
            .request("memory", "64Mi"),
    )
    .await?;

    let nodes = listed(&env, "/api/v1/nodes").await?;
    let pods = listed(&env, "/api/v1/pods").await?;
    for text in &nodes {
        let lean: LeanNode = serde_json::from_str(text)?;
        let full: Node = serde_json::from_str(text)?;
        assert_eq!(lean.info, NodeInfo::from(&full), "node {text:.300}");
        assert_eq!(lean.meta().resource_version, full.metadata.resource_version);
    }
    for text in &pods {
        let lean: Lean<Pod> = serde_json::from_str(text)?;
        let full: Pod = serde_json::from_str(text)?;
        assert_eq!(
            PodInfo::from(&lean.0),
            PodInfo::from(&full),
            "pod {text:.300}"
        );
    }
    // The test's own objects were among them, with the fields the records read.
    let ours = nodes
        .iter()
        .find(|t| t.contains(&names[0]))
        .map(|t| serde_json::from_str::<LeanNode>(t))
        .transpose()?
        .ok_or_else(|| anyhow::anyhow!("{} not listed", names[0]))?;
    assert_eq!(ours.info.taints.len(), 1);
    assert_eq!(ours.info.allocatable.milli_cpu, 7800);
    assert_eq!(ours.info.images.iter().count(), 2);
    let namespace = format!("\"namespace\":\"{}\"", env.namespace());
    assert!(
        pods.iter()
            .any(|t| t.contains(&namespace) && t.contains("\"name\":\"p1\"")),
        "the test's pod was not listed"
    );
    Ok(())
}
