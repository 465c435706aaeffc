//! Tests of pools and node selection: which slices apply to a node (node
//! name, node selector, all nodes, per-device node selection), pool
//! generations, incomplete and invalid pools. Go case names in comments.

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

use super::AllocatedDevices;
use super::AllocatorError;
use super::tests::{all_request, allocate, claim, device, picked, request, slice, triple};

// "other-node": a slice of another node is not used.
#[test]
fn slices_of_other_nodes_are_not_used() {
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![slice("s1", "node-2", "pool-1", vec![device("d1")])],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(results, None);
}

// "network-attached-device" and "all-nodes": node selector slices apply to
// the nodes they select, and the result carries their selector; allNodes
// slices need no selector at all.
#[test]
fn node_selector_and_all_nodes_slices() {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "zone".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec!["a".to_owned()]),
            }]),
            match_fields: None,
        }],
    };
    let mut by_selector = slice("s1", "", "pool-1", vec![device("d1")]);
    by_selector.spec.node_name = None;
    by_selector.spec.node_selector = Some(selector.clone());
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![by_selector.clone()],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(results[0].node_selector, Some(selector.clone()));

    // Another zone: the slice does not apply.
    let mut elsewhere = by_selector;
    if let Some(values) = elsewhere.spec.node_selector.as_mut().and_then(|s| {
        s.node_selector_terms[0].match_expressions.as_mut()?[0]
            .values
            .as_mut()
    }) {
        *values = vec!["b".to_owned()];
    }
    let none = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![elsewhere],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(none, None);

    let mut everywhere = slice("s1", "", "pool-1", vec![device("d1")]);
    everywhere.spec.node_name = None;
    everywhere.spec.all_nodes = Some(true);
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![everywhere],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(results[0].node_selector, None);
}

// "incomplete-pool" (or "all-devices-of-incomplete-pool"): a pool missing a
// slice of its newest generation gives nothing, and "All" is an error.
#[test]
fn incomplete_pools_are_not_used() {
    let mut s = slice("s1", "node-1", "pool-1", vec![device("d1")]);
    s.spec.pool.resource_slice_count = 2;
    let none = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![s.clone()],
        &AllocatedDevices::new(),
    )
    .expect("no error");
    assert_eq!(none, None);
    let err = allocate(
        vec![claim("c1", vec![all_request("req-0")])],
        vec![s],
        &AllocatedDevices::new(),
    )
    .expect_err("All on an incomplete pool");
    assert_eq!(
        err,
        AllocatorError::Fatal(
            "claim default/c1, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated".to_owned()
        )
    );
}

// "old-generation": only the newest generation of a pool counts.
#[test]
fn only_the_newest_generation_is_used() {
    let old = slice("s-old", "node-1", "pool-1", vec![device("old")]);
    let mut new = slice("s-new", "node-1", "pool-1", vec![device("new")]);
    new.spec.pool.generation = 2;
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![old, new],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0", "pool-1", "new")]]
    );
}

// "duplicate-device-name": an invalid pool makes the node fail (not fatal).
#[test]
fn invalid_pools_fail_on_the_node() {
    let s = slice("s1", "node-1", "pool-1", vec![device("d1"), device("d1")]);
    let err = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![s],
        &AllocatedDevices::new(),
    )
    .expect_err("invalid pool");
    assert_eq!(
        err,
        AllocatorError::OnNode("invalid resource pools were encountered".to_owned())
    );
}

// "partitionable-devices-per-device-node-selection-nodename": with per-device
// node selection, each device says where it is reachable; a node-local device
// pins the claim to the node, an all-nodes one does not.
#[test]
fn per_device_node_selection() {
    let mut here = device("here");
    here.node_name = Some("node-1".to_owned());
    let mut there = device("there");
    there.node_name = Some("node-2".to_owned());
    let mut everywhere = device("everywhere");
    everywhere.all_nodes = Some(true);
    let mut s = slice("s1", "", "pool-1", vec![there, here, everywhere]);
    s.spec.node_name = None;
    s.spec.per_device_node_selection = Some(true);

    let results = allocate(
        vec![claim("c1", vec![request("req-0", 1)])],
        vec![s.clone()],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![triple("req-0", "pool-1", "here")]]
    );
    assert!(results[0].node_selector.is_some(), "pinned to node-1");

    // Two devices: "there" is never one of them.
    let results = allocate(
        vec![claim("c1", vec![request("req-0", 2)])],
        vec![s],
        &AllocatedDevices::new(),
    )
    .expect("no error")
    .expect("fits");
    assert_eq!(
        picked(&results),
        vec![vec![
            triple("req-0", "pool-1", "here"),
            triple("req-0", "pool-1", "everywhere")
        ]]
    );
}
