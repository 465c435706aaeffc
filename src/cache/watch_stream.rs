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

/// What the loop hands to its consumer.
pub enum Step<K> {
    /// A full list: replaces every object of the kind.
    Listed(Vec<K>),
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
    let mut list = ListParams::default().limit(PAGE_SIZE);
    let mut watch = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    if let Some(f) = fields.as_deref() {
        list = list.fields(f);
        watch = watch.fields(f);
    }
    let on = |step| out.send((Instant::now(), step));
    let mut backoff = Backoff::default();
    loop {
        let (items, mut version) = match list_all(&api, &list).await {
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

/// Every page of a list, and the list's resource version.
async fn list_all<K>(api: &Api<K>, params: &ListParams) -> kube::Result<(Vec<K>, String)>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = params.clone();
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => return Ok((items, page.metadata.resource_version.unwrap_or_default())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
