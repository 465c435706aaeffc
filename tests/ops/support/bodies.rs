//! Metric samples and request bodies.

use super::{Client, RELOAD_TIMEOUT, Reply, eventually};
use std::net::SocketAddr;

/// The value of the series written exactly as `series` (name and labels in
/// the encoder's order) in an exposition, if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(
            value
                .parse()
                .unwrap_or_else(|e| panic!("bad sample value in {line:?}: {e}")),
        )
    })
}

/// `ExtenderArgs` (nodeCacheCapable: true) as kube-scheduler writes them for
/// a priority-0 pod with `labels` and `annotations` (JSON object texts).
pub fn args_json(pod: &str, labels: &str, annotations: &str, names: &[&str]) -> String {
    let names = serde_json::to_string(names).expect("names encode");
    format!(
        concat!(
            r#"{{"Pod":{{"metadata":{{"name":"{pod}","namespace":"default","uid":"uid-{pod}","#,
            r#""creationTimestamp":null,"labels":{labels},"annotations":{annotations}}},"#,
            r#""spec":{{"containers":[{{"name":"main","image":"registry.k8s.io/pause:3.10","resources":{{}}}}],"#,
            r#""restartPolicy":"Always","schedulerName":"default-scheduler","priority":0}},"status":{{}}}},"#,
            r#""Nodes":null,"NodeNames":{names}}}"#
        ),
        pod = pod,
        labels = labels,
        annotations = annotations,
        names = names,
    )
}

/// A plain pod (no placer label or annotation): only ZoneSpread scores it.
pub fn plain_pod_args(names: &[&str]) -> String {
    args_json("plain-1", r#"{"app":"web"}"#, "{}", names)
}

/// A latency-sensitive pod that needs hardware encryption (every plugin applies).
pub fn api_pod_args(names: &[&str]) -> String {
    args_json(
        "api-1",
        r#"{"qos":"latency-sensitive"}"#,
        r#"{"myorg.io/require-hw-encrypt":"true"}"#,
        names,
    )
}

/// The nodes of the filter example, one of them unknown to the cache.
pub const FILTER_NODES: &[&str] = &["node-a1", "node-a2", "node-c1", "node-x", "ghost"];

/// `/filter` of [`api_pod_args`]`(FILTER_NODES)` over examples/cluster.yaml:
/// only node-a1 and node-c1 carry hw-encrypt.
pub const FILTER_ANSWER: &str = r#"{"Nodes":null,"NodeNames":["node-a1","node-c1"],"FailedNodes":{"ghost":"node not found in placer cache"},"FailedAndUnresolvableNodes":{"node-a2":"node(s) lack hardware encryption","node-x":"node(s) lack hardware encryption"},"Error":""}"#;

/// `/prioritize` scores as (host, score) pairs.
#[track_caller]
pub fn scores(reply: &Reply) -> Vec<(String, i64)> {
    assert_eq!(reply.status, 200, "prioritize: {}", reply.body);
    reply
        .json()
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|e| {
            (
                e["Host"].as_str().expect("Host").to_string(),
                e["Score"].as_i64().expect("Score"),
            )
        })
        .collect()
}

/// (host, score) pairs from literals.
pub fn expect_scores(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(h, s)| (h.to_string(), *s)).collect()
}

/// Waits until `client` gets a 200 from `/healthz` at `addr`: the certificate
/// being served is now one `client` trusts (`what` names the step on failure).
pub fn wait_until_served(client: &Client, addr: SocketAddr, what: &str) {
    eventually(what, RELOAD_TIMEOUT, || {
        client
            .get(addr, "/healthz")
            .ok()
            .filter(|r| r.status == 200)
    });
}
