//! Error paths of the verbs (design §3.1): malformed or wrongly shaped JSON is
//! a 400 `{"Error": "<what and where>"}`, an oversized body a 413, and after
//! each of them the same service still answers good requests. Large but valid
//! requests (10,000 pod labels, 5,000 nodes) are answered correctly.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use futures::StreamExt;
use placer::cache::ClusterState;
use placer::modes::extender::Settings;
use placer::objects::PodInfo;
use serde_json::{Value, json};

use crate::support::{
    App, HW_REASON, NOT_FOUND, POLICY, PodJson, ZONE, good_filter_body, names_args,
    names_filter_result, node, node_json, nodes_args, priorities,
};

/// Asserts a 400 with exactly `error` on every verb that takes `ExtenderArgs`.
async fn assert_bad_args(app: &App, body: &str, error: &str) {
    for verb in ["/filter", "/prioritize", "/explain"] {
        let reply = app.post(verb, body.to_string()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{verb}: {}",
            reply.body
        );
        assert_eq!(reply.json(), json!({ "Error": error }), "{verb}");
        reply.assert_json_content_type();
    }
    app.assert_still_serves().await;
}

/// Asserts a 400 on every `ExtenderArgs` verb whose error is
/// `"{outer}: invalid JSON at line L column C{field}: {what}"` for some L and C:
/// for a Pod or a full Node the position is not compared here, see
/// `nested_positions_count_from_the_request_body`.
async fn assert_bad_nested(app: &App, body: &str, outer: &str, field: &str, what: &str) {
    for verb in ["/filter", "/prioritize", "/explain"] {
        let reply = app.post(verb, body.to_string()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{verb}: {}",
            reply.body
        );
        let error = reply.json()["Error"]
            .as_str()
            .expect("Error is a string")
            .to_string();
        // The path runs from the request root: `Pod.metadata.labels.app`.
        let path = match field.strip_prefix(", field ") {
            Some(inner) => format!("{outer}.{inner}"),
            None => outer.to_string(),
        };
        let position = error
            .strip_prefix("invalid JSON at line ")
            .and_then(|rest| rest.strip_suffix(&format!(", field {path}: {what}")))
            .unwrap_or_else(|| panic!("{verb}: unexpected error {error:?}"));
        let (line, column) = position
            .split_once(" column ")
            .unwrap_or_else(|| panic!("{verb}: no position in {error:?}"));
        assert!(
            line.parse::<u32>().is_ok() && column.parse::<u32>().is_ok(),
            "{verb}: {error:?}"
        );
    }
    app.assert_still_serves().await;
}

#[tokio::test]
async fn truncated_json_names_line_column_and_field() {
    let app = App::default();
    let good = names_args(&PodJson::new("web"), &["a1", "b1"]);
    // Cut inside the first name.
    let cut = &good[..good.len() - 10];
    assert!(cut.ends_with(r#""NodeNames":[""#), "{cut}");
    assert_bad_args(
        &app,
        cut,
        &format!(
            "invalid JSON at line 1 column {}, field NodeNames[0]: EOF while parsing a string",
            cut.len()
        ),
    )
    .await;
    // Cut inside the pod; line numbers count from 1, across newlines.
    assert_bad_args(
        &app,
        "{\n  \"Pod\": {\n    \"metadata\": {",
        "invalid JSON at line 3 column 17, field Pod: EOF while parsing an object",
    )
    .await;
}

#[tokio::test]
async fn empty_and_non_object_bodies_are_bad_requests() {
    let app = App::default();
    assert_bad_args(
        &app,
        "",
        "invalid JSON at line 1 column 0: EOF while parsing a value",
    )
    .await;
    assert_bad_args(
        &app,
        "[1,2]",
        "invalid JSON at line 1 column 0: invalid type: sequence, expected a JSON object (ExtenderArgs)",
    )
    .await;
    let trailing = format!("{} x", names_args(&PodJson::new("web"), &["a1"]));
    assert_bad_args(
        &app,
        &trailing,
        &format!(
            "invalid JSON at line 1 column {}: trailing characters",
            trailing.len()
        ),
    )
    .await;
}

#[tokio::test]
async fn wrong_types_name_the_field_path() {
    let app = App::default();
    let pod = PodJson::new("web").json();

    let body = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":5}}"#);
    assert_bad_args(
        &app,
        &body,
        &format!(
            "invalid JSON at line 1 column {}, field NodeNames: invalid type: integer `5`, expected a sequence",
            body.len() - 1
        ),
    )
    .await;

    let body = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":["a1",7]}}"#);
    assert_bad_args(
        &app,
        &body,
        &format!(
            "invalid JSON at line 1 column {}, field NodeNames[1]: invalid type: integer `7`, expected a string",
            body.len() - 2
        ),
    )
    .await;

    let body = format!(r#"{{"Pod":{pod},"Nodes":{{"metadata":{{}},"items":5}},"NodeNames":null}}"#);
    let col = body.find(r#""items":5"#).expect("present") + r#""items":5"#.len();
    assert_bad_args(
        &app,
        &body,
        &format!(
            "invalid JSON at line 1 column {col}, field Nodes.items: invalid type: integer `5`, expected a sequence"
        ),
    )
    .await;

    assert_bad_nested(
        &app,
        r#"{"Pod":"x","Nodes":null,"NodeNames":["a1"]}"#,
        "Pod",
        "",
        "invalid type: string \"x\", expected a Pod object",
    )
    .await;

    assert_bad_nested(
        &app,
        r#"{"Pod":{"metadata":{"name":"p","labels":{"app":5}}},"NodeNames":["a1"]}"#,
        "Pod",
        ", field metadata.labels.app",
        "invalid type: integer `5`, expected a string",
    )
    .await;

    assert_bad_nested(
        &app,
        r#"{"Pod":{"spec":{"priority":"high"}},"NodeNames":["a1"]}"#,
        "Pod",
        ", field spec.priority",
        "invalid type: string \"high\", expected i32",
    )
    .await;

    let body = format!(
        r#"{{"Pod":{pod},"Nodes":{{"metadata":{{}},"items":[{{"metadata":{{"name":"n","labels":[]}}}}]}},"NodeNames":null}}"#
    );
    assert_bad_nested(
        &app,
        &body,
        "Nodes.items[0]",
        ", field metadata.labels",
        "invalid type: sequence, expected a map",
    )
    .await;

    let body = format!(
        r#"{{"Pod":{pod},"Nodes":{{"metadata":{{}},"items":[{{"metadata":{{"labels":{{}}}}}}]}},"NodeNames":null}}"#
    );
    assert_bad_args(&app, &body, "Nodes.items[0]: metadata.name is missing").await;
}

#[tokio::test]
async fn nested_positions_count_from_the_request_body() {
    let app = App::default();
    // The `5` is at column 48 of the body (column 41 of the Pod value).
    assert_bad_args(
        &app,
        r#"{"Pod":{"metadata":{"name":"p","labels":{"app":5}}},"NodeNames":["a1"]}"#,
        "invalid JSON at line 1 column 48, field Pod.metadata.labels.app: invalid type: integer `5`, expected a string",
    )
    .await;
    // `"high"` ends at line 3 column 27 of the body (line 2 of the Pod value).
    assert_bad_args(
        &app,
        "{\"NodeNames\":[\"a1\"],\n\"Pod\":{\n  \"spec\":{\"priority\":\"high\"}}}",
        "invalid JSON at line 3 column 27, field Pod.spec.priority: invalid type: string \"high\", expected i32",
    )
    .await;
}

#[tokio::test]
async fn errors_before_the_first_key_name_no_field() {
    let app = App::default();
    assert_bad_args(
        &app,
        "{",
        "invalid JSON at line 1 column 1: EOF while parsing an object",
    )
    .await;
}

#[tokio::test]
async fn wrongly_typed_numbers_in_preempt_name_the_field_path() {
    let app = App::default();
    let pod = PodJson::new("web").json();
    for (victims, field, what) in [
        (
            r#"{"a1":{"Pods":[],"NumPDBViolations":"1"}}"#,
            "NodeNameToMetaVictims.a1.NumPDBViolations",
            "invalid type: string \"1\", expected i64",
        ),
        (
            r#"{"a1":{"Pods":[],"NumPDBViolations":1.5}}"#,
            "NodeNameToMetaVictims.a1.NumPDBViolations",
            "invalid type: floating point `1.5`, expected i64",
        ),
        (
            r#"{"a1":{"Pods":[{"UID":5}],"NumPDBViolations":0}}"#,
            "NodeNameToMetaVictims.a1.Pods[0].UID",
            "invalid type: integer `5`, expected a string",
        ),
    ] {
        let body = format!(r#"{{"Pod":{pod},"NodeNameToMetaVictims":{victims}}}"#);
        let reply = app.post("/preempt", body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let error = reply.json()["Error"]
            .as_str()
            .expect("Error is a string")
            .to_string();
        assert!(
            error.starts_with("invalid JSON at line 1 column ")
                && error.ends_with(&format!(", field {field}: {what}")),
            "{error}"
        );
    }
    app.assert_still_serves().await;
}

#[tokio::test]
async fn missing_pod_or_node_list_is_a_bad_request() {
    let app = App::default();
    let missing_pod = "Pod: missing (the pod to schedule is required)";
    assert_bad_args(&app, r#"{"Nodes":null,"NodeNames":["a1"]}"#, missing_pod).await;
    assert_bad_args(&app, r#"{"Pod":null,"NodeNames":["a1"]}"#, missing_pod).await;
    assert_bad_args(&app, "{}", missing_pod).await;
    assert_bad_args(&app, "null", missing_pod).await;
    let pod = PodJson::new("web").json();
    let neither = "request has neither NodeNames nor Nodes (one of them must be set)";
    assert_bad_args(
        &app,
        &format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":null}}"#),
        neither,
    )
    .await;
    assert_bad_args(&app, &format!(r#"{{"Pod":{pod}}}"#), neither).await;
}

#[tokio::test]
async fn body_over_the_configured_limit_is_413() {
    let good = good_filter_body();
    // Exactly at the limit is fine...
    let at_limit = App::with_settings(Settings {
        max_body_bytes: good.len(),
        ..Default::default()
    });
    at_limit.assert_still_serves().await;
    // ...one byte over is not.
    let app = App::with_settings(Settings {
        max_body_bytes: good.len() - 1,
        ..Default::default()
    });
    let error = format!(
        "request body exceeds the limit of {} bytes (--max-body-bytes)",
        good.len() - 1
    );
    for verb in ["/filter", "/prioritize", "/preempt", "/bind", "/explain"] {
        app.post(verb, good.clone())
            .await
            .assert_error(StatusCode::PAYLOAD_TOO_LARGE, &error);
    }
    // The same service still answers a request that fits.
    let shorter = names_args(&PodJson::new("a").needs_hw_encrypt(), &["a1"]);
    assert!(shorter.len() < good.len());
    app.post("/filter", shorter)
        .await
        .assert(StatusCode::OK, &names_filter_result(&["a1"], &[], &[]));
    // Size is checked before syntax: 65 spaces are a 413, not a 400.
    let small = App::with_settings(Settings {
        max_body_bytes: 64,
        ..Default::default()
    });
    small
        .post("/filter", Body::from(vec![b' '; 65]))
        .await
        .assert_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body exceeds the limit of 64 bytes (--max-body-bytes)",
        );
}

#[tokio::test]
async fn hundred_mib_body_is_413_under_the_default_limit_without_reading_it_all() {
    const CHUNK: usize = 1 << 20;
    const CHUNKS: usize = 100;
    let app = App::default();
    // One 1 MiB buffer, shared by every chunk (cloning `Bytes` does not copy).
    let chunk = Bytes::from(vec![b' '; CHUNK]);
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let stream = futures::stream::repeat(chunk).take(CHUNKS).map(move |c| {
        counter.fetch_add(1, Ordering::Relaxed);
        Ok::<_, std::io::Error>(c)
    });
    app.post("/filter", Body::from_stream(stream))
        .await
        .assert_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body exceeds the limit of 67108864 bytes (--max-body-bytes)",
        );
    let pulled = pulled.load(Ordering::Relaxed);
    assert!(
        pulled <= 65,
        "the server read {pulled} MiB of a 100 MiB body; it should stop after 64 MiB"
    );
    app.assert_still_serves().await;
}

#[tokio::test]
async fn get_on_a_verb_is_405_and_unknown_paths_404_with_json_errors() {
    let app = App::default();
    for verb in ["/filter", "/prioritize", "/bind", "/preempt", "/explain"] {
        let reply = app.get(verb).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{verb}");
        assert_eq!(
            reply.headers.get("allow").and_then(|v| v.to_str().ok()),
            Some("POST"),
            "{verb}"
        );
        assert_eq!(
            reply.json()["Error"],
            format!("GET is not allowed on {verb} (see the Allow header)"),
        );
    }
    let reply = app.get("/no/such/route").await;
    reply.assert(
        StatusCode::NOT_FOUND,
        r#"{"Error":"no route for GET /no/such/route"}"#,
    );
    app.assert_still_serves().await;
}

#[tokio::test]
async fn pod_with_ten_thousand_labels_is_answered() {
    let app = App::default();
    let mut pod = PodJson::new("api").latency_sensitive().needs_hw_encrypt();
    for i in 0..10_000 {
        pod = pod.label(&format!("example.com/label-{i:05}"), &format!("value-{i}"));
    }
    let names = ["a1", "a2", "b1", "c1", "x1", "ghost"];
    let body = names_args(&pod, &names);
    assert!(
        body.len() > 256 * 1024,
        "large enough for the blocking path"
    );
    app.post("/filter", body.clone()).await.assert(
        StatusCode::OK,
        &names_filter_result(
            &["a1", "x1"],
            &[("ghost", NOT_FOUND)],
            &[("a2", HW_REASON), ("b1", HW_REASON), ("c1", HW_REASON)],
        ),
    );
    // Same scores as prioritize::latency_sensitive_pod_weighs_both_plugins.
    app.post("/prioritize", body).await.assert(
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
}

/// 5,000 nodes `n0000`..`n4999`: node i is in `zone-{i % 3}`, even nodes
/// carry hw-encrypt; zone-0 holds 30 priority-0 pods, zone-1 10, zone-2 none.
fn big_cluster(policy: &placer::policy::CompiledPolicy) -> ClusterState {
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    for i in 0..5000 {
        let zone = format!("zone-{}", i % 3);
        state.apply_node(node(&big_name(i), Some(&zone), None, i % 2 == 0));
    }
    for (zone, pods) in [(0, 30), (1, 10)] {
        for k in 0..pods {
            state.apply_pod(PodInfo {
                name: format!("p-{zone}-{k}"),
                namespace: "default".into(),
                node_name: Some(big_name(zone + 3 * k)),
                ..Default::default()
            });
        }
    }
    state
}

fn big_name(i: usize) -> String {
    format!("n{i:04}")
}

#[tokio::test]
async fn five_thousand_node_names_are_filtered_and_scored() {
    let app = App::build(POLICY, Settings::default(), big_cluster);
    let mut names: Vec<String> = (0..5000).map(big_name).collect();
    names.push("ghost".into());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();

    let hw = PodJson::new("api").needs_hw_encrypt();
    let reply = app.post("/filter", names_args(&hw, &refs)).await;
    assert_eq!(reply.status, StatusCode::OK);
    let even: Vec<String> = (0..5000).step_by(2).map(big_name).collect();
    let odd: serde_json::Map<String, Value> = (1..5000)
        .step_by(2)
        .map(|i| (big_name(i), json!(HW_REASON)))
        .collect();
    assert_eq!(
        reply.json(),
        json!({
            "Nodes": null,
            "NodeNames": even,
            "FailedNodes": {"ghost": NOT_FOUND},
            "FailedAndUnresolvableNodes": odd,
            "Error": "",
        })
    );

    // M = 30, m = 0: zone-0 → 0, zone-1 → 100*(30-10)/30 = 66 → 6.6 → 7, zone-2 → 100 → 10.
    let reply = app
        .post("/prioritize", names_args(&PodJson::new("web"), &refs))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut expected: Vec<(&str, i64)> = refs
        .iter()
        .enumerate()
        .map(|(i, n)| (*n, [0, 7, 10][i % 3]))
        .collect();
    expected.last_mut().expect("ghost").1 = 0;
    assert_eq!(reply.body, priorities(&expected));
}

#[tokio::test]
async fn five_thousand_full_nodes_are_echoed() {
    let app = App::default();
    let items: Vec<String> = (0..5000)
        .map(|i| {
            let zone = format!("zone-{}", i % 3);
            let hw = if i % 2 == 0 { "true" } else { "false" };
            node_json(
                &big_name(i),
                &[(ZONE, zone.as_str()), ("node.kubernetes.io/hw-encrypt", hw)],
            )
        })
        .collect();
    let body = nodes_args(&PodJson::new("api").needs_hw_encrypt(), "{}", &items);
    assert!(body.len() > 4 << 20);
    let reply = app.post("/filter", body).await;
    assert_eq!(reply.status, StatusCode::OK);
    let passed: Vec<&str> = items.iter().step_by(2).map(String::as_str).collect();
    let prefix = format!(
        r#"{{"Nodes":{{"metadata":{{}},"items":[{}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{"#,
        passed.join(",")
    );
    assert!(
        reply.body.starts_with(&prefix),
        "passing nodes echoed in order"
    );
    let v = reply.json();
    assert_eq!(
        v["FailedAndUnresolvableNodes"]
            .as_object()
            .expect("a map")
            .len(),
        2500
    );
    assert_eq!(v["Error"], "");
}

/// 1-based line and column of the last byte of the first `needle` in `body`:
/// serde_json reports a string value at its closing quote.
fn end_of(body: &str, needle: &str) -> (usize, usize) {
    let end = body.find(needle).expect("needle in body") + needle.len();
    let before = &body[..end];
    let line = before.matches('\n').count() + 1;
    (line, end - before.rfind('\n').map_or(0, |i| i + 1))
}

#[tokio::test]
async fn bad_quantities_are_reported_where_they_sit_in_the_body() {
    let app = App::default();
    let pod = PodJson::new("p").json().replace(
        r#""resources":{}"#,
        r#""resources":{"requests":{"cpu":"abc"}}"#,
    );
    let body = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":["a1"]}}"#);
    let (line, column) = end_of(&body, r#""abc""#);
    assert!(
        column > 100,
        "deep inside the body, not at the Pod: {column}"
    );
    assert_bad_args(
        &app,
        &body,
        &format!(
            "invalid JSON at line {line} column {column}, field Pod.spec.containers[0].resources.requests.cpu: invalid quantity \"abc\""
        ),
    )
    .await;

    // A full node on its own line, its allocatable memory out of range.
    let node = node_json("n1", &[]).replace(
        r#""allocatable":{"cpu":"7800m","memory":"31Gi""#,
        r#""allocatable":{"cpu":"7800m","memory":"1e9999""#,
    );
    let body = nodes_args(&PodJson::new("p"), "{}", &[format!("\n{node}")]);
    let (line, column) = end_of(&body, r#""1e9999""#);
    assert_eq!(line, 2);
    assert_bad_args(
        &app,
        &body,
        &format!(
            "invalid JSON at line 2 column {column}, field Nodes.items[0].status.allocatable.memory: invalid quantity \"1e9999\""
        ),
    )
    .await;
}
