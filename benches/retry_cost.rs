//! What the retry prompts cost `/filter` (decode → evaluate → encode, no socket): the common
//! path where nodes pass, and the rejecting path that parks the pod, each with prompts off and
//! on (registry empty, and holding 1,000 other parked pods). Prints p50/p99 per case; the cases
//! are interleaved round by round so machine noise hits them alike.
//!
//! `cargo bench --bench retry_cost` (`PLACER_BENCH_ITERS` sets the rounds, default 2000).

mod support;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use placer::modes::extender::ExtenderState;
use placer::modes::extender::retry::Retry;
use placer::objects::PodInfo;
use serde_json::json;

use support::{NodeSpec, filter_once};

const HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";

/// A names body for `nodes`, lacking the capability when `reject_all`.
fn body(pod: &serde_json::Value, nodes: &[NodeSpec], reject_all: bool) -> Vec<u8> {
    let names: Vec<&str> = nodes
        .iter()
        .filter(|n| !reject_all || !n.labels.iter().any(|(k, _)| k == HW_LABEL))
        .map(|n| n.name.as_str())
        .collect();
    serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names})).expect("encode")
}

/// `base` with prompts on; `parked` other pods already parked.
fn with_retry(base: &ExtenderState, parked: usize) -> ExtenderState {
    let retry = Arc::new(Retry::new(base.metrics.clone()));
    for i in 0..parked {
        let pod = PodInfo {
            name: format!("other-{i}"),
            namespace: "shop".into(),
            uid: format!("uid-{i}"),
            ..Default::default()
        };
        retry.park(
            &base.cache,
            pod,
            vec!["CapabilityFilter"],
            100,
            base.cache.changes().seq(),
        );
    }
    let mut state = base.clone();
    state.retry = Some(retry);
    state
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

fn main() {
    let rounds: usize = std::env::var("PLACER_BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let pod = support::incoming_pod();
    println!("{:<8} {:<34} {:>10} {:>10}", "nodes", "case", "p50", "p99");
    for n in [500, 5_000] {
        let nodes = support::nodes(n);
        let off = support::app_state(&nodes, Vec::new());
        let on_empty = with_retry(&off, 0);
        let on_full = with_retry(&off, 1000);
        let (pass, reject) = (body(&pod, &nodes, false), body(&pod, &nodes, true));
        let cases: [(&str, &ExtenderState, &[u8]); 5] = [
            ("pass, prompts off", &off, &pass),
            ("pass, prompts on (0 parked)", &on_empty, &pass),
            ("pass, prompts on (1,000 parked)", &on_full, &pass),
            ("reject all, prompts off", &off, &reject),
            ("reject all, prompts on (parks)", &on_full, &reject),
        ];
        let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); cases.len()];
        for _ in 0..(rounds / 10).max(5) {
            for (_, state, b) in &cases {
                black_box(filter_once(state, b));
            }
        }
        for _ in 0..rounds {
            for (i, (_, state, b)) in cases.iter().enumerate() {
                let t = Instant::now();
                black_box(filter_once(state, black_box(b)));
                times[i].push(t.elapsed());
            }
        }
        for ((name, ..), t) in cases.iter().zip(&mut times) {
            t.sort();
            println!(
                "{:<8} {:<34} {:>10.1?} {:>10.1?}",
                n,
                name,
                quantile(t, 0.5),
                quantile(t, 0.99)
            );
        }
        if let Some(retry) = &on_full.retry {
            assert_eq!(
                retry.parked(),
                1001,
                "the rejected pod is parked once, re-parked after"
            );
        }
    }
}
