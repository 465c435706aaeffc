//! Mutated request bodies against the real binary: whatever a client sends,
//! placer answers 200, 400 or 413 with a JSON body, never panics, never drops
//! the connection without an answer, and stays alive.
//!
//! The mutations are seeded and deterministic, so a failure names the seed and
//! the case that reproduce it. CI runs the default seed; to search further:
//! `PLACER_FUZZ_SEED=7 PLACER_FUZZ_CASES=20000 cargo test --test ops fuzz`.

use std::ffi::OsString;

use serde_json::{Value, json};

use crate::support::{Client, Conn, Server, repo_file};

/// The seed CI runs.
const DEFAULT_SEED: u64 = 0x5eed_0001;
/// Cases per verb in CI: a few thousand bodies in all, well under a minute.
const DEFAULT_CASES: usize = 600;
/// A small body limit, so that growing mutations reach the 413 path too.
const BODY_LIMIT: usize = 48 * 1024;

/// splitmix64: a tiny, well-mixed generator; no crate needed for a test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One valid body per verb, in kube-scheduler's shapes.
fn seeds() -> Vec<(&'static str, Value)> {
    let args: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("examples/filter-names.json")).expect("example body"),
    )
    .expect("example body is JSON");
    let mut pod = args["Pod"].clone();
    pod["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1"}});
    pod["spec"]["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}}]}});
    let node = json!({"metadata": {"name": "node-a1", "labels": {
            "topology.kubernetes.io/zone": "zone-a", "net": "high", "node.kubernetes.io/hw-encrypt": "true"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
    let names =
        json!({"Pod": pod, "Nodes": null, "NodeNames": ["node-a1", "node-b1", "node-gone"]});
    let full = json!({"Pod": pod, "Nodes": {"metadata": {}, "items": [node]}, "NodeNames": null});
    let preempt = json!({"Pod": pod, "NodeNameToVictims": null, "NodeNameToMetaVictims": {
        "node-a1": {"Pods": [{"UID": "uid-1"}], "NumPDBViolations": 1}, "node-b1": {"Pods": [], "NumPDBViolations": 0}}});
    let bind =
        json!({"PodName": "api-1", "PodNamespace": "default", "PodUID": "u-1", "Node": "node-a1"});
    // The shipped `placer` profile runs every in-tree plugin on the pod.
    let mut in_tree = names.clone();
    in_tree["Pod"]["spec"]["schedulerName"] = json!("placer");
    in_tree["Pod"]["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}}}]);
    in_tree["Pod"]["spec"]["affinity"]["podAntiAffinity"] = json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}}]});
    vec![
        ("/filter", in_tree.clone()),
        ("/prioritize", in_tree.clone()),
        ("/explain?format=table", in_tree),
        ("/filter", names.clone()),
        ("/filter", full.clone()),
        ("/prioritize", names.clone()),
        ("/prioritize", full),
        ("/explain", names),
        ("/preempt", preempt),
        ("/bind", bind),
    ]
}

/// Values that have broken decoders before: wrong types, extremes, odd text.
fn odd_value(rng: &mut Rng) -> Value {
    // Up to 120 levels: /filter echoes the list metadata unchanged, and this
    // test reads answers with serde_json's 128-level limit. Deeper requests
    // are refused by placer's own decoder (tests/http/errors.rs covers that).
    let depth = 1 + rng.below(120);
    let choices: Vec<Value> = vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1e300),
        json!(""),
        json!("abc"),
        json!("1e9999"),
        json!("-5"),
        json!("9223372036854775807Ki"),
        json!("\u{0000}\u{ffff}é"),
        json!("x".repeat(70_000)),
        json!([]),
        json!({}),
        json!([null, 1, "a", {}]),
        json!({"operator": "Foo", "key": "", "values": null}),
        serde_json::from_str(&format!("{}{}", "[".repeat(depth), "]".repeat(depth)))
            .unwrap_or(Value::Null),
    ];
    rng.pick(&choices).clone()
}

/// Replaces one value somewhere in `v` (walking down a random path).
fn mutate_value(v: &mut Value, rng: &mut Rng) {
    let descend = rng.below(4) != 0;
    let len = match v {
        Value::Object(map) => map.len(),
        Value::Array(items) => items.len(),
        _ => 0,
    };
    if descend && len > 0 {
        let i = rng.below(len);
        let child = match v {
            Value::Object(map) => map.values_mut().nth(i),
            Value::Array(items) => items.get_mut(i),
            _ => None,
        };
        if let Some(child) = child {
            return mutate_value(child, rng);
        }
    }
    match (rng.below(6), v.as_object_mut()) {
        (0, _) => *v = Value::Null,
        (1, Some(map)) => {
            map.insert("unknownField".into(), odd_value(rng));
            let key = *rng.pick(&["NODENAMES", "pod", "Error"]);
            map.insert(key.to_string(), odd_value(rng));
        }
        _ => *v = odd_value(rng),
    }
}

/// Byte-level damage: flips, cuts, insertions and repeats.
fn mutate_bytes(bytes: &mut Vec<u8>, rng: &mut Rng) {
    const TOKENS: &[&[u8]] = &[
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b",",
        b":",
        b"null",
        b"\\u0000",
        b"\\ud800",
        b"-0e-9999",
        b"\xff\xfe",
        b"\x00",
        b"\r\n\r\n",
        b"1e99999999",
    ];
    if bytes.is_empty() {
        bytes.extend_from_slice(rng.pick::<&[u8]>(TOKENS));
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(5) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => bytes.truncate(at),
        2 => {
            let token = *rng.pick(TOKENS);
            bytes.splice(at..at, token.iter().copied());
        }
        3 => {
            let end = (at + 1 + rng.below(64)).min(bytes.len());
            bytes.drain(at..end);
        }
        _ => {
            let end = (at + 1 + rng.below(2048)).min(bytes.len());
            let piece = bytes[at..end].to_vec();
            for _ in 0..1 + rng.below(40) {
                bytes.splice(at..at, piece.iter().copied());
            }
        }
    }
}

fn mutated(seed: &Value, rng: &mut Rng) -> Vec<u8> {
    let mut v = seed.clone();
    for _ in 0..1 + rng.below(3) {
        mutate_value(&mut v, rng);
    }
    let mut bytes = v.to_string().into_bytes();
    if rng.below(2) == 0 {
        for _ in 0..1 + rng.below(3) {
            mutate_bytes(&mut bytes, rng);
        }
    }
    bytes
}

/// Sends one body on `conn` (reconnecting when the server closed it, as a 413
/// may) and returns the reply.
fn send(
    server: &Server,
    conn: &mut Option<Conn>,
    path: &str,
    body: &[u8],
) -> crate::support::Reply {
    for attempt in 0..2 {
        let c = match conn {
            Some(c) => c,
            None => conn.insert(server.client.connect(server.addr).expect("connect")),
        };
        let mut request = c.head("POST", path, body.len(), "").into_bytes();
        request.extend_from_slice(body);
        match c.send_raw(&request).and_then(|()| c.read_reply()) {
            Ok(reply) => {
                if reply.header("connection").as_deref() == Some("close") {
                    *conn = None;
                }
                return reply;
            }
            // A keep-alive connection the server closed after its last
            // answer: retry once on a fresh one.
            Err(e) if attempt == 0 => {
                let _ = e;
                *conn = None;
            }
            Err(e) => panic!("POST {path}: no answer: {e}"),
        }
    }
    unreachable!()
}

#[test]
fn mutated_bodies_get_200_400_or_413_with_json_and_placer_stays_up() {
    let seed = env_or("PLACER_FUZZ_SEED", DEFAULT_SEED);
    let cases = env_or("PLACER_FUZZ_CASES", DEFAULT_CASES);
    let dir = tempfile::tempdir().expect("temp dir");
    let args: Vec<OsString> = vec![
        "--max-body-bytes".into(),
        BODY_LIMIT.to_string().into(),
        "--no-policy-reload".into(),
    ];
    let mut server = Server::start(dir.path(), &args, Client::Plain);
    let mut rng = Rng(seed);
    let mut conn = None;
    let mut seen = std::collections::BTreeMap::new();
    for (path, body) in seeds() {
        for case in 0..cases {
            let bytes = mutated(&body, &mut rng);
            let reply = send(&server, &mut conn, path, &bytes);
            let what = || {
                format!(
                    "seed {seed:#x}, {path} case {case}: {} -> {} {}\nbody: {}",
                    bytes.len(),
                    reply.status,
                    reply.body.chars().take(300).collect::<String>(),
                    String::from_utf8_lossy(&bytes)
                        .chars()
                        .take(600)
                        .collect::<String>()
                )
            };
            assert!(
                matches!(reply.status, 200 | 400 | 413),
                "unexpected status: {}",
                what()
            );
            if reply.status == 200 && path.ends_with("format=table") {
                // The one answer that is text by design, for terminals.
                assert!(reply.body.starts_with("pod "), "not a table: {}", what());
                *seen.entry(reply.status).or_insert(0usize) += 1;
                continue;
            }
            let json: Value = serde_json::from_str(&reply.body)
                .unwrap_or_else(|e| panic!("answer is not JSON ({e}): {}", what()));
            if reply.status != 200 {
                assert!(
                    json["Error"].as_str().is_some_and(|e| !e.is_empty()),
                    "an error answer without an Error text: {}",
                    what()
                );
            }
            *seen.entry(reply.status).or_insert(0usize) += 1;
        }
    }
    // Every path of the property was exercised, not just one.
    for status in [200, 400, 413] {
        assert!(
            seen.get(&status).copied().unwrap_or(0) > 0,
            "no {status} answers: {seen:?}"
        );
    }
    assert_eq!(server.get("/healthz").status, 200);
    assert!(
        server.wait_exit(std::time::Duration::ZERO).is_none(),
        "placer exited"
    );
    assert!(
        !server.log_text().contains("panicked"),
        "a panic was logged:\n{}",
        server.log_text()
    );
    eprintln!("fuzz: seed {seed:#x}, {cases} cases per body: {seen:?}");
}
