//! `POST /explain`: per node and per plugin, filter verdicts and raw,
//! normalized and weighted scores, totals, extender scores and ranks; as JSON
//! and, for curl users, as a text table.

use axum::http::StatusCode;
use serde_json::json;

use crate::support::{
    App, HW_REASON, NOT_FOUND, PodJson, ZONE, names_args, node_json, nodes_args,
    policy_without_default_profile,
};

/// A latency-sensitive pod that needs hardware encryption, over a1 (zone-a,
/// net high, hw), a2 (no hw), x1 (no zone, net "fast", hw) and an unknown name.
///
/// Feasible: a1 and x1. ZoneSpread normalizes over the feasible zoned nodes:
/// only a1 (4 pods), so M = m = 4 → 100*(4+4-4)/4 = 100; x1 has no zone → 0.
/// NetQoS: a1 100, x1 unknown tier → unknownTierScore 20.
/// Totals: a1 2*100+100 = 300 → 10.0 → 10; x1 0+20 = 20 → 0.67 → 1.
fn hw_request() -> String {
    names_args(
        &PodJson::new("api").latency_sensitive().needs_hw_encrypt(),
        &["a1", "a2", "x1", "ghost"],
    )
}

#[tokio::test]
async fn json_explains_filters_scores_and_ranks() {
    let app = App::default();
    let reply = app.post("/explain", hw_request()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.assert_json_content_type();
    let cap_ok = json!([{"plugin": "CapabilityFilter", "status": "Success", "reason": ""}]);
    assert_eq!(
        reply.json(),
        json!({
            "pod": "default/api",
            "profile": "extender",
            "scorePlugins": [
                {"name": "ZoneSpread", "weight": 2, "skipped": null},
                {"name": "NetQoS", "weight": 1, "skipped": null},
            ],
            "weightSum": 3,
            "error": null,
            "nodes": [
                {
                    "node": "a1", "feasible": true, "filters": cap_ok,
                    "scores": [
                        {"plugin": "ZoneSpread", "raw": 4, "normalized": 100, "weighted": 200, "note": null},
                        {"plugin": "NetQoS", "raw": 100, "normalized": 100, "weighted": 100, "note": null},
                    ],
                    "total": 300, "extenderScoreExact": 10.0, "extenderScore": 10, "rank": 1,
                },
                {
                    "node": "a2", "feasible": false,
                    "filters": [{"plugin": "CapabilityFilter", "status": "UnschedulableAndUnresolvable", "reason": HW_REASON}],
                    "scores": [],
                    "total": 0, "extenderScoreExact": 0.0, "extenderScore": 0, "rank": null,
                },
                {
                    "node": "x1", "feasible": true, "filters": cap_ok,
                    "scores": [
                        {"plugin": "ZoneSpread", "raw": null, "normalized": 0, "weighted": 0,
                         "note": format!("node has no {ZONE} label: scores 0")},
                        {"plugin": "NetQoS", "raw": 20, "normalized": 20, "weighted": 20,
                         "note": "node's net value is not a known tier"},
                    ],
                    "total": 20, "extenderScoreExact": 20.0 / 30.0, "extenderScore": 1, "rank": 2,
                },
                {
                    "node": "ghost", "feasible": false,
                    "filters": [{"plugin": "placer", "status": "Unschedulable", "reason": NOT_FOUND}],
                    "scores": [],
                    "total": 0, "extenderScoreExact": 0.0, "extenderScore": 0, "rank": null,
                },
            ],
        })
    );
}

#[tokio::test]
async fn json_says_why_a_plugin_was_skipped_and_ties_share_a_rank() {
    // No qos label: NetQoS skipped, Σ weight = 2. Zoned a1, a2 (4 pods each),
    // b1 (1 pod): M = 4, m = 1 → 25, 25, 100 → totals 50, 50, 200.
    let app = App::default();
    let body = names_args(&PodJson::new("web"), &["a1", "a2", "b1"]);
    let reply = app.post("/explain?format=json", body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    // CapabilityFilter's PreFilter skips a pod without the annotation: the
    // row says so instead of leaving the plugin out.
    let skipped = json!([{"plugin": "CapabilityFilter", "status": "Skip",
                          "reason": "pod requests no capability"}]);
    let zone_row = |raw: i64, normalized: i64| {
        json!([{"plugin": "ZoneSpread", "raw": raw, "normalized": normalized,
                "weighted": 2 * normalized, "note": null}])
    };
    assert_eq!(
        reply.json(),
        json!({
            "pod": "default/web",
            "profile": "extender",
            "scorePlugins": [
                {"name": "ZoneSpread", "weight": 2, "skipped": null},
                {"name": "NetQoS", "weight": 1, "skipped": "pod is not labelled qos=latency-sensitive"},
            ],
            "weightSum": 2,
            "error": null,
            "nodes": [
                {"node": "a1", "feasible": true, "filters": skipped, "scores": zone_row(4, 25),
                 "total": 50, "extenderScoreExact": 2.5, "extenderScore": 3, "rank": 2},
                {"node": "a2", "feasible": true, "filters": skipped, "scores": zone_row(4, 25),
                 "total": 50, "extenderScoreExact": 2.5, "extenderScore": 3, "rank": 2},
                {"node": "b1", "feasible": true, "filters": skipped, "scores": zone_row(1, 100),
                 "total": 200, "extenderScoreExact": 10.0, "extenderScore": 10, "rank": 1},
            ],
        })
    );
}

#[tokio::test]
async fn json_explains_full_nodes_too() {
    let app = App::default();
    let body = nodes_args(
        &PodJson::new("api").needs_hw_encrypt(),
        "{}",
        &[node_json("n1", &[(ZONE, "zone-z")])],
    );
    let reply = app.post("/explain", body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let node = &reply.json()["nodes"][0];
    assert_eq!(node["node"], "n1");
    assert_eq!(node["feasible"], false);
    assert_eq!(
        node["filters"],
        json!([{"plugin": "CapabilityFilter", "status": "UnschedulableAndUnresolvable", "reason": HW_REASON}])
    );
}

#[tokio::test]
async fn table_is_aligned_text() {
    // The same numbers as `json_explains_filters_scores_and_ranks`, one
    // column per active score plugin, failures and notes below the table.
    let app = App::default();
    let reply = app.post("/explain?format=table", hw_request()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(
        reply
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/plain; charset=utf-8")
    );
    let expected = "\
pod default/api  profile extender
  ZoneSpread (weight 2)
  NetQoS (weight 1)
NODE   FILTER  ZoneSpread raw/norm/weighted  NetQoS raw/norm/weighted  TOTAL  SCORE       RANK
a1     pass    4/100/200                     100/100/100               300    10.00 (10)  1
a2     FAIL    -                             -                         -      -           -
x1     pass    -/0/0                         20/20/20                  20     0.67 (1)    2
ghost  FAIL    -                             -                         -      -           -
a2: CapabilityFilter UnschedulableAndUnresolvable: node(s) lack hardware encryption
x1: ZoneSpread: node has no topology.kubernetes.io/zone label: scores 0
x1: NetQoS: node's net value is not a known tier
ghost: placer Unschedulable: node not found in placer cache
";
    assert_eq!(reply.body, expected, "\n{}", reply.body);
}

#[tokio::test]
async fn unsupported_format_is_a_bad_request() {
    let app = App::default();
    app.post("/explain?format=xml", hw_request())
        .await
        .assert_error(
            StatusCode::BAD_REQUEST,
            r#"format: unsupported "xml" (expected json or table)"#,
        );
    app.assert_still_serves().await;
}

#[tokio::test]
async fn pod_matching_no_profile_is_a_bad_request() {
    let app = App::with_policy(&policy_without_default_profile());
    app.post("/explain", hw_request()).await.assert_error(
        StatusCode::BAD_REQUEST,
        r#"placer has no profile for schedulerName "default-scheduler" and the policy sets no extender.defaultProfile"#,
    );
}
