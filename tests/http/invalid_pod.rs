//! A pod the API server would refuse (a bad selector operator, a weight out
//! of range, ...) is one rule on every verb: 400 with the field path, whatever
//! plugin would have met the field first. Never a 5xx.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::support::{App, PodJson, meta_preempt_args, names_args};

/// The shipped policy: its `placer` profile runs every in-tree plugin, so
/// each invalid field reaches the plugin that parses it.
fn shipped() -> App {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/policy.yaml"))
        .expect("policy.yaml is readable");
    App::with_policy(&text)
}

const BAD_OPERATOR: &str = r#"{"key": "a", "operator": "Foo", "values": ["x"]}"#;

/// Each case: the spec fields to set, and the error the verbs must give.
fn cases() -> Vec<(Value, String)> {
    let bad: Value = serde_json::from_str(BAD_OPERATOR).expect("valid JSON");
    let label_op = "\"Foo\" is not a valid label selector operator";
    let node_op = "Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"";
    vec![
        (
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [bad]}}]}}}),
            format!("Pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator: {node_op}"),
        ),
        (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [bad]}]}}}}),
            format!("Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: {node_op}"),
        ),
        (
            json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {"matchExpressions": [bad]}}}]}}}),
            format!("Pod.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchExpressions[0]: {label_op}"),
        ),
        (
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchExpressions": [bad]}}]}}}),
            format!("Pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]: {label_op}"),
        ),
        (
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchExpressions": [bad]}}]}),
            format!("Pod.spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0]: {label_op}"),
        ),
        (
            json!({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule"}]}),
            "Pod.spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero".into(),
        ),
        (
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": -5, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}}),
            "Pod.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: -5: must be in the range 1-100".into(),
        ),
    ]
}

/// The pod as JSON, with `fields` merged into its spec.
fn pod_with(fields: &Value) -> String {
    let mut pod: Value =
        serde_json::from_str(&PodJson::new("bad").scheduler("placer").json()).expect("valid JSON");
    if let (Some(spec), Some(fields)) = (pod["spec"].as_object_mut(), fields.as_object()) {
        spec.extend(fields.clone());
    }
    pod.to_string()
}

/// Puts `pod` in place of the placeholder pod of `body`.
fn swap_pod(body: &str, pod: &str) -> String {
    let placeholder = PodJson::new("bad").scheduler("placer").json();
    assert!(body.contains(&placeholder));
    body.replace(&placeholder, pod)
}

#[tokio::test]
async fn every_verb_answers_400_naming_the_field() {
    let app = shipped();
    let placeholder = PodJson::new("bad").scheduler("placer");
    let names = names_args(&placeholder, &["a1", "b1"]);
    let preempt = meta_preempt_args(&placeholder, &[("a1", &[], 0)]);
    for (fields, error) in cases() {
        let pod = pod_with(&fields);
        for (verb, body) in [
            ("/filter", &names),
            ("/prioritize", &names),
            ("/explain", &names),
            ("/explain?format=table", &names),
            ("/preempt", &preempt),
        ] {
            let reply = app.post(verb, swap_pod(body, &pod)).await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{verb} {fields}: {}",
                reply.body
            );
            reply.assert_error(StatusCode::BAD_REQUEST, &error);
        }
    }
    app.assert_still_serves().await;
}

#[tokio::test]
async fn a_valid_pod_with_the_same_fields_is_answered() {
    let app = shipped();
    let pod = pod_with(
        &json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}}}]}),
    );
    let body = swap_pod(
        &names_args(&PodJson::new("bad").scheduler("placer"), &["a1", "b1"]),
        &pod,
    );
    for verb in ["/filter", "/prioritize", "/explain"] {
        let reply = app.post(verb, body.clone()).await;
        assert_eq!(reply.status, StatusCode::OK, "{verb}: {}", reply.body);
    }
}

#[tokio::test]
async fn explain_table_shortens_names_beyond_any_format_width() {
    let app = App::default();
    let long = "n".repeat(70_000);
    let reply = app
        .post(
            "/explain?format=table",
            names_args(&PodJson::new("web"), &[&long, "a1"]),
        )
        .await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "{}",
        &reply.body[..200.min(reply.body.len())]
    );
    assert!(
        reply
            .body
            .contains("node names over 64 characters are shortened")
    );
    assert!(!reply.body.contains(&long));
    let json = app
        .post("/explain", names_args(&PodJson::new("web"), &[&long, "a1"]))
        .await;
    assert_eq!(json.json()["nodes"][0]["node"], Value::String(long));
}

/// A plugin error shown outside a per-node row names its plugin once: the
/// plugin says what went wrong, the caller says which plugin it was.
#[tokio::test]
async fn plugin_errors_name_their_plugin_once() {
    let app = shipped();
    // Valid for the API server, but placer's extender cache has no namespace
    // labels, so InterPodAffinity cannot decide a namespaceSelector.
    let pod = pod_with(
        &json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"topologyKey": "zone",
            "labelSelector": {"matchLabels": {"app": "db"}},
            "namespaceSelector": {"matchLabels": {"team": "a"}}}}]}}}),
    );
    let body = swap_pod(
        &names_args(&PodJson::new("bad").scheduler("placer"), &["a1", "b1"]),
        &pod,
    );
    let explained = app.post("/explain", body.clone()).await;
    let error = explained.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.starts_with("InterPodAffinity: podAffinity."),
        "{error}"
    );
    assert_eq!(error.matches("InterPodAffinity").count(), 1, "{error}");
    let prioritized = app.post("/prioritize", body).await;
    prioritized.assert_error(StatusCode::INTERNAL_SERVER_ERROR, &error);
}
