//! Operational routes and switches: `/healthz`, `/readyz`, `/policy`,
//! `/debug/zones`, verbs disabled in standalone mode, the path prefix, and
//! the server-side request deadline.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use futures::StreamExt;
use placer::cache::Cache;
use placer::modes::extender::Settings;
use serde_json::json;

use crate::support::{
    App, HW_REASON, POLICY, PodJson, compile, good_filter_body, good_filter_result, names_args,
    priorities,
};

#[tokio::test]
async fn healthz_answers_ok() {
    App::default()
        .get("/healthz")
        .await
        .assert(StatusCode::OK, "ok");
}

#[tokio::test]
async fn readyz_is_200_when_synced() {
    let reply = App::default().get("/readyz").await;
    reply.assert(StatusCode::OK, r#"{"status":"ready"}"#);
    reply.assert_json_content_type();
}

#[tokio::test]
async fn readyz_is_503_with_json_until_the_caches_sync() {
    let cache = Arc::new(Cache::new());
    let app = App::over_cache(compile(POLICY), cache.clone(), Settings::default());
    let reply = app.get("/readyz").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    reply.assert_json_content_type();
    assert_eq!(
        reply.json(),
        json!({"status": "not ready", "Error": "caches have not synced with the API server yet"})
    );
    // Nodes alone are not enough; nodes and pods are.
    cache.mark_nodes_synced();
    assert_eq!(
        app.get("/readyz").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    cache.mark_pods_synced();
    app.get("/readyz")
        .await
        .assert(StatusCode::OK, r#"{"status":"ready"}"#);
    // Liveness never depended on it.
    app.get("/healthz").await.assert(StatusCode::OK, "ok");
}

#[tokio::test]
async fn policy_shows_the_effective_policy_with_defaults() {
    let reply = App::default().get("/policy").await;
    assert_eq!(reply.status, StatusCode::OK);
    reply.assert_json_content_type();
    assert_eq!(
        reply.json(),
        json!({
            "apiVersion": "placer/v1alpha1",
            "kind": "Policy",
            "extender": {"defaultProfile": "extender", "bindAnyScheduler": false},
            "profiles": [{
                "schedulerName": "extender",
                "plugins": [
                    {"name": "CapabilityFilter", "weight": 1, "args": {"rules": [{
                        "podAnnotation": "myorg.io/require-hw-encrypt",
                        "podValue": "true",
                        "nodeLabel": "node.kubernetes.io/hw-encrypt",
                        "nodeValue": "true",
                        "reason": HW_REASON,
                    }]}},
                    {"name": "ZoneSpread", "weight": 2, "args": {
                        "zoneLabel": "topology.kubernetes.io/zone",
                        "reverse": false,
                        "countPods": "SamePriority",
                        "matchLabelKeys": [],
                        "sameNamespace": false,
                    }},
                    {"name": "NetQoS", "weight": 1, "args": {
                        "podLabel": "qos",
                        "podValue": "latency-sensitive",
                        "nodeLabel": "net",
                        "tiers": {"high": 100, "low": 0},
                        "unlabeledScore": 20,
                        "unknownTierScore": 20,
                    }},
                ],
            }],
        })
    );
}

#[tokio::test]
async fn debug_zones_counts_nodes_and_pods_per_zone() {
    let reply = App::default().get("/debug/zones").await;
    assert_eq!(reply.status, StatusCode::OK);
    reply.assert_json_content_type();
    // Not counted: the Succeeded pod on b1, the pending pod, the pod on unzoned x1.
    assert_eq!(
        reply.json(),
        json!([{
            "dimension": {
                "zoneLabel": "topology.kubernetes.io/zone",
                "selector": "SamePriority",
                "sameNamespace": false,
            },
            "zones": {
                "zone-a": {"nodes": 2, "pods": {"priority=0": 4}},
                "zone-b": {"nodes": 1, "pods": {"priority=0": 1}},
                "zone-c": {"nodes": 1, "pods": {"priority=0": 2, "priority=1000": 1}},
            },
            "unzonedNodes": 1,
        }])
    );
}

#[tokio::test]
async fn standalone_mode_disables_the_verbs_but_not_explain() {
    let app = App::with_settings(Settings {
        verbs_enabled: false,
        ..Default::default()
    });
    for verb in ["/filter", "/prioritize", "/bind", "/preempt"] {
        app.post(verb, good_filter_body()).await.assert_error(
            StatusCode::NOT_FOUND,
            "the extender verbs are disabled in standalone mode (--mode standalone); use --mode extender or both",
        );
    }
    let reply = app.post("/explain", good_filter_body()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json()["nodes"][0]["node"], "a1");
    assert_eq!(reply.json()["nodes"][0]["feasible"], true);
    assert_eq!(reply.json()["nodes"][1]["feasible"], false);
}

#[tokio::test]
async fn path_prefix_mounts_the_verbs_under_it() {
    // kube-scheduler trims trailing slashes of urlPrefix, so placer accepts both spellings.
    for prefix in ["/scheduler", "/scheduler/"] {
        let app = App::with_settings(Settings {
            path_prefix: prefix.into(),
            ..Default::default()
        });
        app.post("/scheduler/filter", good_filter_body())
            .await
            .assert(StatusCode::OK, &good_filter_result());
        app.post(
            "/scheduler/prioritize",
            names_args(&PodJson::new("web"), &["b1"]),
        )
        .await
        .assert(StatusCode::OK, &priorities(&[("b1", 10)]));
        let reply = app.post("/scheduler/explain", good_filter_body()).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        for path in ["/filter", "/prioritize", "/explain", "/scheduler//filter"] {
            let reply = app.post(path, good_filter_body()).await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{prefix}: {path}");
        }
        // Operational routes stay at the root.
        app.get("/healthz").await.assert(StatusCode::OK, "ok");
        assert_eq!(app.get("/readyz").await.status, StatusCode::OK);
    }
}

#[tokio::test]
async fn request_deadline_answers_503_json_for_a_stalled_body() {
    // A client that sends part of its body and then stalls: the handler
    // cannot finish, so the deadline must answer for it.
    let app = App::with_settings(Settings {
        request_timeout: Duration::from_millis(50),
        ..Default::default()
    });
    let stalled =
        futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from("{\"Pod\":")) })
            .chain(futures::stream::pending());
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        app.post("/filter", Body::from_stream(stalled)),
    )
    .await
    .expect("the server-side deadline fires well before 10 s");
    reply.assert_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "placer did not answer within 50ms (--request-timeout-ms)",
    );
    app.assert_still_serves().await;
}

#[tokio::test]
async fn verbs_say_the_cache_is_not_synced_instead_of_rejecting_every_node() {
    let cache = Arc::new(Cache::new());
    let app = App::over_cache(compile(POLICY), cache.clone(), Settings::default());
    let not_synced =
        "placer's cache has not synced with the API server yet; the pod will be retried";
    app.post("/filter", good_filter_body()).await.assert(
        StatusCode::OK,
        &format!(
            r#"{{"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":"{not_synced}"}}"#
        ),
    );
    app.post("/prioritize", good_filter_body())
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, not_synced);
    cache.mark_nodes_synced();
    cache.mark_pods_synced();
    assert_eq!(
        app.post("/filter", good_filter_body()).await.status,
        StatusCode::OK
    );
}
