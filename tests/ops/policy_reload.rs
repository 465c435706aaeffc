//! Policy hot reload (design §4) against the real binary: a valid change is
//! put in force (visible in `/policy` and in `/prioritize` scores), an
//! invalid one is rejected with its `file:line:column`, counted, and the old
//! policy stays; ConfigMap-style `..data` symlink swaps are picked up.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::support::{
    Client, ConfigMapDir, RELOAD_TIMEOUT, Server, eventually, expect_scores, plain_pod_args,
    policy_args, replace_file, repo_file, scores,
};

const SUCCESS: &str = r#"placer_policy_reloads_total{result="success"}"#;
const FAILURE: &str = r#"placer_policy_reloads_total{result="failure"}"#;

/// The nodes scored: one per zone of examples/cluster.yaml, where zone-a
/// holds 3 priority-0 pods, zone-b 1, zone-c none at priority 0 (but 2 at
/// priority 1000).
const NODES: &[&str] = &["node-a1", "node-b1", "node-c1"];

/// ZoneSpread (weight 2) alone scores a plain pod: the emptier the zone, the
/// higher (`100 × (max + min − count) / max` with counts 3, 1, 0: 0, 67, 100).
const SPREAD: &[(&str, i64)] = &[("node-a1", 0), ("node-b1", 7), ("node-c1", 10)];
/// `reverse: true`: the fuller the zone, the higher.
const PACK: &[(&str, i64)] = &[("node-a1", 10), ("node-b1", 3), ("node-c1", 0)];
/// `countPods: All`: zone-c's priority-1000 pods count too (3, 1, 2 pods);
/// normalized as `100 × (max + min − count) / max`: 33, 100, 67.
const SPREAD_ALL: &[(&str, i64)] = &[("node-a1", 3), ("node-b1", 10), ("node-c1", 7)];

/// The repository's policy with only its extender profile: these tests
/// count zone-index dimensions, and the standalone profile has its own.
fn base() -> String {
    let text = fs::read_to_string(repo_file("policy.yaml")).expect("read policy.yaml");
    match text.find("\n  # Standalone mode") {
        Some(end) => text[..=end].to_string(),
        None => text,
    }
}

/// `text` with `from` replaced by `to`, which must occur.
#[track_caller]
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in the policy:\n{text}");
    text.replacen(from, to, 1)
}

fn reversed() -> String {
    edit(&base(), "reverse: false", "reverse: true")
}

fn count_all_weight_3() -> String {
    let text = edit(&base(), "countPods: SamePriority", "countPods: All");
    edit(&text, "weight: 2", "weight: 3")
}

/// ZoneSpread's entry in `/policy`.
#[track_caller]
fn zone_spread(server: &Server) -> Value {
    let reply = server.get("/policy");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let policy = reply.json();
    policy["profiles"][0]["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .find(|p| p["name"] == "ZoneSpread")
        .cloned()
        .unwrap_or_else(|| panic!("no ZoneSpread in {policy}"))
}

#[track_caller]
fn prioritize(server: &Server) -> Vec<(String, i64)> {
    scores(&server.post("/prioritize", &plain_pod_args(NODES)))
}

/// Waits until ZoneSpread's `/policy` entry satisfies `pred`.
#[track_caller]
fn wait_policy(server: &Server, what: &str, pred: impl Fn(&Value) -> bool) {
    eventually(what, RELOAD_TIMEOUT, || {
        pred(&zone_spread(server)).then_some(())
    });
}

fn start(dir: &Path, policy: &Path) -> Server {
    Server::start(dir, &policy_args(policy), Client::Plain)
}

#[test]
fn valid_changes_apply_and_invalid_ones_are_rejected_with_their_position() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    fs::write(&policy, base()).expect("write policy");
    let server = start(dir.path(), &policy);
    let spread = zone_spread(&server);
    assert_eq!(spread["weight"], 2, "{spread}");
    assert_eq!(spread["args"]["reverse"], false, "{spread}");
    assert_eq!(prioritize(&server), expect_scores(SPREAD));

    // A valid change: packing instead of spreading.
    replace_file(&policy, &reversed());
    wait_policy(&server, "reverse: true in /policy", |z| {
        z["args"]["reverse"] == true
    });
    assert_eq!(prioritize(&server), expect_scores(PACK));
    assert_eq!(server.metric(SUCCESS), 1.0);
    assert_eq!(server.metric(FAILURE), 0.0);

    // An invalid change: an unknown field. Rejected, logged with its
    // position, counted; the previous policy stays in force.
    let bad = edit(
        &reversed(),
        "reverse: true }",
        "reverse: true, bogusField: 1 }",
    );
    let (line, column) = bad
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("bogusField").map(|c| (i + 1, c + 1)))
        .expect("bogusField is in the text");
    replace_file(&policy, &bad);
    eventually("the failure counter reaches 1", RELOAD_TIMEOUT, || {
        (server.metric(FAILURE) == 1.0).then_some(())
    });
    let position = format!("{}:{line}:{column}: ", policy.display());
    eventually("the rejection is logged", RELOAD_TIMEOUT, || {
        server.log_text().contains(&position).then_some(())
    });
    let log = server.log_text();
    let logged = log
        .lines()
        .find(|l| l.contains(&position))
        .expect("the line with the position");
    assert!(
        logged.contains("bogusField") && logged.contains("WARN"),
        "the warning names the field: {logged}"
    );
    let spread = zone_spread(&server);
    assert_eq!(spread["args"]["reverse"], true, "{spread}");
    assert!(spread["args"].get("bogusField").is_none(), "{spread}");
    assert_eq!(prioritize(&server), expect_scores(PACK));
    assert_eq!(server.metric(SUCCESS), 1.0);

    // A valid change again: applied, including a new counting dimension
    // (the zone index is rebuilt for countPods: All).
    replace_file(&policy, &count_all_weight_3());
    wait_policy(&server, "weight 3 and countPods: All in /policy", |z| {
        z["weight"] == 3 && z["args"]["countPods"] == "All"
    });
    assert_eq!(zone_spread(&server)["args"]["reverse"], false);
    assert_eq!(prioritize(&server), expect_scores(SPREAD_ALL));
    let zones = server.get("/debug/zones").json();
    assert_eq!(zones[0]["dimension"]["selector"], "All", "{zones}");
    assert_eq!(
        zones.as_array().map(Vec::len),
        Some(1),
        "the old dimension is dropped: {zones}"
    );
    assert_eq!(server.metric(SUCCESS), 2.0);
    assert_eq!(server.metric(FAILURE), 1.0);
    assert!(
        server.log_text().contains("policy reloaded"),
        "{}",
        server.log_text()
    );
}

#[test]
fn configmap_symlink_swaps_are_reloaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = base();
    let mut volume = ConfigMapDir::new(&dir.path().join("config"), &[("policy.yaml", &text)]);
    let policy = volume.path("policy.yaml");
    assert!(
        fs::symlink_metadata(&policy)
            .expect("policy symlink")
            .file_type()
            .is_symlink()
    );
    let server = start(dir.path(), &policy);
    assert_eq!(prioritize(&server), expect_scores(SPREAD));

    volume.swap(&[("policy.yaml", &reversed())]);
    wait_policy(&server, "reverse: true after the first swap", |z| {
        z["args"]["reverse"] == true
    });
    assert_eq!(prioritize(&server), expect_scores(PACK));

    // A second swap: the watch survives the removal of the first target.
    volume.swap(&[("policy.yaml", &count_all_weight_3())]);
    wait_policy(&server, "countPods: All after the second swap", |z| {
        z["args"]["countPods"] == "All"
    });
    assert_eq!(prioritize(&server), expect_scores(SPREAD_ALL));
    assert_eq!(server.metric(SUCCESS), 2.0);
    assert_eq!(server.metric(FAILURE), 0.0);
}

#[test]
fn in_place_edits_are_reloaded() {
    // `echo ... > policy.yaml` and most editors' plain save truncate and
    // rewrite the file: a reader may see it empty for a moment, but the
    // final content must win.
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    fs::write(&policy, base()).expect("write policy");
    let server = start(dir.path(), &policy);
    assert_eq!(prioritize(&server), expect_scores(SPREAD));

    fs::write(&policy, reversed()).expect("rewrite policy in place");
    wait_policy(&server, "reverse: true after an in-place write", |z| {
        z["args"]["reverse"] == true
    });
    assert_eq!(prioritize(&server), expect_scores(PACK));
    eventually("the success is counted", RELOAD_TIMEOUT, || {
        (server.metric(SUCCESS) >= 1.0).then_some(())
    });
}
