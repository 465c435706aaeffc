//! `POST /bind`: without an API server (a snapshot-backed service), a domain
//! error in `Error` with status 200; a malformed body, or one without the
//! pod's UID, is a 400; against a stand-in API server, the bind is timed in
//! `placer_bind_duration_seconds`, and every pod or node the checks refuse
//! (a policy that names no scheduler to bind for among them) is answered
//! with the reason while no Binding is sent.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use kube::client::Body;
use placer::cache::Cache;
use placer::explain::PendingPods;
use placer::modes::extender::{Binder, ExtenderState, Settings};
use placer::objects::PodInfo;
use placer::state::AppState;
use serde_json::{Value, json};

use crate::support::{App, POLICY, bind_args, compile, fixture_cluster};

/// [`POLICY`] serving kube-scheduler's default profile, whose pods `/bind`
/// then binds (the stand-in API server's pod is one of them).
fn served_policy() -> String {
    POLICY.replace(
        "extender:\n  defaultProfile: extender\n",
        "extender:\n  defaultProfile: extender\n  schedulerNames: [default-scheduler]\n",
    )
}

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
    // Lower-case keys work as in Go.
    app.post(
        "/bind",
        r#"{"podname":"api","podnamespace":"default","poduid":"uid-api","node":"a1"}"#,
    )
    .await
    .assert(StatusCode::OK, NO_API_SERVER);
}

const MISSING_UID: &str =
    "PodUID: missing: /bind binds only the pod kube-scheduler names by its UID";

/// kube-scheduler always sends `PodUID`: a request without one is refused
/// before anything is looked at, in every setup (no API server, an API
/// server, a policy that would bind any scheduler's pods), and counted.
#[tokio::test]
async fn a_bind_without_the_pods_uid_is_a_bad_request_before_any_lookup() {
    let server = ApiServer::with_pod(Some(api_pod()));
    let any = POLICY.replace(
        "extender:\n  defaultProfile: extender\n",
        "extender:\n  defaultProfile: extender\n  bindAnyScheduler: true\n",
    );
    for (setup, app) in [
        ("no API server", App::default()),
        (
            "schedulerNames",
            app_with(&served_policy(), &server, |_| {}),
        ),
        ("bindAnyScheduler", app_with(&any, &server, |_| {})),
    ] {
        for body in [
            r#"{"PodName":"api","PodNamespace":"default","Node":"a1"}"#.to_string(),
            r#"{"PodName":"api","PodNamespace":"default","PodUID":null,"Node":"a1"}"#.to_string(),
            bind_args("api", "default", "", "a1"),
        ] {
            app.post("/bind", body)
                .await
                .assert_error(StatusCode::BAD_REQUEST, MISSING_UID);
        }
        assert_eq!(
            series(&app, r#"placer_bind_refusals_total{reason="missing_uid"}"#).await,
            "3",
            "{setup}"
        );
        app.assert_still_serves().await;
    }
    assert!(server.requests().is_empty(), "{:?}", server.requests());
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
        (bind_args("api", "default", "", "a1"), MISSING_UID),
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

/// The pending pod `default/api` as the API server returns it.
fn api_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "api", "namespace": "default", "uid": "uid-api"},
        "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending"}
    })
}

/// A `Status` as the API server sends it with an error.
fn status(code: u16, message: &str) -> Value {
    let reason = match code {
        403 => "Forbidden",
        404 => "NotFound",
        _ => "InternalError",
    };
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code})
}

/// What the stand-in API server saw: `METHOD path` of every request, and
/// the body of every Binding.
#[derive(Default)]
struct Seen {
    requests: Vec<String>,
    bindings: Vec<Value>,
}

/// A stand-in API server: `GET` of `default/api` answers `pod` (404 when
/// `None`, or the `(code, Status)` of `get_error`); a Binding answers
/// `binding`.
#[derive(Clone)]
struct ApiServer {
    pod: Option<Value>,
    get_error: Option<u16>,
    binding: (u16, Value),
    seen: Arc<Mutex<Seen>>,
}

impl ApiServer {
    fn with_pod(pod: Option<Value>) -> Self {
        ApiServer {
            pod,
            get_error: None,
            binding: (201, json!({})),
            seen: Arc::default(),
        }
    }

    fn client(&self) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |req: http::Request<Body>| {
            let server = server.clone();
            async move {
                let line = format!("{} {}", req.method(), req.uri().path());
                let binding = req.uri().path().ends_with("/binding");
                let bytes = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .expect("request body")
                    .to_bytes();
                let mut seen = server.seen.lock().expect("lock");
                seen.requests.push(line);
                let (code, body) = if binding {
                    seen.bindings
                        .push(serde_json::from_slice(&bytes).expect("a JSON Binding"));
                    server.binding.clone()
                } else if let Some(code) = server.get_error {
                    (code, status(code, "etcdserver: request timed out"))
                } else {
                    match &server.pod {
                        Some(pod) => (200, pod.clone()),
                        None => (404, status(404, "pods \"api\" not found")),
                    }
                };
                let reply = http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string().into_bytes()))
                    .expect("a response");
                Ok::<_, Infallible>(reply)
            }
        });
        kube::Client::new(service, "default")
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().expect("lock").requests.clone()
    }

    fn bindings(&self) -> Vec<Value> {
        self.seen.lock().expect("lock").bindings.clone()
    }
}

/// The service over the fixture cluster with a binder talking to `server`;
/// `configure` adjusts the verbs' state (settings, pending store).
fn app_with(policy: &str, server: &ApiServer, configure: impl FnOnce(&mut ExtenderState)) -> App {
    let compiled = compile(policy);
    let cache = Arc::new(Cache::from_state(fixture_cluster(&compiled)));
    let state = AppState::new(compiled, cache);
    let binder = Arc::new(Binder::new(server.client(), state.metrics.clone()));
    let mut verbs = ExtenderState::new(&state, Some(binder), Settings::default());
    configure(&mut verbs);
    App::over_state(state, verbs)
}

fn app_with_api_server(server: &ApiServer) -> App {
    app_with(&served_policy(), server, |_| {})
}

/// The value of one series of `/metrics`, "absent" when it is not exposed.
async fn series(app: &App, name: &str) -> String {
    let prefix = format!("{name} ");
    app.get("/metrics")
        .await
        .body
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or("absent")
        .to_owned()
}

/// The `placer_bind_duration_seconds_count` line for `result`, from `/metrics`.
async fn binds_timed(app: &App, result: &str) -> String {
    series(
        app,
        &format!("placer_bind_duration_seconds_count{{result=\"{result}\"}}"),
    )
    .await
}

#[tokio::test]
async fn a_bind_through_the_verb_is_timed_by_result() {
    let server = ApiServer::with_pod(Some(api_pod()));
    let app = app_with_api_server(&server);
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["Error"], "", "{}", reply.body);
    assert_eq!(binds_timed(&app, "success").await, "1");
    assert_eq!(binds_timed(&app, "failure").await, "absent");
    assert_eq!(
        server.requests(),
        [
            "GET /api/v1/namespaces/default/pods/api",
            "POST /api/v1/namespaces/default/pods/api/binding"
        ],
        "the default extender (no pending-pod watch) looks the pod up once"
    );

    let mut refusing = ApiServer::with_pod(Some(api_pod()));
    refusing.binding = (403, status(403, "pods \"api\" is forbidden"));
    let refused = app_with_api_server(&refusing);
    refused
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await
        .assert(
            StatusCode::OK,
            r#"{"Error":"binding pod default/api to node a1 failed: pods \"api\" is forbidden"}"#,
        );
    assert_eq!(binds_timed(&refused, "failure").await, "1");
}

#[tokio::test]
async fn the_binding_carries_the_pods_uid_as_its_precondition() {
    let server = ApiServer::with_pod(Some(api_pod()));
    let app = app_with_api_server(&server);
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_eq!(reply.json()["Error"], "", "{}", reply.body);
    let bindings = server.bindings();
    assert_eq!(bindings.len(), 1);
    assert_eq!(bindings[0]["metadata"]["uid"], "uid-api");
    assert_eq!(bindings[0]["target"]["name"], "a1");
}

const NO_SCHEDULER_NAMES: &str = "/bind binds only pods of the schedulers listed in the policy's extender.schedulerNames, and it lists none: list kube-scheduler's profiles there, or bind any scheduler's pods with --bind-any-scheduler (extender.bindAnyScheduler: true); pod default/api not bound";

/// A policy that names no scheduler binds nobody's pods: any client that
/// reaches `/bind` could otherwise bind any pending pod to any node. Saying
/// so in words, by the flag or the policy, binds any scheduler's pods.
#[tokio::test]
async fn without_scheduler_names_bind_is_refused_unless_any_scheduler_is_allowed() {
    let server = ApiServer::with_pod(Some(api_pod()));
    let app = app_with(POLICY, &server, |_| {});
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_refused(&reply, &server, NO_SCHEDULER_NAMES);
    assert_eq!(
        series(
            &app,
            r#"placer_bind_refusals_total{reason="no_scheduler_names"}"#
        )
        .await,
        "1"
    );
    assert!(
        server.requests().is_empty(),
        "refused before the pod is looked up: {:?}",
        server.requests()
    );

    let by_policy = POLICY.replace(
        "extender:\n  defaultProfile: extender\n",
        "extender:\n  defaultProfile: extender\n  bindAnyScheduler: true\n",
    );
    let by_flag = |verbs: &mut ExtenderState| {
        verbs.settings = Arc::new(Settings {
            bind_any_scheduler: true,
            ..Settings::default()
        });
    };
    for (how, policy, flag) in [
        ("policy", by_policy.as_str(), false),
        ("flag", POLICY, true),
    ] {
        let server = ApiServer::with_pod(Some(api_pod()));
        let app = if flag {
            app_with(policy, &server, by_flag)
        } else {
            app_with(policy, &server, |_| {})
        };
        let reply = app
            .post("/bind", bind_args("api", "default", "uid-api", "a1"))
            .await;
        reply.assert(StatusCode::OK, r#"{"Error":""}"#);
        assert_eq!(server.bindings().len(), 1, "{how}");
    }
}

/// One refused `/bind`: its `Error`, the refusal counted by reason, and no
/// Binding sent.
#[track_caller]
fn assert_refused(reply: &crate::support::Reply, server: &ApiServer, error: &str) {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.json(), json!({ "Error": error }));
    assert!(
        server.bindings().is_empty(),
        "a Binding reached the API server: {:?}",
        server.bindings()
    );
}

#[tokio::test]
async fn pods_and_nodes_the_checks_refuse_never_reach_the_api_server() {
    let pod_with = |patch: Value| {
        let mut pod = api_pod();
        json_patch(&mut pod, patch);
        Some(pod)
    };
    let terminating = pod_with(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}));
    let bound = pod_with(json!({"spec": {"nodeName": "b1"}}));
    let finished = pod_with(json!({"status": {"phase": "Succeeded"}}));
    let recreated = pod_with(json!({"metadata": {"uid": "uid-new"}}));
    for (case, pod, node, error, reason) in [
        (
            "unknown node",
            Some(api_pod()),
            "nope",
            "node nope is not in placer's cache; pod default/api not bound",
            "node_unknown",
        ),
        (
            "no such pod",
            None,
            "a1",
            "pod default/api does not exist; not bound",
            "pod_not_found",
        ),
        (
            "deleted and re-created",
            recreated,
            "a1",
            "pod default/api has uid uid-new, not uid-api; not bound",
            "uid_mismatch",
        ),
        (
            "bound meanwhile",
            bound,
            "a1",
            "pod default/api is already bound to node b1, not a1",
            "already_bound",
        ),
        (
            "being deleted",
            terminating,
            "a1",
            "pod default/api is being deleted; not bound",
            "terminating",
        ),
        (
            "finished",
            finished,
            "a1",
            "pod default/api has finished (Succeeded); not bound",
            "finished",
        ),
    ] {
        let server = ApiServer::with_pod(pod);
        let app = app_with_api_server(&server);
        let reply = app
            .post("/bind", bind_args("api", "default", "uid-api", node))
            .await;
        assert_refused(&reply, &server, error);
        assert_eq!(
            series(
                &app,
                &format!("placer_bind_refusals_total{{reason=\"{reason}\"}}")
            )
            .await,
            "1",
            "{case}"
        );
        assert_eq!(binds_timed(&app, "failure").await, "absent", "{case}");
        if reason == "node_unknown" {
            // Checked before any lookup: the node is placer's own knowledge.
            assert!(server.requests().is_empty(), "{:?}", server.requests());
        }
    }
}

#[tokio::test]
async fn a_lookup_the_api_server_fails_is_a_refusal_not_a_bind() {
    let mut server = ApiServer::with_pod(Some(api_pod()));
    server.get_error = Some(500);
    let app = app_with_api_server(&server);
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_refused(
        &reply,
        &server,
        "looking up pod default/api failed: etcdserver: request timed out; not bound",
    );
}

#[tokio::test]
async fn a_pod_bound_in_the_cache_needs_no_lookup() {
    // web-1 is bound to a1 in the fixture cluster.
    let server = ApiServer::with_pod(None);
    let app = app_with_api_server(&server);
    let reply = app
        .post("/bind", bind_args("web-1", "default", "uid-web-1", "b1"))
        .await;
    assert_refused(
        &reply,
        &server,
        "pod default/web-1 is already bound to node a1, not b1",
    );
    // The same node again: kube-scheduler's retry after a lost answer succeeds.
    let reply = app
        .post("/bind", bind_args("web-1", "default", "uid-web-1", "a1"))
        .await;
    reply.assert(StatusCode::OK, r#"{"Error":""}"#);
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[tokio::test]
async fn schedulers_the_extender_does_not_serve_are_refused() {
    // extender.schedulerNames set: pods of other schedulers are refused.
    let listed = POLICY.replace(
        "extender:\n  defaultProfile: extender\n",
        "extender:\n  defaultProfile: extender\n  schedulerNames: [placer-extender]\n",
    );
    let server = ApiServer::with_pod(Some(api_pod()));
    let app = app_with(&listed, &server, |_| {});
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_refused(
        &reply,
        &server,
        r#"pod default/api has schedulerName "default-scheduler", not one of the policy's extender.schedulerNames ["placer-extender"]; not bound"#,
    );

    // A pod of a profile placer schedules itself (--mode both) is never
    // bound here, not even when any scheduler's pods may be.
    let mut own = api_pod();
    own["spec"]["schedulerName"] = json!("extender");
    let server = ApiServer::with_pod(Some(own));
    let app = app_with(POLICY, &server, |verbs| {
        verbs.settings = Arc::new(Settings {
            own_scheduling: Some("both"),
            bind_any_scheduler: true,
            ..Settings::default()
        });
    });
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    assert_refused(
        &reply,
        &server,
        r#"pod default/api has schedulerName "extender", a profile placer schedules itself (--mode both); /bind does not bind it"#,
    );
    assert_eq!(
        series(
            &app,
            r#"placer_bind_refusals_total{reason="own_scheduler"}"#
        )
        .await,
        "1"
    );
}

#[tokio::test]
async fn a_watched_pending_pod_is_bound_without_a_lookup() {
    let server = ApiServer::with_pod(None);
    let app = app_with(&served_policy(), &server, |verbs| {
        verbs.pending = Some(Arc::new(PendingPods::from_pods([PodInfo {
            name: "api".into(),
            namespace: "default".into(),
            uid: "uid-api".into(),
            scheduler_name: "default-scheduler".into(),
            phase: Some("Pending".into()),
            ..Default::default()
        }])));
    });
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-api", "a1"))
        .await;
    reply.assert(StatusCode::OK, r#"{"Error":""}"#);
    assert_eq!(
        server.requests(),
        ["POST /api/v1/namespaces/default/pods/api/binding"]
    );
    // Another UID than the watched pod's: the API server is asked, and it
    // has no such pod.
    let reply = app
        .post("/bind", bind_args("api", "default", "uid-other", "a1"))
        .await;
    assert_refused_after_one_binding(&reply, &server, "pod default/api does not exist; not bound");
}

#[track_caller]
fn assert_refused_after_one_binding(
    reply: &crate::support::Reply,
    server: &ApiServer,
    error: &str,
) {
    assert_eq!(reply.json(), json!({ "Error": error }));
    assert_eq!(server.bindings().len(), 1, "only the first bind was sent");
}

/// Merges `patch` into `target` (objects recursively, anything else replaced).
fn json_patch(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                json_patch(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}
