//! Both decoders, and that they agree.

use k8s_openapi::api::core::v1::Pod;

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
                        {"name": "e", "emptyDir": {}},
                        {"name": "g", "gcePersistentDisk": {"pdName": "pd", "readOnly": true}},
                        {"name": "r", "rbd": {"monitors": ["m"], "image": "i"}},
                        {"name": "a", "awsElasticBlockStore": {"volumeID": "aws://z/vol-1"}}]
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
    assert_eq!(s.inline_disks.len(), 3);
    assert_eq!(
        s.inline_disks[1],
        InlineDisk::Rbd {
            monitors: vec!["m".into()],
            pool: "rbd".into(),
            image: "i".into(),
            read_only: false
        }
    );
    let ebs = s.inline_disks[2].attach_source().unwrap();
    assert_eq!(
        (ebs.driver.as_str(), ebs.handle.as_str()),
        ("ebs.csi.aws.com", "vol-1")
    );
    assert!(
        s.inline_disks[1].attach_source().is_none(),
        "RBD is not counted"
    );
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
    let body = r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]}}"#;
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
