//! Retry prompts as the HTTP side sees them: `/filter` parks the pods it leaves with no
//! feasible node and forgets them once a node passes; `/readyz` stays 200 while a watch is
//! down and names it.

use std::sync::Arc;

use axum::http::StatusCode;
use placer::cache::Cache;
use placer::modes::extender::retry::Retry;
use placer::modes::extender::{ExtenderState, Settings};
use placer::state::AppState;

use crate::support::{App, POLICY, PodJson, compile, fixture_cluster, names_args};

/// The value of `placer_parked_pods` in `/metrics`.
async fn parked(app: &App) -> String {
    let metrics = app.get("/metrics").await.body;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("placer_parked_pods "))
        .unwrap_or("absent")
        .to_owned()
}

#[tokio::test]
async fn filter_parks_pods_left_without_a_node_until_one_passes() {
    let compiled = compile(POLICY);
    let cache = Arc::new(Cache::from_state(fixture_cluster(&compiled)));
    let state = AppState::new(compiled, cache);
    let mut verbs = ExtenderState::new(&state, None, Settings::default());
    verbs.retry = Some(Arc::new(Retry::new(state.metrics.clone())));
    let app = App::over_state(state, verbs);
    let pod = PodJson::new("api").needs_hw_encrypt();

    let reply = app.post("/filter", names_args(&pod, &["b1", "gone"])).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        parked(&app).await,
        "1",
        "b1 lacks the label, gone is unknown"
    );
    app.post("/filter", names_args(&pod, &["b1"])).await;
    assert_eq!(
        parked(&app).await,
        "1",
        "a re-rejection re-parks the same pod"
    );
    let other = PodJson::new("web");
    app.post("/filter", names_args(&other, &["b1"])).await;
    assert_eq!(parked(&app).await, "1", "a pod that passes is not parked");
    app.post("/filter", names_args(&pod, &["a1", "b1"])).await;
    assert_eq!(parked(&app).await, "0", "a1 passes: forgotten");
}

#[tokio::test]
async fn readyz_stays_200_and_names_disconnected_watches() {
    let compiled = compile(POLICY);
    let cache = Arc::new(Cache::from_state(fixture_cluster(&compiled)));
    let app = App::over_cache(compiled, cache.clone(), Settings::default());
    let node = cache.watches().kind("node");
    node.seen();
    node.failed(&"connection refused", std::time::Duration::from_secs(1));
    let reply = app.get("/readyz").await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.json();
    assert_eq!(body["status"], "ready");
    assert!(body["disconnectedSeconds"]["node"].is_number(), "{body}");
    assert!(
        app.get("/metrics")
            .await
            .body
            .contains(r#"placer_watch_connected{kind="node"} 0"#)
    );
    node.seen();
    app.get("/readyz")
        .await
        .assert(StatusCode::OK, r#"{"status":"ready"}"#);
}
