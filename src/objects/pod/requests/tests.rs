//! Cases from component-helpers' `TestPodRequests*` tables
//! (`resource/helpers_test.go`), checked through the JSON decoder so the
//! status fields are read as the API sends them.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::objects::PodInfo;
use crate::objects::resources::Resources;

/// The pod decoded both ways (they must agree), with its spec-only and
/// counted (status-aware) requests.
fn decode(pod: Value) -> (Resources, Resources, PodInfo) {
    let wire: PodInfo = serde_json::from_value(pod.clone()).unwrap();
    let api: Pod = serde_json::from_value(pod).unwrap();
    assert_eq!(wire, PodInfo::from(&api), "both decoders agree");
    assert_eq!(wire.spec.counted, PodInfo::from(&api).spec.counted);
    (wire.spec.requests.clone(), wire.spec.counted.clone(), wire)
}

fn container(name: &str, requests: Value) -> Value {
    json!({"name": name, "image": "i", "resources": {"requests": requests}})
}

fn infeasible() -> Value {
    json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}])
}

#[test]
fn resize_status_counts_on_the_node_not_for_the_filter() {
    // "resized, infeasible": the status wins over a spec the node cannot give.
    let (spec, counted, _) = decode(json!({
        "spec": {"containers": [container("c", json!({"cpu": "4"}))]},
        "status": {"conditions": infeasible(), "containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
             "resources": {"requests": {"cpu": "2"}}}]}
    }));
    assert_eq!((spec.milli_cpu, counted.milli_cpu), (4000, 2000));

    // "resized, infeasible & in-progress": allocated 4 over actuated 2, spec 6 ignored.
    let (_, counted, _) = decode(json!({
        "spec": {"containers": [container("c", json!({"cpu": "6"}))]},
        "status": {"conditions": infeasible(), "containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
             "allocatedResources": {"cpu": "4"}, "resources": {"requests": {"cpu": "2"}}}]}
    }));
    assert_eq!(counted.milli_cpu, 4000);

    // "resized, no resize status": the larger spec counts.
    let (_, counted, _) = decode(json!({
        "spec": {"containers": [container("c", json!({"cpu": "4"}))]},
        "status": {"containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
             "resources": {"requests": {"cpu": "2"}}}]}
    }));
    assert_eq!(counted.milli_cpu, 4000);

    // "resized: per-resource 3-way maximum".
    let (_, counted, _) = decode(json!({
        "spec": {"containers": [container("c",
            json!({"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"}))]},
        "status": {"containerStatuses": [
            {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
             "allocatedResources": {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
             "resources": {"requests": {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"}}}]}
    }));
    assert_eq!(
        (counted.milli_cpu, counted.memory, counted.ephemeral_storage),
        (30, 30_000_000, 30_000_000_000)
    );
}

#[test]
fn pod_level_requests_replace_the_containers_sum() {
    // "pod level memory and container level cpu resources".
    let (spec, _, _) = decode(json!({"spec": {
        "resources": {"requests": {"memory": "2Mi"}},
        "containers": [container("c", json!({"cpu": "2m"}))]}}));
    assert_eq!((spec.milli_cpu, spec.memory), (2, 2 << 20));

    // "pod level unsupported resources set at pod-level": not pod-level at all.
    let (spec, _, _) = decode(json!({"spec": {
        "resources": {"requests": {"ephemeral-storage": "2Mi"}},
        "containers": [container("c", json!({"memory": "3Mi"}))]}}));
    assert_eq!((spec.memory, spec.ephemeral_storage), (3 << 20, 0));

    // "pod-level resources, container-level resources, init and sidecar container set".
    let (spec, _, _) = decode(json!({"spec": {
        "resources": {"requests": {"memory": "15Mi", "cpu": "18m"}},
        "initContainers": [
            {"name": "s", "image": "i", "restartPolicy": "Always",
             "resources": {"requests": {"memory": "5Mi", "cpu": "4m"}}},
            container("i", json!({"memory": "6Mi", "cpu": "8m"}))],
        "containers": [container("c", json!({"memory": "3Mi", "cpu": "2m"}))],
        "overhead": {"cpu": "1m"}}}));
    assert_eq!(
        (spec.milli_cpu, spec.memory),
        (19, 15 << 20),
        "overhead on top"
    );

    // Hugepages are pod-level resources too.
    let (spec, _, _) = decode(json!({"spec": {
        "resources": {"requests": {"hugepages-2Mi": "10Mi"}},
        "containers": [container("c", json!({"cpu": "1", "hugepages-2Mi": "4Mi"}))]}}));
    assert_eq!(spec.scalar["hugepages-2Mi"], 10 << 20);
    assert_eq!(spec.milli_cpu, 1000);
}

#[test]
fn pod_level_resize_status() {
    // "pod level requests/limits with PLR vertical scaling enabled and status populated".
    let plr = |conditions: Value, spec_cpu: &str, allocated: &str, actuated: &str| {
        decode(json!({
            "spec": {"resources": {"requests": {"cpu": spec_cpu}},
                     "containers": [container("c1", json!({"cpu": "1"}))]},
            "status": {"conditions": conditions, "allocatedResources": {"cpu": allocated},
                       "resources": {"requests": {"cpu": actuated}}}
        }))
    };
    let (spec, counted, _) = plr(json!([]), "2", "3", "3.5");
    assert_eq!((spec.milli_cpu, counted.milli_cpu), (2000, 3500));
    // "... and infeasible resize": the spec's 10 is left out.
    let (spec, counted, _) = plr(infeasible(), "10", "3", "4");
    assert_eq!((spec.milli_cpu, counted.milli_cpu), (10_000, 4000));
}

#[test]
fn non_zero_defaults_replace_only_missing_requests() {
    // An explicit zero is a request (kube-scheduler's `applyNonMissing`).
    let (_, _, pod) = decode(json!({"spec": {"containers": [
        container("a", json!({"cpu": "0"})),
        container("b", json!({}))]}}));
    assert_eq!(pod.spec.non_zero_requests.milli_cpu, 100);
    assert_eq!(pod.spec.non_zero_requests.memory, 2 * (200 << 20));
    assert_eq!(pod.spec.scoring_requests, pod.spec.non_zero_requests);

    // With pod-level cpu, a memory request on one container means the node
    // counts no default memory. The pod's own Fit score adds 200Mi for the
    // container without one and ignores the pod level (kube-scheduler's Fit
    // scorer is built without the PodLevelResources flag): 100m + 100m.
    let (_, _, pod) = decode(json!({"spec": {
        "resources": {"requests": {"cpu": "500m"}},
        "containers": [container("a", json!({"memory": "1Gi"})), container("b", json!({}))]}}));
    let s = &pod.spec;
    assert_eq!((s.requests.milli_cpu, s.requests.memory), (500, 1 << 30));
    assert_eq!(
        (s.non_zero_requests.milli_cpu, s.non_zero_requests.memory),
        (500, 1 << 30)
    );
    assert_eq!(
        (s.scoring_requests.milli_cpu, s.scoring_requests.memory),
        (200, (1 << 30) + (200 << 20))
    );

    // Pod-level requests that name neither: both levels missing → defaults.
    let (_, _, pod) = decode(json!({"spec": {
        "resources": {"requests": {"hugepages-2Mi": "2Mi"}},
        "containers": [container("a", json!({}))]}}));
    assert_eq!(
        (
            pod.spec.non_zero_requests.milli_cpu,
            pod.spec.non_zero_requests.memory
        ),
        (100, 200 << 20)
    );
}
