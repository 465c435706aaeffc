//! Who may call what (design §3.4), on the real control plane: RBAC, ServiceAccount tokens from
//! the TokenRequest API, TokenReviews and SubjectAccessReviews answered by kube-apiserver, client
//! certificates from the harness's CAs, stock kube-scheduler calling placer over mutual TLS, and
//! `/bind` refusing what it must not bind without sending a Binding.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
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
                "user \"system:serviceaccount:{}:nobody\" cannot get path \"{explain}\"",
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

/// One refused `/bind` case: the pod, the node asked for, and the start of the reason.
struct Case {
    pod: String,
    uid: String,
    node: String,
    error: String,
    reason: &'static str,
}

/// `/bind` for a pod already bound, a pod of another `schedulerName`, an unknown node, a pod
/// being deleted and a deleted pod: refused with the reason, and no Binding reaches the API
/// server (the pods are as they were, and placer timed no bind). A good pod is bound, so the
/// refusals are not the rig's. Both ways placer finds pods: a GET (the default extender) and
/// the watched store of unscheduled pods (`--explain-pods=true`).
#[tokio::test]
async fn bind_refuses_what_it_must_not_bind() -> anyhow::Result<()> {
    let env = TestEnv::new("access-bind").await?;
    let nodes = env.create_nodes([env.node("a"), env.node("b")]).await?;
    let mut policy = capability_policy(&env).to_yaml();
    policy = policy.replacen(
        "extender:\n",
        &format!("extender:\n  schedulerNames: [{}]\n", env.scheduler_name()),
        1,
    );
    ensure!(
        policy.contains("schedulerNames"),
        "no extender section in {policy}"
    );
    for (name, args) in [("get", vec![]), ("watched", vec!["--explain-pods=true"])] {
        let placer =
            Placer::start_with(&env, &policy, &format!("placer-{name}"), "extender", &args).await?;
        refusals(&env, &placer, name, &nodes).await?;
    }
    Ok(())
}

async fn refusals(
    env: &TestEnv,
    placer: &Placer,
    tag: &str,
    nodes: &[String],
) -> anyhow::Result<()> {
    let pods = env.pods();
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let name = |suffix: &str| format!("{tag}-{suffix}");
    let good = env.create_pod(&env.pod(&name("good"))).await?;
    let bound = env
        .create_pod(&env.pod(&name("bound")).bound_to(&nodes[0]))
        .await?;
    let other = format!("other-{}", env.run_id());
    let foreign = env
        .create_pod(&env.pod(&name("foreign")).scheduler(&other))
        .await?;
    let lost = env.create_pod(&env.pod(&name("lost"))).await?;
    let held = env.create_pod(&env.pod(&name("terminating"))).await?;
    pods.patch(
        &name("terminating"),
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": ["e2e.placer.io/hold"] } })),
    )
    .await?;
    pods.delete(&name("terminating"), &DeleteParams::default())
        .await?;
    let gone = env.create_pod(&env.pod(&name("gone"))).await?;
    env.delete_pods(&[&name("gone")]).await?;
    env.poll(
        "the deleted pod to be gone",
        std::time::Duration::from_secs(30),
        || async {
            Ok(match pods.get_opt(&name("gone")).await? {
                None => ControlFlow::Break(()),
                Some(_) => ControlFlow::Continue("still there".into()),
            })
        },
    )
    .await?;
    let ns = env.namespace();
    let cases = [
        Case {
            pod: name("bound"),
            uid: uid(&bound),
            node: nodes[1].clone(),
            error: format!(
                "pod {ns}/{} is already bound to node {}, not {}",
                name("bound"),
                nodes[0],
                nodes[1]
            ),
            reason: "already_bound",
        },
        Case {
            pod: name("foreign"),
            uid: uid(&foreign),
            node: nodes[0].clone(),
            error: format!(
                "pod {ns}/{} has schedulerName \"{other}\", not one of the policy's extender.schedulerNames",
                name("foreign")
            ),
            reason: "other_scheduler",
        },
        Case {
            pod: name("lost"),
            uid: uid(&lost),
            node: env.name("no-such-node"),
            error: format!(
                "node {} is not in placer's cache; pod {ns}/{} not bound",
                env.name("no-such-node"),
                name("lost")
            ),
            reason: "node_unknown",
        },
        Case {
            pod: name("terminating"),
            uid: uid(&held),
            node: nodes[0].clone(),
            error: format!(
                "pod {ns}/{} is being deleted; not bound",
                name("terminating")
            ),
            reason: "terminating",
        },
        Case {
            pod: name("gone"),
            uid: uid(&gone),
            node: nodes[0].clone(),
            error: format!("pod {ns}/{} does not exist; not bound", name("gone")),
            reason: "pod_not_found",
        },
    ];
    let http = Caller::anonymous(None);
    for case in &cases {
        // Exactly as kube-scheduler's extender client encodes ExtenderBindingArgs.
        let body = json!({ "PodName": case.pod, "PodNamespace": ns, "PodUID": case.uid, "Node": case.node })
            .to_string();
        let (code, answer) = http.request(&placer.url(), "POST", "/bind", &body).await?;
        assert_eq!(code, 200, "{answer}");
        let error = serde_json::from_str::<Value>(&answer)?["Error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            error.starts_with(&case.error),
            "{tag} {}: {error}",
            case.reason
        );
        let refused = placer
            .metric(&format!(
                "placer_bind_refusals_total{{reason=\"{}\"}}",
                case.reason
            ))
            .await?;
        assert_eq!(refused, Some(1.0), "{tag} {}", case.reason);
    }
    // The good pod is bound: the checks let kube-scheduler's pods through.
    let body = json!({ "PodName": name("good"), "PodNamespace": ns, "PodUID": uid(&good), "Node": nodes[1] })
        .to_string();
    let (_, answer) = http.request(&placer.url(), "POST", "/bind", &body).await?;
    assert_eq!(answer, r#"{"Error":""}"#, "{tag}");
    assert_eq!(env.wait_pod_bound(&name("good")).await?, nodes[1]);

    // Nothing else reached the API server: every pod is as it was, and the only bind placer
    // timed is the good one.
    let node_of = |p: Option<Pod>| p.and_then(|p| p.spec).and_then(|s| s.node_name);
    assert_eq!(
        node_of(pods.get_opt(&name("bound")).await?),
        Some(nodes[0].clone())
    );
    for unbound in ["foreign", "lost", "terminating"] {
        assert_eq!(
            node_of(pods.get_opt(&name(unbound)).await?),
            None,
            "{tag} {unbound}"
        );
    }
    assert!(pods.get_opt(&name("gone")).await?.is_none());
    let timed = |result: &str| format!("placer_bind_duration_seconds_count{{result=\"{result}\"}}");
    assert_eq!(placer.metric(&timed("success")).await?, Some(1.0), "{tag}");
    assert_eq!(placer.metric(&timed("failure")).await?, None, "{tag}");

    pods.patch(
        &name("terminating"),
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await?;
    Ok(())
}
