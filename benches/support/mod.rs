//! Fixtures for the request-path benchmarks: a synthetic but realistic
//! cluster (nodes with 13–14 labels in 6 zones, pods spread over them with a
//! few priorities), the incoming pod, the two request shapes kube-scheduler
//! sends, and one scheduling cycle's worth of work (filter then prioritize:
//! decode, evaluate, encode; no socket).
//!
//! Everything is deterministic (a fixed-seed xorshift), so every run and
//! every machine measures the same bytes.

// Shared by the request_path and retry_cost benches; each uses only part of it.
#![allow(dead_code)]

pub mod floor;

use std::fmt::Write as _;
use std::sync::Arc;

use placer::cache::{Cache, ClusterState};
use placer::modes::extender::{ExtenderState, Settings, filter, prioritize};
use placer::objects::{NodeInfo, PodInfo};
use placer::policy::{self, CompiledPolicy};
use placer::protocol::{self, HostPriority};
use placer::state::AppState;
use serde_json::{Value, json};

/// The repository's own policy: CapabilityFilter + ZoneSpread (weight 2) +
/// NetQoS (weight 1) in profile `extender`, which is also the default profile.
pub const POLICY: &str = include_str!("../../policy.yaml");

/// Zones (topology.kubernetes.io/zone) and their regions.
const ZONES: &[(&str, &str)] = &[
    ("eu-west-1a", "eu-west-1"),
    ("eu-west-1b", "eu-west-1"),
    ("eu-west-1c", "eu-west-1"),
    ("eu-central-1a", "eu-central-1"),
    ("eu-central-1b", "eu-central-1"),
    ("eu-central-1c", "eu-central-1"),
];

const INSTANCE_TYPES: &[&str] = &["m6i.2xlarge", "m6i.4xlarge", "c6i.4xlarge", "r6i.2xlarge"];
const POOLS: &[&str] = &["general", "compute", "memory", "batch"];
/// Pod priorities in the cache, with the incoming pod's (1000) among them.
const PRIORITIES: &[(i32, u32)] = &[(0, 60), (1000, 25), (100_000, 10), (2_000_001_000, 5)];

/// A small deterministic PRNG (xorshift64*), so fixtures need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One generated node: its name and labels (the cache's view) plus what the
/// full JSON object needs.
pub struct NodeSpec {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub index: usize,
    pub instance_type: &'static str,
    pub zone: &'static str,
}

impl NodeSpec {
    pub fn info(&self) -> NodeInfo {
        NodeInfo::new(&self.name, self.labels.iter().cloned())
    }
}

/// `n` nodes spread round-robin over the zones. About 75% carry
/// `node.kubernetes.io/hw-encrypt=true` (the rest fail CapabilityFilter for an
/// annotated pod); `net` is high (45%), low (40%), an unknown tier (5%) or
/// absent (10%).
pub fn nodes(n: usize) -> Vec<NodeSpec> {
    let mut rng = Rng::new(0x5eed_0001);
    (0..n)
        .map(|i| {
            let (zone, region) = ZONES[i % ZONES.len()];
            let name = format!(
                "ip-10-{}-{}-{}.{region}.compute.internal",
                i / 65536 % 256,
                i / 256 % 256,
                i % 256
            );
            let instance_type = INSTANCE_TYPES[rng.below(INSTANCE_TYPES.len() as u64) as usize];
            let mut labels: Vec<(String, String)> = vec![
                ("beta.kubernetes.io/arch".into(), "amd64".into()),
                (
                    "beta.kubernetes.io/instance-type".into(),
                    instance_type.into(),
                ),
                ("beta.kubernetes.io/os".into(), "linux".into()),
                (
                    "failure-domain.beta.kubernetes.io/region".into(),
                    region.into(),
                ),
                ("failure-domain.beta.kubernetes.io/zone".into(), zone.into()),
                ("kubernetes.io/arch".into(), "amd64".into()),
                ("kubernetes.io/hostname".into(), name.clone()),
                ("kubernetes.io/os".into(), "linux".into()),
                (
                    "node.kubernetes.io/instance-type".into(),
                    instance_type.into(),
                ),
                ("topology.kubernetes.io/region".into(), region.into()),
                ("topology.kubernetes.io/zone".into(), zone.into()),
                (
                    "myorg.io/pool".into(),
                    POOLS[rng.below(POOLS.len() as u64) as usize].into(),
                ),
                ("node-role.kubernetes.io/worker".into(), String::new()),
            ];
            let net = rng.below(100);
            match net {
                0..45 => labels.push(("net".into(), "high".into())),
                45..85 => labels.push(("net".into(), "low".into())),
                85..90 => labels.push(("net".into(), "medium".into())),
                _ => {}
            }
            if rng.chance(75) {
                labels.push(("node.kubernetes.io/hw-encrypt".into(), "true".into()));
            }
            NodeSpec {
                name,
                labels,
                index: i,
                instance_type,
                zone,
            }
        })
        .collect()
}

/// `nodes` with `extra` more labels each (`extra.example.com/label-J`), for
/// showing that the request path does not grow with labels per node.
pub fn with_extra_labels(mut nodes: Vec<NodeSpec>, extra: usize) -> Vec<NodeSpec> {
    for n in &mut nodes {
        for j in 0..extra {
            n.labels.push((
                format!("extra.example.com/label-{j:02}"),
                format!("value-{}", (n.index + j) % 7),
            ));
        }
    }
    nodes
}

/// `count` running pods assigned uniformly at random to `nodes`, in 30
/// namespaces, with the priority mix of [`PRIORITIES`].
pub fn pods(count: usize, nodes: &[NodeSpec]) -> Vec<PodInfo> {
    let mut rng = Rng::new(0x5eed_0002);
    (0..count)
        .map(|i| {
            let node = &nodes[rng.below(nodes.len() as u64) as usize];
            let mut roll = rng.below(100) as u32;
            let mut priority = 0;
            for &(p, share) in PRIORITIES {
                if roll < share {
                    priority = p;
                    break;
                }
                roll -= share;
            }
            let app = format!("app-{}", i % 997);
            let mut labels = std::collections::BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), app.clone()),
                (
                    "pod-template-hash".to_string(),
                    format!("{:010x}", i % 997 * 7919),
                ),
            ]);
            if rng.chance(20) {
                labels.insert("qos".into(), "latency-sensitive".into());
            }
            PodInfo {
                name: format!("{app}-{i:05x}"),
                namespace: format!("team-{:02}", i % 30),
                uid: format!("00000000-0000-4000-8000-{i:012}"),
                labels: labels.into(),
                annotations: Default::default(),
                priority,
                scheduler_name: "default-scheduler".into(),
                node_name: Some(node.name.clone()),
                phase: Some("Running".into()),
                ..Default::default()
            }
        })
        .collect()
}

/// The service state over a cluster of `nodes` and `pods`, with the
/// repository's policy.
pub fn app_state(nodes: &[NodeSpec], pods: Vec<PodInfo>) -> ExtenderState {
    let compiled = CompiledPolicy::new(policy::parse(POLICY, "policy.yaml").expect("policy"));
    let mut state = ClusterState::with_dimensions(&compiled.count_dimensions());
    state.watch_labels(compiled.node_label_keys().iter().map(String::as_str));
    state.replace_nodes(nodes.iter().map(NodeSpec::info).collect());
    state.replace_pods(pods);
    let service = AppState::new(compiled, Arc::new(Cache::from_state(state)));
    ExtenderState::new(&service, None, Settings::default())
}

/// The pod being scheduled, as kube-scheduler sends it (a full v1.Pod, ~2.5 KB):
/// latency-sensitive (NetQoS scores), asks for hardware encryption
/// (CapabilityFilter filters), priority 1000 (ZoneSpread counts pods of the
/// same priority).
pub fn incoming_pod() -> Value {
    json!({
        "metadata": {
            "name": "checkout-7d9f8b6c5d-x2x7q",
            "generateName": "checkout-7d9f8b6c5d-",
            "namespace": "shop",
            "uid": "4f8e1c2a-9b7d-4e3f-a1c2-0d9e8f7a6b5c",
            "resourceVersion": "48151623",
            "creationTimestamp": "2026-01-15T10:21:33Z",
            "labels": {
                "app.kubernetes.io/name": "checkout",
                "app.kubernetes.io/part-of": "shop",
                "pod-template-hash": "7d9f8b6c5d",
                "qos": "latency-sensitive"
            },
            "annotations": {
                "myorg.io/require-hw-encrypt": "true",
                "kubectl.kubernetes.io/restartedAt": "2026-01-15T10:21:30Z",
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090"
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-7d9f8b6c5d",
                "uid": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "volumes": [{
                "name": "kube-api-access-abcde",
                "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ], "defaultMode": 420}
            }],
            "containers": [{
                "name": "checkout",
                "image": "registry.example.com/shop/checkout:1.42.3",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                          {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                "env": [{"name": "GOMAXPROCS", "value": "2"}, {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
                "resources": {"limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}},
                "volumeMounts": [{"name": "kube-api-access-abcde", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                  "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
                                   "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "checkout",
            "serviceAccount": "checkout",
            "securityContext": {"runAsNonRoot": true, "fsGroup": 2000},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priorityClassName": "shop-critical",
            "priority": 1000,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"}
    })
}

/// A full v1.Node as kube-scheduler sends it with `nodeCacheCapable: false`:
/// metadata, spec, and a status with conditions, addresses, node info and
/// an image list (15–40 images), 4–10 KB each.
pub fn full_node(spec: &NodeSpec) -> Value {
    let mut rng = Rng::new(0x5eed_1000 + spec.index as u64);
    let labels: serde_json::Map<String, Value> = spec
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let ip = format!(
        "10.{}.{}.{}",
        spec.index / 65536 % 256,
        spec.index / 256 % 256,
        spec.index % 256
    );
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": kind, "status": status,
            "lastHeartbeatTime": "2026-01-15T10:20:11Z",
            "lastTransitionTime": "2025-12-01T08:00:00Z",
            "reason": reason, "message": message
        })
    };
    let images: Vec<Value> = (0..15 + rng.below(26))
        .map(|k| {
            let repo = format!("registry.example.com/team-{:02}/service-{k:03}", rng.below(30));
            let digest: String = (0..4).fold(String::new(), |mut s, _| {
                let _ = write!(s, "{:016x}", rng.next());
                s
            });
            json!({
                "names": [format!("{repo}@sha256:{digest}"), format!("{repo}:v1.{}.{}", rng.below(50), rng.below(10))],
                "sizeBytes": 20_000_000 + rng.below(900_000_000)
            })
        })
        .collect();
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": spec.name,
            "uid": format!("6b1f0c7e-0000-4000-8000-{:012}", spec.index),
            "resourceVersion": format!("{}", 48_000_000 + spec.index),
            "creationTimestamp": "2025-12-01T08:00:00Z",
            "labels": labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{:017x}\"}}", rng.next() >> 4),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"
            }
        },
        "spec": {
            "podCIDR": format!("100.64.{}.0/24", spec.index % 256),
            "podCIDRs": [format!("100.64.{}.0/24", spec.index % 256)],
            "providerID": format!("aws:///{}/i-{:017x}", spec.zone, rng.next() >> 4)
        },
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "memory": "32386524Ki", "pods": "110"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "memory": "31369692Ki", "pods": "110"},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": spec.name},
                {"type": "Hostname", "address": spec.name}
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": format!("{:016x}{:016x}", rng.next(), rng.next()),
                "systemUUID": format!("ec2{:05x}-0000-0000-0000-{:012x}", spec.index, rng.next() >> 16),
                "bootID": format!("{:08x}-1111-4222-8333-{:012x}", rng.next() >> 32, rng.next() >> 16),
                "kernelVersion": "6.1.112-122.189.amzn2023.x86_64",
                "osImage": "Amazon Linux 2023.6.20241010",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.33.2",
                "kubeProxyVersion": "v1.33.2",
                "operatingSystem": "linux",
                "architecture": "amd64"
            },
            "images": images
        }
    })
}

/// `{"Pod":…,"Nodes":null,"NodeNames":[…]}` (nodeCacheCapable: true), as Go
/// encodes `ExtenderArgs`.
pub fn names_body(pod: &Value, nodes: &[NodeSpec]) -> Vec<u8> {
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names})).expect("encode")
}

/// `{"Pod":…,"Nodes":{"metadata":{},"items":[…]},"NodeNames":null}`
/// (nodeCacheCapable: false). Built by hand so 15,000 nodes never sit in
/// memory as one `Value` tree.
pub fn full_body(pod: &Value, nodes: &[NodeSpec]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nodes.len() * 8 * 1024);
    out.extend_from_slice(b"{\"Pod\":");
    serde_json::to_writer(&mut out, pod).expect("encode");
    out.extend_from_slice(
        b",\"Nodes\":{\"metadata\":{\"resourceVersion\":\"48151700\"},\"items\":[",
    );
    for (i, n) in nodes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &full_node(n)).expect("encode");
    }
    out.extend_from_slice(b"]},\"NodeNames\":null}");
    out
}

/// The full-node floor over the same cluster as [`app_state`].
pub fn full_floor(nodes: &[NodeSpec], pods: &[PodInfo]) -> floor::FullFloor {
    floor::FullFloor::new(
        nodes.iter().map(|n| (n.name.as_str(), n.zone)),
        pods.iter().filter_map(|p| {
            Some((
                p.node_name.as_deref()?,
                i64::from(p.priority),
                p.is_terminal(),
            ))
        }),
    )
}

/// Bytes written by one cycle, so the optimiser cannot drop the work.
#[derive(Debug, Clone, Copy, Default)]
pub struct CycleOut {
    pub filter_bytes: usize,
    pub prioritize_bytes: usize,
}

/// `/filter` without the socket: decode, evaluate, encode.
#[inline(never)]
pub fn filter_once(state: &ExtenderState, body: &[u8]) -> usize {
    filter_bytes(state, body).len()
}

/// The encoded `/filter` answer to `body`.
pub fn filter_bytes(state: &ExtenderState, body: &[u8]) -> Vec<u8> {
    // A filter decodes its pod: it is the first verb of a pod's cycle.
    state.last_pod.forget();
    let args = protocol::from_slice(body).expect("decode filter body");
    match filter::respond(state, args).expect("filter") {
        filter::Answer::Encoded(bytes) => bytes,
        filter::Answer::DomainError(e) => panic!("filter error: {}", e.error),
    }
}

/// `/prioritize` without the socket: decode, evaluate, encode. Its pod is
/// the one decoded last (after the first call), as after the pod's filter.
#[inline(never)]
pub fn prioritize_once(state: &ExtenderState, body: &[u8]) -> usize {
    let args = protocol::from_slice(body).expect("decode prioritize body");
    prioritize::respond(state, args).expect("prioritize").len()
}

/// One scheduling cycle as placer sees it: `/filter` then `/prioritize`, both
/// with `body` (so prioritize scores every requested node: an upper bound,
/// since kube-scheduler sends it only the nodes that passed filtering).
#[inline(never)]
pub fn cycle(state: &ExtenderState, body: &[u8]) -> CycleOut {
    CycleOut {
        filter_bytes: filter_once(state, body),
        prioritize_bytes: prioritize_once(state, body),
    }
}

/// Checks that a body exercises every plugin: some nodes fail
/// CapabilityFilter, the rest pass, and the scores are not all equal.
pub fn sanity_check(state: &ExtenderState, body: &[u8]) {
    let f: Value = serde_json::from_slice(&filter_bytes(state, body)).expect("filter answer");
    assert_eq!(f["Error"], "", "filter error");
    let failed = f["FailedAndUnresolvableNodes"]
        .as_object()
        .map_or(0, |m| m.len());
    let passed = f["NodeNames"]
        .as_array()
        .or_else(|| f["Nodes"]["items"].as_array())
        .map_or(0, Vec::len);
    assert!(failed > 0 && passed > 0, "passed {passed}, failed {failed}");
    let args = protocol::from_slice(body).expect("decode");
    let p: Vec<HostPriority> =
        serde_json::from_slice(&prioritize::respond(state, args).expect("prioritize"))
            .expect("prioritize answer");
    let distinct: std::collections::BTreeSet<i64> = p.iter().map(|h| h.score).collect();
    assert!(distinct.len() > 1, "all scores equal: {distinct:?}");
}

/// A snapshot file for `placer serve --snapshot`: one JSON `v1.List` with the
/// nodes (metadata and labels) and the pods (what PodInfo reads).
pub fn snapshot_json(nodes: &[NodeSpec], pods: &[PodInfo]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nodes.len() * 800 + pods.len() * 400);
    out.extend_from_slice(b"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[");
    let mut first = true;
    let mut sep = |out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
    };
    for n in nodes {
        sep(&mut out);
        let labels: serde_json::Map<String, Value> = n
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        serde_json::to_writer(
            &mut out,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels}}),
        )
        .expect("encode");
    }
    for p in pods {
        sep(&mut out);
        serde_json::to_writer(
            &mut out,
            &json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": p.name, "namespace": p.namespace, "uid": p.uid, "labels": &*p.labels},
                "spec": {"nodeName": p.node_name, "priority": p.priority,
                         "schedulerName": p.scheduler_name, "containers": []},
                "status": {"phase": p.phase}
            }),
        )
        .expect("encode");
    }
    out.extend_from_slice(b"]}");
    out
}
