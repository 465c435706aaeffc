//! `POST /bind`: without an API server (a snapshot-backed service), a domain
//! error in `Error` with status 200; a malformed body is a 400; against a
//! stand-in API server, the bind is timed in `placer_bind_duration_seconds`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::StatusCode;
use kube::client::Body;
use placer::cache::Cache;
use placer::modes::extender::{Binder, ExtenderState, Settings};
use placer::state::AppState;

use crate::support::{App, POLICY, bind_args, compile, fixture_cluster};

const NO_API_SERVER: &str =
    r#"{"Error":"placer cannot bind: it runs from a snapshot file, without an API server"}"#;

#[tokio::test]
async fn without_an_api_server_binding_is_a_domain_error() {
    let app = App::default();
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    reply.assert(StatusCode::OK, NO_API_SERVER);
    reply.assert_json_content_type();
    // PodUID is optional on the wire; lower-case keys work as in Go.
    app.post(
        "/bind",
        r#"{"podname":"api","podnamespace":"default","node":"a1"}"#,
    )
    .await
    .assert(StatusCode::OK, NO_API_SERVER);
}

#[tokio::test]
async fn missing_identifying_fields_are_bad_requests() {
    let app = App::default();
    for (body, error) in [
        (
            r#"{"PodNamespace":"default","PodUID":"u","Node":"a1"}"#.to_string(),
            "PodName: missing",
        ),
        (bind_args("", "default", "u", "a1"), "PodName: missing"),
        (
            r#"{"PodName":null,"PodNamespace":"default","PodUID":"u","Node":"a1"}"#.to_string(),
            "PodName: missing",
        ),
        (bind_args("api", "", "u", "a1"), "PodNamespace: missing"),
        (bind_args("api", "default", "u", ""), "Node: missing"),
        ("{}".to_string(), "PodName: missing"),
    ] {
        app.post("/bind", body)
            .await
            .assert_error(StatusCode::BAD_REQUEST, error);
    }
    app.assert_still_serves().await;
}

#[tokio::test]
async fn wrongly_typed_fields_are_bad_requests_naming_the_field() {
    let app = App::default();
    let body = r#"{"PodName":"api","PodNamespace":"default","PodUID":7,"Node":"a1"}"#;
    let column = body.find('7').expect("present") + 1;
    app.post("/bind", body).await.assert_error(
        StatusCode::BAD_REQUEST,
        &format!(
            "invalid JSON at line 1 column {column}, field PodUID: invalid type: integer `7`, expected a string"
        ),
    );
    app.assert_still_serves().await;
}

/// The service with a binder whose API server answers every request with
/// `status` and `body` (a Binding's `201 {}`, or a Status object).
fn app_with_api_server(status: u16, body: &'static str) -> App {
    let api_server = tower::service_fn(move |_: http::Request<Body>| async move {
        let reply = http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(body.as_bytes().to_vec()))
            .expect("a static response");
        Ok::<_, Infallible>(reply)
    });
    let client = kube::Client::new(api_server, "default");
    let compiled = compile(POLICY);
    let cache = Arc::new(Cache::from_state(fixture_cluster(&compiled)));
    let state = AppState::new(compiled, cache);
    let binder = Arc::new(Binder::new(client, state.metrics.clone()));
    let verbs = ExtenderState::new(&state, Some(binder), Settings::default());
    App::over_state(state, verbs)
}

/// The `placer_bind_duration_seconds_count` line for `result`, from `/metrics`.
async fn binds_timed(app: &App, result: &str) -> String {
    let prefix = format!("placer_bind_duration_seconds_count{{result=\"{result}\"}} ");
    app.get("/metrics")
        .await
        .body
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or("absent")
        .to_owned()
}

#[tokio::test]
async fn a_bind_through_the_verb_is_timed_by_result() {
    let app = app_with_api_server(201, "{}");
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["Error"], "", "{}", reply.body);
    assert_eq!(binds_timed(&app, "success").await, "1");
    assert_eq!(binds_timed(&app, "failure").await, "absent");

    let refused = app_with_api_server(
        403,
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"api\" is forbidden","reason":"Forbidden","code":403}"#,
    );
    refused
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await
        .assert(
            StatusCode::OK,
            r#"{"Error":"binding pod default/api to node a1 failed: pods \"api\" is forbidden"}"#,
        );
    assert_eq!(binds_timed(&refused, "failure").await, "1");
}
