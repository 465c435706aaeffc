//! `filterTimeout` and the step budget: the args as kube-scheduler takes
//! them, a claim built to explode the search given up on in bounded time
//! with kube-scheduler's text (or placer's own for the step budget), the
//! other nodes of the attempt stopped, and ordinary claims untouched.

use k8s_openapi::api::resource::v1::DeviceClass;
use serde_json::json;

use super::*;
use crate::dra::{AllocatedDevices, Allocator, STEP_BUDGET};

/// Devices with `numa: 0` on each node of [`exploding_cluster`].
const SAME_NUMA: usize = 200;

/// A cluster with class `gpu` (every device of the driver), nodes `nodes`
/// with [`SAME_NUMA`] devices on NUMA node 0 and one on NUMA node 1 each,
/// and `claims`.
fn exploding_cluster(nodes: &[&str], claims: Vec<ResourceClaim>) -> ClusterState {
    let mut c = cluster(claims);
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    }))
    .unwrap();
    c.dra_mut().apply_class(Arc::new(class));
    let slices = nodes
        .iter()
        .map(|node| {
            let mut devices: Vec<serde_json::Value> = (0..SAME_NUMA)
                .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"numa": {"int": 0}}}))
                .collect();
            devices.push(json!({"name": "odd", "attributes": {"numa": {"int": 1}}}));
            let slice: ResourceSlice = serde_json::from_value(json!({
                "metadata": {"name": format!("{node}-gpus")},
                "spec": {"driver": "gpu.example.com", "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": devices},
            }))
            .unwrap();
            Arc::new(slice)
        })
        .collect();
    c.dra_mut().replace_slices(slices);
    c
}

/// A claim `name` of `requests` (JSON) all bound by `matchAttribute` on
/// `numa`.
fn claim_of(name: &str, requests: serde_json::Value) -> ResourceClaim {
    let names: Vec<serde_json::Value> = requests
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["name"].clone())
        .collect();
    let mut c: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid")},
        "spec": {"devices": {
            "requests": requests,
            "constraints": [{"requests": names, "matchAttribute": "gpu.example.com/numa"}],
        }},
    }))
    .unwrap();
    c.status = None;
    c
}

fn exact(name: &str, count: i64, selector: Option<&str>) -> serde_json::Value {
    let selectors: Vec<serde_json::Value> = selector
        .map(|e| json!({"cel": {"expression": e}}))
        .into_iter()
        .collect();
    json!({"name": name, "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
           "count": count, "selectors": selectors}})
}

/// Four devices of one NUMA node, and then the one device of the other:
/// `matchAttribute` rejects it after every one of the C(200, 4), some 65
/// million, combinations of the first request.
fn exploding_claim() -> ResourceClaim {
    claim_of(
        "explode",
        json!([
            exact("many", 4, None),
            exact(
                "odd",
                1,
                Some("device.attributes['gpu.example.com'].numa == 1")
            ),
        ]),
    )
}

/// Two devices of one NUMA node: an ordinary claim.
fn ordinary_claim() -> ResourceClaim {
    claim_of("pair", json!([exact("pair", 2, None)]))
}

fn args(yaml: &str) -> Result<DynamicResourcesArgs, String> {
    serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
}

fn plugin(filter_timeout: &str) -> DynamicResources {
    DynamicResources::new(&args(&format!("filterTimeout: {filter_timeout}")).unwrap())
}

/// PreFilter then Filter on each of `nodes`, in one attempt.
fn attempt(
    plugin: &DynamicResources,
    claim: &str,
    nodes: &[&str],
    cluster: &ClusterState,
) -> Vec<Status> {
    let p = pod(vec![named(claim)]);
    let mut state = CycleState::new();
    let pre = plugin.pre_filter(&mut state, &p, cluster);
    assert!(pre.is_success(), "{pre:?}");
    nodes
        .iter()
        .map(|n| plugin.filter(&state, &p, &node(n), cluster))
        .collect()
}

#[test]
fn filter_timeout_is_kube_schedulers_argument() {
    let default = DynamicResources::default();
    assert_eq!(
        default.filter_timeout,
        Some(std::time::Duration::from_secs(10))
    );
    assert_eq!(default.step_budget, STEP_BUDGET);
    assert_eq!(plugin("0").filter_timeout, None, "0 turns it off");
    assert_eq!(plugin("0s").filter_timeout, None);
    assert_eq!(
        plugin("1m30s").filter_timeout,
        Some(std::time::Duration::from_secs(90))
    );
    // ValidateDynamicResourcesArgs: zero or positive.
    let e = args("filterTimeout: -1s").unwrap_err();
    assert!(
        e.contains("Invalid value: \"-1s\": must be zero or positive"),
        "{e}"
    );
    assert!(args("filterTimeout: -0s").is_ok());
    let e = args("filterTimeout: soon").unwrap_err();
    assert!(e.contains("\"soon\" is not a duration"), "{e}");
    // Written back as given.
    let a = args("filterTimeout: 1s").unwrap();
    assert_eq!(
        serde_yaml_ng::to_string(&a).unwrap().trim(),
        "filterTimeout: 1s"
    );
}

/// A tiny timeout on the exploding claim: the node's Filter returns in
/// bounded time with kube-scheduler's Error, and every other node of the
/// attempt is stopped at once, as kube-scheduler cancels them.
#[test]
fn an_exploding_claim_times_out_with_kube_schedulers_text() {
    let nodes = ["n1", "n2", "n3"];
    let cluster = exploding_cluster(&nodes, vec![exploding_claim()]);
    let statuses = attempt(&plugin("20ms"), "explode", &nodes, &cluster);
    assert_eq!(statuses[0].code(), Code::Error);
    assert_eq!(
        statuses[0].message(),
        "node n1: timed out trying to allocate devices"
    );
    for s in &statuses[1..] {
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.message(),
            "asked by caller to stop allocating devices: some other Filter operation failed"
        );
    }
}

/// With the timeout off, the step budget still ends the search, with
/// placer's own text; the next attempt starts with a fresh budget.
#[test]
fn the_step_budget_bounds_the_search_with_the_timeout_off() {
    let nodes = ["n1", "n2"];
    let cluster = exploding_cluster(&nodes, vec![exploding_claim(), ordinary_claim()]);
    let plugin = plugin("0").with_step_budget(100_000);
    let statuses = attempt(&plugin, "explode", &nodes, &cluster);
    assert_eq!(statuses[0].code(), Code::Error);
    assert_eq!(
        statuses[0].message(),
        "node n1: gave up trying to allocate devices: the search exceeded 100000 steps"
    );
    assert_eq!(statuses[1].code(), Code::UnschedulableAndUnresolvable);
    // Another pod's attempt is not held by the first one's.
    let statuses = attempt(&plugin, "pair", &nodes, &cluster);
    assert!(statuses.iter().all(Status::is_success), "{statuses:?}");
}

/// An ordinary claim gets the same devices under the default limits as
/// without any, and a claim whose answer needs no search at all is
/// unaffected by a budget it could never reach.
#[test]
fn ordinary_claims_get_the_same_verdict_within_the_limits() {
    let nodes = ["n1", "n2"];
    let cluster = exploding_cluster(&nodes, vec![ordinary_claim()]);
    let limited = DynamicResources::default();
    let p = pod(vec![named("pair")]);
    let mut state = CycleState::new();
    assert!(limited.pre_filter(&mut state, &p, &cluster).is_success());
    for n in nodes {
        assert!(limited.filter(&state, &p, &node(n), &cluster).is_success());
    }
    let cycle = state.read::<DraCycle>().unwrap();
    let by_node = cycle.by_node.lock();
    let chosen: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            by_node[*n].results[0]
                .devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .map(|r| r.device.clone())
                .collect()
        })
        .collect();
    assert_eq!(chosen, vec![vec!["gpu-0", "gpu-1"]; 2]);
    // The unlimited allocator chooses the same.
    let dra = cluster.dra();
    let class_of = |name: &str| dra.class(name);
    let unlimited = Allocator::new(vec![ordinary_claim()], &class_of).unwrap();
    let (own, _) = dra.slices_for("n1");
    let results = unlimited
        .allocate(
            &node("n1"),
            own,
            dra.all_slices(),
            &AllocatedDevices::default(),
            dra.taint_rules(),
        )
        .unwrap()
        .unwrap();
    assert_eq!(results, by_node["n1"].results);
}
