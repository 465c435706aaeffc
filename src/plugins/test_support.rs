//! Shared fixtures for the plugin unit tests: a pod builder, a cluster under
//! construction, and runners that drive one plugin through its extension
//! points the way the framework does, so each plugin's tests state only what
//! is particular to it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cache::ClusterState;
use crate::cache::events::{node_update, pod_update};
use crate::framework::queueing::{
    ActionType, Change, ClusterEvent, EventResource, Observed, QueueingHint, Registrations,
    queue_if,
};
use crate::framework::{
    Code, CycleState, FilterPlugin, NodeScore, Plugin, PreFilterExtensions, PreFilterPlugin,
    PreScorePlugin, ScorePlugin, Status,
};
use crate::objects::pod::{HostPort, PodSpecInfo, VolumeClaim};
use crate::objects::{NodeInfo, PodInfo, Resources};

/// The zone label the topology tests spread over.
pub(crate) const ZONE: &str = "topology.kubernetes.io/zone";
/// The hostname label, one domain per node.
pub(crate) const HOSTNAME: &str = "kubernetes.io/hostname";

/// A label (or annotation) map from pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Resources from `(name, quantity)` pairs, e.g. `[("cpu", "1")]`.
pub(crate) fn res(list: &[(&str, &str)]) -> Resources {
    Resources::from_list(list.iter().copied()).unwrap()
}

/// A pod decoded from its `spec` in kube-scheduler's JSON.
pub(crate) fn pod_with_spec(spec: serde_json::Value) -> PodInfo {
    serde_json::from_value(serde_json::json!({ "spec": spec })).unwrap()
}

/// The incoming pod `ns/incoming` with `labels` and `spec` in its JSON form.
pub(crate) fn incoming(ns: &str, labels: &[(&str, &str)], spec: serde_json::Value) -> PodInfo {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "incoming", "namespace": ns, "labels": labels},
        "spec": spec
    }))
    .unwrap()
}

/// Builds a [`PodInfo`]: `PodBuilder::new("p").on("n1").requests(&[("cpu", "1")]).build()`.
/// Pods live in namespace `ns` unless told otherwise.
pub(crate) struct PodBuilder {
    pod: PodInfo,
    spec: PodSpecInfo,
}

impl PodBuilder {
    /// Pod `ns/name`.
    pub(crate) fn new(name: &str) -> Self {
        PodBuilder {
            pod: PodInfo {
                name: name.into(),
                namespace: "ns".into(),
                ..Default::default()
            },
            spec: PodSpecInfo::default(),
        }
    }

    /// In namespace `ns`.
    pub(crate) fn namespace(mut self, ns: &str) -> Self {
        self.pod.namespace = ns.into();
        self
    }

    /// With `uid`.
    pub(crate) fn uid(mut self, uid: &str) -> Self {
        self.pod.uid = uid.into();
        self
    }

    /// With these labels.
    pub(crate) fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.pod.labels = labels(pairs).into();
        self
    }

    /// Bound to `node` (`None` or "" leaves it pending).
    pub(crate) fn on<'a>(mut self, node: impl Into<Option<&'a str>>) -> Self {
        self.pod.node_name = node.into().filter(|n| !n.is_empty()).map(str::to_string);
        self
    }

    /// With priority `priority`.
    pub(crate) fn priority(mut self, priority: i32) -> Self {
        self.pod.priority = priority;
        self
    }

    /// Requesting `list` as one container would: the non-zero defaults for
    /// cpu and memory are the pod's.
    pub(crate) fn requests(mut self, list: &[(&str, &str)]) -> Self {
        self.spec.requests = res(list);
        self.spec.counted = self.spec.requests.clone();
        self.spec.non_zero_requests = self.spec.requests.with_non_zero_defaults();
        self.spec.scoring_requests = self.spec.non_zero_requests.clone();
        self
    }

    /// Binding these host ports.
    pub(crate) fn host_ports(mut self, ports: Vec<HostPort>) -> Self {
        self.spec.host_ports = ports;
        self
    }

    /// Needing these claims.
    pub(crate) fn claims(mut self, claims: &[VolumeClaim]) -> Self {
        self.spec.pvc_claims = claims.to_vec();
        self
    }

    /// Disks named in-line in its volumes.
    pub(crate) fn disks(mut self, disks: &[crate::objects::pod::InlineDisk]) -> Self {
        self.spec.inline_disks = disks.to_vec();
        self
    }

    /// The pod.
    pub(crate) fn build(self) -> PodInfo {
        PodInfo {
            spec: Arc::new(self.spec),
            ..self.pod
        }
    }
}

/// A cluster under construction, with its nodes in insertion order.
#[derive(Default)]
pub(crate) struct Cluster {
    /// The cluster the plugin reads.
    pub(crate) cluster: ClusterState,
    /// The nodes, as the runner hands them to plugins.
    pub(crate) nodes: Vec<Arc<NodeInfo>>,
}

impl Cluster {
    /// Adds node `name` with `labels`.
    pub(crate) fn node(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.add_node(NodeInfo::new(name, labels.iter().copied()));
    }

    /// Adds nodes `(name, zone)`, each labelled with its [`ZONE`] and its
    /// [`HOSTNAME`].
    pub(crate) fn zoned_nodes(&mut self, nodes: &[(&str, &str)]) {
        for (name, zone) in nodes {
            self.node(name, &[(ZONE, zone), (HOSTNAME, name)]);
        }
    }

    /// Adds `node`.
    pub(crate) fn add_node(&mut self, node: NodeInfo) {
        self.cluster.apply_node(node.clone());
        self.nodes.push(Arc::new(node));
    }

    /// Replaces the node called `name` with what `change` makes of it.
    pub(crate) fn change_node(&mut self, name: &str, change: impl FnOnce(&mut NodeInfo)) {
        let Some(slot) = self.nodes.iter_mut().find(|n| n.name == name) else {
            panic!("no node {name}");
        };
        let mut n = (**slot).clone();
        change(&mut n);
        self.cluster.apply_node(n.clone());
        *slot = Arc::new(n);
    }

    /// Adds an existing pod.
    pub(crate) fn pod(&mut self, pod: PodInfo) {
        self.cluster.apply_pod(pod);
    }
}

/// Checks `plugin`'s PreFilter extensions against PreFilter for `pod`: for
/// each existing pod of `c`, RemovePod on a clone of the full state leaves
/// what PreFilter writes without that pod, and AddPod after putting it back
/// restores the full state. `read` picks the plugin's state out of a cycle
/// state. PreFilter must succeed on every one of those clusters.
pub(crate) fn check_extensions<P: PreFilterExtensions, S: PartialEq + std::fmt::Debug>(
    plugin: &P,
    c: &mut Cluster,
    pod: &PodInfo,
    read: impl Fn(&CycleState) -> Option<S>,
) {
    let pre = |cluster: &ClusterState| {
        let mut state = CycleState::new();
        let s = plugin.pre_filter(&mut state, pod, cluster);
        assert_eq!(s.code(), Code::Success, "{}", s.message());
        state
    };
    let full = pre(&c.cluster);
    assert!(read(&full).is_some(), "PreFilter wrote no state");
    let existing: Vec<PodInfo> = c.cluster.pods().cloned().collect();
    assert!(!existing.is_empty(), "no pod to remove");
    for v in existing {
        let node = c
            .nodes
            .iter()
            .find(|n| Some(n.name.as_str()) == v.node_name.as_deref())
            .cloned()
            .expect("the pod is on a node of the fixture");
        let mut state = full.clone();
        c.cluster.delete_pod(&v.namespace, &v.name);
        let s = plugin.remove_pod(&mut state, pod, &v, &node, &c.cluster);
        assert_eq!(s.code(), Code::Success, "{}", s.message());
        assert_eq!(read(&state), read(&pre(&c.cluster)), "without {}", v.name);
        c.cluster.apply_pod(v.clone());
        let s = plugin.add_pod(&mut state, pod, &v, &node, &c.cluster);
        assert_eq!(s.code(), Code::Success, "{}", s.message());
        assert_eq!(read(&state), read(&full), "with {} back", v.name);
        assert_eq!(
            read(&full),
            read(&pre(&c.cluster)),
            "the clone left the original alone"
        );
    }
}

/// PreFilter, then, when it succeeds, Filter on `node`; a PreFilter status
/// other than `Success` is returned as it is.
pub(crate) fn filter<P: PreFilterPlugin + FilterPlugin>(
    plugin: &P,
    pod: &PodInfo,
    node: &NodeInfo,
    cluster: &ClusterState,
) -> Status {
    let mut state = CycleState::new();
    let pre = plugin.pre_filter(&mut state, pod, cluster);
    if pre.code() != Code::Success {
        return pre;
    }
    plugin.filter(&state, pod, node, cluster)
}

/// PreScore over `nodes`, then Score and NormalizeScore (which must succeed):
/// the PreScore status and the scores (none when PreScore did not succeed).
/// Score runs both ways, node by node and as the runner calls it (one
/// `score_batch`), and the two must agree, so every plugin's score tables
/// also check its batch.
pub(crate) fn score<P: PreScorePlugin + ScorePlugin>(
    plugin: &P,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    cluster: &ClusterState,
) -> (Status, Vec<NodeScore>) {
    let mut state = CycleState::new();
    let refs: Vec<&NodeInfo> = nodes.iter().map(|n| &**n).collect();
    let s = plugin.pre_score(&mut state, pod, &refs, cluster);
    if s.code() != Code::Success {
        return (s, Vec::new());
    }
    let mut scores = score_both_ways(plugin, &state, pod, &refs, cluster);
    assert!(plugin.normalize(&state, pod, &mut scores).is_success());
    (s, scores)
}

/// Every node's score from `score`, node by node, after checking that
/// `score_batch` (how the runner calls the plugin) gives the same.
pub(crate) fn score_both_ways<P: ScorePlugin>(
    plugin: &P,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[&NodeInfo],
    cluster: &ClusterState,
) -> Vec<NodeScore> {
    let scores: Vec<NodeScore> = (nodes.iter())
        .map(|n| plugin.score(state, pod, n, cluster).unwrap())
        .collect();
    let mut batch = vec![NodeScore::default(); nodes.len()];
    plugin
        .score_batch(state, pod, nodes, cluster, &mut batch)
        .unwrap();
    assert_eq!(batch, scores, "score_batch against score, node by node");
    scores
}

/// Score without PreScore first: plugins answer `Error` (the runner never
/// does this; the status is what a bug would produce).
/// Its batch must fail the same way.
pub(crate) fn score_without_pre_score<P: ScorePlugin>(plugin: &P) -> Status {
    let (state, pod, node, cluster) = (
        CycleState::new(),
        PodInfo::default(),
        NodeInfo::default(),
        ClusterState::default(),
    );
    let status = plugin.score(&state, &pod, &node, &cluster).unwrap_err();
    let batch = plugin
        .score_batch(
            &state,
            &pod,
            &[&node],
            &cluster,
            &mut [NodeScore::default()],
        )
        .unwrap_err();
    assert_eq!(batch, status, "score_batch against score");
    status
}

/// `(raw, score)` of each node, for compact assertions.
pub(crate) fn raw_and_score(scores: &[NodeScore]) -> Vec<(Option<i64>, i64)> {
    scores.iter().map(|s| (s.raw, s.score)).collect()
}

/// A profile `s` with NodeResourcesFit and DefaultPreemption: the smallest
/// policy under which a pod can preempt (cycle-view and explainer tests).
pub(crate) const PREEMPTION_POLICY: &str = "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: s\n  plugins:\n  - name: NodeResourcesFit\n  - name: DefaultPreemption\n";

/// A node with 1 CPU and room for 9 pods.
pub(crate) fn one_cpu_node(name: &str) -> NodeInfo {
    NodeInfo {
        allocatable: res(&[("cpu", "1"), ("pods", "9")]),
        ..NodeInfo::new(name, [(HOSTNAME, name)])
    }
}

/// A pod of profile `s` in namespace `ns` asking for 1 CPU, on `node` (or
/// pending), with `priority`; its uid is its name.
pub(crate) fn one_cpu_pod(name: &str, node: Option<&str>, priority: i32) -> PodInfo {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"nodeName": node, "priority": priority, "schedulerName": "s",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap()
}

/// What `plugin`'s queueing hints say of `event` for `pod`, which the plugin
/// rejected: through the plugin's registrations, as the queue asks them, so
/// an event the plugin did not register is `Skip` as well.
pub(crate) fn hint(plugin: &dyn Plugin, pod: &PodInfo, event: Observed) -> QueueingHint {
    let registrations = Registrations::of(std::iter::once(plugin));
    queue_if(registrations.worth_retrying(pod, &[plugin.name()], &event))
}

/// Node `new` added.
pub(crate) fn node_added(new: NodeInfo) -> Observed {
    Observed {
        event: ClusterEvent::new(EventResource::Node, ActionType::ADD),
        change: Change::Node {
            old: None,
            new: Some(Arc::new(new)),
        },
    }
}

/// Node `old` changed into `new`, classified as the cache classifies it
/// (the change must be one).
pub(crate) fn node_updated(old: NodeInfo, new: NodeInfo) -> Observed {
    let actions = node_update(&old, &new);
    assert!(!actions.is_empty(), "no change: no event");
    Observed {
        event: ClusterEvent::new(EventResource::Node, actions),
        change: Change::Node {
            old: Some(Arc::new(old)),
            new: Some(Arc::new(new)),
        },
    }
}

/// Node `old` deleted.
pub(crate) fn node_deleted(old: NodeInfo) -> Observed {
    Observed {
        event: ClusterEvent::new(EventResource::Node, ActionType::DELETE),
        change: Change::Node {
            old: Some(Arc::new(old)),
            new: None,
        },
    }
}

/// A pod of `resource` going from `old` to `new` (an add without `old`, a
/// delete without `new`; an update classified as the cache classifies it).
pub(crate) fn pod_event(
    resource: EventResource,
    old: Option<PodInfo>,
    new: Option<PodInfo>,
) -> Observed {
    let actions = match (&old, &new) {
        (Some(o), Some(n)) => pod_update(o, n),
        (None, _) => ActionType::ADD,
        (Some(_), None) => ActionType::DELETE,
    };
    assert!(!actions.is_empty(), "no change: no event");
    Observed {
        event: ClusterEvent::new(resource, actions),
        change: Change::Pod {
            old: old.map(Arc::new),
            new: new.map(Arc::new),
        },
    }
}

/// The waiting pod itself updated from `old` to `new`.
pub(crate) fn target_pod_updated(old: PodInfo, new: PodInfo) -> Observed {
    pod_event(EventResource::TargetPod, Some(old), Some(new))
}

/// A record of kind `kind` (a kind kept by key) going from `old` to `new`,
/// with the action the watch gives it (an add without `old`, a delete
/// without `new`, else an update).
pub(crate) fn object_event<T>(kind: &'static str, old: Option<T>, new: Option<T>) -> Observed
where
    T: crate::objects::Keyed + Send + Sync + 'static,
{
    let actions = match (&old, &new) {
        (None, _) => ActionType::ADD,
        (Some(_), None) => ActionType::DELETE,
        (Some(_), Some(_)) => ActionType::UPDATE_OTHER,
    };
    let key = new
        .as_ref()
        .or(old.as_ref())
        .map(|o| o.key())
        .unwrap_or_default();
    Observed {
        event: ClusterEvent::new(EventResource::Kind(kind), actions),
        change: Change::object(&key, old, new),
    }
}
