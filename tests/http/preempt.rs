//! `POST /preempt`: candidates a placer filter rejects as unresolvable are
//! dropped, the rest are kept with their victims unchanged; the answer is
//! always `NodeNameToMetaVictims` and never holds `null`.

use axum::http::StatusCode;

use crate::support::{App, PodJson, full_preempt_args, meta_preempt_args};

#[tokio::test]
async fn meta_candidates_rejected_as_unresolvable_are_dropped() {
    let app = App::default();
    let body = meta_preempt_args(
        &PodJson::new("api").needs_hw_encrypt(),
        &[
            // Victim order is the scheduler's (highest priority first): kept as is.
            ("a1", &["uid-web-3", "uid-web-1"], 1),
            ("a2", &["uid-web-4"], 0),
            ("b1", &[], 0),
            // An empty victim list (a placeholder since kubernetes#135486) is legal.
            ("x1", &[], 0),
        ],
    );
    let reply = app.post("/preempt", body).await;
    reply.assert(
        StatusCode::OK,
        r#"{"NodeNameToMetaVictims":{"a1":{"Pods":[{"UID":"uid-web-3"},{"UID":"uid-web-1"}],"NumPDBViolations":1},"x1":{"Pods":[],"NumPDBViolations":0}}}"#,
    );
    reply.assert_json_content_type();
}

#[tokio::test]
async fn candidates_are_kept_unchanged_when_no_filter_rejects_them() {
    let app = App::default();
    // No annotation: CapabilityFilter does not apply; a name placer does not
    // know is kept too (only an unresolvable verdict drops a candidate).
    let body = meta_preempt_args(
        &PodJson::new("web"),
        &[
            ("ghost", &["u-9"], 3),
            ("b1", &["uid-web-5"], 0),
            ("a2", &["uid-web-4"], 2),
        ],
    );
    app.post("/preempt", body).await.assert(
        StatusCode::OK,
        r#"{"NodeNameToMetaVictims":{"a2":{"Pods":[{"UID":"uid-web-4"}],"NumPDBViolations":2},"b1":{"Pods":[{"UID":"uid-web-5"}],"NumPDBViolations":0},"ghost":{"Pods":[{"UID":"u-9"}],"NumPDBViolations":3}}}"#,
    );
}

#[tokio::test]
async fn full_victim_pods_are_answered_as_uids() {
    let app = App::default();
    let body = full_preempt_args(
        &PodJson::new("api").needs_hw_encrypt(),
        &[
            ("a1", &[PodJson::new("web-2"), PodJson::new("web-1")], 0),
            ("b1", &[PodJson::new("web-5")], 1),
            ("x1", &[PodJson::new("web-8")], 4),
        ],
    );
    app.post("/preempt", body).await.assert(
        StatusCode::OK,
        r#"{"NodeNameToMetaVictims":{"a1":{"Pods":[{"UID":"uid-web-2"},{"UID":"uid-web-1"}],"NumPDBViolations":0},"x1":{"Pods":[{"UID":"uid-web-8"}],"NumPDBViolations":4}}}"#,
    );
}

#[tokio::test]
async fn null_victims_and_null_pod_lists_are_answered_without_null() {
    let app = App::default();
    let body = format!(
        r#"{{"Pod":{},"NodeNameToVictims":null,"NodeNameToMetaVictims":{{"a1":null,"b1":{{"Pods":null,"NumPDBViolations":0}},"c1":{{}}}}}}"#,
        PodJson::new("web").json()
    );
    app.post("/preempt", body).await.assert(
        StatusCode::OK,
        r#"{"NodeNameToMetaVictims":{"a1":{"Pods":[],"NumPDBViolations":0},"b1":{"Pods":[],"NumPDBViolations":0},"c1":{"Pods":[],"NumPDBViolations":0}}}"#,
    );
}

#[tokio::test]
async fn no_candidates_answer_an_empty_map() {
    let app = App::default();
    let body = meta_preempt_args(&PodJson::new("web"), &[]);
    app.post("/preempt", body)
        .await
        .assert(StatusCode::OK, r#"{"NodeNameToMetaVictims":{}}"#);
}

#[tokio::test]
async fn keys_match_case_insensitively() {
    let app = App::default();
    let body = format!(
        r#"{{"pod":{},"nodenametometavictims":{{"a1":{{"pods":[{{"uid":"u1"}}],"numpdbviolations":2}},"a2":{{"pods":[]}}}}}}"#,
        PodJson::new("api").needs_hw_encrypt().json()
    );
    app.post("/preempt", body).await.assert(
        StatusCode::OK,
        r#"{"NodeNameToMetaVictims":{"a1":{"Pods":[{"UID":"u1"}],"NumPDBViolations":2}}}"#,
    );
}

#[tokio::test]
async fn neither_victim_map_is_a_bad_request() {
    let app = App::default();
    let body = format!(
        r#"{{"Pod":{},"NodeNameToVictims":null,"NodeNameToMetaVictims":null}}"#,
        PodJson::new("web").json()
    );
    app.post("/preempt", body).await.assert_error(
        StatusCode::BAD_REQUEST,
        "request has neither NodeNameToMetaVictims nor NodeNameToVictims",
    );
    app.assert_still_serves().await;
}

#[tokio::test]
async fn missing_pod_is_a_bad_request() {
    let app = App::default();
    app.post(
        "/preempt",
        r#"{"Pod":null,"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}"#,
    )
    .await
    .assert_error(
        StatusCode::BAD_REQUEST,
        "Pod: missing (the pod to schedule is required)",
    );
    app.assert_still_serves().await;
}
