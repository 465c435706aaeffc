//! The scheduling loop against a stand-in API server: when it starts
//! attempting pods.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::client::Body;
use tokio::sync::watch;

use super::scheduler::Standalone;
use crate::cache::Cache;
use crate::objects::NodeInfo;
use crate::policy::{self, CompiledPolicy};
use crate::state::AppState;

const POLICY: &str = r#"apiVersion: placer/v1alpha1
kind: Policy
profiles:
  - schedulerName: placer
    plugins:
      - name: PrioritySort
      - name: NodeUnschedulable
"#;

/// One pending pod of placer's, as the unscheduled-pod list returns it.
const PENDING_LIST: &str = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"10"},
"items":[{"metadata":{"name":"p","namespace":"default","uid":"u1","resourceVersion":"5"},
"spec":{"schedulerName":"placer","containers":[{"name":"c","image":"i"}]}}]}"#;

/// An API server that lists [`PENDING_LIST`], holds every watch open, and
/// answers anything else with `201 {}`; it records each request's method
/// and path.
fn api_server(seen: Arc<Mutex<Vec<String>>>) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let seen = seen.clone();
        async move {
            let query = req.uri().query().unwrap_or_default().to_owned();
            let path = req.uri().path().to_owned();
            if let Ok(mut seen) = seen.lock() {
                seen.push(format!("{} {path}", req.method()));
            }
            if query.contains("watch=true") {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            let (status, body) = match path.as_str() {
                "/api/v1/pods" => (200, PENDING_LIST),
                _ => (201, "{}"),
            };
            let reply = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(body.as_bytes().to_vec()))
                .expect("a static response");
            Ok::<_, Infallible>(reply)
        }
    });
    kube::Client::new(service, "default")
}

fn bindings(seen: &Mutex<Vec<String>>) -> usize {
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    seen.iter().filter(|r| r.ends_with("/binding")).count()
}

#[tokio::test]
async fn no_pod_is_attempted_before_the_cache_has_listed_nodes_and_pods() {
    let policy = CompiledPolicy::new(policy::parse(POLICY, "test.yaml").unwrap());
    let cache = Arc::new(Cache::new());
    // A node is in, but the lists are not complete: an attempt now would
    // place the pod without knowing the cluster.
    cache
        .write()
        .apply_node(NodeInfo::new("n1", Vec::<(String, String)>::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = AppState::new(policy, cache.clone());
    let standalone = Standalone::new(api_server(seen.clone()), state, "test");
    let (stop_tx, stop_rx) = watch::channel(false);
    let run = tokio::spawn(standalone.run(None, stop_rx, Duration::from_secs(10)));

    // The pending pod is listed at once; nothing is bound while the cache
    // is not synced.
    let listed = async {
        while !seen
            .lock()
            .is_ok_and(|s| s.iter().any(|r| r == "GET /api/v1/pods"))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), listed)
        .await
        .expect("the loop lists the pending pods");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(bindings(&seen), 0, "bound before the cache synced");

    cache.mark_nodes_synced();
    cache.mark_pods_synced();
    let bound = async {
        while bindings(&seen) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), bound)
        .await
        .expect("the pod is bound once the cache synced");
    assert_eq!(bindings(&seen), 1);

    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the loop stops")
        .unwrap();
}

#[tokio::test]
async fn a_stop_while_waiting_for_the_cache_ends_the_loop() {
    let policy = CompiledPolicy::new(policy::parse(POLICY, "test.yaml").unwrap());
    let state = AppState::new(policy, Arc::new(Cache::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let standalone = Standalone::new(api_server(seen.clone()), state, "test");
    let (stop_tx, stop_rx) = watch::channel(false);
    let run = tokio::spawn(standalone.run(None, stop_rx, Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the loop stops without the cache ever syncing")
        .unwrap();
    assert_eq!(bindings(&seen), 0);
}
