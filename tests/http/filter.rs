//! `POST /filter`: both request shapes, every key of the answer, the
//! unknown-node and CapabilityFilter verdicts, and Go's decoding leniency.

use axum::http::StatusCode;

use crate::support::{
    App, HW_LABEL, HW_REASON, NOT_FOUND, PodJson, ZONE, good_filter_body, good_filter_result,
    names_args, names_filter_result, node_json, nodes_args, policy_without_default_profile,
};

#[tokio::test]
async fn names_pass_in_request_order_and_unknown_names_fail_resolvably() {
    let app = App::default();
    let body = names_args(
        &PodJson::new("web"),
        &["c1", "a2", "ghost", "b1", "a1", "x1"],
    );
    let reply = app.post("/filter", body).await;
    reply.assert(
        StatusCode::OK,
        &names_filter_result(
            &["c1", "a2", "b1", "a1", "x1"],
            &[("ghost", NOT_FOUND)],
            &[],
        ),
    );
    reply.assert_json_content_type();
}

#[tokio::test]
async fn capability_rejections_are_unresolvable_with_the_rules_reason() {
    let app = App::default();
    let body = names_args(
        &PodJson::new("api").needs_hw_encrypt(),
        &["a1", "a2", "b1", "ghost", "x1"],
    );
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        r#"{"Nodes":null,"NodeNames":["a1","x1"],"FailedNodes":{"ghost":"node not found in placer cache"},"FailedAndUnresolvableNodes":{"a2":"node(s) lack hardware encryption","b1":"node(s) lack hardware encryption"},"Error":""}"#,
    );
}

#[tokio::test]
async fn annotation_value_must_match_exactly_to_activate_the_rule() {
    let app = App::default();
    let pod = PodJson::new("api").annotation("myorg.io/require-hw-encrypt", "True");
    app.post("/filter", names_args(&pod, &["a2", "b1"]))
        .await
        .assert(
            StatusCode::OK,
            &names_filter_result(&["a2", "b1"], &[], &[]),
        );
}

#[tokio::test]
async fn empty_name_list_answers_an_empty_list_not_null() {
    let app = App::default();
    app.post("/filter", names_args(&PodJson::new("web"), &[]))
        .await
        .assert(
            StatusCode::OK,
            r#"{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}"#,
        );
}

#[tokio::test]
async fn duplicate_names_are_answered_once() {
    let app = App::default();
    let body = names_args(
        &PodJson::new("api").needs_hw_encrypt(),
        &["a1", "b1", "a1", "ghost", "b1", "ghost", "a1"],
    );
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        &names_filter_result(&["a1"], &[("ghost", NOT_FOUND)], &[("b1", HW_REASON)]),
    );
}

#[tokio::test]
async fn full_nodes_are_echoed_byte_for_byte_and_names_stay_null() {
    let app = App::default();
    // Nodes the cache does not know are judged on their own labels; `a1`
    // is in the cache *with* hw-encrypt, but the request's copy (which wins
    // in this shape) has no such label.
    let enc = node_json("n-enc", &[(HW_LABEL, "true"), (ZONE, "zone-q")]);
    let plain = node_json("n-plain", &[(ZONE, "zone-q")]);
    let a1 = node_json("a1", &[(ZONE, "zone-a")]);
    let enc2 = node_json("n-enc-2", &[(HW_LABEL, "true")]);
    let body = nodes_args(
        &PodJson::new("api").needs_hw_encrypt(),
        "{}",
        &[enc.clone(), plain, a1, enc2.clone()],
    );
    let reply = app.post("/filter", body).await;
    reply.assert(
        StatusCode::OK,
        &format!(
            r#"{{"Nodes":{{"metadata":{{}},"items":[{enc},{enc2}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{"a1":"{HW_REASON}","n-plain":"{HW_REASON}"}},"Error":""}}"#
        ),
    );
    assert!(
        reply.body.contains(r#""kubeletEndpoint":{"Port":10250}"#),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn full_nodes_list_metadata_is_echoed_and_duplicates_dropped() {
    let app = App::default();
    let a = node_json("a", &[]);
    let b = node_json("b", &[("net", "high")]);
    let meta = r#"{"resourceVersion":"99","continue":"tok"}"#;
    let body = nodes_args(
        &PodJson::new("web"),
        meta,
        &[b.clone(), a.clone(), b.clone()],
    );
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        &format!(
            r#"{{"Nodes":{{"metadata":{meta},"items":[{b},{a}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{}},"Error":""}}"#
        ),
    );
}

#[tokio::test]
async fn full_nodes_without_list_metadata_answer_metadata_null() {
    let app = App::default();
    let a = node_json("a", &[]);
    let body = format!(
        r#"{{"Pod":{},"Nodes":{{"items":[{a}]}},"NodeNames":null}}"#,
        PodJson::new("web").json()
    );
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        &format!(
            r#"{{"Nodes":{{"metadata":null,"items":[{a}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{}},"Error":""}}"#
        ),
    );
}

#[tokio::test]
async fn keys_match_case_insensitively_like_go() {
    let app = App::default();
    let pod = PodJson::new("api").needs_hw_encrypt().json();
    for body in [
        format!(r#"{{"pod":{pod},"nodes":null,"nodenames":["a1","a2"]}}"#),
        format!(r#"{{"POD":{pod},"nodeNames":["a1","a2"]}}"#),
    ] {
        app.post("/filter", body).await.assert(
            StatusCode::OK,
            &names_filter_result(&["a1"], &[], &[("a2", HW_REASON)]),
        );
    }
}

#[tokio::test]
async fn unknown_fields_are_ignored_and_absent_equals_null() {
    let app = App::default();
    let pod = PodJson::new("api").needs_hw_encrypt().json();
    // No "Nodes" key at all, unknown keys of every JSON type around the known ones.
    let body = format!(
        r#"{{"Kind":"ExtenderArgs","Pod":{pod},"Extra":{{"deep":[1,2.5,{{"x":null}}],"t":true}},"NodeNames":["x1","b1"],"Zzz":null}}"#
    );
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        &names_filter_result(&["x1"], &[], &[("b1", HW_REASON)]),
    );
}

#[tokio::test]
async fn go_escaped_strings_and_unknown_pod_fields_decode() {
    let app = App::default();
    // Go writes `<`, `>`, `&` as \u003c, \u003e, \u0026; the pod also
    // carries fields placer never reads.
    let pod = PodJson::new("api")
        .annotation("note", "a<b&c>d")
        .needs_hw_encrypt();
    let json = pod.json();
    assert!(json.contains(r#""a\u003cb\u0026c\u003ed""#), "{json}");
    app.post("/filter", names_args(&pod, &["a1", "a2"]))
        .await
        .assert(
            StatusCode::OK,
            &names_filter_result(&["a1"], &[], &[("a2", HW_REASON)]),
        );
}

#[tokio::test]
async fn pod_matching_no_profile_without_default_is_a_domain_error() {
    let app = App::with_policy(&policy_without_default_profile());
    let body = names_args(&PodJson::new("web"), &["a1", "b1"]);
    app.post("/filter", body).await.assert(
        StatusCode::OK,
        r#"{"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":"placer has no profile for schedulerName \"default-scheduler\" and the policy sets no extender.defaultProfile"}"#,
    );
}

#[tokio::test]
async fn pod_naming_a_profile_uses_it_without_a_default() {
    let app = App::with_policy(&policy_without_default_profile());
    let pod = PodJson::new("api").scheduler("extender").needs_hw_encrypt();
    app.post("/filter", names_args(&pod, &["a1", "b1"]))
        .await
        .assert(
            StatusCode::OK,
            &names_filter_result(&["a1"], &[], &[("b1", HW_REASON)]),
        );
}

#[tokio::test]
async fn any_content_type_is_accepted() {
    let app = App::default();
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/json; charset=utf-8"),
    ] {
        let mut req = axum::http::Request::builder().method("POST").uri("/filter");
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let req = req
            .body(axum::body::Body::from(good_filter_body()))
            .expect("request builds");
        app.send(req)
            .await
            .assert(StatusCode::OK, &good_filter_result());
    }
}
