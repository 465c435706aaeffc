//! Extended resources backed by DRA, on the cache alone: which nodes leave
//! a pod's `example.com/gpu` to a DeviceClass, the claim Filter builds for
//! them, the devices Reserve keeps in flight, and a claim an earlier
//! attempt left behind (kube-scheduler's `TestPlugin` cases
//! "extended-resource-*" and "stale-extended-resource-claim" in spirit).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::DeviceClass;

use super::super::cycle::NodeChoice;
use super::super::extended::{ANNOTATION, ERR_STALE};
use super::*;

const GPU: &str = "example.com/gpu";

/// A cluster whose class `gpu` serves `example.com/gpu`, with one device
/// on each of `nodes`, and `claims`.
fn gpu_cluster(nodes: &[&str], claims: Vec<ResourceClaim>) -> ClusterState {
    let mut c = cluster(claims);
    let class: DeviceClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gpu"},
        "spec": {"extendedResourceName": GPU},
    }))
    .unwrap();
    c.dra_mut().apply_class(Arc::new(class));
    let slices = nodes
        .iter()
        .map(|node| {
            Arc::new(
                serde_json::from_value::<ResourceSlice>(serde_json::json!({
                    "metadata": {"name": format!("{node}-gpus")},
                    "spec": {"driver": "gpu.example.com", "nodeName": node,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                             "devices": [{"name": "gpu-0"}]},
                }))
                .unwrap(),
            )
        })
        .collect();
    c.dra_mut().replace_slices(slices);
    c
}

/// A pod `name` whose container `main` asks for `count` GPUs (and a cpu,
/// which sorts before the GPU among its request names).
fn gpu_pod(name: &str, count: &str) -> PodInfo {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid")},
        "spec": {"containers": [{"name": "main", "resources": {
            "requests": {"cpu": "1", GPU: count},
            "limits": {GPU: count},
        }}]},
    }))
    .unwrap();
    PodInfo::from(&pod)
}

/// A node with `gpus` of `example.com/gpu` in its allocatable (a device plugin's).
fn node_with(name: &str, gpus: Option<&str>) -> NodeInfo {
    let mut n = node(name);
    if let Some(g) = gpus {
        n.allocatable = crate::plugins::test_support::res(&[(GPU, g)]);
    }
    n
}

fn choice(state: &CycleState, node: &str) -> Option<Arc<NodeChoice>> {
    state.read::<DraCycle>()?.by_node.lock().get(node).cloned()
}

#[test]
fn a_node_without_the_resource_gets_a_claim_for_it() {
    let plugin = DynamicResources::default();
    let c = gpu_cluster(&["n1", "n2"], vec![]);
    let p = gpu_pod("p", "1");
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
    assert!(
        plugin
            .filter(&state, &p, &node_with("n1", None), &c)
            .is_success()
    );
    let n1 = choice(&state, "n1").unwrap();
    let extended = n1.extended.as_ref().unwrap();
    let requests = extended
        .claim
        .spec
        .as_ref()
        .unwrap()
        .devices
        .as_ref()
        .unwrap();
    let requests = requests.requests.as_ref().unwrap();
    assert_eq!(requests.len(), 1);
    // `cpu` sorts first among the container's request names.
    assert_eq!(requests[0].name, "container-0-request-1");
    assert_eq!(
        requests[0]
            .exactly
            .as_ref()
            .map(|e| (&*e.device_class_name, e.count)),
        Some(("gpu", Some(1)))
    );
    let meta = &extended.claim.metadata;
    assert_eq!(meta.generate_name.as_deref(), Some("p-extended-resources-"));
    assert_eq!(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION))
            .map(String::as_str),
        Some("true")
    );
    let devices = extended
        .allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref());
    assert_eq!(devices.map(|r| r[0].device.as_str()), Some("gpu-0"));
    assert_eq!(extended.mappings[0].request_name, "container-0-request-1");
    // A node whose device plugin provides the resource needs no claim.
    assert!(
        plugin
            .filter(&state, &p, &node_with("n3", Some("1")), &c)
            .is_success()
    );
    assert!(choice(&state, "n3").is_none());
    // Two GPUs do not fit a node with one device.
    let two = gpu_pod("two", "2");
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &two, &c).is_success());
    let s = plugin.filter(&state, &two, &node_with("n1", None), &c);
    assert_eq!(s.message(), ERR_CANNOT_ALLOCATE);
}

#[test]
fn a_pod_without_served_resources_is_skipped() {
    let plugin = DynamicResources::default();
    let c = cluster(vec![]);
    let mut state = CycleState::new();
    let s = plugin.pre_filter(&mut state, &gpu_pod("p", "1"), &c);
    assert_eq!(s.code(), Code::Skip);
}

/// Reserve keeps the chosen device in flight: the next pod finds no
/// free device on the node; Unreserve gives it back.
#[test]
fn reserve_keeps_the_device_from_the_next_pod_until_unreserve() {
    let plugin = DynamicResources::default();
    let c = gpu_cluster(&["n1"], vec![]);
    let n1 = node_with("n1", None);
    let first = gpu_pod("first", "1");
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &first, &c).is_success());
    assert!(plugin.filter(&state, &first, &n1, &c).is_success());
    assert!(plugin.reserve(&mut state, &first, "n1").is_success());

    let second = gpu_pod("second", "1");
    let filter_second = || {
        let mut s = CycleState::new();
        assert!(plugin.pre_filter(&mut s, &second, &c).is_success());
        plugin.filter(&s, &second, &n1, &c)
    };
    assert_eq!(filter_second().message(), ERR_CANNOT_ALLOCATE);
    assert!(plugin.unreserve(&mut state, &first, "n1").is_empty());
    assert!(filter_second().is_success());
}

/// A claim an earlier attempt created for the pod: every node rejects the
/// pod, and PostFilter deletes the claim so that the next attempt starts
/// anew.
#[test]
fn a_stale_claim_is_deleted_by_post_filter() {
    let plugin = DynamicResources::default();
    let p = gpu_pod("p", "1");
    let mut stale = claim("p-extended-resources-x1");
    stale.metadata.annotations = Some([(ANNOTATION.to_owned(), "true".to_owned())].into());
    stale.metadata.owner_references = Some(vec![OwnerReference {
        controller: Some(true),
        uid: p.uid.clone(),
        ..OwnerReference::default()
    }]);
    let mut c = gpu_cluster(&["n1"], vec![stale]);
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &p, &c).is_success());
    let s = plugin.filter(&state, &p, &node_with("n1", None), &c);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), ERR_STALE);
    let result = post_filter_on(plugin, &p, &state, &mut c);
    assert_eq!(
        result.status.message(),
        "deletion of ResourceClaim completed"
    );
    let what: Vec<&str> = result.writes.iter().map(|w| w.what()).collect();
    assert_eq!(what, ["delete ResourceClaim ns/p-extended-resources-x1"]);
}
