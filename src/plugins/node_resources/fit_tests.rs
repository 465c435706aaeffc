//! Unit tests of the plugin, kept apart to keep the plugin file readable.
use std::sync::Arc;

use super::*;
use crate::k8s::validation::is_qualified_name;
use crate::objects::pod::PodSpecInfo;
use crate::plugins::test_support::{self, PodBuilder, res};

const MI: i64 = 1 << 20;

fn args(yaml: &str) -> NodeResourcesFitArgs {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn pod(name: &str, node: Option<&str>, requests: &[(&str, &str)]) -> PodInfo {
    PodBuilder::new(name).on(node).requests(requests).build()
}

fn node(allocatable: &[(&str, &str)]) -> NodeInfo {
    NodeInfo {
        allocatable: res(allocatable),
        ..NodeInfo::new("n1", Vec::<(String, String)>::new())
    }
}

/// A cluster with `node` and `existing` pods (requests each) bound to it.
fn cluster(node: &NodeInfo, existing: &[&[(&str, &str)]]) -> ClusterState {
    let mut c = ClusterState::default();
    c.apply_node(node.clone());
    for (i, r) in existing.iter().enumerate() {
        c.apply_pod(pod(&format!("p{i}"), Some(&node.name), r));
    }
    c
}

fn filter(a: &NodeResourcesFitArgs, p: &PodInfo, n: &NodeInfo, c: &ClusterState) -> Status {
    let plugin = NodeResourcesFit::new(a);
    let mut state = CycleState::new();
    assert_eq!(plugin.pre_filter(&mut state, p, c).code(), Code::Success);
    plugin.filter(&state, p, n, c)
}

fn score(a: &NodeResourcesFitArgs, p: &PodInfo, n: &NodeInfo, c: &ClusterState) -> i64 {
    let nodes = [Arc::new(n.clone())];
    let (s, scores) = test_support::score(&NodeResourcesFit::new(a), p, &nodes, c);
    assert!(s.is_success());
    scores[0].score
}

const NODE: &[(&str, &str)] = &[
    ("cpu", "4"),
    ("memory", "8Gi"),
    ("ephemeral-storage", "10Gi"),
    ("pods", "3"),
    ("example.com/gpu", "2"),
];

#[test]
fn fitting_pod_passes() {
    let n = node(NODE);
    let c = cluster(&n, &[&[("cpu", "1"), ("memory", "2Gi")]]);
    let p = pod(
        "new",
        None,
        &[("cpu", "3"), ("memory", "6Gi"), ("example.com/gpu", "2")],
    );
    assert_eq!(filter(&Default::default(), &p, &n, &c), Status::success());
}

#[test]
fn every_insufficient_resource_is_listed_in_kube_order() {
    let n = node(&[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("ephemeral-storage", "10Gi"),
        ("pods", "2"),
        ("example.com/gpu", "2"),
        ("example.com/fpga", "1"),
    ]);
    let used: &[(&str, &str)] = &[
        ("cpu", "3"),
        ("memory", "7Gi"),
        ("ephemeral-storage", "9Gi"),
        ("example.com/gpu", "1"),
    ];
    let c = cluster(&n, &[used, &[]]);
    let p = pod(
        "new",
        None,
        &[
            ("cpu", "2"),
            ("memory", "2Gi"),
            ("ephemeral-storage", "2Gi"),
            ("example.com/gpu", "2"),
            ("example.com/fpga", "1"),
        ],
    );
    let s = filter(&Default::default(), &p, &n, &c);
    assert_eq!(s.code(), Code::Unschedulable, "each fits an empty node");
    assert_eq!(
        s.reasons(),
        [
            "Too many pods",
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient ephemeral-storage",
            "Insufficient example.com/gpu",
        ]
    );
    assert_eq!(
        s.message(),
        "Too many pods, Insufficient cpu, Insufficient memory, \
         Insufficient ephemeral-storage, Insufficient example.com/gpu"
    );
}

#[test]
fn request_larger_than_the_whole_node_is_unresolvable() {
    let n = node(NODE);
    let c = cluster(&n, &[]);
    let s = filter(
        &Default::default(),
        &pod("new", None, &[("cpu", "5")]),
        &n,
        &c,
    );
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.reasons(), ["Insufficient cpu"]);
    let s = filter(
        &Default::default(),
        &pod("new", None, &[("memory", "1Gi"), ("example.com/tpu", "1")]),
        &n,
        &c,
    );
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        s.reasons(),
        ["Insufficient example.com/tpu"],
        "a resource the node lacks entirely"
    );
}

#[test]
fn pod_count_is_checked_even_for_pods_that_request_nothing() {
    let n = node(&[("cpu", "1"), ("pods", "2")]);
    let c = cluster(&n, &[&[("cpu", "1")], &[]]);
    let s = filter(&Default::default(), &pod("new", None, &[]), &n, &c);
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.reasons(), ["Too many pods"]);
    let n = node(&[("pods", "110")]);
    let c = cluster(&n, &[&[("cpu", "1")]]);
    assert_eq!(
        filter(&Default::default(), &pod("new", None, &[]), &n, &c),
        Status::success(),
        "zero requests skip every resource check"
    );
    let s = filter(&Default::default(), &pod("new", None, &[]), &node(&[]), &c);
    assert_eq!(s.reasons(), ["Too many pods"], "no pods allocatable at all");
}

#[test]
fn resources_the_pod_does_not_request_are_not_checked() {
    let n = node(&[("cpu", "1"), ("pods", "10")]);
    let c = cluster(&n, &[&[("cpu", "1")]]);
    let p = pod("new", None, &[("memory", "0"), ("example.com/gpu", "0")]);
    assert_eq!(filter(&Default::default(), &p, &n, &c), Status::success());
    let p = pod("new", None, &[("cpu", "1m")]);
    assert_eq!(
        filter(&Default::default(), &p, &n, &c).reasons(),
        ["Insufficient cpu"]
    );
}

#[test]
fn ignored_resources_and_groups_skip_extended_resources_only() {
    let n = node(&[("cpu", "1"), ("pods", "10")]);
    let c = cluster(&n, &[]);
    let p = pod(
        "new",
        None,
        &[
            ("example.com/gpu", "1"),
            ("vendor.io/nic", "1"),
            ("hugepages-2Mi", "2Mi"),
        ],
    );
    let all = [
        "Insufficient example.com/gpu",
        "Insufficient hugepages-2Mi",
        "Insufficient vendor.io/nic",
    ];
    assert_eq!(filter(&Default::default(), &p, &n, &c).reasons(), all);
    let a = args("ignoredResources: [example.com/gpu, hugepages-2Mi]");
    assert_eq!(
        filter(&a, &p, &n, &c).reasons(),
        ["Insufficient hugepages-2Mi", "Insufficient vendor.io/nic"],
        "hugepages are not an extended resource"
    );
    let a = args("ignoredResourceGroups: [vendor.io]");
    assert_eq!(
        filter(&a, &p, &n, &c).reasons(),
        ["Insufficient example.com/gpu", "Insufficient hugepages-2Mi"]
    );
    let a = args("ignoredResources: [example.com/gpu]\nignoredResourceGroups: [vendor.io]");
    assert_eq!(
        filter(&a, &p, &n, &c).reasons(),
        ["Insufficient hugepages-2Mi"]
    );
}

#[test]
fn existing_usage_is_subtracted_per_extended_resource() {
    let n = node(NODE);
    let c = cluster(&n, &[&[("example.com/gpu", "1")]]);
    let one = pod("new", None, &[("example.com/gpu", "1")]);
    assert_eq!(filter(&Default::default(), &one, &n, &c), Status::success());
    let two = pod("new", None, &[("example.com/gpu", "2")]);
    let s = filter(&Default::default(), &two, &n, &c);
    assert_eq!(
        (s.code(), s.message().as_str()),
        (Code::Unschedulable, "Insufficient example.com/gpu")
    );
}

#[test]
fn least_and_most_allocated_by_hand() {
    // 4 cpu, 8Gi; 1 cpu and 2Gi in use; the pod asks 500m and 3Gi.
    // cpu requested 1500/4000: least (2500×100)/4000 = 62, most 150000/4000 = 37.
    // memory requested 5Gi/8Gi: least 3×100/8 = 37, most 5×100/8 = 62.
    let n = node(NODE);
    let c = cluster(&n, &[&[("cpu", "1"), ("memory", "2Gi")]]);
    let p = pod("new", None, &[("cpu", "500m"), ("memory", "3Gi")]);
    assert_eq!(score(&Default::default(), &p, &n, &c), (62 + 37) / 2);
    let least = args(
        "scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 3}, {name: memory}]}",
    );
    assert_eq!(score(&least, &p, &n, &c), (62 * 3 + 37) / 4);
    assert_eq!(score(&least, &p, &n, &c), 55);
    let most = args(
        "scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 3}, {name: memory, weight: 1}]}",
    );
    assert_eq!(score(&most, &p, &n, &c), (37 * 3 + 62) / 4);
    assert_eq!(score(&most, &p, &n, &c), 43);
}

#[test]
fn zero_request_pods_score_with_the_non_zero_defaults() {
    // 1000m and 1000Mi; the pod counts as 100m and 200Mi.
    let n = node(&[("cpu", "1"), ("memory", "1000Mi")]);
    let c = cluster(&n, &[]);
    let p = pod("best-effort", None, &[]);
    // least: cpu 900×100/1000 = 90, memory 800×100/1000 = 80 → 85.
    assert_eq!(score(&Default::default(), &p, &n, &c), 85);
    // most: cpu 10, memory 20 → 15.
    assert_eq!(
        score(&args("scoringStrategy: {type: MostAllocated}"), &p, &n, &c),
        15
    );
    let defaults = Resources::default().with_non_zero_defaults();
    assert_eq!((defaults.milli_cpu, defaults.memory), (100, 200 * MI));
}

#[test]
fn overcommitted_nodes_score_zero_or_full() {
    let n = node(&[("cpu", "1"), ("memory", "1Gi")]);
    let c = cluster(&n, &[&[("cpu", "2"), ("memory", "2Gi")]]);
    let p = pod("new", None, &[("cpu", "1"), ("memory", "1Gi")]);
    assert_eq!(score(&Default::default(), &p, &n, &c), 0);
    assert_eq!(
        score(&args("scoringStrategy: {type: MostAllocated}"), &p, &n, &c),
        100
    );
}

#[test]
fn extended_resources_score_only_when_requested_and_present() {
    let a = args(
        "scoringStrategy: {type: LeastAllocated, resources: [{name: cpu}, {name: example.com/gpu, weight: 2}]}",
    );
    // gpu: 2 allocatable, 1 in use, pod asks 1 → requested 2: least 0.
    // cpu: 4000m; the existing pod requests no cpu and counts 100m (non-zero
    // default), the pod 1000m → (4000 - 1100) × 100 / 4000 = 72. (72 + 2×0) / 3 = 24.
    let n = node(NODE);
    let c = cluster(&n, &[&[("example.com/gpu", "1")]]);
    let gpu = pod("new", None, &[("cpu", "1"), ("example.com/gpu", "1")]);
    assert_eq!(score(&a, &gpu, &n, &c), 24);
    let plain = pod("new", None, &[("cpu", "1")]);
    assert_eq!(score(&a, &plain, &n, &c), 72, "gpu left out of the weights");
    let no_gpu_node = node(&[("cpu", "4")]);
    assert_eq!(
        score(&a, &gpu, &no_gpu_node, &c),
        72,
        "node without the resource (same name, so the same usage)"
    );
    let empty = node(&[]);
    assert_eq!(score(&a, &gpu, &empty, &c), 0, "nothing allocatable");
}

#[test]
fn ephemeral_storage_and_untracked_names_in_scoring() {
    let a = args(
        "scoringStrategy: {type: MostAllocated, resources: [{name: ephemeral-storage}, {name: pods, weight: 5}]}",
    );
    let n = node(NODE);
    let c = cluster(&n, &[&[("ephemeral-storage", "4Gi")]]);
    let p = pod("new", None, &[("ephemeral-storage", "1Gi")]);
    assert_eq!(score(&a, &p, &n, &c), 50, "5Gi of 10Gi; pods never scored");
}

#[test]
fn args_defaults_and_round_trip() {
    let d = args("{}");
    assert_eq!(d, NodeResourcesFitArgs::default());
    assert_eq!(d.scoring_strategy.kind, ScoringStrategyType::LeastAllocated);
    assert_eq!(
        d.scoring_strategy.resources,
        [ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
    );
    let a = args("scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 0}]}");
    assert_eq!(a.scoring_strategy.resources, [ResourceSpec::new("cpu", 1)]);
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["scoringStrategy"]["type"], "MostAllocated");
    assert_eq!(json["scoringStrategy"]["resources"][0]["weight"], 1);
    let back: NodeResourcesFitArgs = serde_json::from_value(json).unwrap();
    assert_eq!(back, a);
    let empty = args("scoringStrategy: {type: MostAllocated, resources: []}");
    assert_eq!(
        empty.scoring_strategy.resources.len(),
        2,
        "empty means default"
    );
}

#[test]
fn bad_args_are_rejected() {
    let err = |yaml: &str| {
        serde_yaml_ng::from_str::<NodeResourcesFitArgs>(yaml)
            .unwrap_err()
            .to_string()
    };
    assert!(err("ignoredResource: [x]").contains("unknown field"));
    assert!(err("scoringStrategy: {resources: [{name: cpu}]}").contains("type"));
    assert!(err("scoringStrategy: {type: Balanced}").contains("unknown variant"));
    for (bad, says) in [
        (
            "scoringStrategy: {type: RequestedToCapacityRatio}",
            "must be specified when type is RequestedToCapacityRatio",
        ),
        (
            "scoringStrategy: {type: LeastAllocated, requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}]}}",
            "must be nil when type is not RequestedToCapacityRatio",
        ),
        (
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: []}}",
            "at least one point",
        ),
        (
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 50, score: 1}, {utilization: 50, score: 2}]}}",
            "shape[1].utilization: 50: values must be sorted in increasing order",
        ),
        (
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 101, score: 1}]}}",
            "not in valid range [0, 100]",
        ),
        (
            "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape: [{utilization: 10, score: 11}]}}",
            "shape[0].score: 11: not in valid range [0, 10]",
        ),
    ] {
        let e = err(bad);
        assert!(e.contains(says), "{bad}: {e}");
    }
    let e = err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 101}]}");
    assert!(
        e.contains("resource weight of cpu not in valid range (0, 100]"),
        "{e}"
    );
    assert!(
        err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: -1}]}")
            .contains("not in valid range")
    );
    let e = err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu}, {name: cpu}]}");
    assert!(e.contains("resources[1].name: duplicate"), "{e}");
    assert!(
        err("scoringStrategy: {type: LeastAllocated, resources: [{name: ''}]}")
            .contains("non-empty")
    );
    assert!(
        err("scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, extra: 1}]}")
            .contains("unknown field")
    );
    let e = err("ignoredResourceGroups: [example.com/gpu]");
    assert!(e.contains("resource group name can't contain '/'"), "{e}");
    assert!(err("ignoredResources: ['-bad']").contains("ignoredResources[0]"));
    assert!(err("ignoredResources: ['Example.com/gpu']").contains("not a qualified name"));
}

#[test]
fn resource_name_classes_match_kubernetes() {
    for name in ["example.com/gpu", "nvidia.com/gpu", "foo.bar/baz-1"] {
        assert!(is_extended_resource_name(name), "{name}");
    }
    for name in [
        "cpu",
        "hugepages-2Mi",
        "kubernetes.io/foo",
        "requests.example.com/x",
        "example.com/-bad",
    ] {
        assert!(!is_extended_resource_name(name), "{name}");
    }
    assert!(is_scalar_resource_name("hugepages-1Gi"));
    assert!(is_scalar_resource_name("attachable-volumes-aws-ebs"));
    assert!(is_scalar_resource_name("example.com/gpu"));
    assert!(!is_scalar_resource_name("pods"));
    assert!(is_qualified_name("a.b/c_d.e-f"));
    assert!(!is_qualified_name("a/b/c"));
    assert!(!is_qualified_name(&"x".repeat(64)));
}

/// kube-scheduler's `TestRequestedToCapacityRatioScoringStrategy` cases (shape
/// 0% → 10, 100% → 0; cpu and memory weight 1).
#[test]
fn requested_to_capacity_ratio_follows_the_shape() {
    let a = args(
        "scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: \
         {shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]}}",
    );
    let node = |cpu: &str| node(&[("cpu", cpu), ("memory", "10000")]);
    let (n1, n2) = (node("4000"), node("6000"));
    // Nothing scheduled, 3000 cpu and 5000 memory requested: n1 cpu 75% → 25,
    // memory 50% → 50, round(37.5) = 38; n2 50% and 50% → 50.
    let p = pod("p", None, &[("cpu", "3000"), ("memory", "5000")]);
    assert_eq!(score(&a, &p, &n1, &cluster(&n1, &[])), 38);
    assert_eq!(score(&a, &p, &n2, &cluster(&n2, &[])), 50);
    // The same load already placed, and a pod without containers (no defaults).
    let empty = PodInfo {
        spec: Arc::new(PodSpecInfo::default()),
        ..pod("q", None, &[])
    };
    let placed: &[&[(&str, &str)]] = &[&[("cpu", "3000"), ("memory", "5000")]];
    assert_eq!(score(&a, &empty, &n1, &cluster(&n1, placed)), 38);
    assert_eq!(score(&a, &empty, &n2, &cluster(&n2, placed)), 50);
    // A resource scoring 0 (here: full) is left out of the mean, not averaged in.
    let full = pod("f", None, &[("cpu", "4000"), ("memory", "5000")]);
    assert_eq!(score(&a, &full, &n1, &cluster(&n1, &[])), 50);
}

#[test]
fn broken_linear_interpolates_and_clamps() {
    let shape = [(10, 0), (50, 100), (90, 20)];
    assert_eq!(broken_linear(&shape, 0), 0, "flat before the first point");
    assert_eq!(broken_linear(&shape, 30), 50);
    assert_eq!(broken_linear(&shape, 70), 60);
    assert_eq!(broken_linear(&shape, 100), 20, "flat after the last point");
}

/// kube-scheduler's `shouldDelegateResourceToDRA`: an extended resource a
/// DeviceClass serves is left to DynamicResources where the node's
/// allocatable has none of it, and checked as ever where a device plugin
/// provides it.
#[test]
fn an_extended_resource_a_device_class_serves_is_left_to_dynamic_resources() {
    let class: k8s_openapi::api::resource::v1::DeviceClass = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}),
    )
    .unwrap();
    let without = node(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "3")]);
    let with_plugin = node(&[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "3"),
        ("example.com/gpu", "1"),
    ]);
    let p = pod("new", None, &[("cpu", "1"), ("example.com/gpu", "2")]);
    let plain = cluster(&without, &[]);
    assert_eq!(
        filter(&Default::default(), &p, &without, &plain),
        Status::from_reasons(
            Code::UnschedulableAndUnresolvable,
            vec!["Insufficient example.com/gpu".into()]
        )
    );
    let mut served = cluster(&without, &[]);
    served.dra_mut().apply_class(Arc::new(class));
    assert_eq!(
        filter(&Default::default(), &p, &without, &served),
        Status::success()
    );
    assert_eq!(
        filter(&Default::default(), &p, &with_plugin, &served),
        Status::from_reasons(
            Code::UnschedulableAndUnresolvable,
            vec!["Insufficient example.com/gpu".into()]
        )
    );
}

/// kube-scheduler's scores of an extended resource a DeviceClass serves: on a node without it in
/// its allocatable, the class's devices the node can use are its allocatable and those
/// allocated its use (`calculateDRAResourceTotals`); a device plugin's allocatable still wins.
#[test]
fn a_resource_a_device_class_serves_scores_by_the_nodes_devices() {
    let class: k8s_openapi::api::resource::v1::DeviceClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gpu"},
        "spec": {"extendedResourceName": "example.com/gpu",
                 "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].kind == 'gpu'"}}]},
    }))
    .unwrap();
    // n1: four GPUs (one allocated) and a NIC the class does not select.
    let slice: k8s_openapi::api::resource::v1::ResourceSlice =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1-devices"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [
                         {"name": "gpu-0", "attributes": {"kind": {"string": "gpu"}}},
                         {"name": "gpu-1", "attributes": {"kind": {"string": "gpu"}}},
                         {"name": "gpu-2", "attributes": {"kind": {"string": "gpu"}}},
                         {"name": "gpu-3", "attributes": {"kind": {"string": "gpu"}}},
                         {"name": "nic-0", "attributes": {"kind": {"string": "nic"}}}]},
        }))
        .unwrap();
    let claim: k8s_openapi::api::resource::v1::ResourceClaim =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "used", "namespace": "ns"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}}},
        }))
        .unwrap();
    let a = args(
        "scoringStrategy: {type: LeastAllocated, resources: [{name: example.com/gpu, weight: 1}]}",
    );
    let p = pod("new", None, &[("cpu", "1"), ("example.com/gpu", "1")]);
    let n = node(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "3")]);
    let mut c = cluster(&n, &[]);
    assert_eq!(score(&a, &p, &n, &c), 0, "no class: nothing to score");
    c.dra_mut().apply_class(Arc::new(class));
    c.dra_mut().replace_slices(vec![Arc::new(slice)]);
    c.dra_mut().replace_claims(vec![Arc::new(claim)]);
    // 4 GPUs, 1 allocated, the pod asks 1: (4 - 2) × 100 / 4.
    assert_eq!(score(&a, &p, &n, &c), 50);
    let most = args(
        "scoringStrategy: {type: MostAllocated, resources: [{name: example.com/gpu, weight: 1}]}",
    );
    assert_eq!(score(&most, &p, &n, &c), 50);
    // A device plugin's allocatable counts as ever: 2, none in use, the pod asks 1.
    let with_plugin = node(&[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "3"),
        ("example.com/gpu", "2"),
    ]);
    assert_eq!(score(&a, &p, &with_plugin, &c), 50);
    let with_more = node(&[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "3"),
        ("example.com/gpu", "8"),
    ]);
    assert_eq!(score(&a, &p, &with_more, &c), 87);
}

#[test]
fn scaled_share_matches_128_bit_arithmetic_on_both_sides_of_overflow() {
    use crate::plugins::node_resources::strategy::scaled_share;
    // Below the 64-bit product's limit, at it, and past it (a 100 EiB node).
    for (part, whole) in [
        (3_500, 4_000),
        (i64::MAX / 100, i64::MAX / 50),
        (i64::MAX / 100 + 1, i64::MAX / 2),
        (i64::MAX / 3, i64::MAX / 2),
    ] {
        let exact = (i128::from(part) * 100 / i128::from(whole)) as i64;
        assert_eq!(scaled_share(part, 100, whole), exact, "{part} / {whole}");
    }
    assert_eq!(scaled_share(i64::MAX / 3, 100, i64::MAX / 2), 66);
}
