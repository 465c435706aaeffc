//! Who may call which path (design §3.4), in process: every route against
//! every kind of caller under each way placer can be set up, with a
//! stand-in API server answering TokenReviews and SubjectAccessReviews (the
//! real one is in `tests/e2e/access.rs`): non-resource URLs for the reads,
//! `get` on `pods/explain` in the pod's namespace for a pod's explanation. A client certificate is what the
//! listener hands a request after the TLS handshake verified it: an
//! `Arc<ClientCert>` extension.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use placer::cache::Cache;
use placer::modes::extender::{ExtenderState, Settings};
use placer::ops::access::{
    Access, AccessSettings, AlwaysAllow, ClientCert, ReviewSettings, Reviewer, Scheme, paths,
};
use placer::state::AppState;
use serde_json::{Value, json};

use crate::support::{App, POLICY, Reply, bind_args, compile, fixture_cluster, good_filter_body};

/// The service account of a team that may explain the pods of namespace
/// `default` only (a RoleBinding there).
const TEAM: &str = "system:serviceaccount:default:team";

/// Tokens the stand-in API server knows: token → (user, groups).
const TOKENS: [(&str, &str, &[&str]); 4] = [
    (
        "reader-token",
        "system:serviceaccount:monitoring:reader",
        &["system:serviceaccounts"],
    ),
    (
        "nobody-token",
        "system:serviceaccount:tenant:nobody",
        &["system:serviceaccounts"],
    ),
    ("admin-token", "admin", &["system:masters"]),
    ("team-token", TEAM, &["system:serviceaccounts"]),
];

/// The reader service account and members of the group `readers` (a
/// ClusterRoleBinding to the README's reader ClusterRole).
fn reader(user: &str, groups: &[String]) -> bool {
    user == "system:serviceaccount:monitoring:reader" || groups.iter().any(|g| g == "readers")
}

/// The stand-in API server's RBAC for non-resource URLs: readers may `get`
/// the read paths and `post` `/explain`.
fn allowed(user: &str, groups: &[String], verb: &str, path: &str) -> bool {
    let readable = matches!(path, "/metrics" | "/policy") || path.starts_with("/debug/");
    reader(user, groups) && ((verb == "get" && readable) || (verb == "post" && path == "/explain"))
}

/// The stand-in API server's RBAC for `get` on `pods/explain`: readers in
/// every namespace, the team in `default` only.
fn allowed_explain(user: &str, groups: &[String], namespace: &str) -> bool {
    reader(user, groups) || (user == TEAM && namespace == "default")
}

/// Whether `user` may call `method path`, as placer asks the stand-in.
fn may(user: &str, groups: &[String], method: &Method, path: &str) -> bool {
    match path.strip_prefix("/explain/pods/") {
        Some(pod) => allowed_explain(user, groups, pod.split('/').next().unwrap_or("")),
        None => allowed(user, groups, &method.as_str().to_lowercase(), path),
    }
}

/// A stand-in API server for reviews; counts them and can be made to fail.
#[derive(Clone, Default)]
struct Reviews {
    /// `tokenreviews` / `subjectaccessreviews` calls, in order.
    calls: Arc<Mutex<Vec<String>>>,
    /// The spec of every SubjectAccessReview, in order.
    access_specs: Arc<Mutex<Vec<Value>>>,
    /// Answer every review with this status code and a Status.
    fail_with: Option<u16>,
}

impl Reviews {
    fn client(&self) -> kube::Client {
        let reviews = self.clone();
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let reviews = reviews.clone();
            async move {
                let path = req.uri().path().to_owned();
                let bytes = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .expect("body")
                    .to_bytes();
                let review: Value = serde_json::from_slice(&bytes).expect("a JSON review");
                let kind = path.rsplit('/').next().unwrap_or("").to_owned();
                reviews.calls.lock().expect("lock").push(kind.clone());
                if kind == "subjectaccessreviews" {
                    let spec = review["spec"].clone();
                    reviews.access_specs.lock().expect("lock").push(spec);
                }
                let (code, answer) = match reviews.fail_with {
                    Some(code) => (
                        code,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                            "reason": "Forbidden",
                            "message": format!("{kind}.authorization.k8s.io is forbidden: User \"placer\" cannot create resource \"{kind}\"")}),
                    ),
                    None => (201, answer(&kind, review)),
                };
                let reply = http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(answer.to_string().into_bytes()))
                    .expect("a response");
                Ok::<_, Infallible>(reply)
            }
        });
        kube::Client::new(service, "default")
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("lock").clone()
    }

    fn access_specs(&self) -> Vec<Value> {
        self.access_specs.lock().expect("lock").clone()
    }
}

/// The review with its status filled in as the API server would.
fn answer(kind: &str, mut review: Value) -> Value {
    match kind {
        "tokenreviews" => {
            let token = review["spec"]["token"].as_str().unwrap_or("");
            review["status"] = match TOKENS.iter().find(|(t, ..)| *t == token) {
                Some((_, user, groups)) => json!({
                    "authenticated": true,
                    "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups},
                }),
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            };
        }
        _ => {
            let spec = &review["spec"];
            let groups: Vec<String> =
                serde_json::from_value(spec["groups"].clone()).unwrap_or_default();
            let user = spec["user"].as_str().unwrap_or("");
            let resource = &spec["resourceAttributes"];
            let ok = if resource.is_object() {
                let explain = resource["group"] == ""
                    && resource["resource"] == "pods"
                    && resource["subresource"] == "explain"
                    && resource["verb"] == "get";
                explain
                    && allowed_explain(user, &groups, resource["namespace"].as_str().unwrap_or(""))
            } else {
                allowed(
                    user,
                    &groups,
                    spec["nonResourceAttributes"]["verb"].as_str().unwrap_or(""),
                    spec["nonResourceAttributes"]["path"].as_str().unwrap_or(""),
                )
            };
            review["status"] = if ok {
                json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"placer-reader\""})
            } else {
                json!({"allowed": false})
            };
        }
    }
    review
}

/// How placer is set up.
#[derive(Clone, Copy, Debug)]
enum Setup {
    /// `--snapshot` without a client CA or delegated authentication.
    Open,
    /// A live cluster without a client CA or delegated authentication.
    Closed,
    /// `--client-ca-file` only.
    ClientCa,
    /// Delegated authentication with `--client-ca-file`.
    DelegatedMtls,
    /// Delegated authentication without a client CA.
    Delegated,
}

impl Setup {
    fn delegated(self) -> bool {
        matches!(self, Setup::Delegated | Setup::DelegatedMtls)
    }

    fn client_ca(self) -> bool {
        matches!(self, Setup::ClientCa | Setup::DelegatedMtls)
    }
}

/// The service over the fixture cluster, set up as `setup` says, with
/// `always_allow` and reviews answered by `reviews`.
fn app(setup: Setup, always_allow: &[&str], reviews: &Reviews, names: &[&str]) -> App {
    let compiled = compile(POLICY);
    let cache = Arc::new(Cache::from_state(fixture_cluster(&compiled)));
    cache.mark_nodes_synced();
    cache.mark_pods_synced();
    let state = AppState::new(compiled, cache);
    let verbs = ExtenderState::new(&state, None, Settings::default());
    let reads = if setup.delegated() {
        let reviewer = Reviewer::new(
            reviews.client(),
            reviews.client(),
            ReviewSettings::default(),
            state.metrics.clone(),
        )
        .expect("a random key");
        Scheme::Delegated(Arc::new(reviewer))
    } else if setup.client_ca() {
        Scheme::ClientCertificate
    } else if matches!(setup, Setup::Closed) {
        Scheme::Closed
    } else {
        Scheme::Open
    };
    let access = Access::new(
        AccessSettings {
            client_ca: setup.client_ca(),
            verbs_allowed_names: names.iter().map(|n| (*n).to_owned()).collect(),
            always_allow: AlwaysAllow::new(always_allow).expect("a valid list"),
            reads,
        },
        state.metrics.clone(),
    );
    App::from_router(placer::server::secured_router(state, verbs, None, &access))
}

/// A caller.
#[derive(Clone, Copy, Debug)]
enum Caller {
    /// No certificate, no token.
    Anonymous,
    /// A verified client certificate (CN, O).
    Cert(&'static str, &'static [&'static str]),
    /// `Authorization: Bearer <token>`.
    Token(&'static str),
    /// An `Authorization` header of another scheme.
    Basic,
}

const SCHEDULER: Caller = Caller::Cert("kube-scheduler", &[]);
const ALICE: Caller = Caller::Cert("alice", &["readers"]);

fn cert(cn: &str, orgs: &[&str]) -> Arc<ClientCert> {
    Arc::new(ClientCert {
        common_name: cn.to_owned(),
        organizations: orgs.iter().map(|o| (*o).to_owned()).collect(),
        fingerprint: "00".repeat(32),
    })
}

async fn call(app: &App, caller: Caller, method: Method, path: &str) -> Reply {
    let body = match path {
        "/bind" => bind_args("api", "default", "uid-api", "a1"),
        p if p.starts_with("/explain/") || method == Method::GET => String::new(),
        _ => good_filter_body(),
    };
    let mut req = Request::builder().method(method).uri(path);
    match caller {
        Caller::Token(token) => req = req.header("authorization", format!("Bearer {token}")),
        Caller::Basic => req = req.header("authorization", "Basic dXNlcjpwYXNz"),
        _ => {}
    }
    let mut req = req
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a request");
    if let Caller::Cert(cn, orgs) = caller {
        req.extensions_mut().insert(cert(cn, orgs));
    }
    app.send(req).await
}

/// Every route, with its method.
const HEALTH: [&str; 3] = ["/healthz", "/readyz", "/livez"];
const READS: [&str; 6] = [
    "/metrics",
    "/policy",
    "/debug/zones",
    "/debug/snapshot",
    "/explain/pods/default/web-1",
    "/explain/pods/kube-system/web-1",
];
const VERBS: [&str; 4] = ["/filter", "/prioritize", "/bind", "/preempt"];

/// The refusal statuses and why, or `None` when the caller gets through.
fn expected(setup: Setup, caller: Caller, method: &Method, path: &str) -> Option<u16> {
    let verb = VERBS.contains(&path);
    if verb {
        return match (setup.client_ca(), caller) {
            (false, _) | (true, Caller::Cert(..)) => None,
            (true, _) => Some(403),
        };
    }
    if HEALTH.contains(&path) {
        return None;
    }
    match setup {
        Setup::Open => None,
        Setup::Closed => Some(403),
        Setup::ClientCa => match caller {
            Caller::Cert(..) => None,
            _ => Some(401),
        },
        Setup::Delegated | Setup::DelegatedMtls => match caller {
            Caller::Anonymous | Caller::Basic => Some(401),
            // Without a client CA the TLS layer asks for no certificate:
            // none reaches a route (covered by the e2e tests); here the
            // certificate's user is reviewed like any other.
            Caller::Cert(cn, orgs) => {
                let groups: Vec<String> = orgs.iter().map(|o| (*o).to_owned()).collect();
                (!may(cn, &groups, method, path)).then_some(403)
            }
            Caller::Token("admin-token") => None,
            Caller::Token(token) => match TOKENS.iter().find(|(t, ..)| *t == token) {
                Some((_, user, groups)) => {
                    let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
                    (!may(user, &groups, method, path)).then_some(403)
                }
                None => Some(401),
            },
        },
    }
}

#[tokio::test]
async fn every_path_against_every_caller_in_every_setup() {
    let callers = [
        Caller::Anonymous,
        SCHEDULER,
        ALICE,
        Caller::Token("reader-token"),
        Caller::Token("nobody-token"),
        Caller::Token("admin-token"),
        Caller::Token("team-token"),
        Caller::Token("forged"),
        Caller::Basic,
    ];
    let routes: Vec<(Method, &str)> = HEALTH
        .iter()
        .chain(&READS)
        .map(|p| (Method::GET, *p))
        .chain(
            VERBS
                .iter()
                .chain(&["/explain"])
                .map(|p| (Method::POST, *p)),
        )
        .collect();
    let mut table = BTreeMap::new();
    for setup in [
        Setup::Open,
        Setup::Closed,
        Setup::ClientCa,
        Setup::Delegated,
        Setup::DelegatedMtls,
    ] {
        let reviews = Reviews::default();
        let app = app(setup, paths::DEFAULT, &reviews, &[]);
        for caller in callers {
            for (method, path) in &routes {
                let reply = call(&app, caller, method.clone(), path).await;
                let want = expected(setup, caller, method, path);
                let refused = matches!(reply.status.as_u16(), 401 | 403);
                match want {
                    Some(code) => {
                        assert_eq!(
                            reply.status.as_u16(),
                            code,
                            "{setup:?} {caller:?} {method} {path}: {}",
                            reply.body
                        );
                        let error = reply.json()["Error"].as_str().unwrap_or("").to_owned();
                        assert!(
                            !error.is_empty(),
                            "{setup:?} {caller:?} {path}: {}",
                            reply.body
                        );
                    }
                    None => assert!(
                        !refused,
                        "{setup:?} {caller:?} {method} {path} refused: {}",
                        reply.body
                    ),
                }
                table.insert(
                    (
                        format!("{setup:?}"),
                        format!("{caller:?}"),
                        path.to_string(),
                    ),
                    reply.status.as_u16(),
                );
            }
        }
        if !setup.delegated() {
            assert!(
                reviews.calls().is_empty(),
                "{setup:?}: {:?}",
                reviews.calls()
            );
        }
    }
    // A few cells spelled out, the way the README's table reads.
    for (setup, caller, path, status) in [
        ("DelegatedMtls", "Anonymous", "/healthz", 200),
        ("DelegatedMtls", "Anonymous", "/metrics", 401),
        ("DelegatedMtls", "Token(\"nobody-token\")", "/metrics", 403),
        ("DelegatedMtls", "Token(\"reader-token\")", "/metrics", 200),
        ("DelegatedMtls", "Anonymous", "/filter", 403),
        ("ClientCa", "Anonymous", "/metrics", 401),
        ("Open", "Anonymous", "/filter", 200),
        ("Closed", "Anonymous", "/metrics", 403),
        ("Closed", "Anonymous", "/healthz", 200),
        ("Closed", "Anonymous", "/filter", 200),
        // Explaining live pods is off in this app: allowed is a 404.
        (
            "Delegated",
            "Token(\"team-token\")",
            "/explain/pods/default/web-1",
            404,
        ),
        (
            "Delegated",
            "Token(\"team-token\")",
            "/explain/pods/kube-system/web-1",
            403,
        ),
        ("Delegated", "Token(\"team-token\")", "/metrics", 403),
    ] {
        assert_eq!(
            table[&(setup.to_string(), caller.to_string(), path.to_string())],
            status,
            "{setup} {caller} {path}"
        );
    }
}

#[tokio::test]
async fn refusals_name_why_and_are_counted_by_route_and_reason() {
    let reviews = Reviews::default();
    let app = app(Setup::DelegatedMtls, paths::DEFAULT, &reviews, &[]);
    let reply = call(
        &app,
        Caller::Anonymous,
        Method::GET,
        "/explain/pods/default/web-1",
    )
    .await;
    reply.assert_error(
        StatusCode::UNAUTHORIZED,
        "/explain/pods/default/web-1 needs credentials: a bearer token (Authorization: Bearer ...) or a client certificate with a CommonName, signed by placer's --client-ca-file",
    );
    assert_eq!(
        reply
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"placer\"")
    );
    call(&app, Caller::Token("forged"), Method::GET, "/metrics")
        .await
        .assert_error(
            StatusCode::UNAUTHORIZED,
            "the bearer token was not accepted by the API server's TokenReview: invalid bearer token",
        );
    call(&app, Caller::Basic, Method::GET, "/metrics")
        .await
        .assert_error(
            StatusCode::UNAUTHORIZED,
            "the Authorization header is not \"Bearer <token>\"",
        );
    call(&app, Caller::Token("nobody-token"), Method::GET, "/explain/pods/default/web-1")
        .await
        .assert_error(
            StatusCode::FORBIDDEN,
            "user \"system:serviceaccount:tenant:nobody\" cannot get pods/explain in namespace \"default\"",
        );
    call(&app, Caller::Token("nobody-token"), Method::GET, "/policy")
        .await
        .assert_error(
            StatusCode::FORBIDDEN,
            "user \"system:serviceaccount:tenant:nobody\" cannot get path \"/policy\"",
        );
    call(&app, Caller::Anonymous, Method::POST, "/filter")
        .await
        .assert_error(
            StatusCode::FORBIDDEN,
            "/filter is kube-scheduler's: present a client certificate signed by placer's --client-ca-file (the extender's tlsConfig.certFile)",
        );
    let metrics = call(&app, Caller::Token("admin-token"), Method::GET, "/metrics")
        .await
        .body;
    for series in [
        r#"placer_http_refusals_total{route="/explain/pods/{namespace}/{name}",reason="no_credentials"} 1"#,
        r#"placer_http_refusals_total{route="/explain/pods/{namespace}/{name}",reason="forbidden"} 1"#,
        r#"placer_http_refusals_total{route="/policy",reason="forbidden"} 1"#,
        r#"placer_http_refusals_total{route="/metrics",reason="invalid_token"} 1"#,
        r#"placer_http_refusals_total{route="/metrics",reason="malformed_authorization"} 1"#,
        r#"placer_http_refusals_total{route="/filter",reason="no_client_certificate"} 1"#,
        r#"placer_access_reviews_total{review="token",result="unauthenticated"} 1"#,
        r#"placer_access_reviews_total{review="subject_access",result="denied"} 2"#,
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
    // A refused verb is not one of the verb's outcomes.
    assert!(
        !metrics.contains(r#"placer_requests_total{verb="filter""#),
        "{metrics}"
    );
}

#[tokio::test]
async fn review_answers_are_cached_and_privileged_users_need_no_access_review() {
    let reviews = Reviews::default();
    let app = app(Setup::Delegated, paths::DEFAULT, &reviews, &[]);
    for _ in 0..3 {
        let reply = call(&app, Caller::Token("reader-token"), Method::GET, "/metrics").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    assert_eq!(reviews.calls(), ["tokenreviews", "subjectaccessreviews"]);
    // Another path: the token's answer is reused, the access is reviewed.
    call(&app, Caller::Token("reader-token"), Method::GET, "/policy").await;
    assert_eq!(
        reviews.calls(),
        [
            "tokenreviews",
            "subjectaccessreviews",
            "subjectaccessreviews"
        ]
    );
    // Denials and rejected tokens are cached too (10 s, as kube's defaults).
    for _ in 0..2 {
        call(&app, Caller::Token("nobody-token"), Method::GET, "/metrics").await;
        call(&app, Caller::Token("forged"), Method::GET, "/metrics").await;
    }
    assert_eq!(reviews.calls().len(), 6, "{:?}", reviews.calls());
    // system:masters is allowed without a SubjectAccessReview.
    let reply = call(
        &app,
        Caller::Token("admin-token"),
        Method::GET,
        "/debug/zones",
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reviews.calls().last().map(String::as_str),
        Some("tokenreviews")
    );
}

#[tokio::test]
async fn a_review_the_api_server_fails_is_a_503_never_an_allow_and_not_cached() {
    let reviews = Reviews {
        fail_with: Some(403),
        ..Reviews::default()
    };
    let app = app(Setup::Delegated, paths::DEFAULT, &reviews, &[]);
    for _ in 0..2 {
        call(&app, Caller::Token("reader-token"), Method::GET, "/metrics")
            .await
            .assert_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "could not check access to /metrics (TokenReview failed: tokenreviews.authorization.k8s.io is forbidden: User \"placer\" cannot create resource \"tokenreviews\" (403)); try again",
            );
    }
    assert_eq!(reviews.calls(), ["tokenreviews", "tokenreviews"]);
    // A certificate's user needs no TokenReview; its SubjectAccessReview fails the same way.
    call(&app, ALICE, Method::GET, "/metrics")
        .await
        .assert_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "could not check access to /metrics (SubjectAccessReview failed: subjectaccessreviews.authorization.k8s.io is forbidden: User \"placer\" cannot create resource \"subjectaccessreviews\" (403)); try again",
        );
    // The health paths never depend on the API server.
    assert_eq!(
        call(&app, Caller::Anonymous, Method::GET, "/healthz")
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn always_allow_paths_replace_the_defaults_as_kube_schedulers_flag_does() {
    let reviews = Reviews::default();
    let app = app(
        Setup::DelegatedMtls,
        &["/metrics", "/debug/*", "/livez"],
        &reviews,
        &[],
    );
    for path in ["/metrics", "/debug/zones", "/debug/snapshot", "/livez"] {
        let reply = call(&app, Caller::Anonymous, Method::GET, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
    }
    for path in ["/healthz", "/policy"] {
        let reply = call(&app, Caller::Anonymous, Method::GET, path).await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{path}: {}",
            reply.body
        );
    }
    // Never the verbs: their check is the client certificate.
    let app = app_with_verbs_listed();
    let reply = call(&app, Caller::Anonymous, Method::POST, "/filter").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert!(reviews.calls().is_empty(), "{:?}", reviews.calls());
}

fn app_with_verbs_listed() -> App {
    app(
        Setup::ClientCa,
        &["/filter", "/*"],
        &Reviews::default(),
        &[],
    )
}

#[tokio::test]
async fn verbs_allowed_names_narrow_the_client_ca_to_kube_scheduler() {
    let app = app(
        Setup::ClientCa,
        paths::DEFAULT,
        &Reviews::default(),
        &["kube-scheduler"],
    );
    let reply = call(&app, SCHEDULER, Method::POST, "/filter").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    call(&app, ALICE, Method::POST, "/bind").await.assert_error(
        StatusCode::FORBIDDEN,
        "/bind: client certificate CN \"alice\" is not in --verbs-allowed-names",
    );
    // The reads take any certificate from the CA.
    let reply = call(&app, ALICE, Method::GET, "/metrics").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn unknown_paths_and_methods_are_404_and_405_before_any_check() {
    let app = app(
        Setup::DelegatedMtls,
        paths::DEFAULT,
        &Reviews::default(),
        &[],
    );
    let reply = call(&app, Caller::Anonymous, Method::GET, "/nope").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let reply = call(&app, Caller::Anonymous, Method::GET, "/filter").await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// A live cluster without a client CA or delegated authentication serves
/// the always-allowed paths only; every other read is a 403 that names the
/// flags that would open it, counted as `closed`. The verbs keep their own
/// check (none without a client CA).
#[tokio::test]
async fn a_live_cluster_without_credentials_to_check_closes_the_reads() {
    let reviews = Reviews::default();
    let app = app(Setup::Closed, paths::DEFAULT, &reviews, &[]);
    for path in ["/metrics", "/explain/pods/default/web-1"] {
        call(&app, Caller::Anonymous, Method::GET, path).await.assert_error(
            StatusCode::FORBIDDEN,
            &format!("{path} is closed: placer serves a live cluster and has no way to check who calls. Open it with --client-ca-file (callers present a client certificate from that CA), with --authentication-kubeconfig and --authorization-kubeconfig (the API server checks tokens and RBAC), or to anyone with --authorization-always-allow-paths"),
        );
    }
    // Credentials do not help: nothing could check them.
    let reply = call(&app, Caller::Token("admin-token"), Method::GET, "/policy").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    let reply = call(&app, Caller::Anonymous, Method::GET, "/readyz").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = call(&app, Caller::Anonymous, Method::POST, "/filter").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reviews.calls().is_empty(), "{:?}", reviews.calls());

    // --authorization-always-allow-paths opens what it lists, on purpose.
    let opened = app_over(Setup::Closed, &["/healthz", "/metrics"]);
    let metrics = call(&opened, Caller::Anonymous, Method::GET, "/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK, "{}", metrics.body);
    let reply = call(&opened, Caller::Anonymous, Method::GET, "/policy").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    let metrics = call(&opened, Caller::Anonymous, Method::GET, "/metrics")
        .await
        .body;
    let series = r#"placer_http_refusals_total{route="/policy",reason="closed"} 1"#;
    assert!(metrics.contains(series), "{series} missing:\n{metrics}");
}

fn app_over(setup: Setup, always_allow: &[&str]) -> App {
    app(setup, always_allow, &Reviews::default(), &[])
}

/// With a client CA and no delegated authentication, a read without a
/// certificate is told which flags would let it in.
#[tokio::test]
async fn a_read_without_the_client_certificate_is_told_what_opens_it() {
    let app = app_over(Setup::ClientCa, paths::DEFAULT);
    call(&app, Caller::Token("reader-token"), Method::GET, "/metrics")
        .await
        .assert_error(
            StatusCode::UNAUTHORIZED,
            "/metrics needs a client certificate signed by placer's --client-ca-file (--authentication-kubeconfig and --authorization-kubeconfig would accept bearer tokens checked by RBAC; --authorization-always-allow-paths opens a path to anyone)",
        );
}

/// A pod's explanation is reviewed as `get` on `pods/explain` of that pod in
/// its namespace (so a Role can grant it), the namespace decoded as the
/// handler decodes it; the other reads stay non-resource URLs.
#[tokio::test]
async fn a_pod_explanation_is_reviewed_in_the_pods_namespace() {
    let reviews = Reviews::default();
    let app = app(Setup::Delegated, paths::DEFAULT, &reviews, &[]);
    // Allowed, then answered by the handler (explaining live pods is off here).
    let team = Caller::Token("team-token");
    for path in [
        "/explain/pods/default/web-1",
        "/explain/pods/def%61ult/web-1",
    ] {
        let reply = call(&app, team, Method::GET, path).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            reply.body
        );
    }
    call(&app, team, Method::GET, "/explain/pods/kube-system/web-1")
        .await
        .assert_error(
            StatusCode::FORBIDDEN,
            "user \"system:serviceaccount:default:team\" cannot get pods/explain in namespace \"kube-system\"",
        );
    call(&app, team, Method::GET, "/metrics").await;
    let specs = reviews.access_specs();
    assert_eq!(
        specs.len(),
        3,
        "the decoded path reuses the first answer: {specs:?}"
    );
    let pod = |namespace: &str| {
        json!({
            "group": "", "resource": "pods", "subresource": "explain",
            "namespace": namespace, "name": "web-1", "verb": "get",
        })
    };
    assert_eq!(specs[0]["resourceAttributes"], pod("default"));
    assert_eq!(specs[0]["nonResourceAttributes"], Value::Null);
    assert_eq!(specs[0]["user"], TEAM);
    assert_eq!(specs[1]["resourceAttributes"], pod("kube-system"));
    assert_eq!(
        specs[2]["nonResourceAttributes"],
        json!({"path": "/metrics", "verb": "get"})
    );
    assert_eq!(specs[2]["resourceAttributes"], Value::Null);
}
