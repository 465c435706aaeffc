//! Who may call what (design §3.4), on the real control plane: RBAC, ServiceAccount tokens from
//! the TokenRequest API, TokenReviews and SubjectAccessReviews answered by kube-apiserver, client
//! certificates from the harness's CAs, stock kube-scheduler calling placer over mutual TLS, a
//! team's Role that lets it explain its own namespace's pods, and reads closed out of cluster
//! without delegated authentication. (`/bind`'s own checks: `bind.rs`.)

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::harness::pki::{Ca, CertFiles};
use crate::harness::{
    Caller, ExtenderConfig, HW_ANNOTATION, HW_LABEL, Placer, Scheduler, SchedulerConfig,
    ScorePlugins, TestEnv, capability_policy, placer_cli, shipped_rules_in,
};

/// The certificates of one test: placer's serving pair from a serving CA, a client CA
/// (`--client-ca-file`) and its client certificates, and a CA placer does not trust.
struct Pki {
    serving_ca: PathBuf,
    serving: CertFiles,
    client_ca: Ca,
    client_ca_file: PathBuf,
    other_ca: Ca,
    dir: PathBuf,
}

impl Pki {
    fn new(env: &TestEnv) -> anyhow::Result<Self> {
        let dir = env.dir().join("placer-pki");
        std::fs::create_dir_all(&dir)?;
        let serving_ca = Ca::new("placer-serving-ca")?;
        let (cert, key) = serving_ca.server("placer")?;
        let serving = CertFiles {
            cert: dir.join("placer.crt"),
            key: dir.join("placer.key"),
        };
        std::fs::write(&serving.cert, cert)?;
        std::fs::write(&serving.key, key)?;
        let client_ca = Ca::new("placer-client-ca")?;
        Ok(Self {
            serving_ca: serving_ca.write_cert(&dir.join("serving-ca.crt"))?,
            serving,
            client_ca_file: client_ca.write_cert(&dir.join("client-ca.crt"))?,
            client_ca,
            other_ca: Ca::new("other-ca")?,
            dir,
        })
    }

    /// A client certificate from the client CA.
    fn client(&self, cn: &str, orgs: &[&str]) -> anyhow::Result<CertFiles> {
        self.client_ca.client(&self.dir, cn, cn, orgs)
    }

    /// placer's TLS arguments (HTTPS with client certificates verified when given).
    fn placer_args(&self) -> Vec<String> {
        vec![
            format!("--tls-cert-file={}", self.serving.cert.display()),
            format!("--tls-key-file={}", self.serving.key.display()),
            format!("--client-ca-file={}", self.client_ca_file.display()),
        ]
    }
}

/// The identities of a test: placer itself with the shipped `placer-extender` rules, a reader
/// bound to the shipped `placer-reader` ClusterRole, and a ServiceAccount without any RBAC.
struct Identities {
    placer: PathBuf,
    reader: (PathBuf, String),
    nobody: (PathBuf, String),
}

impl Identities {
    async fn new(env: &TestEnv) -> anyhow::Result<Self> {
        let extender = shipped_rules_in("manifests/rbac.yaml", "ClusterRole", "placer")?;
        let reader = shipped_rules_in(
            "manifests/reader-roles.yaml",
            "ClusterRole",
            "placer-reader",
        )?;
        Ok(Self {
            placer: env.restricted_identity("placer", extender).await?.0,
            reader: env.restricted_identity("reader", reader).await?,
            nobody: env.restricted_identity("nobody", json!([])).await?,
        })
    }
}

/// Binds the ClusterRole made for the reader identity to the user `user` too (a client
/// certificate's CommonName).
async fn bind_reader_role_to_user(env: &TestEnv, user: &str) -> anyhow::Result<()> {
    let role = env.name("reader");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": env.name("reader-user") },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))?;
    Api::<ClusterRoleBinding>::all(env.client().clone())
        .create(&PostParams::default(), &binding)
        .await
        .context("bind the reader role to a certificate's user")?;
    Ok(())
}

/// `placer serve` arguments for delegated authentication through `kubeconfig`.
fn delegated_args(kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--authentication-kubeconfig={}", kubeconfig.display()),
        format!("--authorization-kubeconfig={}", kubeconfig.display()),
    ]
}

/// Starts placer as `name` with the restricted `kubeconfig` and `args`.
async fn start_placer(
    env: &TestEnv,
    name: &str,
    kubeconfig: &Path,
    args: &[String],
) -> anyhow::Result<Placer> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Placer::start_as(
        env,
        &capability_policy(env).to_yaml(),
        name,
        "extender",
        &args,
        kubeconfig,
    )
    .await
}

/// The status `caller` gets for `GET path`.
async fn status(placer: &Placer, caller: &Caller, path: &str) -> anyhow::Result<u16> {
    Ok(caller.request(&placer.url(), "GET", path, "").await?.0)
}

/// A `/filter` body as kube-scheduler sends it with `nodeCacheCapable: true`.
fn filter_body(namespace: &str, node: &str) -> String {
    json!({
        "Pod": { "metadata": { "name": "probe", "namespace": namespace, "uid": "u" }, "spec": {} },
        "Nodes": null,
        "NodeNames": [node],
    })
    .to_string()
}

/// A ServiceAccount without RBAC gets 403 on `/explain/pods/...` and `/metrics`, one bound to the
/// shipped `placer-reader` ClusterRole 200, no token 401, and the health paths answer all of
/// them, over plain HTTP and over mutual TLS; with mutual TLS a client certificate's CN/O is the
/// user RBAC decides on, and the verbs need kube-scheduler's certificate. `placer explain
/// --server` reads as the kubeconfig's user.
#[tokio::test]
async fn reads_follow_the_callers_rbac_and_probes_need_nothing() -> anyhow::Result<()> {
    let env = TestEnv::new("access-reads").await?;
    let nodes = env.create_nodes([env.node("n")]).await?;
    env.create_pod(&env.pod("web").bound_to(&nodes[0])).await?;
    let ids = Identities::new(&env).await?;
    let pki = Pki::new(&env)?;
    let plain = start_placer(
        &env,
        "placer-http",
        &ids.placer,
        &delegated_args(&ids.placer),
    )
    .await?;
    let mut args = delegated_args(&ids.placer);
    args.extend(pki.placer_args());
    let mtls = start_placer(&env, "placer-mtls", &ids.placer, &args).await?;

    let alice = env.name("alice");
    bind_reader_role_to_user(&env, &alice).await?;
    let explain = format!("/explain/pods/{}/web", env.namespace());
    for (placer, ca) in [(&plain, None), (&mtls, Some(pki.serving_ca.as_path()))] {
        let anonymous = Caller::anonymous(ca);
        let reader = anonymous.clone().with_token(&ids.reader.1);
        let nobody = anonymous.clone().with_token(&ids.nobody.1);
        // The reader's first answer waits for placer's cache to hold the pod.
        env.poll(
            &format!("the reader to read {explain} from {}", placer.url()),
            std::time::Duration::from_secs(30),
            || async {
                let (code, body) = reader.request(&placer.url(), "GET", &explain, "").await?;
                Ok(if code == 200 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(format!("{code} {body}"))
                })
            },
        )
        .await?;
        for (who, caller, explain_code, metrics_code) in [
            ("reader", &reader, 200, 200),
            ("nobody", &nobody, 403, 403),
            ("no token", &anonymous, 401, 401),
        ] {
            let url = placer.url();
            assert_eq!(
                status(placer, caller, &explain).await?,
                explain_code,
                "{who} {url}"
            );
            assert_eq!(
                status(placer, caller, "/metrics").await?,
                metrics_code,
                "{who} {url}"
            );
            for health in ["/healthz", "/readyz", "/livez"] {
                assert_eq!(
                    status(placer, caller, health).await?,
                    200,
                    "{who} {health} {url}"
                );
            }
        }
        let (_, body) = nobody.request(&placer.url(), "GET", &explain, "").await?;
        let error: Value = serde_json::from_str(&body)?;
        assert_eq!(
            error["Error"],
            format!(
                "user \"system:serviceaccount:{0}:nobody\" cannot get pods/explain in namespace \"{0}\"",
                env.namespace()
            ),
            "{body}"
        );
        let (_, metrics) = reader.request(&placer.url(), "GET", "/metrics", "").await?;
        for series in [
            r#"placer_http_refusals_total{route="/metrics",reason="forbidden"} "#,
            r#"placer_http_refusals_total{route="/metrics",reason="no_credentials"} "#,
            r#"placer_access_reviews_total{review="token",result="authenticated"} "#,
            r#"placer_access_reviews_total{review="subject_access",result="allowed"} "#,
        ] {
            assert!(
                metrics.contains(series),
                "{series} missing at {}:\n{metrics}",
                placer.url()
            );
        }

        // The command line reads as the kubeconfig's user.
        let mut cli = vec![
            "explain".to_string(),
            format!("{}/web", env.namespace()),
            "--server".to_string(),
            placer.url(),
            "--format".to_string(),
            "json".to_string(),
        ];
        if let Some(ca) = ca {
            cli.extend(["--ca-file".to_string(), ca.display().to_string()]);
        }
        let as_user = |kubeconfig: &Path| {
            let mut args = cli.clone();
            args.extend(["--kubeconfig".to_string(), kubeconfig.display().to_string()]);
            args
        };
        let answer: Value = serde_json::from_str(&placer_cli(&as_user(&ids.reader.0)).await?)?;
        assert!(answer["summary"].is_string(), "{answer}");
        let refused = placer_cli(&as_user(&ids.nobody.0)).await.unwrap_err();
        assert!(
            format!("{refused:#}").contains("403 Forbidden"),
            "{refused:#}"
        );
    }

    // Mutual TLS: a certificate's CN/O is the user the SubjectAccessReview names.
    let ca = Some(pki.serving_ca.as_path());
    let alice_cert = Caller::anonymous(ca).with_cert(&pki.client(&alice, &[])?);
    let bob_cert = Caller::anonymous(ca).with_cert(&pki.client(&env.name("bob"), &[])?);
    assert_eq!(status(&mtls, &alice_cert, &explain).await?, 200);
    assert_eq!(status(&mtls, &bob_cert, &explain).await?, 403);
    assert_eq!(status(&mtls, &bob_cert, "/healthz").await?, 200);
    // The verbs take any certificate from the client CA, and none without one.
    let body = filter_body(env.namespace(), &nodes[0]);
    let (code, answer) = bob_cert
        .request(&mtls.url(), "POST", "/filter", &body)
        .await?;
    assert_eq!(code, 200, "{answer}");
    let (code, answer) = Caller::anonymous(ca)
        .with_token(&ids.reader.1)
        .request(&mtls.url(), "POST", "/filter", &body)
        .await?;
    assert_eq!(code, 403, "a token does not open the verbs: {answer}");
    // Over plain HTTP the verbs are open (trusted networks, the NetworkPolicy).
    let (code, answer) = Caller::anonymous(None)
        .request(&plain.url(), "POST", "/filter", &body)
        .await?;
    assert_eq!(code, 200, "{answer}");
    Ok(())
}

/// Stock kube-scheduler with the README's `tlsConfig` schedules (filter and bind) through a
/// placer that verifies client certificates; the verbs refuse a client without a certificate,
/// one whose CN is not allowed, and (in the handshake) one from another CA.
#[tokio::test]
async fn kube_scheduler_schedules_through_placer_over_mutual_tls() -> anyhow::Result<()> {
    let env = TestEnv::new("access-mtls").await?;
    let nodes = env
        .create_nodes([
            env.node("hw").label(HW_LABEL, "true"),
            env.node("n2"),
            env.node("n3"),
        ])
        .await?;
    let ids = Identities::new(&env).await?;
    let pki = Pki::new(&env)?;
    let mut args = delegated_args(&ids.placer);
    args.extend(pki.placer_args());
    args.push("--verbs-allowed-names=kube-scheduler".to_string());
    let placer = start_placer(&env, "placer", &ids.placer, &args).await?;
    let scheduler_cert = pki.client("kube-scheduler", &[])?;
    let config = SchedulerConfig::new(&env.scheduler_name())
        .score_plugins(ScorePlugins::Defaults)
        .extender(
            ExtenderConfig::new(&placer.url())
                .bind_verb(Some("bind"))
                .tls(&pki.serving_ca, &scheduler_cert.cert, &scheduler_cert.key),
        );
    let _scheduler = Scheduler::start(&env, &config).await?;

    for i in 0..3 {
        env.create_pod(
            &env.pod(&format!("secure-{i}"))
                .annotation(HW_ANNOTATION, "true"),
        )
        .await?;
    }
    for i in 0..3 {
        let name = format!("secure-{i}");
        assert_eq!(
            env.wait_pod_bound(&name).await?,
            nodes[0],
            "{name}: placer's filter"
        );
        env.wait_log_line(
            placer.log_path(),
            &["bound pod", &format!("pod={}/{name}", env.namespace())],
        )
        .await?;
    }

    let ca = Some(pki.serving_ca.as_path());
    let body = filter_body(env.namespace(), &nodes[1]);
    let (code, answer) = Caller::anonymous(ca)
        .request(&placer.url(), "POST", "/filter", &body)
        .await?;
    assert_eq!(code, 403, "{answer}");
    let operator = Caller::anonymous(ca).with_cert(&pki.client("operator", &[])?);
    let (code, answer) = operator
        .request(&placer.url(), "POST", "/bind", "{}")
        .await?;
    assert_eq!(code, 403, "{answer}");
    assert!(answer.contains("--verbs-allowed-names"), "{answer}");
    let intruder = pki
        .other_ca
        .client(&pki.dir, "intruder", "kube-scheduler", &[])?;
    let refused = Caller::anonymous(ca)
        .with_cert(&intruder)
        .request(&placer.url(), "POST", "/filter", &body)
        .await;
    assert!(
        refused.is_err(),
        "a certificate from another CA was answered: {refused:?}"
    );
    Ok(())
}

/// Out of cluster (a kubeconfig, no delegated authentication), placer reads a live cluster
/// and cannot check tokens: with `--client-ca-file`, `/metrics` and `/explain/pods/...` need a
/// client certificate from that CA (401 without, 200 with); without one they are closed (403
/// naming the flags that open them). The health paths answer anyone in both.
#[tokio::test]
async fn out_of_cluster_reads_need_a_client_certificate_or_are_closed() -> anyhow::Result<()> {
    let env = TestEnv::new("access-closed").await?;
    let nodes = env.create_nodes([env.node("n")]).await?;
    env.create_pod(&env.pod("web").bound_to(&nodes[0])).await?;
    let pki = Pki::new(&env)?;
    let policy = capability_policy(&env).to_yaml();
    let args = pki.placer_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mtls = Placer::start_with(&env, &policy, "placer-mtls", "extender", &args).await?;
    // kube-scheduler's default list, given so that the harness does not open the reads.
    let closed = Placer::start_with(
        &env,
        &policy,
        "placer-closed",
        "extender",
        &["--authorization-always-allow-paths=/healthz,/readyz,/livez"],
    )
    .await?;
    let explain = format!("/explain/pods/{}/web", env.namespace());
    let ca = Some(pki.serving_ca.as_path());
    let operator = Caller::anonymous(ca).with_cert(&pki.client("operator", &[])?);
    env.poll(
        "a certificate holder to read the explanation",
        std::time::Duration::from_secs(30),
        || async {
            let (code, body) = operator.request(&mtls.url(), "GET", &explain, "").await?;
            Ok(if code == 200 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("{code} {body}"))
            })
        },
    )
    .await?;
    let anonymous = Caller::anonymous(ca);
    for path in [explain.as_str(), "/metrics", "/policy"] {
        assert_eq!(status(&mtls, &operator, path).await?, 200, "{path}");
        let (code, body) = anonymous.request(&mtls.url(), "GET", path, "").await?;
        assert_eq!(code, 401, "{path}: {body}");
        let error = serde_json::from_str::<Value>(&body)?["Error"].to_string();
        assert!(error.contains("--client-ca-file"), "{error}");
    }
    assert_eq!(status(&mtls, &anonymous, "/healthz").await?, 200);

    let plain = Caller::anonymous(None);
    for path in [explain.as_str(), "/metrics"] {
        let (code, body) = plain.request(&closed.url(), "GET", path, "").await?;
        assert_eq!(code, 403, "{path}: {body}");
        let error = serde_json::from_str::<Value>(&body)?["Error"].to_string();
        for flag in [
            "--client-ca-file",
            "--authentication-kubeconfig",
            "--authorization-always-allow-paths",
        ] {
            assert!(error.contains(flag), "{flag} not named: {error}");
        }
    }
    for health in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(status(&closed, &plain, health).await?, 200, "{health}");
    }
    // The verbs keep their own check: open without a client CA (the NetworkPolicy's job).
    let (code, answer) = plain
        .request(
            &closed.url(),
            "POST",
            "/filter",
            &filter_body(env.namespace(), &nodes[0]),
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    Ok(())
}

/// The README's Role for a team: `get` on `pods/explain` in its own namespace.
fn team_role(namespace: &str, name: &str) -> anyhow::Result<Role> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": namespace },
        "rules": [{ "apiGroups": [""], "resources": ["pods/explain"], "verbs": ["get"] }],
    }))?)
}

/// A team whose Role grants `get` on `pods/explain` in its namespace explains the pods there,
/// through the API and with `placer explain --server`, and not those of another namespace; the
/// shipped reader ClusterRole reads both.
#[tokio::test]
async fn a_teams_role_lets_it_explain_its_own_namespaces_pods_only() -> anyhow::Result<()> {
    let env = TestEnv::new("access-team").await?;
    let nodes = env.create_nodes([env.node("n")]).await?;
    env.create_pod(&env.pod("web").bound_to(&nodes[0])).await?;
    let other = env.name("other");
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": other } }))?;
    Api::<Namespace>::all(env.client().clone())
        .create(&PostParams::default(), &namespace)
        .await
        .context("create the other namespace")?;
    Api::<Pod>::namespaced(env.client().clone(), &other)
        .create(
            &PostParams::default(),
            &env.pod("web").bound_to(&nodes[0]).build(),
        )
        .await
        .context("create the other namespace's pod")?;
    let ids = Identities::new(&env).await?;
    let team = env.restricted_identity("team", json!([])).await?;
    let ns = env.namespace();
    Api::<Role>::namespaced(env.client().clone(), ns)
        .create(&PostParams::default(), &team_role(ns, "placer-explain")?)
        .await
        .context("create the team's Role")?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "placer-explain", "namespace": ns },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "placer-explain" },
        "subjects": [{ "kind": "ServiceAccount", "name": "team", "namespace": ns }],
    }))?;
    Api::<RoleBinding>::namespaced(env.client().clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .context("bind the team's Role")?;
    let placer = start_placer(&env, "placer", &ids.placer, &delegated_args(&ids.placer)).await?;

    let own = format!("/explain/pods/{ns}/web");
    let others = format!("/explain/pods/{other}/web");
    let http = Caller::anonymous(None);
    let teammate = http.clone().with_token(&team.1);
    let reader = http.with_token(&ids.reader.1);
    env.poll(
        "the team to explain its pod",
        std::time::Duration::from_secs(30),
        || async {
            let (code, body) = teammate.request(&placer.url(), "GET", &own, "").await?;
            Ok(if code == 200 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("{code} {body}"))
            })
        },
    )
    .await?;
    let (code, body) = teammate.request(&placer.url(), "GET", &others, "").await?;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body)?["Error"],
        format!(
            "user \"system:serviceaccount:{ns}:team\" cannot get pods/explain in namespace \"{other}\""
        ),
    );
    assert_eq!(status(&placer, &teammate, "/metrics").await?, 403);
    assert_eq!(status(&placer, &reader, &others).await?, 200);
    assert_eq!(status(&placer, &reader, &own).await?, 200);

    let cli = |pod: &str| {
        vec![
            "explain".to_string(),
            pod.to_string(),
            "--server".to_string(),
            placer.url(),
            "--format".to_string(),
            "json".to_string(),
            "--kubeconfig".to_string(),
            team.0.display().to_string(),
        ]
    };
    let answer: Value = serde_json::from_str(&placer_cli(&cli(&format!("{ns}/web"))).await?)?;
    assert!(answer["summary"].is_string(), "{answer}");
    let refused = placer_cli(&cli(&format!("{other}/web"))).await.unwrap_err();
    assert!(
        format!("{refused:#}").contains("403 Forbidden"),
        "{refused:#}"
    );
    Ok(())
}
