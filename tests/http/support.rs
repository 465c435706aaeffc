//! Shared fixtures: the test policy, a small cluster whose scores are worked
//! out by hand in the tests, request bodies in the exact shape kube-scheduler
//! sends, and an in-process app to send them to.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use placer::cache::{Cache, ClusterState};
use placer::modes::extender::{ExtenderState, Settings};
use placer::objects::{NodeInfo, PodInfo};
use placer::policy::{self, CompiledPolicy};
use placer::state::AppState;
use serde_json::Value;
use tower::ServiceExt;

// ---------------------------------------------------------------------------
// Policy

/// Zone label ZoneSpread reads (its default).
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// Annotation that activates the CapabilityFilter rule.
pub const HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";
/// Node label the rule requires.
pub const HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";
/// The rule's reason.
pub const HW_REASON: &str = "node(s) lack hardware encryption";
/// Reason for names the cache does not know.
pub const NOT_FOUND: &str = "node not found in placer cache";

/// The test policy: CapabilityFilter (one rule), ZoneSpread weight 2, NetQoS
/// weight 1 with `unlabeledScore: 20` (so `unknownTierScore` defaults to 20).
/// Everything else is left to the defaults.
pub const POLICY: &str = r#"apiVersion: placer/v1alpha1
kind: Policy
extender:
  defaultProfile: extender
profiles:
  - schedulerName: extender
    plugins:
      - name: CapabilityFilter
        args:
          rules:
            - podAnnotation: myorg.io/require-hw-encrypt
              nodeLabel: node.kubernetes.io/hw-encrypt
              reason: node(s) lack hardware encryption
      - name: ZoneSpread
        weight: 2
      - name: NetQoS
        args: { unlabeledScore: 20 }
"#;

/// [`POLICY`] without `extender.defaultProfile`: pods whose schedulerName is
/// not `extender` have no profile.
pub fn policy_without_default_profile() -> String {
    POLICY.replace("extender:\n  defaultProfile: extender\n", "")
}

/// Parses and compiles policy text (panics on an invalid fixture).
pub fn compile(text: &str) -> CompiledPolicy {
    CompiledPolicy::new(policy::parse(text, "test.yaml").expect("test policy is valid"))
}

// ---------------------------------------------------------------------------
// Cluster

/// The fixture cluster, indexed for `policy`:
///
/// | node | zone | net | hw-encrypt | priority-0 pods counted in its zone |
/// | --- | --- | --- | --- | --- |
/// | a1 | zone-a | high | true | zone-a: 4 (3 on a1, 1 on a2) |
/// | a2 | zone-a | low | - | |
/// | b1 | zone-b | high | - | zone-b: 1 (plus a Succeeded pod, not counted) |
/// | c1 | zone-c | - | - | zone-c: 2 (plus 1 pod at priority 1000) |
/// | x1 | - | fast (not a tier) | true | unzoned (its pod counts nowhere) |
///
/// One more pod is pending (no nodeName) and counts nowhere.
pub fn fixture_cluster(policy: &CompiledPolicy) -> ClusterState {
    let mut state = ClusterState::with_dimensions(&policy.count_dimensions());
    for node in [
        node("a1", Some("zone-a"), Some("high"), true),
        node("a2", Some("zone-a"), Some("low"), false),
        node("b1", Some("zone-b"), Some("high"), false),
        node("c1", Some("zone-c"), None, false),
        node("x1", None, Some("fast"), true),
    ] {
        state.apply_node(node);
    }
    for (name, node_name, priority, phase) in [
        ("web-1", Some("a1"), 0, "Running"),
        ("web-2", Some("a1"), 0, "Running"),
        ("web-3", Some("a1"), 0, "Running"),
        ("web-4", Some("a2"), 0, "Running"),
        ("web-5", Some("b1"), 0, "Running"),
        ("done-1", Some("b1"), 0, "Succeeded"),
        ("web-6", Some("c1"), 0, "Running"),
        ("web-7", Some("c1"), 0, "Running"),
        ("batch-1", Some("c1"), 1000, "Running"),
        ("web-8", Some("x1"), 0, "Running"),
        ("pending-1", None, 0, "Pending"),
    ] {
        state.apply_pod(PodInfo {
            name: name.into(),
            namespace: "default".into(),
            uid: format!("uid-{name}"),
            priority,
            node_name: node_name.map(str::to_string),
            phase: Some(phase.into()),
            ..Default::default()
        });
    }
    state
}

/// A node with the fixture's label scheme.
pub fn node(name: &str, zone: Option<&str>, net: Option<&str>, hw: bool) -> NodeInfo {
    let mut labels = vec![("kubernetes.io/hostname", name.to_string())];
    if let Some(z) = zone {
        labels.push((ZONE, z.to_string()));
    }
    if let Some(n) = net {
        labels.push(("net", n.to_string()));
    }
    if hw {
        labels.push((HW_LABEL, "true".to_string()));
    }
    NodeInfo::new(name, labels)
}

// ---------------------------------------------------------------------------
// Request bodies, as kube-scheduler's Go encoder writes them

/// A JSON string the way Go's `encoding/json` writes it (`<`, `>`, `&` escaped).
pub fn go_string(s: &str) -> String {
    serde_json::to_string(s)
        .expect("strings encode")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn go_map<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut entries: Vec<_> = entries.into_iter().collect();
    entries.sort_unstable(); // Go sorts map keys
    let body: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{}", go_string(k), go_string(v)))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn go_list<T: AsRef<str>>(items: &[T]) -> String {
    let body: Vec<String> = items.iter().map(|s| go_string(s.as_ref())).collect();
    format!("[{}]", body.join(","))
}

/// A Pod as kube-scheduler's queue holds it and its encoder writes it:
/// compact, fields in Go declaration order, `creationTimestamp: null`,
/// `status: {}`, no `apiVersion`/`kind`.
#[derive(Debug, Clone)]
pub struct PodJson {
    name: String,
    namespace: String,
    uid: String,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
    scheduler_name: String,
    priority: i32,
}

impl PodJson {
    /// A priority-0 pod for `default-scheduler` (so the policy's
    /// `defaultProfile` evaluates it) without labels or annotations.
    pub fn new(name: &str) -> Self {
        PodJson {
            name: name.into(),
            namespace: "default".into(),
            uid: format!("uid-{name}"),
            labels: Vec::new(),
            annotations: Vec::new(),
            scheduler_name: "default-scheduler".into(),
            priority: 0,
        }
    }

    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.push((k.into(), v.into()));
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.annotations.push((k.into(), v.into()));
        self
    }

    /// `qos=latency-sensitive`: NetQoS applies.
    pub fn latency_sensitive(self) -> Self {
        self.label("qos", "latency-sensitive")
    }

    /// Asks for hardware encryption: CapabilityFilter applies.
    pub fn needs_hw_encrypt(self) -> Self {
        self.annotation(HW_ANNOTATION, "true")
    }

    /// Sets `spec.schedulerName`.
    pub fn scheduler(mut self, name: &str) -> Self {
        self.scheduler_name = name.into();
        self
    }

    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }

    /// The compact JSON.
    pub fn json(&self) -> String {
        let mut meta = format!(
            r#""name":{},"namespace":{},"uid":{},"creationTimestamp":null"#,
            go_string(&self.name),
            go_string(&self.namespace),
            go_string(&self.uid)
        );
        if !self.labels.is_empty() {
            let m = go_map(self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            meta.push_str(&format!(r#","labels":{m}"#));
        }
        if !self.annotations.is_empty() {
            let m = go_map(
                self.annotations
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            );
            meta.push_str(&format!(r#","annotations":{m}"#));
        }
        format!(
            concat!(
                r#"{{"metadata":{{{meta}}},"spec":{{"containers":[{{"name":"main","image":"registry.k8s.io/pause:3.10","resources":{{}}}}],"#,
                r#""restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","#,
                r#""securityContext":{{}},"schedulerName":{sched},"priority":{prio},"enableServiceLinks":true,"#,
                r#""preemptionPolicy":"PreemptLowerPriority"}},"status":{{}}}}"#
            ),
            meta = meta,
            sched = go_string(&self.scheduler_name),
            prio = self.priority,
        )
    }
}

/// `ExtenderArgs` with `nodeCacheCapable: true`: `"Nodes":null`, names set.
pub fn names_args(pod: &PodJson, names: &[&str]) -> String {
    format!(
        r#"{{"Pod":{},"Nodes":null,"NodeNames":{}}}"#,
        pod.json(),
        go_list(names)
    )
}

/// `ExtenderArgs` with `nodeCacheCapable: false`: full nodes, `"NodeNames":null`.
pub fn nodes_args(pod: &PodJson, list_metadata: &str, items: &[String]) -> String {
    format!(
        r#"{{"Pod":{},"Nodes":{{"metadata":{list_metadata},"items":[{}]}},"NodeNames":null}}"#,
        pod.json(),
        items.join(",")
    )
}

/// A full `v1.Node` as the API server and kube-scheduler write it: Go field
/// order (not alphabetical: `uid` before `resourceVersion`, `capacity` before
/// `allocatable`), and the `"Port"` quirk inside `kubeletEndpoint`.
pub fn node_json(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels: Vec<(&str, &str)> = labels.to_vec();
    labels.push(("kubernetes.io/hostname", name));
    format!(
        concat!(
            r#"{{"metadata":{{"name":{name},"uid":{uid},"resourceVersion":"4711","creationTimestamp":"2025-05-01T00:00:00Z","labels":{labels}}},"#,
            r#""spec":{{"podCIDR":"10.244.1.0/24","podCIDRs":["10.244.1.0/24"]}},"#,
            r#""status":{{"capacity":{{"cpu":"8","memory":"32Gi","pods":"110"}},"allocatable":{{"cpu":"7800m","memory":"31Gi","pods":"110"}},"#,
            r#""conditions":[{{"type":"Ready","status":"True","lastHeartbeatTime":"2025-05-01T00:00:00Z","lastTransitionTime":"2025-05-01T00:00:00Z","reason":"KubeletReady","message":"kubelet is posting ready status"}}],"#,
            r#""addresses":[{{"type":"InternalIP","address":"10.0.0.1"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":10250}}}},"#,
            r#""nodeInfo":{{"machineID":"m","systemUUID":"s","bootID":"b","kernelVersion":"6.8.0","osImage":"Ubuntu 24.04","containerRuntimeVersion":"containerd://2.0.0","kubeletVersion":"v1.34.0","kubeProxyVersion":"","operatingSystem":"linux","architecture":"amd64"}}}}}}"#
        ),
        name = go_string(name),
        uid = go_string(&format!("{name}-uid")),
        labels = go_map(labels),
    )
}

/// `ExtenderPreemptionArgs` with `nodeCacheCapable: true`: per node the
/// victims' UIDs and the PDB violation count.
pub fn meta_preempt_args(pod: &PodJson, candidates: &[(&str, &[&str], i64)]) -> String {
    let entries: Vec<String> = candidates
        .iter()
        .map(|(node, uids, pdb)| {
            let pods: Vec<String> = uids
                .iter()
                .map(|u| format!(r#"{{"UID":{}}}"#, go_string(u)))
                .collect();
            format!(
                r#"{}:{{"Pods":[{}],"NumPDBViolations":{pdb}}}"#,
                go_string(node),
                pods.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"Pod":{},"NodeNameToVictims":null,"NodeNameToMetaVictims":{{{}}}}}"#,
        pod.json(),
        entries.join(",")
    )
}

/// `ExtenderPreemptionArgs` with `nodeCacheCapable: false`: full victim pods.
pub fn full_preempt_args(pod: &PodJson, candidates: &[(&str, &[PodJson], i64)]) -> String {
    let entries: Vec<String> = candidates
        .iter()
        .map(|(node, victims, pdb)| {
            let pods: Vec<String> = victims.iter().map(PodJson::json).collect();
            format!(
                r#"{}:{{"Pods":[{}],"NumPDBViolations":{pdb}}}"#,
                go_string(node),
                pods.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"Pod":{},"NodeNameToVictims":{{{}}},"NodeNameToMetaVictims":null}}"#,
        pod.json(),
        entries.join(",")
    )
}

/// `ExtenderBindingArgs`.
pub fn bind_args(name: &str, namespace: &str, uid: &str, node: &str) -> String {
    format!(
        r#"{{"PodName":{},"PodNamespace":{},"PodUID":{},"Node":{}}}"#,
        go_string(name),
        go_string(namespace),
        go_string(uid),
        go_string(node)
    )
}

/// A good `/filter` request: a pod needing hw-encrypt over a1 (has it) and b1.
pub fn good_filter_body() -> String {
    names_args(&PodJson::new("api").needs_hw_encrypt(), &["a1", "b1"])
}

/// The answer to [`good_filter_body`] over the fixture cluster.
pub fn good_filter_result() -> String {
    names_filter_result(&["a1"], &[], &[("b1", HW_REASON)])
}

/// The `/filter` answer for names, every key present as Go writes it.
pub fn names_filter_result(
    passed: &[&str],
    failed: &[(&str, &str)],
    unresolvable: &[(&str, &str)],
) -> String {
    format!(
        r#"{{"Nodes":null,"NodeNames":{},"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}}"#,
        go_list(passed),
        go_map(failed.iter().copied()),
        go_map(unresolvable.iter().copied()),
    )
}

/// The `/prioritize` answer.
pub fn priorities(scores: &[(&str, i64)]) -> String {
    let body: Vec<String> = scores
        .iter()
        .map(|(h, s)| format!(r#"{{"Host":{},"Score":{s}}}"#, go_string(h)))
        .collect();
    format!("[{}]", body.join(","))
}

// ---------------------------------------------------------------------------
// The app

/// The service, in process, over a given policy, cache and settings.
#[derive(Clone)]
pub struct App {
    router: Router,
}

impl Default for App {
    /// [`POLICY`] over the fixture cluster with default settings.
    fn default() -> Self {
        App::with_settings(Settings::default())
    }
}

impl App {
    /// [`POLICY`] over the fixture cluster with `settings`.
    pub fn with_settings(settings: Settings) -> Self {
        App::build(POLICY, settings, fixture_cluster)
    }

    /// `policy_text` over the fixture cluster with default settings.
    pub fn with_policy(policy_text: &str) -> Self {
        App::build(policy_text, Settings::default(), fixture_cluster)
    }

    /// `policy_text` over the cluster `cluster` builds for it.
    pub fn build(
        policy_text: &str,
        settings: Settings,
        cluster: impl FnOnce(&CompiledPolicy) -> ClusterState,
    ) -> Self {
        let compiled = compile(policy_text);
        let state = cluster(&compiled);
        App::over_cache(compiled, Arc::new(Cache::from_state(state)), settings)
    }

    /// `policy` over `cache` as given (e.g. an unsynced `Cache::new()`).
    pub fn over_cache(policy: CompiledPolicy, cache: Arc<Cache>, settings: Settings) -> Self {
        let state = AppState::new(policy, cache);
        let verbs = ExtenderState::new(&state, None, settings);
        App::over_state(state, verbs)
    }

    /// The router over `state` and `verbs` as given (e.g. with retry prompts switched on).
    pub fn over_state(state: AppState, verbs: ExtenderState) -> Self {
        App {
            router: placer::server::router(state, verbs, None),
        }
    }

    /// A router built elsewhere (e.g. with request extensions layered on).
    pub fn from_router(router: Router) -> Self {
        App { router }
    }

    /// Sends `req` to (a clone of) the router; clones share all state.
    pub async fn send(&self, req: Request<Body>) -> Reply {
        let resp = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("the router is infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .expect("response body reads")
            .to_bytes();
        Reply {
            status,
            headers,
            body: String::from_utf8(bytes.to_vec()).expect("response body is UTF-8"),
        }
    }

    /// `POST path` with `body` and kube-scheduler's only header.
    pub async fn post(&self, path: &str, body: impl Into<Body>) -> Reply {
        self.send(post(path, body)).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Reply {
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .body(Body::empty())
            .expect("request builds");
        self.send(req).await
    }

    /// Asserts that the app still answers a good `/filter` exactly (used
    /// after error paths: an error must not poison the service).
    pub async fn assert_still_serves(&self) {
        self.post("/filter", good_filter_body())
            .await
            .assert(StatusCode::OK, &good_filter_result());
    }
}

/// A `POST` request as kube-scheduler sends it (`Content-Type: application/json` only).
pub fn post(path: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.into())
        .expect("request builds")
}

/// A collected response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: String,
}

impl Reply {
    /// Asserts status and exact body.
    #[track_caller]
    pub fn assert(&self, status: StatusCode, body: &str) {
        assert_eq!(
            (self.status, self.body.as_str()),
            (status, body),
            "unexpected reply"
        );
    }

    /// Asserts status and that the body is `{"Error": error}` exactly, as JSON.
    #[track_caller]
    pub fn assert_error(&self, status: StatusCode, error: &str) {
        assert_eq!(self.status, status, "status; body: {}", self.body);
        self.assert_json_content_type();
        assert_eq!(self.json(), serde_json::json!({ "Error": error }));
    }

    /// Asserts `Content-Type: application/json`.
    #[track_caller]
    pub fn assert_json_content_type(&self) {
        assert_eq!(
            self.headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "content type of {}",
            self.body
        );
    }

    /// The body as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}
