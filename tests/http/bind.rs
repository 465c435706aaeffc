//! `POST /bind` without an API server (a snapshot-backed service): a domain
//! error in `Error` with status 200; a malformed body is a 400.

use axum::http::StatusCode;

use crate::support::{App, bind_args};

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
