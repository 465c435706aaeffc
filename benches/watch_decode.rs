//! What decoding one watched object costs, as the cache's watches decode it.
//!
//! - A pod: into k8s-openapi's `Pod` with `metadata.managedFields` (before) and through
//!   `Lean<Pod>`, which skips it (now), each followed by the conversion to placer's `PodInfo`.
//!   The pod is a Deployment's replica as a v1.37 API server sends it: three field managers
//!   (kube-controller-manager's create, the scheduler's binding, the kubelet's status).
//! - A node's heartbeat: through `Lean<Node>` and `NodeInfo::from` (before) and straight into
//!   the record with `LeanNode` (now). The node is a kwok node as the scale harness makes it:
//!   15 labels, five conditions, two field managers.
//!
//! Prints p50 per case; cases are interleaved round by round so machine noise hits them alike.
//!
//! `cargo bench --bench watch_decode` (`PLACER_BENCH_ITERS` sets the rounds, default 20000).

use std::hint::black_box;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use placer::cache::lean::{Lean, LeanNode};
use placer::objects::{NodeInfo, PodInfo};
use serde_json::json;

fn fields(paths: &[&str]) -> serde_json::Value {
    let mut tree = serde_json::Map::new();
    for p in paths {
        tree.insert(
            format!("f:{p}"),
            json!({ ".": {}, "f:name": {}, "f:value": {} }),
        );
    }
    serde_json::Value::Object(tree)
}

fn replica() -> Vec<u8> {
    let entry = |manager: &str, op: &str, sub: Option<&str>, paths: &[&str]| {
        let mut e = json!({
            "manager": manager, "operation": op, "apiVersion": "v1",
            "time": "2026-12-02T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": { "f:metadata": fields(&["labels", "ownerReferences", "generateName"]),
                          "f:spec": fields(paths) }
        });
        if let Some(sub) = sub {
            e["subresource"] = json!(sub);
        }
        e
    };
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8b6c5-x2k4q", "generateName": "web-7d9f8b6c5-", "namespace": "shop",
            "uid": "0d9c3f1e-6a57-4c1b-9f0e-2b7f1c0d4e5a", "resourceVersion": "123456",
            "creationTimestamp": "2026-12-02T10:00:00Z",
            "labels": { "app": "web", "pod-template-hash": "7d9f8b6c5", "tier": "frontend" },
            "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-7d9f8b6c5", "uid": "5b1f0e2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",
                "controller": true, "blockOwnerDeletion": true }],
            "managedFields": [
                entry("kube-controller-manager", "Update", None,
                      &["containers", "dnsPolicy", "enableServiceLinks", "restartPolicy",
                        "schedulerName", "securityContext", "terminationGracePeriodSeconds",
                        "affinity", "topologySpreadConstraints"]),
                entry("kube-scheduler", "Update", Some("binding"), &["nodeName"]),
                entry("kubelet", "Update", Some("status"),
                      &["conditions", "containerStatuses", "hostIP", "hostIPs", "phase",
                        "podIP", "podIPs", "startTime", "qosClass"]),
            ]
        },
        "spec": {
            "nodeName": "node-0042", "schedulerName": "default-scheduler", "priority": 0,
            "containers": [{ "name": "web", "image": "registry.example/web:1.4.2",
                "ports": [{ "containerPort": 8080, "protocol": "TCP" }],
                "resources": { "requests": { "cpu": "250m", "memory": "256Mi" },
                               "limits": { "memory": "512Mi" } } }],
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 }],
            "topologySpreadConstraints": [{ "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": { "matchLabels": { "app": "web" } } }]
        },
        "status": { "phase": "Running", "qosClass": "Burstable", "podIP": "10.0.42.7",
            "conditions": [{ "type": "Ready", "status": "True", "lastTransitionTime": "2026-12-02T10:00:05Z" }] }
    }))
    .expect("encode")
}

fn heartbeat_node() -> Vec<u8> {
    let mut labels = serde_json::Map::new();
    for (k, v) in [
        (
            "kubernetes.io/hostname",
            "ip-10-0-19-136.eu-west-1.compute.internal",
        ),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/region", "eu-west-1"),
        ("topology.kubernetes.io/zone", "eu-west-1b"),
        ("node.kubernetes.io/instance-type", "m6i.2xlarge"),
        ("node.kubernetes.io/hw-encrypt", "true"),
        ("net", "high"),
        ("type", "kwok"),
    ]
    .into_iter()
    .chain((0..6).map(|i| ("example.com/pool", ["a", "b", "c", "d", "e", "f"][i])))
    {
        labels.insert(k.to_owned(), json!(v));
    }
    let condition = |t: &str, status: &str| {
        json!({ "type": t, "status": status, "reason": format!("Kubelet{t}"),
                "message": format!("kubelet reports {t}"),
                "lastHeartbeatTime": "2026-12-05T04:31:02Z",
                "lastTransitionTime": "2026-12-05T04:27:41Z" })
    };
    let manager = |name: &str, sub: Option<&str>, paths: &[&str]| {
        let mut e = json!({ "manager": name, "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-05T04:31:02Z", "fieldsType": "FieldsV1",
            "fieldsV1": { "f:status": fields(paths) } });
        if let Some(sub) = sub {
            e["subresource"] = json!(sub);
        }
        e
    };
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "ip-10-0-19-136.eu-west-1.compute.internal",
            "uid": "6d1b7a0e-8a36-4a8e-9d55-0b8f3c1f1d2a", "resourceVersion": "918273",
            "creationTimestamp": "2026-12-05T04:27:41Z", "labels": labels,
            "annotations": { "kwok.x-k8s.io/node": "fake",
                             "node.alpha.kubernetes.io/ttl": "0" },
            "managedFields": [
                manager("placer-e2e", None, &["allocatable", "capacity"]),
                manager("kwok", Some("status"),
                        &["addresses", "conditions", "daemonEndpoints", "phase"]),
            ]
        },
        "spec": {},
        "status": {
            "capacity": { "cpu": "8", "memory": "32Gi", "pods": "110" },
            "allocatable": { "cpu": "7800m", "memory": "31Gi", "pods": "110" },
            "conditions": [condition("MemoryPressure", "False"), condition("DiskPressure", "False"),
                           condition("PIDPressure", "False"), condition("NetworkUnavailable", "False"),
                           condition("Ready", "True")],
            "addresses": [{ "type": "InternalIP", "address": "10.0.19.136" },
                          { "type": "Hostname", "address": "ip-10-0-19-136" }],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
            "nodeInfo": { "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                          "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "fake",
                          "kubeProxyVersion": "", "operatingSystem": "linux",
                          "architecture": "amd64" },
            "phase": "Running"
        }
    }))
    .expect("encode")
}

/// A named way to decode an object's bytes.
type Case<'a> = (&'a str, &'a dyn Fn(&[u8]));

/// Times both cases (before, after) on `bytes`, interleaved, and prints their p50s.
fn compare(what: &str, rounds: usize, cases: [Case<'_>; 2], bytes: &[u8]) {
    let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for _ in 0..rounds {
        for ((_, run), times) in cases.iter().zip(&mut times) {
            let t = Instant::now();
            run(black_box(bytes));
            times.push(t.elapsed());
        }
    }
    let p50 = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let [before, after] = &mut times;
    let (b, a) = (p50(before), p50(after));
    println!("{what} of {} bytes, {rounds} rounds", bytes.len());
    println!("{:<34} p50 {b:?}", cases[0].0);
    println!(
        "{:<34} p50 {a:?}  ({:.2}x)",
        cases[1].0,
        a.as_secs_f64() / b.as_secs_f64()
    );
}

fn main() {
    let rounds: usize = std::env::var("PLACER_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    compare(
        "pod",
        rounds,
        [
            ("k8s-openapi Pod + PodInfo", &|b| {
                let pod: Pod = serde_json::from_slice(b).expect("decode");
                black_box(PodInfo::from(&pod));
            }),
            ("Lean<Pod> + PodInfo", &|b| {
                let pod: Lean<Pod> = serde_json::from_slice(b).expect("decode");
                black_box(PodInfo::from(&pod.0));
            }),
        ],
        &replica(),
    );
    compare(
        "node heartbeat",
        rounds,
        [
            ("Lean<Node> + NodeInfo::from", &|b| {
                let node: Lean<Node> = serde_json::from_slice(b).expect("decode");
                black_box(NodeInfo::from(&node.0));
            }),
            ("LeanNode", &|b| {
                black_box(serde_json::from_slice::<LeanNode>(b).expect("decode"));
            }),
        ],
        &heartbeat_node(),
    );
}
