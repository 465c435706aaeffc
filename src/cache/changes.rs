//! Which nodes changed since someone last looked: the feed behind the
//! extender's parked-pod re-checks (`modes::extender::retry`).
//!
//! The watch loops report, while they still hold the cache's write lock, each
//! node whose record changed and each node whose counted pods changed. A
//! reader takes the accumulated set in one step. Reports are coalesced (a
//! node reported ten times between two looks is one entry) and bounded: past
//! [`MAX_PENDING_NODES`] distinct nodes the feed only remembers "everything
//! changed", which costs the reader a full re-check instead of memory here.
//!
//! Nothing is recorded until a reader [`enable`](ChangeFeed::enable)s the
//! feed, so snapshot mode and standalone mode pay one atomic load per event.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Distinct changed nodes kept before the feed collapses to "everything".
pub const MAX_PENDING_NODES: usize = 4096;

/// What changed since the last [`ChangeFeed::take`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Nodes whose record or whose counted pods changed.
    pub nodes: HashSet<String>,
    /// Anything may have changed (a relist, a policy reload, an overflow).
    pub everything: bool,
}

impl Changes {
    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        !self.everything && self.nodes.is_empty()
    }
}

/// The accumulated changes plus a sequence number readers compare against.
#[derive(Debug, Default)]
pub struct ChangeFeed {
    enabled: AtomicBool,
    /// Bumped on every report; a reader that saw `n` under the cache's read
    /// lock knows a later report happened when it finds a larger value.
    seq: AtomicU64,
    pending: Mutex<Changes>,
    notify: Notify,
}

impl ChangeFeed {
    /// Starts recording (the reader exists from now on).
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    /// Whether a reader exists.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// The number of reports so far.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Reports that node `name` (its record or its pods) changed.
    pub fn node(&self, name: &str) {
        if !self.is_enabled() {
            return;
        }
        {
            let mut p = self.pending.lock();
            if !p.everything && !p.nodes.contains(name) {
                if p.nodes.len() >= MAX_PENDING_NODES {
                    p.nodes.clear();
                    p.everything = true;
                } else {
                    p.nodes.insert(name.to_owned());
                }
            }
        }
        self.bump();
    }

    /// Reports that anything may have changed.
    pub fn everything(&self) {
        if !self.is_enabled() {
            return;
        }
        {
            let mut p = self.pending.lock();
            p.nodes.clear();
            p.everything = true;
        }
        self.bump();
    }

    /// Wakes the reader without reporting a change (it has other work: a
    /// pod parked while a change was being applied).
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    fn bump(&self) {
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_one();
    }

    /// Takes everything reported so far.
    pub fn take(&self) -> Changes {
        std::mem::take(&mut *self.pending.lock())
    }

    /// Waits until something is reported (returns at once if a report came
    /// since the last wait).
    pub async fn changed(&self) {
        self.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_nothing_until_enabled() {
        let feed = ChangeFeed::default();
        feed.node("a");
        feed.everything();
        assert!(feed.take().is_empty());
        assert_eq!(feed.seq(), 0);
    }

    #[test]
    fn coalesces_and_overflows_into_everything() {
        let feed = ChangeFeed::default();
        feed.enable();
        feed.node("a");
        feed.node("a");
        feed.node("b");
        let c = feed.take();
        assert_eq!(c.nodes.len(), 2);
        assert!(!c.everything);
        assert_eq!(feed.seq(), 3, "every report counts, even coalesced ones");
        assert!(feed.take().is_empty(), "take empties the feed");
        for i in 0..=MAX_PENDING_NODES {
            feed.node(&format!("n{i}"));
        }
        let c = feed.take();
        assert!(c.everything && c.nodes.is_empty());
    }
}
