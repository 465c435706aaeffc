//! List, then watch, forever: the loop under every cache watch.
//!
//! Failures are retried after client-go's reflector backoff
//! (`tools/cache/reflector.go`, [`Backoff`]): 0.8 s doubling to 30 s, each
//! wait its step plus up to as much again at random, back to 0.8 s after two
//! minutes without a retry. A thousand replicas' watches therefore settle at
//! one attempt per 30–60 s each while an API server struggles, instead of
//! one every ~1.6 s.
//!
//! The price is recovery time. This loop used to retry after 100 ms doubling
//! to 1.6 s and relist at once after a 410, so a restarted API server was
//! seen within ~2 s (docs/freshness.md has those measurements). Now a server
//! back after an outage is seen at the end of the wait in progress, which is
//! at most about twice the outage (the steps double) and never more than
//! 60 s; a watch whose resource version expired meanwhile (410 Gone) relists
//! only after the next wait, as client-go's reflector does. Recovery is
//! bounded by the backoff, not by how fast the server returns.
//!
//! What this loop still does beyond kube-rs' `watcher`:
//!
//! - reports every list, event and bookmark to [`WatchHealth`] (connected,
//!   time since the last sign of life), which logs each disconnect and
//!   reconnect once; the consumer logs each (re)list once;
//! - converts listed objects page by page ([`run_converting`]);
//! - reopens a watch the server closed after its timeout at once, from the
//!   same resource version.

use std::fmt::Debug;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::info;

use crate::cache::watch_health::WatchHealth;

/// First retry step after a failure (client-go's `defaultBackoffInit`).
pub const FIRST_RETRY: Duration = Duration::from_millis(800);
/// Largest retry step (client-go's `defaultBackoffMax`); with the jitter a
/// wait is at most twice this.
pub const MAX_RETRY: Duration = Duration::from_secs(30);
/// After this long without a retry the API server is taken as healthy and
/// the next failure waits [`FIRST_RETRY`] again (`defaultBackoffReset`).
pub const HEALTHY_RESET: Duration = Duration::from_secs(120);
/// Server-side watch timeout; the API server closes the watch after it and
/// the loop opens the next one from the same resource version.
const WATCH_TIMEOUT_SECS: u32 = 290;
/// A watch that ends sooner than this without any event is treated as a
/// failure, so a server that accepts and drops watches is not hammered.
const MIN_HEALTHY_WATCH: Duration = Duration::from_secs(1);
/// Objects per list page.
const PAGE_SIZE: u32 = 500;

/// What the loop hands to its consumer: listed objects already converted
/// to `L` (see [`run_converting`]), watched ones as they came.
pub enum Step<K, L = K> {
    /// A full list: replaces every object of the kind.
    Listed(Vec<L>),
    /// An object added or changed.
    Applied(K),
    /// An object deleted.
    Deleted(K),
}

/// client-go's reflector backoff (`wait.Backoff` with factor 2 and jitter
/// 1.0, behind `DelayWithReset`): each wait is the current step plus a
/// random part of up to one step, so replicas do not retry in lockstep; the
/// step doubles from [`FIRST_RETRY`] up to [`MAX_RETRY`]. It starts over
/// once [`HEALTHY_RESET`] has passed since the end of the last wait
/// (client-go counts from its start; from the end, the two minutes are all
/// healthy ones). A success alone does not reset it, so a server that
/// answers one list and fails the next watch is not retried faster.
///
/// Time is tokio's, so tests can run it on a paused clock.
#[derive(Debug)]
pub struct Backoff {
    /// The step of the next wait.
    step: Duration,
    /// When the last wait ended (or ends).
    last_wait_end: Option<tokio::time::Instant>,
    /// xorshift state for the jitter: no random crate needed for it.
    seed: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        let seed = foldhash::fast::RandomState::default()
            .build_hasher()
            .finish();
        Backoff {
            step: FIRST_RETRY,
            last_wait_end: None,
            // xorshift never leaves 0.
            seed: seed | 1,
        }
    }
}

impl Backoff {
    /// The next wait: the current step, jittered, after which the step
    /// doubles (up to [`MAX_RETRY`]).
    pub fn next_delay(&mut self) -> Duration {
        let now = tokio::time::Instant::now();
        if self
            .last_wait_end
            .is_some_and(|end| now.saturating_duration_since(end) >= HEALTHY_RESET)
        {
            self.step = FIRST_RETRY;
        }
        let delay = self.step + self.step.mul_f64(self.random_fraction());
        self.step = (self.step * 2).min(MAX_RETRY);
        self.last_wait_end = Some(now + delay);
        delay
    }

    /// A number in [0, 1).
    fn random_fraction(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        // The top 53 bits: every f64 in [0, 1) of that precision.
        (self.seed >> 11) as f64 / (1_u64 << 53) as f64
    }

    /// Records `error` in `health` (which logs once per outage) and returns
    /// the wait before the next try.
    fn after_failure(&mut self, health: &WatchHealth, error: &dyn std::fmt::Display) -> Duration {
        let delay = self.next_delay();
        health.failed(error, delay);
        delay
    }
}

/// Lists and watches `api` (restricted by `fields`, a field selector),
/// sending every step with its arrival time to `out`, until `out` closes.
pub async fn run<K>(
    api: Api<K>,
    fields: Option<String>,
    health: Arc<WatchHealth>,
    out: mpsc::Sender<(Instant, Step<K>)>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    run_converting(api, fields, health, out, |k| k).await;
}

/// [`run`], with every listed object converted by `convert` as its page
/// arrives: a (re)list then holds at most one page of full objects beside
/// the converted records, instead of the whole cluster as API objects.
pub async fn run_converting<K, L, F>(
    api: Api<K>,
    fields: Option<String>,
    health: Arc<WatchHealth>,
    out: mpsc::Sender<(Instant, Step<K, L>)>,
    convert: F,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    L: Send + 'static,
    F: Fn(K) -> L + Send + 'static,
{
    let mut list = ListParams::default().limit(PAGE_SIZE);
    let mut watch = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    if let Some(f) = fields.as_deref() {
        list = list.fields(f);
        watch = watch.fields(f);
    }
    let on = |step| out.send((Instant::now(), step));
    let mut backoff = Backoff::default();
    loop {
        let (items, mut version) = match list_all(&api, &list, &convert).await {
            Ok(page) => page,
            Err(e) => {
                tokio::time::sleep(backoff.after_failure(&health, &e)).await;
                continue;
            }
        };
        health.seen();
        if on(Step::Listed(items)).await.is_err() {
            return;
        }
        // Watch from the list's version until the server says it is too old.
        loop {
            let opened = Instant::now();
            let stream = match api.watch(&watch, &version).await {
                // The server answered: connected, even if no event follows for a while.
                Ok(s) => {
                    health.seen();
                    s
                }
                Err(kube::Error::Api(e)) if e.code == 410 => {
                    relist_after_expiry(&health, &mut backoff).await;
                    break;
                }
                Err(e) => {
                    tokio::time::sleep(backoff.after_failure(&health, &e)).await;
                    continue;
                }
            };
            futures::pin_mut!(stream);
            let mut events = 0_u64;
            let mut outcome = Outcome::Ended;
            while let Some(item) = stream.next().await {
                let step = match item {
                    Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                        version = o.resource_version().unwrap_or_else(|| version.clone());
                        Step::Applied(o)
                    }
                    Ok(WatchEvent::Deleted(o)) => {
                        version = o.resource_version().unwrap_or_else(|| version.clone());
                        Step::Deleted(o)
                    }
                    Ok(WatchEvent::Bookmark(b)) => {
                        version = b.metadata.resource_version;
                        health.seen();
                        continue;
                    }
                    Ok(WatchEvent::Error(e)) if e.code == 410 => {
                        outcome = Outcome::Gone;
                        break;
                    }
                    Ok(WatchEvent::Error(e)) => {
                        outcome = Outcome::Failed(format!("{} ({})", e.message, e.code));
                        break;
                    }
                    Err(e) => {
                        outcome = Outcome::Failed(e.to_string());
                        break;
                    }
                };
                events += 1;
                health.seen();
                if on(step).await.is_err() {
                    return;
                }
            }
            match outcome {
                Outcome::Gone => {
                    relist_after_expiry(&health, &mut backoff).await;
                    break;
                }
                Outcome::Failed(e) => {
                    tokio::time::sleep(backoff.after_failure(&health, &e)).await;
                }
                Outcome::Ended if events == 0 && opened.elapsed() < MIN_HEALTHY_WATCH => {
                    let e = "watch closed by the server without any event";
                    tokio::time::sleep(backoff.after_failure(&health, &e)).await;
                }
                // A server-side timeout: open the next watch at once.
                Outcome::Ended => {}
            }
        }
    }
}

/// A watch's resource version expired (410 Gone): logs it once and waits
/// for the backoff before the relist, as client-go's reflector does, so that
/// every watch of every replica relisting after a restart or a compaction
/// does not list the whole kind from the API server at the same moment.
async fn relist_after_expiry(health: &WatchHealth, backoff: &mut Backoff) {
    let delay = backoff.next_delay();
    info!(
        kind = health.kind(),
        relist_in = ?delay,
        "watch version expired (410); relisting"
    );
    tokio::time::sleep(delay).await;
}

/// How one watch connection ended.
enum Outcome {
    /// The server closed it (timeout, restart).
    Ended,
    /// 410 Gone: the resource version is too old; relist.
    Gone,
    /// An error event or a transport error.
    Failed(String),
}

/// Every page of a list, each converted and dropped as it arrives, and the
/// list's resource version.
async fn list_all<K, L>(
    api: &Api<K>,
    params: &ListParams,
    convert: &impl Fn(K) -> L,
) -> kube::Result<(Vec<L>, String)>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = params.clone();
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items.into_iter().map(convert));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => return Ok((items, page.metadata.resource_version.unwrap_or_default())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;

    use super::*;
    use crate::testing::stand_in_api;

    /// A list of two pages, recording in `log` each page request as it
    /// comes; a narrow stand-in for the API server's paging.
    fn paged_api(log: Arc<Mutex<Vec<String>>>) -> Api<ConfigMap> {
        let client = stand_in_api(move |req: http::Request<Body>| {
            let log = log.clone();
            async move {
                let second = req
                    .uri()
                    .query()
                    .unwrap_or_default()
                    .contains("continue=next");
                if let Ok(mut log) = log.lock() {
                    log.push(if second { "page 2" } else { "page 1" }.to_owned());
                }
                let body = if second {
                    r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},
                        "items":[{"metadata":{"name":"c"}}]}"#
                } else {
                    r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"continue":"next"},
                        "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#
                };
                (200, body)
            }
        });
        Api::all(client)
    }

    #[tokio::test]
    async fn each_listed_page_is_converted_before_the_next_is_fetched() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let api = paged_api(log.clone());
        let convert = |c: ConfigMap| {
            let name = c.metadata.name.unwrap_or_default();
            if let Ok(mut log) = log.lock() {
                log.push(format!("converted {name}"));
            }
            name
        };
        let (names, version) = list_all(&api, &ListParams::default().limit(2), &convert)
            .await
            .unwrap();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(version, "7");
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            [
                "page 1",
                "converted a",
                "converted b",
                "page 2",
                "converted c"
            ],
            "a page's objects must be converted (and dropped) before the next page"
        );
    }

    /// client-go's steps: 0.8 s doubling, capped at 30 s.
    fn steps() -> impl Iterator<Item = Duration> {
        (0..).map(|i: u32| FIRST_RETRY.saturating_mul(1 << i.min(16)).min(MAX_RETRY))
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_grows_to_30_s_with_each_wait_jittered_within_its_step() {
        let mut b = Backoff::default();
        let mut fractions = Vec::new();
        for (i, step) in steps().take(40).enumerate() {
            let d = b.next_delay();
            assert!(
                d >= step && d < step * 2,
                "wait {i}: {d:?} not in [{step:?}, {:?})",
                step * 2
            );
            fractions.push((d - step).as_secs_f64() / step.as_secs_f64());
            // Every retry fails again at once: no healthy period.
            tokio::time::advance(d).await;
        }
        let first: Vec<Duration> = steps().take(8).collect();
        let secs = Duration::from_secs_f64;
        assert_eq!(
            first,
            [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0].map(secs),
            "client-go's sequence"
        );
        let spread = fractions.iter().copied().fold(f64::NAN, f64::max)
            - fractions.iter().copied().fold(f64::NAN, f64::min);
        assert!(spread > 0.3, "the jitter does not vary: {fractions:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_starts_over_after_two_healthy_minutes_and_not_sooner() {
        let mut b = Backoff::default();
        for _ in 0..5 {
            let d = b.next_delay();
            tokio::time::advance(d).await;
        }
        // Healthy for a little less than the reset period: the step keeps growing.
        tokio::time::advance(HEALTHY_RESET - Duration::from_secs(1)).await;
        let d = b.next_delay();
        let sixth = steps().nth(5).unwrap();
        assert!(d >= sixth, "{d:?} < {sixth:?}: reset too early");
        // Healthy for the whole period after that wait: back to the first step.
        tokio::time::advance(d + HEALTHY_RESET).await;
        let d = b.next_delay();
        assert!(d >= FIRST_RETRY && d < FIRST_RETRY * 2, "{d:?}: not reset");
    }

    /// A 410 Gone `Status`, as the API server words it.
    const EXPIRED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"too old resource version: 7 (9)","reason":"Expired","code":410}"#;

    /// An API server whose lists succeed and whose watches have always expired: the first answers
    /// with a 410 `ERROR` event on an open watch, the later ones with a 410 answer to the watch
    /// request itself. Records each request (`list` or `watch`) with tokio's time.
    fn expiring_api(log: Arc<Mutex<Vec<(tokio::time::Instant, &'static str)>>>) -> Api<ConfigMap> {
        let client = stand_in_api(move |req: http::Request<Body>| {
            let log = log.clone();
            async move {
                let watch = req.uri().query().unwrap_or_default().contains("watch=true");
                let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                let watches_before = log.iter().filter(|(_, r)| *r == "watch").count();
                log.push((
                    tokio::time::Instant::now(),
                    if watch { "watch" } else { "list" },
                ));
                match (watch, watches_before) {
                    (false, _) => (
                        200,
                        r#"{"kind":"ConfigMapList","apiVersion":"v1",
                            "metadata":{"resourceVersion":"7"},"items":[]}"#,
                    ),
                    (true, 0) => (
                        200,
                        concat!(
                            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","#,
                            r#""metadata":{},"status":"Failure","message":"too old resource "#,
                            r#"version: 7 (9)","reason":"Expired","code":410}}"#,
                            "\n"
                        ),
                    ),
                    (true, _) => (410, EXPIRED),
                }
            }
        });
        Api::all(client)
    }

    #[tokio::test(start_paused = true)]
    async fn a_relist_after_410_waits_for_the_backoff() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let health = crate::cache::watch_health::WatchHealthSet::default().kind("configmap");
        let (tx, mut rx) = mpsc::channel(1);
        let task = tokio::spawn(run(expiring_api(log.clone()), None, health, tx));
        for _ in 0..3 {
            let step = rx.recv().await.map(|(_, step)| step);
            assert!(matches!(step, Some(Step::Listed(_))), "expected a list");
        }
        task.abort();
        let log = log.lock().unwrap().clone();
        let requests: Vec<&str> = log.iter().map(|(_, r)| *r).take(5).collect();
        assert_eq!(requests, ["list", "watch", "list", "watch", "list"]);
        let gap = |i: usize| log[i + 1].0 - log[i].0;
        // The first expiry (an event on the open watch) waits the first step...
        assert!(
            gap(1) >= FIRST_RETRY && gap(1) < FIRST_RETRY * 2,
            "relist {:?} after the 410 event",
            gap(1)
        );
        // ...and the second (the watch request refused) the next one: the same backoff, which
        // a successful list in between did not reset.
        assert!(
            gap(3) >= FIRST_RETRY * 2 && gap(3) < FIRST_RETRY * 4,
            "relist {:?} after the 410 answer",
            gap(3)
        );
    }
}
