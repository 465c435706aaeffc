//! `GET /explain/pods/{namespace}/{name}` on the real control plane: a pending pod's summary is
//! byte for byte the `FailedScheduling` text its scheduler wrote, and for a pod that got bound
//! the predicted winner is the node it was bound to.
//!
//! The pending pod is blocked by a taint on two nodes (kube-scheduler's TaintToleration), by
//! resources on one (NodeResourcesFit) and by placer's CapabilityFilter on the last; a
//! `nodeSelector` on the test's run label keeps it off other tests' nodes, which then count as
//! "didn't match Pod's node affinity/selector" for both the scheduler and the endpoint. Nodes
//! other tests add between the event and the query change "0/N"; the check is polled until both
//! were taken from the same cluster, and fails if they never agree.

use std::ops::ControlFlow;

use serde_json::{Value, json};

use crate::harness::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, HW_REASON, Placer, PodBuilder, RUN_LABEL, ScorePlugins,
    TestEnv, capability_policy, placer_cli,
};

/// The shipped standalone profile's CapabilityFilter rule (policy.yaml).
const SHIPPED_HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";
const SHIPPED_HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";

/// Polls until the endpoint's summary equals the pod's latest `FailedScheduling` message; returns
/// the explanation.
async fn summary_matches_event(env: &TestEnv, placer: &Placer, pod: &str) -> anyhow::Result<Value> {
    let path = format!("/explain/pods/{}/{pod}", env.namespace());
    env.poll(
        &format!("{path} to state {pod}'s FailedScheduling text"),
        crate::harness::SCHEDULING_TIMEOUT,
        || async {
            let events = env.failed_scheduling_messages(pod).await?;
            let explained = placer.get_json(&path).await?;
            Ok(match events.last() {
                Some(m) if explained["summary"] == json!(m) => ControlFlow::Break(explained),
                last => ControlFlow::Continue(format!(
                    "event {last:?}, endpoint {}",
                    explained["summary"]
                )),
            })
        },
    )
    .await
}

/// The blocked pod: needs `annotation`=true and 2 cpus, tolerates nothing, confined to this run.
fn blocked_pod(env: &TestEnv, name: &str, annotation: &str) -> PodBuilder {
    env.pod(name)
        .annotation(annotation, "true")
        .request("cpu", "2")
        .node_selector(RUN_LABEL, env.run_id())
}

/// The taint [`blocking_nodes`] puts on two nodes.
const BLOCKING_TAINT: (&str, &str, &str) = ("e2e.placer.io/dedicated", "gpu", "NoSchedule");

/// Four nodes that each block the test's pod for a different reason: two with a taint it does
/// not tolerate, one too small (1 cpu), and one without the `capability` label the
/// CapabilityFilter rule asks for.
async fn blocking_nodes(env: &TestEnv, capability: &str) -> anyhow::Result<()> {
    let taint = BLOCKING_TAINT;
    env.create_nodes([
        env.node("tainted-1")
            .label(capability, "true")
            .taint(taint.0, taint.1, taint.2),
        env.node("tainted-2")
            .label(capability, "true")
            .taint(taint.0, taint.1, taint.2),
        env.node("small").label(capability, "true").cpu("1"),
        env.node("plain"),
    ])
    .await?;
    Ok(())
}

#[tokio::test]
async fn extender_summary_is_the_failed_scheduling_text() -> anyhow::Result<()> {
    let env = TestEnv::new("explain-extender").await?;
    blocking_nodes(&env, HW_LABEL).await?;
    let rig = ExtenderRig::start_with_args(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
        &["--explain-pods=true"],
    )
    .await?;
    env.create_pod(&blocked_pod(&env, "blocked", HW_ANNOTATION))
        .await?;
    let event = env.wait_failed_scheduling("blocked", HW_REASON).await?;
    eprintln!("FailedScheduling: {event}");
    let explained = summary_matches_event(&env, &rig.placer, "blocked").await?;
    assert_eq!(explained["deployment"], "extender");
    assert_eq!(explained["feasible"], 0);
    let by_node: Vec<(String, String)> = explained["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| {
            n["node"]
                .as_str()
                .is_some_and(|n| n.starts_with(env.run_id()))
        })
        .map(|n| {
            (
                n["node"].as_str().unwrap_or_default().to_string(),
                format!(
                    "{} {}",
                    n["failure"]["by"].as_str().unwrap_or("-"),
                    n["failure"]["plugin"].as_str().unwrap_or("-")
                ),
            )
        })
        .collect();
    assert_eq!(
        by_node,
        [
            (env.name("plain"), "placer CapabilityFilter".to_string()),
            (
                env.name("small"),
                "kube-scheduler NodeResourcesFit".to_string()
            ),
            (
                env.name("tainted-1"),
                "kube-scheduler TaintToleration".to_string()
            ),
            (
                env.name("tainted-2"),
                "kube-scheduler TaintToleration".to_string()
            ),
        ]
    );
    let hint = format!(
        "2 node(s) would pass every filter if the pod tolerated taint {}={}:{}",
        BLOCKING_TAINT.0, BLOCKING_TAINT.1, BLOCKING_TAINT.2
    );
    assert!(
        explained["hints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| *h == json!(hint)),
        "hints: {}",
        explained["hints"]
    );
    // The command line: the same answer from the running placer and from a one-shot cache.
    let target = format!("{}/blocked", env.namespace());
    let server = rig.placer.url();
    let from_server = placer_cli(&["explain", &target, "--server", &server]).await?;
    let summary = explained["summary"].as_str().unwrap_or_default();
    assert!(
        !summary.is_empty() && from_server.contains(summary),
        "placer explain --server:\n{from_server}"
    );
    let kubeconfig = env.cluster().kubeconfig().display().to_string();
    let policy = rig.placer.policy_path().display().to_string();
    let one_shot = placer_cli(&[
        "explain",
        &target,
        "--kubeconfig",
        &kubeconfig,
        "--policy",
        &policy,
        "--format",
        "json",
    ])
    .await?;
    let one_shot: Value = serde_json::from_str(&one_shot)?;
    assert_eq!(one_shot["summary"], explained["summary"], "one-shot cache");

    // As a kubectl plugin: `kubectl placer explain` runs `kubectl-placer` with kubectl's
    // environment; the kubeconfig's current context, a bare name with -n, and the policy from the
    // ConfigMap the running placer reads (no policy file where it runs).
    let policy_text = std::fs::read_to_string(&policy)?;
    let map: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "placer-policy" },
        "data": { "policy.yaml": policy_text },
    }))?;
    kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        env.client().clone(),
        env.namespace(),
    )
    .create(&Default::default(), &map)
    .await?;
    let plugin = env.dir().join("bin").join("kubectl-placer");
    std::fs::create_dir_all(env.dir().join("bin"))?;
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_placer"), &plugin)?;
    let configmap = format!("{}/placer-policy", env.namespace());
    let run = |args: Vec<String>| {
        let (plugin, dir, kubeconfig) = (plugin.clone(), env.dir().to_owned(), kubeconfig.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(plugin)
                .args(args)
                .current_dir(dir)
                .env("KUBECONFIG", kubeconfig)
                .output()
        })
    };
    let usage = run(vec!["--help".into()]).await??;
    let usage = String::from_utf8_lossy(&usage.stdout);
    assert!(usage.contains("Usage: kubectl placer"), "{usage}");
    let out = run(vec![
        "explain".into(),
        "blocked".into(),
        "-n".into(),
        env.namespace().into(),
        "--policy-configmap".into(),
        configmap,
        "--format".into(),
        "json".into(),
    ])
    .await??;
    anyhow::ensure!(
        out.status.success(),
        "kubectl-placer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plugin_answer: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        plugin_answer["summary"], explained["summary"],
        "kubectl placer explain"
    );
    Ok(())
}

#[tokio::test]
async fn extender_winner_is_the_bound_node() -> anyhow::Result<()> {
    let env = TestEnv::new("explain-winner").await?;
    // Equal nodes but for a PreferNoSchedule taint on two of them: kube-scheduler's
    // TaintToleration score (weight 3) decides; placer's policy has no score plugin.
    let nodes = env
        .create_nodes([
            env.node("a").label(HW_LABEL, "true").taint(
                "e2e.placer.io/busy",
                "true",
                "PreferNoSchedule",
            ),
            env.node("b").label(HW_LABEL, "true"),
            env.node("c").label(HW_LABEL, "true").taint(
                "e2e.placer.io/busy",
                "true",
                "PreferNoSchedule",
            ),
        ])
        .await?;
    let rig = ExtenderRig::start_with_args(
        &env,
        &capability_policy(&env),
        ScorePlugins::Defaults,
        |e| e,
        &["--explain-pods=true"],
    )
    .await?;
    env.create_pod(
        &env.pod("fits")
            .annotation(HW_ANNOTATION, "true")
            .node_selector(RUN_LABEL, env.run_id()),
    )
    .await?;
    let bound = env.wait_pod_bound("fits").await?;
    assert_eq!(bound, nodes[1]);
    let path = format!("/explain/pods/{}/fits", env.namespace());
    let explained = env
        .poll(
            "placer to see the binding",
            crate::harness::SCHEDULING_TIMEOUT,
            || async {
                let e = rig.placer.get_json(&path).await?;
                Ok(if e["boundNode"] == json!(bound) {
                    ControlFlow::Break(e)
                } else {
                    ControlFlow::Continue(format!("boundNode {}", e["boundNode"]))
                })
            },
        )
        .await?;
    assert_eq!(explained["winner"], json!(bound), "{explained:#}");
    assert_eq!(explained["feasible"], 3);
    assert!(explained["runnerUp"].is_string());
    Ok(())
}

#[tokio::test]
async fn standalone_summary_and_last_attempt_are_the_failed_scheduling_text() -> anyhow::Result<()>
{
    let env = TestEnv::new("explain-standalone").await?;
    blocking_nodes(&env, SHIPPED_HW_LABEL).await?;
    let placer = env
        .start_standalone("placer", &["--simulator-annotations"])
        .await?;
    env.create_pod(
        &blocked_pod(&env, "blocked", SHIPPED_HW_ANNOTATION).scheduler(&env.scheduler_name()),
    )
    .await?;
    env.wait_failed_scheduling("blocked", "hardware encryption")
        .await?;
    let explained = summary_matches_event(&env, &placer, "blocked").await?;
    assert_eq!(explained["deployment"], "standalone");
    // The pending pod came through the scheduler's own watch of unassigned pods (kind
    // `unassignedpod`): a second watch (kind `pendingpod`) would have the API server send every
    // pending pod twice.
    let metrics = placer.metrics().await?;
    assert!(
        metrics.contains(r#"kind="unassignedpod""#) && !metrics.contains(r#"kind="pendingpod""#),
        "one watch of unassigned pods in standalone mode:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("kind="))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let events = env.failed_scheduling_messages("blocked").await?;
    assert_eq!(
        explained["lastAttempt"]["message"],
        json!(events.last()),
        "the scheduling loop recorded its attempt"
    );
    let key = "kube-scheduler-simulator.sigs.k8s.io/filter-result";
    let filter = env
        .poll(
            "the simulator annotations",
            crate::harness::SCHEDULING_TIMEOUT,
            || async {
                let pod = env.pods().get("blocked").await?;
                Ok(
                    match pod.metadata.annotations.and_then(|a| a.get(key).cloned()) {
                        Some(v) => ControlFlow::Break(v),
                        None => ControlFlow::Continue("no annotation yet".into()),
                    },
                )
            },
        )
        .await?;
    let filter: Value = serde_json::from_str(&filter)?;
    assert_eq!(
        filter[env.name("plain")]["CapabilityFilter"],
        "node(s) lack hardware encryption",
        "{filter:#}"
    );
    assert_eq!(
        filter[env.name("tainted-1")]["TaintToleration"],
        "node(s) had untolerated taint(s)"
    );
    Ok(())
}

/// Creates pending pod `pending-<i>` for a scheduler nobody runs.
async fn create_pending(
    client: kube::Client,
    ns: &str,
    i: usize,
    labels: Value,
) -> anyhow::Result<()> {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": { "name": format!("pending-{i}"), "labels": labels },
        "spec": { "schedulerName": "nobody", "containers": [{ "name": "c",
            "image": "registry.k8s.io/pause:3.10", "resources": { "requests": { "cpu": "100m" } } }] },
    }))?;
    kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, ns)
        .create(&kube::api::PostParams::default(), &pod)
        .await?;
    Ok(())
}

/// `--explain-pods` in extender mode: with it, placer watches unscheduled pods (and the kinds the
/// in-tree plugins read) and explains a pending pod; without it, the pending pod is unknown (404).
/// It also measures what the feature costs: the resident memory of the two placers over the same
/// cluster, printed. CI creates a few objects of each kind; for the figures in the README:
///
/// ```text
/// PLACER_E2E_EXPLAIN_OBJECTS=2000 cargo test --release --test e2e explain_pods_memory_cost -- --nocapture
/// ```
///
/// `PLACER_E2E_EXPLAIN_OBJECTS` (default 50) is the number of Services, of ReplicaSets, of
/// PersistentVolumeClaims and of pending pods each; `PLACER_E2E_EXPLAIN_PODS_ONLY=1` creates the
/// pending pods only, to tell their share from the other kinds'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_pods_memory_cost() -> anyhow::Result<()> {
    use futures::StreamExt as _;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
    use kube::Api;
    use kube::api::PostParams;

    let count: usize = std::env::var("PLACER_E2E_EXPLAIN_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let pods_only = std::env::var("PLACER_E2E_EXPLAIN_PODS_ONLY").is_ok_and(|v| v == "1");
    let env = TestEnv::new("explain-memory").await?;
    env.create_nodes((0..20).map(|i| env.node(&format!("n{i}"))))
        .await?;
    let ns = env.namespace().to_string();
    let client = env.client().clone();
    let create = |i: usize| {
        let (client, ns) = (client.clone(), ns.clone());
        async move {
            let labels = json!({ "app": format!("app-{i}"), "tier": "web" });
            let pp = PostParams::default();
            if pods_only {
                return create_pending(client, &ns, i, labels).await;
            }
            let svc: Service = serde_json::from_value(json!({
                "metadata": { "name": format!("svc-{i}") },
                "spec": { "clusterIP": "None", "selector": labels, "ports": [{ "port": 80 }] },
            }))?;
            Api::<Service>::namespaced(client.clone(), &ns)
                .create(&pp, &svc)
                .await?;
            let rs: ReplicaSet = serde_json::from_value(json!({
                "metadata": { "name": format!("rs-{i}") },
                "spec": { "replicas": 0, "selector": { "matchLabels": labels },
                    "template": { "metadata": { "labels": labels },
                        "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10" }] } } },
            }))?;
            Api::<ReplicaSet>::namespaced(client.clone(), &ns)
                .create(&pp, &rs)
                .await?;
            let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
                "metadata": { "name": format!("pvc-{i}") },
                "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
            }))?;
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns)
                .create(&pp, &pvc)
                .await?;
            create_pending(client, &ns, i, labels).await
        }
    };
    let results: Vec<anyhow::Result<()>> = futures::stream::iter((0..count).map(create))
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let policy = capability_policy(&env).to_yaml();
    let mut rss = Vec::new();
    for (name, flag) in [
        ("off", "--explain-pods=false"),
        ("on", "--explain-pods=true"),
    ] {
        let placer = Placer::start_with(&env, &policy, name, "extender", &[flag]).await?;
        let path = format!("/explain/pods/{ns}/pending-0");
        if name == "on" {
            env.poll(
                &format!("{path} to explain the pending pod"),
                crate::harness::SCHEDULING_TIMEOUT,
                || async {
                    Ok(match placer.get_json(&path).await {
                        Ok(explained) => ControlFlow::Break(explained),
                        Err(e) => ControlFlow::Continue(e.to_string()),
                    })
                },
            )
            .await?;
        } else {
            let (status, body) = crate::harness::http_get(placer.port(), &path).await?;
            anyhow::ensure!(
                status == 404,
                "without --explain-pods a pending pod is not cached: {status} {body}"
            );
        }
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        let pid = placer
            .pid()
            .ok_or_else(|| anyhow::anyhow!("placer {name} not running"))?;
        let (now, peak) = crate::harness::procstat::rss_mib(pid)?;
        eprintln!("explain-pods {name}: RSS {now:.1} MiB (peak {peak:.1} MiB)");
        rss.push(now);
    }
    eprintln!(
        "{count} pending pods{}: +{:.1} MiB with --explain-pods",
        if pods_only {
            ""
        } else {
            " and as many services, replica sets and claims"
        },
        rss[1] - rss[0]
    );
    Ok(())
}
