//! `/metrics` (design §9) from the real binary: OpenMetrics text with request
//! counts by verb and outcome, latency in seconds, nodes per request, plugin
//! timings per extension point, cache object counts and build info.

use std::path::Path;

use crate::support::{
    Client, FILTER_ANSWER, FILTER_NODES, Server, api_pod_args, copy_policy, policy_args, sample,
    scores,
};

#[track_caller]
fn value(text: &str, series: &str) -> f64 {
    sample(text, series).unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
}

fn start(dir: &Path) -> Server {
    Server::start(dir, &policy_args(&copy_policy(dir)), Client::Plain)
}

#[test]
fn metrics_count_requests_by_verb_and_outcome() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = start(dir.path());

    for _ in 0..3 {
        let reply = server.post("/filter", &api_pod_args(FILTER_NODES));
        assert_eq!((reply.status, reply.body.as_str()), (200, FILTER_ANSWER));
    }
    let bad = server.post("/filter", "{");
    assert_eq!(bad.status, 400, "{}", bad.body);
    for _ in 0..2 {
        let reply = server.post(
            "/prioritize",
            &api_pod_args(&["node-a1", "node-b1", "node-c1"]),
        );
        assert_eq!(scores(&reply).len(), 3);
    }

    let reply = server.get("/metrics");
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type").as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = reply.body;
    assert!(
        text.ends_with("# EOF\n"),
        "OpenMetrics ends with # EOF:\n{text}"
    );
    assert_eq!(text.matches("# EOF").count(), 1);

    // Request counts by verb and outcome.
    assert_eq!(
        value(
            &text,
            r#"placer_requests_total{verb="filter",outcome="success"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            r#"placer_requests_total{verb="filter",outcome="bad_request"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"placer_requests_total{verb="prioritize",outcome="success"}"#
        ),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            r#"placer_requests_total{verb="prioritize",outcome="bad_request"}"#
        ),
        None
    );
    assert!(text.contains("# TYPE placer_requests counter\n"), "{text}");

    // Latency: a histogram in seconds, with `le` first in the label set.
    assert!(
        text.contains("# TYPE placer_request_duration_seconds histogram\n")
            && text.contains("# UNIT placer_request_duration_seconds seconds\n"),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            r#"placer_request_duration_seconds_count{verb="prioritize",outcome="success"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            r#"placer_request_duration_seconds_bucket{le="+Inf",verb="prioritize",outcome="success"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            r#"placer_request_duration_seconds_count{verb="filter",outcome="bad_request"}"#
        ),
        1.0
    );
    // Seconds, not milliseconds or microseconds: two tiny requests sum to
    // well under a second, yet above zero.
    let sum = value(
        &text,
        r#"placer_request_duration_seconds_sum{verb="prioritize",outcome="success"}"#,
    );
    assert!(sum > 0.0 && sum < 2.0, "prioritize latency sum {sum} s");
    // The smallest bucket is sub-millisecond (a seconds scale).
    assert!(
        text.contains(r#"placer_request_duration_seconds_bucket{le="0.00005",verb="prioritize",outcome="success"}"#),
        "{text}"
    );

    // Nodes per request: 5 names per filter (the 400 carried none).
    assert_eq!(
        value(&text, r#"placer_request_nodes_count{verb="filter"}"#),
        3.0
    );
    assert_eq!(
        value(&text, r#"placer_request_nodes_sum{verb="filter"}"#),
        15.0
    );
    assert_eq!(
        value(
            &text,
            r#"placer_request_nodes_bucket{le="4.0",verb="filter"}"#
        ),
        0.0
    );
    assert_eq!(
        value(
            &text,
            r#"placer_request_nodes_bucket{le="8.0",verb="filter"}"#
        ),
        3.0
    );
    assert_eq!(
        value(&text, r#"placer_request_nodes_count{verb="prioritize"}"#),
        2.0
    );

    // Plugin timings: one observation per pod and extension point.
    assert!(
        text.contains("# UNIT placer_plugin_duration_seconds seconds\n"),
        "{text}"
    );
    for (plugin, point, n) in [
        ("ZoneSpread", "Score", 2.0),
        ("NetQoS", "Score", 2.0),
        ("NetQoS", "PreScore", 2.0),
        ("CapabilityFilter", "Filter", 3.0),
    ] {
        let series = format!(
            r#"placer_plugin_duration_seconds_count{{plugin="{plugin}",extension_point="{point}"}}"#
        );
        assert_eq!(value(&text, &series), n, "{series}");
        let inf = format!(
            r#"placer_plugin_duration_seconds_bucket{{le="+Inf",plugin="{plugin}",extension_point="{point}"}}"#
        );
        assert_eq!(value(&text, &inf), n, "{inf}");
    }

    // Cache objects: examples/cluster.yaml has 6 nodes and 7 pods, one of
    // them Succeeded (terminal pods are not kept, as in kube-scheduler).
    assert_eq!(value(&text, r#"placer_cache_objects{kind="node"}"#), 6.0);
    assert_eq!(value(&text, r#"placer_cache_objects{kind="pod"}"#), 6.0);

    assert_eq!(
        value(
            &text,
            &format!(
                r#"placer_build_info{{version="{}",revision="{}"}}"#,
                env!("CARGO_PKG_VERSION"),
                crate::support::built_commit()
            )
        ),
        1.0
    );

    // The process_* families of every Go component (client_golang's names).
    for family in [
        "process_cpu_seconds counter",
        "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge",
        "process_open_fds gauge",
        "process_max_fds gauge",
        "process_threads gauge",
        "process_start_time_seconds gauge",
    ] {
        assert!(text.contains(&format!("# TYPE {family}\n")), "{family}");
    }
    assert!(value(&text, "process_cpu_seconds_total") >= 0.0);
    assert!(value(&text, "process_resident_memory_bytes") > 1e6);
    assert!(value(&text, "process_open_fds") >= 3.0);

    // Every other metric is placer_-prefixed and every timing histogram is in seconds.
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut parts = line.split(' ').skip(2);
        let (name, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        assert!(
            name.starts_with("placer_") || name.starts_with("process_"),
            "{line}"
        );
        if kind == "histogram" && (name.contains("duration") || name.contains("latency")) {
            assert!(
                name.ends_with("_seconds"),
                "timing histogram not in seconds: {line}"
            );
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            line.starts_with("placer_") || line.starts_with("process_"),
            "{line}"
        );
    }

    // /metrics itself is not counted as a verb.
    assert!(!text.contains(r#"verb="other""#), "{text}");
}
