//! Configuration f's probe of the extender verbs: what kube-scheduler's extender calls meet while
//! placer in `--mode both` binds a burst of pods in the same process.
//!
//! One fixed pod, shaped like the measured pods (`qos=latency-sensitive`, asking for hardware
//! encryption) but for another scheduler, so the shipped extender profile answers for it. Its
//! object is what the API server would store (a dry-run create: defaulted and admitted, never
//! persisted, so no scheduler and no check of the run ever sees it), without `managedFields`, as
//! kube-scheduler's informer trims them. Then, as kube-scheduler calls an extender with
//! `nodeCacheCapable: true`: `/filter` with `{"Pod":…,"Nodes":null,"NodeNames":[…]}` for
//! [`PROBE_NODES`] of the test's nodes, and `/prioritize` with the names the filter kept.
//!
//! One pair every [`PERIOD`]; a pair that takes longer delays the next (no catch-up burst). One
//! keep-alive connection to 127.0.0.1, from the probe's own OS thread, so the test's runtime
//! (pod creates, the bind watch) does not delay it; latency is client-side, from the request's
//! first byte written to the answer's last byte read. Every answer must be 200 with a
//! well-formed body: the filter keeps exactly the hw-encrypt nodes, the prioritize scores each
//! kept node once, 0–10. The loop ends when stopped (the last binding) or after its limit.

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::workload::{self, Size};
use crate::harness::TestEnv;

/// One `/filter` + `/prioritize` pair per period.
pub const PERIOD: Duration = Duration::from_millis(20);
/// How long the baseline is probed, after sync and before the burst.
pub const IDLE: Duration = Duration::from_secs(3);
/// Node names per request (all of the test's nodes when it has fewer).
pub const PROBE_NODES: usize = 500;
/// An answer later than this is a failure (kube-scheduler's default `httpTimeout` is 30 s;
/// placer's own deadline is 4.5 s).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// Failure messages kept (all are counted).
const KEPT_FAILURES: usize = 5;

/// The probe's fixed request.
pub struct Request {
    pod: Value,
    names: Vec<String>,
    /// What `/filter` must keep: the hw-encrypt nodes among `names`.
    expected: BTreeSet<String>,
    filter_body: Vec<u8>,
}

impl Request {
    /// The probe pod in namespace `ns`, over the first [`PROBE_NODES`] nodes of `size`.
    pub async fn new(env: &TestEnv, ns: &str, size: Size) -> anyhow::Result<Self> {
        let mut pod = workload::pod(env, "default-scheduler", 0);
        pod.metadata.name = Some("extender-probe".into());
        let api: Api<Pod> = Api::namespaced(env.client().clone(), ns);
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let stored = api
            .create(&dry_run, &pod)
            .await
            .context("dry-run create of the probe pod")?;
        let mut pod = serde_json::to_value(stored)?;
        if let Some(meta) = pod["metadata"].as_object_mut() {
            meta.remove("managedFields");
        }
        let count = size.nodes.min(PROBE_NODES);
        let names: Vec<String> = (0..count).map(|i| workload::node_name(env, i)).collect();
        let expected = (0..count)
            .filter(|&i| workload::node_has_hw(i))
            .map(|i| workload::node_name(env, i))
            .collect();
        let filter_body = body(&pod, &names)?;
        Ok(Self {
            pod,
            names,
            expected,
            filter_body,
        })
    }

    /// The node names each `/filter` carries.
    pub fn nodes(&self) -> usize {
        self.names.len()
    }

    /// The names `/filter` kept, if its answer is what it must be.
    fn kept(&self, status: u16, answer: &[u8]) -> anyhow::Result<Vec<String>> {
        let v = json_answer(status, answer)?;
        ensure!(
            v["Error"].as_str().unwrap_or_default().is_empty(),
            "Error {}",
            v["Error"]
        );
        let kept = v["NodeNames"]
            .as_array()
            .context("no NodeNames")?
            .iter()
            .map(|n| {
                n.as_str()
                    .map(str::to_owned)
                    .context("a name is not a string")
            })
            .collect::<anyhow::Result<Vec<String>>>()?;
        let failed = |key: &str| v[key].as_object().map_or(0, serde_json::Map::len);
        let answered = kept.len() + failed("FailedNodes") + failed("FailedAndUnresolvableNodes");
        ensure!(
            answered == self.names.len(),
            "{answered} nodes answered for {} sent",
            self.names.len()
        );
        let kept_set: BTreeSet<String> = kept.iter().cloned().collect();
        let wrong = kept_set.symmetric_difference(&self.expected).count();
        ensure!(
            wrong == 0,
            "kept {} nodes; {wrong} names differ from the {} hw-encrypt nodes sent",
            kept.len(),
            self.expected.len()
        );
        Ok(kept)
    }

    /// Checks a `/prioritize` answer for the `kept` nodes.
    fn check_scores(status: u16, answer: &[u8], kept: &[String]) -> anyhow::Result<()> {
        let v = json_answer(status, answer)?;
        let scores = v.as_array().context("not a HostPriorityList")?;
        let mut hosts = BTreeSet::new();
        for s in scores {
            let host = s["Host"].as_str().context("no Host")?;
            let score = s["Score"].as_i64().context("no Score")?;
            ensure!((0..=10).contains(&score), "{host}: score {score}");
            ensure!(hosts.insert(host), "{host} scored twice");
        }
        ensure!(
            hosts.len() == kept.len() && kept.iter().all(|k| hosts.contains(k.as_str())),
            "{} nodes scored for {} sent",
            hosts.len(),
            kept.len()
        );
        Ok(())
    }
}

/// `{"Pod":…,"Nodes":null,"NodeNames":[…]}`, as Go encodes `ExtenderArgs`.
fn body(pod: &Value, names: &[String]) -> anyhow::Result<Vec<u8>> {
    Ok(serde_json::to_vec(
        &json!({"Pod": pod, "Nodes": null, "NodeNames": names}),
    )?)
}

fn json_answer(status: u16, answer: &[u8]) -> anyhow::Result<Value> {
    ensure!(
        status == 200,
        "status {status}: {}",
        String::from_utf8_lossy(answer)
    );
    serde_json::from_slice(answer).context("answer is not JSON")
}

/// What one phase of probing saw.
#[derive(Debug, Default)]
pub struct Samples {
    /// Client-side latency of each good `/filter` answer, then of each good `/prioritize`.
    pub filter: Vec<Duration>,
    pub prioritize: Vec<Duration>,
    /// Requests with no answer, or one that was not 200 with a well-formed body.
    pub failures: usize,
    /// The first few of them.
    pub first_failures: Vec<String>,
}

impl Samples {
    fn fail(&mut self, what: String) {
        self.failures += 1;
        if self.first_failures.len() < KEPT_FAILURES {
            self.first_failures.push(what);
        }
    }

    /// Every request of the phase answered well, and at least one pair sent.
    pub fn check(&self, phase: &str) -> anyhow::Result<()> {
        ensure!(
            self.failures == 0,
            "{phase} probe: {} bad answers, first: {:?}",
            self.failures,
            self.first_failures
        );
        ensure!(
            !self.prioritize.is_empty(),
            "{phase} probe: no pair completed"
        );
        Ok(())
    }

    /// One `/filter` and, if its answer is good, the `/prioritize` that follows it.
    fn pair(&mut self, conn: &mut Connection, request: &Request) {
        let kept = conn
            .post("/filter", &request.filter_body)
            .and_then(|(took, status, answer)| Ok((took, request.kept(status, &answer)?)));
        let kept = match kept {
            Ok((took, kept)) => {
                self.filter.push(took);
                kept
            }
            Err(e) => return self.fail(format!("/filter: {e:#}")),
        };
        let scored = body(&request.pod, &kept)
            .and_then(|b| conn.post("/prioritize", &b))
            .and_then(|(took, status, answer)| {
                Request::check_scores(status, &answer, &kept)?;
                Ok(took)
            });
        match scored {
            Ok(took) => self.prioritize.push(took),
            Err(e) => self.fail(format!("/prioritize: {e:#}")),
        }
    }
}

/// A probe running on its own thread.
pub struct Probe {
    stop: mpsc::Sender<()>,
    thread: thread::JoinHandle<Samples>,
}

impl Probe {
    /// Probes placer on `port` until stopped or for `limit` at most.
    pub fn start(port: u16, request: Arc<Request>, limit: Duration) -> Self {
        let (stop, stopped) = mpsc::channel();
        let thread = thread::spawn(move || run(port, &request, limit, &stopped));
        Self { stop, thread }
    }

    /// Waits until the probe reaches its limit.
    pub async fn finish(self) -> anyhow::Result<Samples> {
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join())
            .await?
            .map_err(|_| anyhow::anyhow!("the probe thread panicked"))
    }

    /// Stops the probe after the pair in flight.
    pub async fn stop(self) -> anyhow::Result<Samples> {
        // An error means the probe already reached its limit.
        let _ = self.stop.send(());
        Self::finish(self).await
    }
}

fn run(port: u16, request: &Request, limit: Duration, stopped: &mpsc::Receiver<()>) -> Samples {
    let start = Instant::now();
    let mut samples = Samples::default();
    let mut conn = Connection { port, stream: None };
    let mut next = start;
    // Bounded by `limit`, so by limit / PERIOD pairs.
    while start.elapsed() < limit {
        samples.pair(&mut conn, request);
        next += PERIOD;
        let now = Instant::now();
        next = next.max(now);
        match stopped.recv_timeout(next - now) {
            Err(RecvTimeoutError::Timeout) => {}
            // Stopped, or the test gave up on the probe.
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    samples
}

/// One keep-alive HTTP/1.1 connection to placer, re-opened after an error.
struct Connection {
    port: u16,
    stream: Option<BufReader<TcpStream>>,
}

impl Connection {
    /// `POST path` with a JSON body: time to the whole answer, status, body.
    fn post(&mut self, path: &str, body: &[u8]) -> anyhow::Result<(Duration, u16, Vec<u8>)> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(("127.0.0.1", self.port))?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
            stream.set_write_timeout(Some(ANSWER_TIMEOUT))?;
            self.stream = Some(BufReader::new(stream));
        }
        let result = self.exchange(path, body);
        if !matches!(result, Ok((_, _, _, true))) {
            // After an error, or when placer closes: a fresh connection next time.
            self.stream = None;
        }
        result.map(|(took, status, answer, _)| (took, status, answer))
    }

    /// One request and its answer; the last field: whether the connection stays open.
    fn exchange(
        &mut self,
        path: &str,
        body: &[u8],
    ) -> anyhow::Result<(Duration, u16, Vec<u8>, bool)> {
        let stream = self.stream.as_mut().context("not connected")?;
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            self.port,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        let sent = Instant::now();
        stream.get_mut().write_all(&request)?;
        let mut line = String::new();
        stream.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let (mut length, mut keep_alive) = (None, true);
        loop {
            line.clear();
            stream.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else {
                bail!("bad header {header:?}");
            };
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = Some(value.parse::<usize>()?),
                "connection" => keep_alive &= !value.eq_ignore_ascii_case("close"),
                "transfer-encoding" => bail!("transfer-encoding {value}: placer sends lengths"),
                _ => {}
            }
        }
        let mut answer = vec![0; length.context("no content-length")?];
        stream.read_exact(&mut answer)?;
        Ok((sent.elapsed(), status, answer, keep_alive))
    }
}

/// `p50 / p90 / p99 / max` of `samples` in ms (nearest rank), or `–` when empty.
pub fn quantiles(samples: &[Duration]) -> String {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let Some(&max) = ms.last() else {
        return "–".into();
    };
    let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
    format!(
        "{:.2} / {:.2} / {:.2} / {max:.2}",
        at(0.5),
        at(0.9),
        at(0.99)
    )
}
