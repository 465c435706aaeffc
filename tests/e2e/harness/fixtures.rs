//! Builders and helpers for the API objects tests create: `Node`s (schedulable without kubelets),
//! `Pod`s, `PriorityClass`es.
//!
//! Nodes carry their status at creation (the API accepts status on create): capacity and
//! allocatable for cpu, memory and `pods`, and a `Ready` condition. No kubelet or node controller
//! ever touches them, and the `TaintNodesByCondition` admission plugin is off, so they stay
//! schedulable. Pods are bare (no controllers run) and use an image that is never pulled.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::env::{RUN_LABEL, TestEnv};
use super::wait::SCHEDULING_TIMEOUT;

/// The image of every test pod; nothing runs it.
const POD_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// A Node to create: name, labels, taints and resources.
#[derive(Clone, Debug)]
pub struct NodeBuilder {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Value>,
    cpu: String,
    memory: String,
    /// `status.images` entries.
    images: Vec<Value>,
}

impl NodeBuilder {
    /// A linux/amd64 node named `name` with 8 CPUs, 32 GiB and room for 110 pods.
    pub fn new(name: &str) -> Self {
        let labels = [
            ("kubernetes.io/hostname", name),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
        ];
        Self {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            taints: Vec::new(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            images: Vec::new(),
        }
    }

    /// Adds (or replaces) a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds a taint, e.g. `taint("dedicated", "gpu", "NoSchedule")`.
    #[must_use]
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints
            .push(json!({ "key": key, "value": value, "effect": effect }));
        self
    }

    /// Sets CPU capacity and allocatable (a quantity, e.g. `"4"`).
    #[must_use]
    pub fn cpu(mut self, quantity: &str) -> Self {
        quantity.clone_into(&mut self.cpu);
        self
    }

    /// Sets memory capacity and allocatable (a quantity, e.g. `"16Gi"`).
    #[must_use]
    pub fn memory(mut self, quantity: &str) -> Self {
        quantity.clone_into(&mut self.memory);
        self
    }

    /// Adds a `status.images` entry: an image the node holds under `names`.
    #[must_use]
    pub fn image(mut self, names: &[&str], size_bytes: i64) -> Self {
        self.images
            .push(json!({ "names": names, "sizeBytes": size_bytes }));
        self
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Node object, status included.
    pub fn build(&self) -> Node {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let resources = json!({ "cpu": self.cpu, "memory": self.memory, "pods": "110" });
        serde_json::from_value(json!({
            "metadata": { "name": self.name, "labels": self.labels },
            "spec": { "taints": self.taints },
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "images": self.images,
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "placer e2e fake node", "lastHeartbeatTime": now, "lastTransitionTime": now,
                }],
                "nodeInfo": {
                    "architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.37.2",
                    "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                    "machineID": "", "osImage": "", "systemUUID": "",
                },
            },
        }))
        .expect("node JSON matches the Node schema")
    }
}

/// A bare Pod to create.
#[derive(Clone, Debug)]
pub struct PodBuilder {
    name: String,
    scheduler_name: Option<String>,
    node_selector: BTreeMap<String, String>,
    node_name: Option<String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    priority_class: Option<String>,
    requests: BTreeMap<String, String>,
}

impl PodBuilder {
    /// A pod named `name` with one container and no scheduling constraints.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            scheduler_name: None,
            node_selector: BTreeMap::new(),
            node_name: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            priority_class: None,
            requests: BTreeMap::new(),
        }
    }

    /// Sets `spec.schedulerName`.
    #[must_use]
    pub fn scheduler(mut self, name: &str) -> Self {
        self.scheduler_name = Some(name.to_owned());
        self
    }

    /// Adds a `nodeSelector` entry.
    #[must_use]
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets `spec.nodeName`: the pod is created already bound and no scheduler sees it.
    #[must_use]
    pub fn bound_to(mut self, node: &str) -> Self {
        self.node_name = Some(node.to_owned());
        self
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds an annotation.
    #[must_use]
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets `spec.priorityClassName` (the Priority admission plugin fills `spec.priority`).
    #[must_use]
    pub fn priority_class(mut self, name: &str) -> Self {
        self.priority_class = Some(name.to_owned());
        self
    }

    /// Adds a resource request, e.g. `request("cpu", "4")`.
    #[must_use]
    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        self.requests
            .insert(resource.to_owned(), quantity.to_owned());
        self
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Pod object.
    pub fn build(&self) -> Pod {
        // The API server takes no overcommit of extended resources and hugepages: their limit
        // must be given, equal to the request.
        let limits: BTreeMap<&String, &String> = self
            .requests
            .iter()
            .filter(|(name, _)| !matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage"))
            .collect();
        let mut spec = json!({
            "containers": [{ "name": "main", "image": POD_IMAGE,
                "resources": { "requests": self.requests, "limits": limits } }],
            "nodeSelector": self.node_selector,
            "terminationGracePeriodSeconds": 0,
        });
        if let Some(name) = &self.scheduler_name {
            spec["schedulerName"] = json!(name);
        }
        if let Some(node) = &self.node_name {
            spec["nodeName"] = json!(node);
        }
        if let Some(class) = &self.priority_class {
            spec["priorityClassName"] = json!(class);
        }
        serde_json::from_value(json!({
            "metadata": { "name": self.name, "labels": self.labels, "annotations": self.annotations },
            "spec": spec,
        }))
        .expect("pod JSON matches the Pod schema")
    }
}

impl TestEnv {
    /// A node named `<run id>-<suffix>` carrying the test's [`RUN_LABEL`].
    pub fn node(&self, suffix: &str) -> NodeBuilder {
        NodeBuilder::new(&self.name(suffix)).label(RUN_LABEL, self.run_id())
    }

    /// Creates the nodes; returns their names in order.
    pub async fn create_nodes(
        &self,
        nodes: impl IntoIterator<Item = NodeBuilder>,
    ) -> anyhow::Result<Vec<String>> {
        let api = Api::<Node>::all(self.client().clone());
        let mut names = Vec::new();
        for node in nodes {
            api.create(&PostParams::default(), &node.build())
                .await
                .with_context(|| format!("create node {}", node.name()))?;
            names.push(node.name().to_owned());
        }
        Ok(names)
    }

    /// Sets a label on an existing node (a merge patch of its metadata).
    pub async fn label_node(&self, node: &str, key: &str, value: &str) -> anyhow::Result<()> {
        let patch = json!({ "metadata": { "labels": { key: value } } });
        Api::<Node>::all(self.client().clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("label node {node} with {key}={value}"))?;
        Ok(())
    }

    /// A pod for the test's scheduler, confined to the test's nodes.
    pub fn pod(&self, name: &str) -> PodBuilder {
        PodBuilder::new(name)
            .scheduler(&self.scheduler_name())
            .node_selector(RUN_LABEL, self.run_id())
    }

    /// Creates the pod in the test's namespace.
    pub async fn create_pod(&self, pod: &PodBuilder) -> anyhow::Result<Pod> {
        self.pods()
            .create(&PostParams::default(), &pod.build())
            .await
            .with_context(|| format!("create pod {}/{}", self.namespace(), pod.name()))
    }

    /// Creates `count` pods named `<prefix>-<i>` already bound to `node`, each built by `template`
    /// from [`TestEnv::pod`] (e.g. to add a priority class or labels).
    pub async fn create_bound_pods(
        &self,
        prefix: &str,
        node: &str,
        count: usize,
        template: impl Fn(PodBuilder) -> PodBuilder,
    ) -> anyhow::Result<()> {
        for i in 0..count {
            let pod = template(self.pod(&format!("{prefix}-{i}")).bound_to(node));
            self.create_pod(&pod).await?;
        }
        Ok(())
    }

    /// Creates a `PriorityClass` `<run id>-<suffix>` with `value` and waits until pods may use
    /// it; returns its name.
    ///
    /// The `Priority` admission plugin resolves classes from an informer, so a pod created right
    /// after its class can be refused ("no PriorityClass with name ... was found"); a dry-run pod
    /// goes through the same admission and shows when the class is usable.
    pub async fn create_priority_class(&self, suffix: &str, value: i32) -> anyhow::Result<String> {
        let name = self.name(suffix);
        let class: PriorityClass = serde_json::from_value(json!({
            "metadata": { "name": name },
            "value": value,
            "description": "placer e2e test class",
        }))?;
        Api::<PriorityClass>::all(self.client().clone())
            .create(&PostParams::default(), &class)
            .await
            .with_context(|| format!("create priority class {name}"))?;
        let probe = self
            .pod("priority-class-probe")
            .priority_class(&name)
            .build();
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        self.poll_every(
            &format!("priority class {name} to be usable"),
            SCHEDULING_TIMEOUT,
            Duration::from_millis(50),
            || async {
                Ok(match self.pods().create(&dry_run, &probe).await {
                    Ok(_) => ControlFlow::Break(()),
                    Err(e) => ControlFlow::Continue(e.to_string()),
                })
            },
        )
        .await?;
        Ok(name)
    }

    /// Deletes pods immediately (grace period 0: no kubelet would ever confirm a graceful delete).
    pub async fn delete_pods(&self, names: &[&str]) -> anyhow::Result<()> {
        let params = DeleteParams::default().grace_period(0);
        for name in names {
            self.pods()
                .delete(name, &params)
                .await
                .with_context(|| format!("delete pod {name}"))?;
        }
        Ok(())
    }
}

/// An allocation of `driver`'s `device` in pool `node` (pools are named after their node) to
/// request `request`, usable on `node` only.
pub fn node_allocation(
    request: &str,
    driver: &str,
    node: &str,
    device: &str,
) -> anyhow::Result<k8s_openapi::api::resource::v1::AllocationResult> {
    Ok(serde_json::from_value(json!({
        "devices": { "results": [
            { "request": request, "driver": driver, "pool": node, "device": device },
        ] },
        "nodeSelector": { "nodeSelectorTerms": [{ "matchFields": [
            { "key": "metadata.name", "operator": "In", "values": [node] },
        ] }] },
    }))?)
}
