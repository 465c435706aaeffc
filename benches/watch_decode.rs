//! What decoding one watched pod costs, as the cache's watches decode it: into k8s-openapi's
//! `Pod` with `metadata.managedFields` (before) and through `Lean<Pod>`, which skips it (now),
//! each followed by the conversion to placer's `PodInfo`. The pod is a Deployment's replica as
//! a v1.37 API server sends it: three field managers (kube-controller-manager's create, the
//! scheduler's binding, the kubelet's status). Prints p50 per case; cases are interleaved round
//! by round so machine noise hits them alike.
//!
//! `cargo bench --bench watch_decode` (`PLACER_BENCH_ITERS` sets the rounds, default 20000).

use std::hint::black_box;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use placer::cache::lean::Lean;
use placer::objects::PodInfo;
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

fn main() {
    let rounds: usize = std::env::var("PLACER_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let bytes = replica();
    let mut full = Vec::with_capacity(rounds);
    let mut lean = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let pod: Pod = serde_json::from_slice(black_box(&bytes)).expect("decode");
        black_box(PodInfo::from(&pod));
        full.push(t.elapsed());
        let t = Instant::now();
        let pod: Lean<Pod> = serde_json::from_slice(black_box(&bytes)).expect("decode");
        black_box(PodInfo::from(&pod.0));
        lean.push(t.elapsed());
    }
    let p50 = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (f, l) = (p50(&mut full), p50(&mut lean));
    println!("pod of {} bytes, {rounds} rounds", bytes.len());
    println!("k8s-openapi Pod + PodInfo  p50 {f:?}");
    println!(
        "Lean<Pod> + PodInfo        p50 {l:?}  ({:.2}x)",
        l.as_secs_f64() / f.as_secs_f64()
    );
}
