//! Per-kind health of the watches: connected or not, and when the last event
//! or bookmark arrived. `/metrics` and `/readyz` read it; the watch loop
//! writes it and logs each disconnect and each reconnect once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{info, warn};

/// One watched kind.
#[derive(Debug)]
pub struct WatchHealth {
    kind: &'static str,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    connected: bool,
    /// Last event, bookmark or successful list (start time before any).
    last_seen: Instant,
    /// When the current outage began.
    down_since: Option<Instant>,
}

impl WatchHealth {
    fn new(kind: &'static str) -> Self {
        WatchHealth {
            kind,
            state: Mutex::new(State {
                connected: false,
                last_seen: Instant::now(),
                down_since: None,
            }),
        }
    }

    /// The kind, e.g. `node`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The API server answered: a list, a watch opened, an event, a bookmark.
    /// Logs the end of an outage once.
    pub fn seen(&self) {
        let mut s = self.state.lock();
        s.last_seen = Instant::now();
        s.connected = true;
        if let Some(since) = s.down_since.take() {
            info!(kind = self.kind, outage = ?since.elapsed(), "watch reconnected");
        }
    }

    /// A list or watch failed; the next try comes after `retry_in`. Logs the
    /// start of an outage once; the retries of the same outage log at debug
    /// level.
    pub fn failed(&self, error: &dyn std::fmt::Display, retry_in: Duration) {
        let mut s = self.state.lock();
        s.connected = false;
        if s.down_since.is_none() {
            s.down_since = Some(Instant::now());
            warn!(kind = self.kind, %error, ?retry_in, "watch disconnected; retrying with backoff (0.8 s doubling to 30 s, jittered)");
        } else {
            tracing::debug!(kind = self.kind, %error, ?retry_in, "watch still disconnected");
        }
    }

    /// Whether the last contact with the API server succeeded.
    pub fn is_connected(&self) -> bool {
        self.state.lock().connected
    }

    /// Time since the last event, bookmark or list.
    pub fn since_last_seen(&self) -> Duration {
        self.state.lock().last_seen.elapsed()
    }

    /// How long the current outage has lasted (`None` while connected).
    pub fn down_for(&self) -> Option<Duration> {
        self.state.lock().down_since.map(|t| t.elapsed())
    }
}

/// The health of every watched kind, by kind.
#[derive(Debug, Default)]
pub struct WatchHealthSet {
    kinds: Mutex<BTreeMap<&'static str, Arc<WatchHealth>>>,
}

impl WatchHealthSet {
    /// The entry for `kind`, created on first use.
    pub fn kind(&self, kind: &'static str) -> Arc<WatchHealth> {
        self.kinds
            .lock()
            .entry(kind)
            .or_insert_with(|| Arc::new(WatchHealth::new(kind)))
            .clone()
    }

    /// Every kind watched so far, by name.
    pub fn all(&self) -> Vec<Arc<WatchHealth>> {
        self.kinds.lock().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_outages() {
        let set = WatchHealthSet::default();
        let h = set.kind("node");
        assert!(!h.is_connected(), "not connected before the first list");
        h.seen();
        assert!(h.is_connected() && h.down_for().is_none());
        h.failed(&"connection refused", Duration::from_secs(1));
        h.failed(&"connection refused", Duration::from_secs(2));
        assert!(!h.is_connected());
        assert!(h.down_for().is_some());
        h.seen();
        assert!(h.is_connected() && h.down_for().is_none());
        assert_eq!(set.all().len(), 1, "one entry per kind");
        assert!(Arc::ptr_eq(&set.kind("node"), &h));
    }
}
