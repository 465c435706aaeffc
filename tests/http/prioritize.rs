//! `POST /prioritize`: a bare array with one 0..=10 score per requested node,
//! computed as design §6 says. Every expected score is worked out by hand from
//! the fixture cluster (see `support::fixture_cluster`).

use axum::http::StatusCode;

use crate::support::{
    App, PodJson, ZONE, names_args, node_json, nodes_args, policy_without_default_profile,
    priorities,
};

// Priority-0 pods per zone: zone-a 4, zone-b 1, zone-c 2 (x1 has no zone).
// ZoneSpread over the zoned nodes a1, a2, b1, c1: M = 4, m = 1,
//   score = 100 * (M + m - c) / M → zone-a 100*1/4 = 25, zone-b 100, zone-c 100*3/4 = 75;
//   x1 scores 0.
// NetQoS (unlabeledScore 20, unknownTierScore defaults to 20):
//   a1 high 100, a2 low 0, b1 high 100, c1 unlabeled 20, x1 "fast" (unknown tier) 20.

#[tokio::test]
async fn latency_sensitive_pod_weighs_both_plugins() {
    // total = 2 * ZoneSpread + 1 * NetQoS; Score = round(10 * total / (100 * 3)):
    //   a1 2*25+100 = 150 → 5.00 → 5     a2 2*25+0 = 50 → 1.67 → 2
    //   b1 2*100+100 = 300 → 10          c1 2*75+20 = 170 → 5.67 → 6
    //   x1 0+20 = 20 → 0.67 → 1          ghost (unknown) → 0
    let app = App::default();
    let body = names_args(
        &PodJson::new("api").latency_sensitive(),
        &["a1", "a2", "b1", "c1", "x1", "ghost"],
    );
    let reply = app.post("/prioritize", body).await;
    reply.assert(
        StatusCode::OK,
        &priorities(&[
            ("a1", 5),
            ("a2", 2),
            ("b1", 10),
            ("c1", 6),
            ("x1", 1),
            ("ghost", 0),
        ]),
    );
    reply.assert_json_content_type();
}

#[tokio::test]
async fn skipped_netqos_leaves_only_zone_spreads_weight() {
    // NetQoS is skipped (no qos label): Σ weight = 2, Score = round(10 * 2 * zs / 200):
    //   a1, a2 25 → 2.5 → 3 (half rounds up); b1 100 → 10; c1 75 → 7.5 → 8; x1 0.
    // Counting NetQoS's weight anyway would give a1 round(50/30) = 2 and b1 7.
    let app = App::default();
    let body = names_args(
        &PodJson::new("web"),
        &["a1", "a2", "b1", "c1", "x1", "ghost"],
    );
    app.post("/prioritize", body).await.assert(
        StatusCode::OK,
        &priorities(&[
            ("a1", 3),
            ("a2", 3),
            ("b1", 10),
            ("c1", 8),
            ("x1", 0),
            ("ghost", 0),
        ]),
    );
}

#[tokio::test]
async fn only_pods_of_the_same_priority_are_counted() {
    // At priority 1000 only batch-1 (zone-c) counts: M = 1, m = 0 →
    // zone-a and zone-b 100*(1+0-0)/1 = 100 → 10, zone-c 0 → 0.
    let app = App::default();
    let body = names_args(&PodJson::new("web").priority(1000), &["c1", "a1", "b1"]);
    app.post("/prioritize", body).await.assert(
        StatusCode::OK,
        &priorities(&[("c1", 0), ("a1", 10), ("b1", 10)]),
    );
}

#[tokio::test]
async fn normalization_runs_over_the_requested_nodes_only() {
    // Only b1 (1 pod) and c1 (2 pods) are requested: M = 2, m = 1 →
    // b1 100*(3-1)/2 = 100 → 10, c1 100*(3-2)/2 = 50 → 5.
    let app = App::default();
    let body = names_args(&PodJson::new("web"), &["c1", "b1"]);
    app.post("/prioritize", body)
        .await
        .assert(StatusCode::OK, &priorities(&[("c1", 5), ("b1", 10)]));
}

#[tokio::test]
async fn duplicate_names_get_one_entry_each_in_first_seen_order() {
    // Requested zoned nodes b1 (1) and a1 (4): M = 4, m = 1 → b1 100, a1 25.
    let app = App::default();
    let body = names_args(&PodJson::new("web"), &["b1", "a1", "b1", "ghost", "ghost"]);
    app.post("/prioritize", body).await.assert(
        StatusCode::OK,
        &priorities(&[("b1", 10), ("a1", 3), ("ghost", 0)]),
    );
}

#[tokio::test]
async fn empty_name_list_answers_an_empty_array() {
    let app = App::default();
    app.post("/prioritize", names_args(&PodJson::new("web"), &[]))
        .await
        .assert(StatusCode::OK, "[]");
}

#[tokio::test]
async fn full_nodes_are_scored_from_their_own_labels() {
    // a1's copy keeps zone-a (4 pods); "new" is in zone-d (0 pods): M = 4, m = 0 →
    // a1 100*(4-4)/4 = 0, new 100*(4-0)/4 = 100.
    // Latency-sensitive: a1 2*0+100 = 100 → 3.33 → 3; new 2*100+0 = 200 → 6.67 → 7.
    let app = App::default();
    let body = nodes_args(
        &PodJson::new("api").latency_sensitive(),
        "{}",
        &[
            node_json("a1", &[(ZONE, "zone-a"), ("net", "high")]),
            node_json("new", &[(ZONE, "zone-d"), ("net", "low")]),
        ],
    );
    app.post("/prioritize", body)
        .await
        .assert(StatusCode::OK, &priorities(&[("a1", 3), ("new", 7)]));
}

#[tokio::test]
async fn every_score_plugin_skipped_scores_zero() {
    let policy = r#"apiVersion: placer/v1alpha1
kind: Policy
extender: {defaultProfile: net}
profiles:
  - schedulerName: net
    plugins:
      - name: NetQoS
        weight: 5
        args: {unlabeledScore: 20}
"#;
    let app = App::with_policy(policy);
    let names = ["a1", "a2", "c1", "x1"];
    app.post("/prioritize", names_args(&PodJson::new("web"), &names))
        .await
        .assert(
            StatusCode::OK,
            &priorities(&[("a1", 0), ("a2", 0), ("c1", 0), ("x1", 0)]),
        );
    // The same nodes for a pod NetQoS applies to: round(10 * 5s / 500) = s / 10.
    let pod = PodJson::new("api").latency_sensitive();
    app.post("/prioritize", names_args(&pod, &names))
        .await
        .assert(
            StatusCode::OK,
            &priorities(&[("a1", 10), ("a2", 0), ("c1", 2), ("x1", 2)]),
        );
}

#[tokio::test]
async fn pod_matching_no_profile_is_an_error_the_scheduler_ignores() {
    // kube-scheduler ignores a failed prioritize call (the extender then
    // contributes no scores); the body still says why.
    let app = App::with_policy(&policy_without_default_profile());
    app.post("/prioritize", names_args(&PodJson::new("web"), &["a1"]))
        .await
        .assert_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"placer has no profile for schedulerName "default-scheduler" and the policy sets no extender.defaultProfile"#,
        );
    app.post(
        "/prioritize",
        names_args(&PodJson::new("web").scheduler("extender"), &["b1"]),
    )
    .await
    .assert(StatusCode::OK, &priorities(&[("b1", 10)]));
}
