//! List, then watch, forever: the loop under every cache watch.
//!
//! kube-rs' `watcher` retries with client-go's backoff (0.8 s doubling to
//! 30 s) and hides bookmarks. After an API server restart that made placer's
//! cache see new objects only 11–13 s after the server was ready: several
//! doubled waits while it was down, then a watch from the old resource
//! version, a 410, another wait and a relist. This loop instead:
//!
//! - retries after [`Backoff`]'s short, jittered, capped delays (100 ms
//!   doubling to 1.6 s), so a returning API server is seen within ~2 s;
//! - relists at once, without waiting, when the watch answers 410 Gone;
//! - reports every list, event and bookmark to [`WatchHealth`] (connected,
//!   time since the last sign of life), which logs each disconnect and
//!   reconnect once; the consumer logs each (re)list once.

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

/// First retry delay after a failure.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// Longest retry delay: a returning API server is noticed within it.
const MAX_RETRY: Duration = Duration::from_millis(1600);
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

/// Exponential backoff with jitter: each delay is drawn from the upper half
/// of the current step (so replicas do not retry in lockstep), doubling from
/// [`FIRST_RETRY`] up to [`MAX_RETRY`].
#[derive(Debug)]
pub struct Backoff {
    step: Duration,
    seed: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            step: FIRST_RETRY,
            seed: foldhash::fast::RandomState::default()
                .build_hasher()
                .finish(),
        }
    }
}

impl Backoff {
    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        // xorshift: no random crate needed for jitter.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let fraction = 0.5 + (self.seed % 1000) as f64 / 2000.0;
        let delay = self.step.mul_f64(fraction);
        self.step = (self.step * 2).min(MAX_RETRY);
        delay
    }

    /// Back to the first delay (after a success).
    pub fn reset(&mut self) {
        self.step = FIRST_RETRY;
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
                health.failed(&e);
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        health.seen();
        backoff.reset();
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
                    log_expired(&health);
                    break;
                }
                Err(e) => {
                    health.failed(&e);
                    tokio::time::sleep(backoff.next_delay()).await;
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
                backoff.reset();
                if on(step).await.is_err() {
                    return;
                }
            }
            match outcome {
                Outcome::Gone => {
                    info!(
                        kind = health.kind(),
                        "watch version expired (410); relisting"
                    );
                    break;
                }
                Outcome::Failed(e) => {
                    health.failed(&e);
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Outcome::Ended if events == 0 && opened.elapsed() < MIN_HEALTHY_WATCH => {
                    health.failed(&"watch closed by the server without any event");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                // A server-side timeout: open the next watch at once.
                Outcome::Ended => {}
            }
        }
    }
}

/// The one log line of a relist forced by an expired resource version.
fn log_expired(health: &WatchHealth) {
    info!(
        kind = health.kind(),
        "watch version expired (410); relisting"
    );
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

    #[test]
    fn backoff_is_short_jittered_and_capped() {
        let mut b = Backoff::default();
        let delays: Vec<Duration> = (0..8).map(|_| b.next_delay()).collect();
        assert!(delays[0] >= FIRST_RETRY / 2 && delays[0] <= FIRST_RETRY);
        assert!(delays.iter().all(|d| *d <= MAX_RETRY), "{delays:?}");
        assert!(delays[7] >= MAX_RETRY / 2, "{delays:?}");
        b.reset();
        assert!(b.next_delay() <= FIRST_RETRY);
    }
}
