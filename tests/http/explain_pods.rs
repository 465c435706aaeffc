//! `GET /explain/pods/{namespace}/{name}`: a live pod explained from the
//! cache. The cluster: three nodes, each blocked for the pod in its own way
//! (a taint kube-scheduler's TaintToleration rejects, too little cpu for its
//! NodeResourcesFit, no hardware-encryption label for placer's
//! CapabilityFilter), plus, for a second pod, two nodes that fit with
//! different scores.

use std::sync::Arc;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::Taint;
use placer::cache::{Cache, ClusterState};
use placer::explain::{Diagnoses, Explainer, InTree, PendingPods};
use placer::modes::extender::{ExtenderState, Settings};
use placer::objects::{NodeInfo, PodInfo, Resources};
use placer::state::{AppState, Mode};
use serde_json::json;

use crate::support::{App, HW_LABEL, HW_REASON, POLICY, compile};

fn node(name: &str, cpu: &str, hw: bool, taint: bool) -> NodeInfo {
    let mut labels = vec![("kubernetes.io/hostname".to_string(), name.to_string())];
    if hw {
        labels.push((HW_LABEL.to_string(), "true".to_string()));
    }
    NodeInfo {
        allocatable: Resources::from_list([("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])
            .unwrap(),
        taints: if taint {
            vec![Taint {
                key: "dedicated".into(),
                value: Some("gpu".into()),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]
        } else {
            Vec::new()
        },
        ..NodeInfo::new(name, labels)
    }
}

fn pod(name: &str, cpu: &str, hw: bool) -> PodInfo {
    let mut annotations = serde_json::Map::new();
    if hw {
        annotations.insert("myorg.io/require-hw-encrypt".into(), json!("true"));
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "annotations": annotations},
        "spec": {"schedulerName": "default-scheduler",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    }))
    .unwrap()
}

/// The app over `nodes` with `pending` pods, explaining as an extender deployment.
fn app(nodes: Vec<NodeInfo>, pending: Vec<PodInfo>) -> (App, Arc<Explainer>) {
    let policy = compile(POLICY);
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    for n in nodes {
        state.apply_node(n);
    }
    let cache = Arc::new(Cache::from_state(state));
    let app_state = AppState::new(policy, cache.clone());
    let verbs = ExtenderState::new(&app_state, None, Settings::default());
    let explainer = Arc::new(Explainer {
        policy: app_state.policy.clone(),
        cache,
        mode: Mode::Extender,
        pending: Arc::new(PendingPods::from_pods(pending)),
        in_tree: Some(Arc::new(InTree::defaults().unwrap())),
        diagnoses: Arc::new(Diagnoses::default()),
        replica: Default::default(),
    });
    let router = placer::server::router(app_state, verbs, Some(explainer.clone()));
    (App::from_router(router), explainer)
}

/// "small" has 3 cpus, 2 of them taken by a pod of the same priority (so
/// preemption finds no victims there).
fn blocked() -> (App, Arc<Explainer>) {
    let (app, explainer) = app(
        vec![
            node("tainted", "8", true, true),
            node("small", "3", true, false),
            node("plain", "8", false, false),
        ],
        vec![pod("web", "2", true)],
    );
    let mut running = pod("running", "2", false);
    running.node_name = Some("small".into());
    explainer.cache.write().apply_pod(running);
    (app, explainer)
}

#[tokio::test]
async fn a_blocked_pod_gets_kube_schedulers_failed_scheduling_text_and_hints() {
    let (app, _) = blocked();
    let reply = app.get("/explain/pods/default/web").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let j = reply.json();
    assert_eq!(
        j["summary"],
        format!(
            "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), 1 {HW_REASON}. \
             preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
             2 Preemption is not helpful for scheduling."
        )
    );
    assert_eq!(j["deployment"], "extender");
    assert_eq!(j["feasible"], 0);
    assert_eq!(j["winner"], json!(null));
    let failure = |i: usize| j["nodes"][i]["failure"].clone();
    // Nodes by name: plain, small, tainted.
    assert_eq!(
        failure(0),
        json!({"by": "placer", "plugin": "CapabilityFilter", "status": "UnschedulableAndUnresolvable", "reason": HW_REASON})
    );
    assert_eq!(failure(1)["plugin"], "NodeResourcesFit");
    assert_eq!(failure(1)["by"], "kube-scheduler");
    assert_eq!(failure(2)["plugin"], "TaintToleration");
    assert_eq!(
        j["hints"],
        json!([
            format!(
                "1 node(s) would pass every filter if kube-scheduler's NodeResourcesFit passed them (Insufficient cpu)"
            ),
            format!(
                "1 node(s) would pass every filter if placer's CapabilityFilter passed them ({HW_REASON})"
            ),
            "1 node(s) would pass every filter if the pod tolerated taint dedicated=gpu:NoSchedule",
        ])
    );
    assert_eq!(j["reused"], false);
    let again = app.get("/explain/pods/default/web").await.json();
    assert_eq!(
        again["reused"], true,
        "nothing changed: the diagnosis is reused"
    );
    assert_eq!(again["summary"], j["summary"]);
}

#[tokio::test]
async fn a_cache_change_makes_the_next_answer_fresh() {
    let (app, explainer) = blocked();
    assert_eq!(
        app.get("/explain/pods/default/web").await.json()["reused"],
        false
    );
    explainer
        .cache
        .write()
        .apply_node(node("roomy", "8", true, false));
    let j = app.get("/explain/pods/default/web").await.json();
    assert_eq!(j["reused"], false);
    assert_eq!(j["winner"], "roomy");
    // Nodes by name: plain, roomy, small, tainted.
    assert_eq!(j["nodes"][1]["node"], "roomy");
    let total = &j["nodes"][1]["total"];
    assert_eq!(
        j["summary"],
        format!("1/4 nodes are available; winner roomy (total {total})")
    );
}

#[tokio::test]
async fn a_feasible_pod_names_winner_and_runner_up_with_every_score() {
    // "busy" already runs a pod using 6 of its 8 cpus: LeastAllocated prefers "idle".
    let (app, explainer) = app(
        vec![
            node("busy", "8", true, false),
            node("idle", "8", true, false),
        ],
        vec![pod("api", "1", true)],
    );
    let mut running = pod("running", "6", false);
    running.node_name = Some("busy".into());
    explainer.cache.write().apply_pod(running);
    let j = app.get("/explain/pods/default/api").await.json();
    assert_eq!(j["winner"], "idle", "{j:#}");
    assert_eq!(j["runnerUp"], "busy");
    assert_eq!(j["nodes"][1]["rank"], 1);
    assert_eq!(j["nodes"][0]["rank"], 2);
    let fit = j["nodes"][1]["kubeScheduler"]["scores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["plugin"] == "NodeResourcesFit")
        .cloned()
        .unwrap();
    assert_eq!(fit["weighted"], fit["normalized"], "weight 1");
    let table = app.get("/explain/pods/default/api?format=table").await;
    assert_eq!(table.status, StatusCode::OK);
    assert!(
        table.body.contains("2/2 nodes are available; winner idle"),
        "{}",
        table.body
    );
    assert!(
        table.body.contains("k:NodeResourcesFitx1"),
        "{}",
        table.body
    );
    // The volume plugins are evaluated (only plugins placer lacks are listed).
    let not_evaluated = table
        .body
        .lines()
        .find(|l| l.starts_with("not evaluated"))
        .unwrap_or("");
    assert!(!not_evaluated.contains("Volume"), "{}", table.body);
    // A bound pod is explained as if it were not bound.
    let mut bound = pod("api", "1", true);
    bound.node_name = Some("idle".into());
    explainer.cache.write().apply_pod(bound);
    explainer.pending.delete("default", "api");
    let j = app.get("/explain/pods/default/api").await.json();
    assert_eq!(j["boundNode"], "idle");
    assert_eq!(
        j["winner"], "idle",
        "its own requests do not count against its node"
    );
}

#[tokio::test]
async fn unknown_pods_are_404_and_bad_names_400_naming_the_part() {
    let (app, _) = blocked();
    app.get("/explain/pods/default/ghost").await.assert_error(
        StatusCode::NOT_FOUND,
        "pod default/ghost not found in placer's cache",
    );
    let reply = app.get("/explain/pods/Default/web").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.json()["Error"]
            .as_str()
            .unwrap()
            .starts_with(r#"namespace "Default": character 1 is 'D'"#),
        "{}",
        reply.body
    );
    let reply = app.get("/explain/pods/default/web_1").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.json()["Error"]
            .as_str()
            .unwrap()
            .starts_with(r#"name "web_1": character 4 is '_'"#),
        "{}",
        reply.body
    );
    let long = "p".repeat(300);
    let reply = app.get(&format!("/explain/pods/default/{long}")).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let error = reply.json()["Error"].as_str().unwrap().to_string();
    assert!(
        error.contains("no more than 253 characters (it has 300)"),
        "{error}"
    );
    assert!(error.len() < 400, "the name is not echoed whole: {error}");
    let reply = app.get("/explain/pods/default/web?format=yaml").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn without_the_explainer_the_route_says_it_is_off() {
    let app = App::default();
    app.get("/explain/pods/default/web").await.assert_error(
        StatusCode::NOT_FOUND,
        "explaining live pods is off in this placer",
    );
}

#[tokio::test]
async fn long_names_are_shortened_in_the_table_and_whole_in_json() {
    let long_node = format!("{}.example.com", "n".repeat(63));
    let long_pod = "p".repeat(253);
    let (app, _) = app(
        vec![node(&long_node, "8", false, false)],
        vec![pod(&long_pod, "1", true)],
    );
    let path = format!("/explain/pods/default/{long_pod}");
    let j = app.get(&path).await.json();
    assert_eq!(j["nodes"][0]["node"], long_node);
    let table = app.get(&format!("{path}?format=table")).await.body;
    assert!(!table.contains(&long_node), "{table}");
    assert!(
        table.contains(&format!("{}...", &long_node[..61])),
        "{table}"
    );
    assert!(
        table.contains("node names over 64 characters are shortened"),
        "{table}"
    );
}

/// A profile placer schedules itself (standalone): its own safety plugins, no in-tree side.
const STANDALONE_POLICY: &str = r#"apiVersion: placer/v1alpha1
kind: Policy
profiles:
  - schedulerName: placer
    plugins:
      - name: TaintToleration
        weight: 3
      - name: NodeResourcesFit
      - name: DefaultPreemption
"#;

#[tokio::test]
async fn a_standalone_pod_is_explained_with_placers_profile_and_its_last_attempt() {
    let policy = compile(STANDALONE_POLICY);
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    state.apply_node(node("tainted", "8", true, true));
    state.apply_node(node("small", "1", true, false));
    let cache = Arc::new(Cache::from_state(state));
    let app_state = AppState::new(policy, cache.clone());
    let verbs = ExtenderState::new(&app_state, None, Settings::default());
    let mut web = pod("web", "2", false);
    web.scheduler_name = "placer".into();
    let diagnoses = Arc::new(Diagnoses::default());
    let message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). \
                   preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
    diagnoses.record_attempt(&web, message, cache.generation());
    let explainer = Arc::new(Explainer {
        policy: app_state.policy.clone(),
        cache,
        mode: Mode::Standalone,
        pending: Arc::new(PendingPods::from_pods([web, pod("stray", "1", false)])),
        in_tree: Some(Arc::new(InTree::defaults().unwrap())),
        diagnoses,
        replica: Default::default(),
    });
    let app = App::from_router(placer::server::router(app_state, verbs, Some(explainer)));
    let j = app.get("/explain/pods/default/web").await.json();
    assert_eq!(j["deployment"], "standalone");
    assert_eq!(
        j["kubeScheduler"],
        json!(null),
        "placer's own profile has the safety plugins"
    );
    assert_eq!(j["summary"], message, "the same text the attempt reported");
    assert_eq!(j["lastAttempt"]["message"], message);
    assert_eq!(j["nodes"][0]["failure"]["by"], "placer");
    // A pod of another scheduler: standalone mode does not serve extender calls.
    let (other, _) = blocked();
    let reply = other.get("/explain/pods/default/web").await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the extender app still answers"
    );
}
