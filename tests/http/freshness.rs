//! A request sees every cache write completed before it was sent: the verbs
//! read a published snapshot, not the cache under its lock, and must never
//! answer from one older than the last write (the race every extender has
//! when its view lags the cluster).

use std::sync::Arc;

use axum::http::StatusCode;
use placer::cache::Cache;
use placer::modes::extender::Settings;
use placer::objects::PodInfo;

use crate::support::{
    App, HW_REASON, NOT_FOUND, POLICY, PodJson, compile, fixture_cluster, names_args,
    names_filter_result, node,
};

fn app_and_cache() -> (App, Arc<Cache>) {
    let policy = compile(POLICY);
    let cache = Arc::new(Cache::from_state(fixture_cluster(&policy)));
    let app = App::over_cache(policy, cache.clone(), Settings::default());
    (app, cache)
}

fn running_on(name: &str, node: &str) -> PodInfo {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"}
    }))
    .expect("a valid pod")
}

#[tokio::test]
async fn filter_answers_with_every_write_made_before_it() {
    let (app, cache) = app_and_cache();
    let body = names_args(&PodJson::new("api").needs_hw_encrypt(), &["a2"]);
    let rejected = names_filter_result(&[], &[], &[("a2", HW_REASON)]);
    let passed = names_filter_result(&["a2"], &[], &[]);
    app.post("/filter", body.clone())
        .await
        .assert(StatusCode::OK, &rejected);
    // Enough turns that both buffers are published and reused.
    for turn in 0..6 {
        let hw = turn % 2 == 0;
        cache
            .write()
            .apply_node(node("a2", Some("zone-a"), Some("low"), hw));
        let expected = if hw { &passed } else { &rejected };
        app.post("/filter", body.clone())
            .await
            .assert(StatusCode::OK, expected);
    }
    cache.write().delete_node("a2");
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        &names_filter_result(&[], &[("a2", NOT_FOUND)], &[]),
    );
    let stats = cache.publish_stats();
    assert_eq!(stats.held, 0, "{stats:?}");
    assert_eq!(stats.full_copies, 1, "only the first sync copies all");
}

#[tokio::test]
async fn prioritize_counts_every_pod_written_before_it() {
    let (app, cache) = app_and_cache();
    let body = names_args(&PodJson::new("web"), &["a1", "b1"]);
    let first = app.post("/prioritize", body.clone()).await.body;
    let mut late = Vec::new();
    for i in 0..5 {
        let pod = running_on(&format!("late-{i}"), "b1");
        cache.write().apply_pod(pod.clone());
        late.push(pod);
        // What a service started over the same state answers.
        let fresh = App::build(POLICY, Settings::default(), |policy| {
            let mut state = fixture_cluster(policy);
            for p in &late {
                state.apply_pod(p.clone());
            }
            state
        });
        let expected = fresh.post("/prioritize", body.clone()).await.body;
        let reply = app.post("/prioritize", body.clone()).await;
        reply.assert(StatusCode::OK, &expected);
    }
    let last = app.post("/prioritize", body).await.body;
    assert_ne!(first, last, "five more pods in zone-b move b1's score");
}
