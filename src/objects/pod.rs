//! The view of a pod that plugins read.
//!
//! Both the HTTP verbs (a Pod in kube-scheduler's JSON) and the watch cache
//! (k8s-openapi `Pod`s) produce a [`PodInfo`], so a plugin is written once.
//! Only the fields placer's plugins use are kept; everything else in the JSON
//! is skipped while decoding, which is both faster and more forgiving of
//! fields newer than this build.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Affinity, Pod, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use crate::objects::resources::{ContainerRequests, QuantityError, Resources, pod_requests};

/// The fields of a pod that scheduling decisions depend on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty when the JSON had none).
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.priority`; a missing priority counts as 0, as kube-scheduler does.
    pub priority: i32,
    /// `spec.schedulerName` (empty when absent; the API server defaults it).
    pub scheduler_name: String,
    /// `spec.nodeName`, set once the pod is bound (or assumed).
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `metadata.deletionTimestamp` is set: the pod is terminating.
    pub deleting: bool,
    /// The owner reference with `controller: true` (its ReplicaSet, ...).
    pub controller: Option<ControllerRef>,
    /// The placement requirements in the spec (shared: cheap to clone).
    pub spec: Arc<PodSpecInfo>,
    /// What preemption reads (standalone mode).
    pub preemption: PreemptionInfo,
}

/// A pod's controlling owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerRef {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// `kind`, e.g. `ReplicaSet`.
    pub kind: String,
    /// `name`.
    pub name: String,
}

impl ControllerRef {
    /// The first owner reference marked `controller: true`, given as
    /// `(controller, [apiVersion, kind, name])`.
    fn first_of<'a>(
        owners: impl IntoIterator<Item = (Option<bool>, [&'a String; 3])>,
    ) -> Option<Self> {
        owners
            .into_iter()
            .find(|(controller, _)| *controller == Some(true))
            .map(|(_, [api_version, kind, name])| ControllerRef {
                api_version: api_version.clone(),
                kind: kind.clone(),
                name: name.clone(),
            })
    }
}

/// The fields DefaultPreemption reads, from the spec and the status.
///
/// Equality looks at the spec part only: a pod whose status alone changed
/// (placer just wrote its `nominatedNodeName`) is not a changed pod for the
/// scheduling queue, as kube-scheduler ignores status-only updates.
#[derive(Debug, Clone, Default)]
pub struct PreemptionInfo {
    /// `spec.preemptionPolicy: Never`: the pod waits rather than evicting others.
    pub never: bool,
    /// `status.nominatedNodeName`.
    pub nominated_node: Option<String>,
    /// `status.startTime` in seconds since the epoch; `None` until a kubelet starts the pod.
    pub start_time: Option<i64>,
    /// Carries a `DisruptionTarget` condition with reason
    /// `PreemptionByScheduler`: a scheduler chose it as a victim.
    pub preempted: bool,
}

impl PartialEq for PreemptionInfo {
    fn eq(&self, other: &Self) -> bool {
        self.never == other.never
    }
}

/// `preemptionPolicy` value that keeps a pod from preempting.
const PREEMPT_NEVER: &str = "Never";

/// What a pod's spec asks of its node, reduced to what the filters read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSpecInfo {
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.affinity`.
    pub affinity: Option<Affinity>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// The effective request (containers, init containers, sidecars, overhead).
    pub requests: Resources,
    /// The same with each container's missing cpu/memory request counted at
    /// kube-scheduler's scoring defaults (100m, 200Mi); used only for scoring.
    pub non_zero_requests: Resources,
    /// Host ports the pod's containers (and init containers) bind.
    pub host_ports: Vec<HostPort>,
    /// `spec.topologySpreadConstraints`.
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Names of `spec.schedulingGates`; a gated pod is not scheduled.
    pub scheduling_gates: Vec<String>,
    /// Claims the pod's volumes need, in volume order.
    pub pvc_claims: Vec<VolumeClaim>,
}

/// A PersistentVolumeClaim one of the pod's volumes needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeClaim {
    /// A `persistentVolumeClaim` volume's `claimName`, or the `<pod>-<volume>`
    /// claim of a generic ephemeral volume.
    pub name: String,
    /// A generic ephemeral volume's claim (created for, and owned by, the pod).
    pub ephemeral: bool,
}

impl VolumeClaim {
    /// The claim of a `persistentVolumeClaim` volume.
    pub fn named(name: &str) -> Self {
        VolumeClaim {
            name: name.to_string(),
            ephemeral: false,
        }
    }

    fn ephemeral(pod: &str, volume: &str) -> Self {
        VolumeClaim {
            name: format!("{pod}-{volume}"),
            ephemeral: true,
        }
    }
}

/// One host port a container binds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// `hostIP` ("" = all addresses, as "0.0.0.0").
    pub ip: String,
    /// `TCP`, `UDP` or `SCTP` (default `TCP`).
    pub protocol: String,
    /// `hostPort`.
    pub port: i32,
}

/// A container as far as requests and ports go (shared by both decoders).
struct ContainerView {
    requests: Resources,
    ports: Vec<HostPort>,
    sidecar: bool,
}

fn host_port(host_port: Option<i32>, protocol: Option<&str>, ip: Option<&str>) -> Option<HostPort> {
    let port = host_port.filter(|p| *p > 0)?;
    Some(HostPort {
        ip: ip
            .filter(|i| !i.is_empty())
            .unwrap_or("0.0.0.0")
            .to_string(),
        protocol: protocol
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP")
            .to_string(),
        port,
    })
}

/// Effective requests and host ports.
fn requests_and_ports(
    containers: &[ContainerView],
    init: &[ContainerView],
    overhead: &Resources,
) -> Requests {
    let regular: Vec<Resources> = containers.iter().map(|c| c.requests.clone()).collect();
    let init_requests: Vec<ContainerRequests> = init
        .iter()
        .map(|c| ContainerRequests {
            requests: c.requests.clone(),
            sidecar: c.sidecar,
        })
        .collect();
    let ports = init
        .iter()
        .chain(containers)
        .flat_map(|c| c.ports.iter().cloned())
        .collect();
    let non_zero_regular: Vec<Resources> = regular
        .iter()
        .map(Resources::with_non_zero_defaults)
        .collect();
    let non_zero_init: Vec<ContainerRequests> = init_requests
        .iter()
        .map(|c| ContainerRequests {
            requests: c.requests.with_non_zero_defaults(),
            sidecar: c.sidecar,
        })
        .collect();
    Requests {
        requests: pod_requests(&regular, &init_requests, overhead),
        non_zero: pod_requests(&non_zero_regular, &non_zero_init, overhead),
        host_ports: ports,
    }
}

/// The request-related parts of a spec, computed once.
#[derive(Default)]
struct Requests {
    requests: Resources,
    non_zero: Resources,
    host_ports: Vec<HostPort>,
}

impl PodInfo {
    /// `namespace/name`, as used in events and logs.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Succeeded and Failed pods hold no resources and are not counted.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Being deleted after a scheduler preempted it (kube-scheduler's
    /// `PodTerminatingByPreemption`).
    pub fn terminating_by_preemption(&self) -> bool {
        self.deleting && self.preemption.preempted
    }
}

impl From<&Pod> for PodInfo {
    fn from(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        PodInfo {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            scheduler_name: spec
                .and_then(|s| s.scheduler_name.clone())
                .unwrap_or_default(),
            node_name: spec
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            deleting: meta.deletion_timestamp.is_some(),
            controller: ControllerRef::first_of(
                meta.owner_references
                    .iter()
                    .flatten()
                    .map(|o| (o.controller, [&o.api_version, &o.kind, &o.name])),
            ),
            spec: Arc::new(
                spec.map(|s| spec_from_api(meta.name.as_deref().unwrap_or(""), s))
                    .unwrap_or_default(),
            ),
            preemption: preemption_from_api(pod),
        }
    }
}

fn preemption_from_api(pod: &Pod) -> PreemptionInfo {
    let status = pod.status.as_ref();
    let preempted = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler")
        });
    PreemptionInfo {
        never: pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some(PREEMPT_NEVER),
        nominated_node: status
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty()),
        start_time: status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second()),
        preempted,
    }
}

/// The spec of a pod the API server accepted (so its quantities are valid;
/// one that still fails to parse counts as zero rather than failing the watch).
fn spec_from_api(pod_name: &str, spec: &k8s_openapi::api::core::v1::PodSpec) -> PodSpecInfo {
    fn list(list: Option<&BTreeMap<String, Quantity>>) -> Result<Resources, QuantityError> {
        Resources::from_list(
            list.iter()
                .flat_map(|l| l.iter().map(|(k, q)| (k.as_str(), q.0.as_str()))),
        )
    }
    fn view(c: &k8s_openapi::api::core::v1::Container) -> Result<ContainerView, QuantityError> {
        Ok(ContainerView {
            requests: list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))?,
            ports: c
                .ports
                .iter()
                .flatten()
                .filter_map(|p| host_port(p.host_port, p.protocol.as_deref(), p.host_ip.as_deref()))
                .collect(),
            sidecar: c.restart_policy.as_deref() == Some("Always"),
        })
    }
    let requests = || -> Result<Requests, QuantityError> {
        let containers = spec
            .containers
            .iter()
            .map(view)
            .collect::<Result<Vec<_>, _>>()?;
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .map(view)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(requests_and_ports(
            &containers,
            &init,
            &list(spec.overhead.as_ref())?,
        ))
    };
    let r = requests().unwrap_or_default();
    PodSpecInfo {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        affinity: spec.affinity.clone(),
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        requests: r.requests,
        non_zero_requests: r.non_zero,
        host_ports: r.host_ports,
        topology_spread_constraints: spec.topology_spread_constraints.clone().unwrap_or_default(),
        scheduling_gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        pvc_claims: spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => Some(VolumeClaim::named(&c.claim_name)),
                (None, Some(_)) => Some(VolumeClaim::ephemeral(pod_name, &v.name)),
                (None, None) => None,
            })
            .collect(),
    }
}

/// Decodes a Pod in Kubernetes' JSON form (camelCase keys) straight into a
/// [`PodInfo`]. `null` is accepted wherever a field may be absent.
impl<'de> Deserialize<'de> for PodInfo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(d)?;
        let meta = wire.metadata.unwrap_or_default();
        let mut spec = wire.spec.unwrap_or_default();
        let (priority, scheduler_name, node_name, preemption_policy) = (
            spec.priority,
            spec.scheduler_name.take(),
            spec.node_name.take(),
            spec.preemption_policy.take(),
        );
        let status = wire.status.unwrap_or_default();
        let spec_info = spec.info(meta.name.as_deref().unwrap_or(""));
        Ok(PodInfo {
            name: meta.name.unwrap_or_default(),
            namespace: meta.namespace.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            annotations: meta.annotations.unwrap_or_default(),
            priority: priority.unwrap_or(0),
            scheduler_name: scheduler_name.unwrap_or_default(),
            node_name: node_name.filter(|n| !n.is_empty()),
            phase: status.phase,
            deleting: meta.deletion_timestamp.is_some(),
            controller: ControllerRef::first_of(
                meta.owner_references
                    .iter()
                    .flatten()
                    .map(|o| (o.controller, [&o.api_version, &o.kind, &o.name])),
            ),
            spec: Arc::new(spec_info),
            preemption: PreemptionInfo {
                never: preemption_policy.as_deref() == Some(PREEMPT_NEVER),
                nominated_node: status.nominated_node_name.filter(|n| !n.is_empty()),
                start_time: status
                    .start_time
                    .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                    .map(|t| t.as_second()),
                // A pending pod sent to the extender is no preemption victim.
                preempted: false,
            },
        })
    }
}

#[derive(Deserialize)]
#[serde(expecting = "a Pod object")]
struct WirePod {
    metadata: Option<WireMeta>,
    spec: Option<WireSpec>,
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    deletion_timestamp: Option<serde::de::IgnoredAny>,
    owner_references: Option<Vec<WireOwner>>,
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireOwner {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    controller: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    priority: Option<i32>,
    preemption_policy: Option<String>,
    scheduler_name: Option<String>,
    node_name: Option<String>,
    node_selector: Option<BTreeMap<String, String>>,
    affinity: Option<Affinity>,
    tolerations: Option<Vec<Toleration>>,
    containers: Option<Vec<WireContainer>>,
    init_containers: Option<Vec<WireContainer>>,
    overhead: Option<Resources>,
    topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    scheduling_gates: Option<Vec<WireName>>,
    volumes: Option<Vec<WireVolume>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireContainer {
    resources: Option<WireResources>,
    ports: Option<Vec<WirePort>>,
    restart_policy: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireResources {
    requests: Option<Resources>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePort {
    host_port: Option<i32>,
    protocol: Option<String>,
    #[serde(rename = "hostIP")]
    host_ip: Option<String>,
}

#[derive(Deserialize)]
struct WireName {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolume {
    #[serde(default)]
    name: String,
    persistent_volume_claim: Option<WireClaim>,
    ephemeral: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaim {
    claim_name: String,
}

impl WireContainer {
    fn view(&self) -> ContainerView {
        ContainerView {
            requests: self
                .resources
                .as_ref()
                .and_then(|r| r.requests.clone())
                .unwrap_or_default(),
            ports: self
                .ports
                .iter()
                .flatten()
                .filter_map(|p| host_port(p.host_port, p.protocol.as_deref(), p.host_ip.as_deref()))
                .collect(),
            sidecar: self.restart_policy.as_deref() == Some("Always"),
        }
    }
}

impl WireSpec {
    fn info(self, pod_name: &str) -> PodSpecInfo {
        let containers: Vec<_> = self
            .containers
            .iter()
            .flatten()
            .map(WireContainer::view)
            .collect();
        let init: Vec<_> = self
            .init_containers
            .iter()
            .flatten()
            .map(WireContainer::view)
            .collect();
        let r = requests_and_ports(&containers, &init, &self.overhead.unwrap_or_default());
        PodSpecInfo {
            node_selector: self.node_selector.unwrap_or_default(),
            affinity: self.affinity,
            tolerations: self.tolerations.unwrap_or_default(),
            requests: r.requests,
            non_zero_requests: r.non_zero,
            host_ports: r.host_ports,
            topology_spread_constraints: self.topology_spread_constraints.unwrap_or_default(),
            scheduling_gates: self
                .scheduling_gates
                .into_iter()
                .flatten()
                .map(|g| g.name)
                .collect(),
            pvc_claims: self
                .volumes
                .into_iter()
                .flatten()
                .filter_map(|v| match (v.persistent_volume_claim, v.ephemeral) {
                    (Some(c), _) => Some(VolumeClaim::named(&c.claim_name)),
                    (None, Some(_)) => Some(VolumeClaim::ephemeral(pod_name, &v.name)),
                    (None, None) => None,
                })
                .collect(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    nominated_node_name: Option<String>,
    start_time: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_scheduler_json_and_tolerates_nulls() {
        let json = r#"{"metadata":{"name":"p","namespace":"ns","uid":"u1","creationTimestamp":null,
            "labels":{"qos":"latency-sensitive"},"annotations":null},
            "spec":{"containers":null,"priority":null,"schedulerName":"s"},"status":{}}"#;
        let pod: PodInfo = serde_json::from_str(json).unwrap();
        assert_eq!(pod.key(), "ns/p");
        assert_eq!(pod.uid, "u1");
        assert_eq!(pod.priority, 0);
        assert_eq!(pod.labels["qos"], "latency-sensitive");
        assert!(pod.annotations.is_empty());
        assert_eq!(pod.scheduler_name, "s");
        assert_eq!(pod.node_name, None);
    }

    #[test]
    fn wire_and_api_pods_agree_on_the_spec() {
        let json = serde_json::json!({
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "initContainers": [
                    {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                    {"name": "init", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                ],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "200m", "example.com/gpu": "1"}},
                                "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]}],
                "overhead": {"cpu": "10m"},
                "schedulingGates": [{"name": "wait"}],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}},
                            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                            {"name": "e", "emptyDir": {}}]
            }
        });
        let wire: PodInfo = serde_json::from_value(json.clone()).unwrap();
        let api: Pod = serde_json::from_value(json).unwrap();
        assert_eq!(wire, PodInfo::from(&api));
        let s = &wire.spec;
        assert_eq!(
            s.requests.milli_cpu, 1060,
            "max(200 + 50, 1000 + 50) + 10 overhead"
        );
        assert_eq!(s.requests.memory, 1 << 30);
        assert_eq!(s.requests.scalar["example.com/gpu"], 1);
        assert_eq!(
            s.host_ports,
            vec![HostPort {
                ip: "0.0.0.0".into(),
                protocol: "TCP".into(),
                port: 8080
            }]
        );
        assert_eq!(s.scheduling_gates, ["wait"]);
        let claims: Vec<(&str, bool)> = s
            .pvc_claims
            .iter()
            .map(|c| (c.name.as_str(), c.ephemeral))
            .collect();
        assert_eq!(claims, [("data", false), ("p-scratch", true)]);
        // Scoring counts the sidecar's and the container's missing memory at 200Mi each.
        assert_eq!(s.non_zero_requests.memory, (1 << 30) + (200 << 20));
        assert_eq!(s.non_zero_requests.milli_cpu, 1060);
        assert_eq!(s.node_selector["disk"], "ssd");
        assert_eq!(s.tolerations.len(), 1);
    }

    #[test]
    fn preemption_fields_from_both_decoders() {
        let json = serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "deletionTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "Node", "name": "x", "uid": "1"},
                             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                              "uid": "2", "controller": true}]},
            "spec": {"preemptionPolicy": "Never", "containers": []},
            "status": {"nominatedNodeName": "node-1", "startTime": "2026-01-01T00:00:10Z",
                       "conditions": [{"type": "DisruptionTarget", "status": "True",
                                       "reason": "PreemptionByScheduler"}]}
        });
        let wire: PodInfo = serde_json::from_value(json.clone()).unwrap();
        let api = PodInfo::from(&serde_json::from_value::<Pod>(json).unwrap());
        for p in [&wire, &api] {
            assert!(p.preemption.never);
            assert_eq!(p.preemption.nominated_node.as_deref(), Some("node-1"));
            assert_eq!(p.preemption.start_time, Some(1_767_225_610));
        }
        assert!(api.terminating_by_preemption());
        assert!(!wire.terminating_by_preemption());
        assert!(api.deleting && wire.deleting);
        let owner = ControllerRef {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-1".into(),
        };
        assert_eq!(api.controller.as_ref(), Some(&owner));
        assert_eq!(wire.controller.as_ref(), Some(&owner));
        // Status-only differences do not make a different pod for the queue.
        let mut moved = api.clone();
        moved.preemption.nominated_node = None;
        assert_eq!(moved, api);
    }

    #[test]
    fn bad_quantities_in_requests_are_decode_errors_at_their_value() {
        let body =
            r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]}}"#;
        let e = crate::protocol::from_slice::<PodInfo>(body.as_bytes()).unwrap_err();
        assert_eq!(e.path, "spec.containers[0].resources.requests.cpu");
        assert_eq!(e.what, "invalid quantity \"lots\"");
        // serde_json reports a string where it ends, at its closing quote.
        let closing_quote = body.find("\"lots\"").unwrap() + "\"lots\"".len();
        assert_eq!((e.line, e.column), (1, closing_quote));
    }

    #[test]
    fn from_api_pod_keeps_the_fields_plugins_need() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n", "labels": {"app": "x"}},
            "spec": {"containers": [], "nodeName": "node-1", "priority": 7},
            "status": {"phase": "Succeeded"}
        }))
        .unwrap();
        let info = PodInfo::from(&pod);
        assert_eq!(info.node_name.as_deref(), Some("node-1"));
        assert_eq!(info.priority, 7);
        assert!(info.is_terminal());
        assert_eq!(info.labels["app"], "x");
    }
}
