//! `bindVerb: bind`: kube-scheduler delegates the binding of every pod to placer, and `/bind`
//! refuses what it must not bind (what kube-scheduler would never send among it) without
//! sending a Binding.

use std::ops::ControlFlow;

use anyhow::ensure;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::logs::field;
use crate::harness::{
    Caller, ExtenderRig, HW_ANNOTATION, HW_LABEL, Placer, ScorePlugins, TestEnv, capability_policy,
};

/// Pods to schedule, and whether they carry the capability annotation.
const PODS: [(&str, bool); 4] = [
    ("secure-0", true),
    ("secure-1", true),
    ("ordinary-0", false),
    ("ordinary-1", false),
];

/// Every pod is bound to the node kube-scheduler chose (its "Successfully bound pod to node" log
/// line), and placer made each Binding: it logs "bound pod" with the same pod and node, and
/// counts at least one successful `bind` call per pod. Annotated pods end up on the labelled node.
#[tokio::test]
async fn placer_binds_pods_when_bind_verb_set() -> anyhow::Result<()> {
    let env = TestEnv::new("bind").await?;
    let nodes = env
        .create_nodes([
            env.node("hw").label(HW_LABEL, "true"),
            env.node("n2"),
            env.node("n3"),
        ])
        .await?;
    let rig = ExtenderRig::start(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e.bind_verb(Some("bind")),
    )
    .await?;

    for (name, secure) in PODS {
        let pod = env.pod(name);
        let pod = if secure {
            pod.annotation(HW_ANNOTATION, "true")
        } else {
            pod
        };
        env.create_pod(&pod).await?;
    }
    for (name, secure) in PODS {
        let node = env.wait_pod_bound(name).await?;
        if secure {
            assert_eq!(node, nodes[0], "{name} not on the labelled node");
        } else {
            assert!(nodes.contains(&node), "{name} bound to foreign node {node}");
        }
        let pod = format!("{}/{name}", env.namespace());
        let chosen = env
            .wait_log_line(
                rig.scheduler.log_path(),
                &["Successfully bound pod to node", &format!("pod=\"{pod}\"")],
            )
            .await?;
        assert_eq!(field(&chosen, "node"), Some(node.as_str()), "{chosen}");
        let bound = env
            .wait_log_line(rig.placer.log_path(), &["bound pod", &format!("pod={pod}")])
            .await?;
        assert_eq!(field(&bound, "node"), Some(node.as_str()), "{bound}");
    }

    let series = r#"placer_requests_total{verb="bind",outcome="success"}"#;
    let binds = rig.placer.metric(series).await?.unwrap_or(0.0);
    eprintln!("{series} = {binds}");
    let expected = PODS.len() as f64;
    assert!(
        binds >= expected,
        "{series} = {binds}, expected ≥ {expected}"
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
    let policy = capability_policy(&env).to_yaml();
    ensure!(
        policy.contains(&format!("schedulerNames: [{}]", env.scheduler_name())),
        "the harness's policy lists no schedulerNames: {policy}"
    );
    for (name, args) in [("get", vec![]), ("watched", vec!["--explain-pods=true"])] {
        let placer =
            Placer::start_with(&env, &policy, &format!("placer-{name}"), "extender", &args).await?;
        refusals(&env, &placer, name, &nodes).await?;
    }

    // A policy that names no scheduler binds nobody's pods, until --bind-any-scheduler says so.
    let unnamed = policy.replace(
        &format!("  schedulerNames: [{}]\n", env.scheduler_name()),
        "",
    );
    let pending = env.create_pod(&env.pod("unnamed")).await?;
    let uid = pending.metadata.uid.clone().unwrap_or_default();
    let body = json!({ "PodName": "unnamed", "PodNamespace": env.namespace(), "PodUID": uid, "Node": nodes[0] })
        .to_string();
    let http = Caller::anonymous(None);
    let placer = Placer::start_with(&env, &unnamed, "placer-unnamed", "extender", &[]).await?;
    let (code, answer) = http.request(&placer.url(), "POST", "/bind", &body).await?;
    assert_eq!(code, 200, "{answer}");
    let error = serde_json::from_str::<Value>(&answer)?["Error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("extender.schedulerNames") && error.contains("--bind-any-scheduler"),
        "{error}"
    );
    assert_eq!(
        placer
            .metric(r#"placer_bind_refusals_total{reason="no_scheduler_names"}"#)
            .await?,
        Some(1.0)
    );
    let node_of = |p: Option<Pod>| p.and_then(|p| p.spec).and_then(|s| s.node_name);
    assert_eq!(node_of(env.pods().get_opt("unnamed").await?), None);
    drop(placer);
    let placer = Placer::start_with(
        &env,
        &unnamed,
        "placer-any",
        "extender",
        &["--bind-any-scheduler"],
    )
    .await?;
    let (_, answer) = http.request(&placer.url(), "POST", "/bind", &body).await?;
    assert_eq!(answer, r#"{"Error":""}"#);
    assert_eq!(env.wait_pod_bound("unnamed").await?, nodes[0]);
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
    // Without the pod's UID (kube-scheduler always sends it): a 400 naming the field, counted,
    // before the pod is looked at.
    let body = json!({ "PodName": name("lost"), "PodNamespace": ns, "Node": nodes[0] }).to_string();
    let (code, answer) = http.request(&placer.url(), "POST", "/bind", &body).await?;
    assert_eq!(code, 400, "{tag}: {answer}");
    assert_eq!(
        serde_json::from_str::<Value>(&answer)?["Error"],
        "PodUID: missing: /bind binds only the pod kube-scheduler names by its UID",
        "{tag}"
    );
    let refused = placer
        .metric(r#"placer_bind_refusals_total{reason="missing_uid"}"#)
        .await?;
    assert_eq!(refused, Some(1.0), "{tag} missing_uid");

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
