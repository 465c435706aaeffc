//! Cluster events meet the unschedulable pool: a waiting pod moves only when
//! an event arrives that one of the plugins which rejected it says may help
//! (kube-scheduler's `MoveAllToActiveOrBackoffQueue` with queueing hints),
//! and events seen while a pod was being scheduled are checked when it comes
//! back unschedulable (kube-scheduler's in-flight events), so a change that
//! landed during its attempt is not lost for five minutes.

use std::collections::VecDeque;
use std::sync::Arc;

use super::SchedulingQueue;
use crate::cache::events::Observed;
use crate::objects::PodInfo;

/// Events kept for pods in flight; past it the oldest go, and a pod popped
/// before them counts as having seen a change that may help.
const MAX_HISTORY: usize = 4096;

/// Whether an event may make a pod schedulable, given the plugins that
/// rejected it: its profile's queueing hints.
pub type Worth<'a> = dyn Fn(&PodInfo, &[&'static str], &Observed) -> bool + 'a;

/// Events seen while pods were in flight, numbered.
#[derive(Default)]
pub(super) struct History {
    /// The number the next event gets.
    next: u64,
    events: VecDeque<(u64, Arc<Observed>)>,
    /// Events numbered below this were dropped while a pod in flight might
    /// still have needed them.
    lost_before: u64,
}

impl History {
    /// The number of the next event: a pod popped now has seen every
    /// event numbered below it.
    pub(super) fn now(&self) -> u64 {
        self.next
    }

    /// Keeps `event` for the pods in flight.
    fn record(&mut self, event: Arc<Observed>) {
        if self.events.len() == MAX_HISTORY
            && let Some((seq, _)) = self.events.pop_front()
        {
            self.lost_before = seq + 1;
        }
        self.events.push_back((self.next, event));
        self.next += 1;
    }

    /// True when an event numbered `since` or later passes `may_help`, or
    /// when some of them were lost.
    pub(super) fn any_since(&self, since: u64, may_help: impl Fn(&Observed) -> bool) -> bool {
        since < self.lost_before
            || self
                .events
                .iter()
                .filter(|(seq, _)| *seq >= since)
                .any(|(_, ev)| may_help(ev))
    }

    /// Drops the events no pod in flight (popped at `sinces`) can need.
    pub(super) fn prune(&mut self, sinces: impl Iterator<Item = u64>) {
        let oldest = sinces.min().unwrap_or(self.next);
        while self.events.front().is_some_and(|(seq, _)| *seq < oldest) {
            self.events.pop_front();
        }
    }
}

impl SchedulingQueue {
    /// Applies cluster events, oldest first: each moves the unschedulable
    /// pods it may help (per `worth`) to backoff, or to active if their
    /// backoff is over, and is kept for the pods in flight.
    pub fn on_events(&self, events: Vec<Observed>, worth: &Worth<'_>) {
        if events.is_empty() {
            return;
        }
        let mut inner = self.inner.lock();
        for event in events {
            let event = Arc::new(event);
            if !inner.in_flight.is_empty() {
                inner.history.record(event.clone());
            }
            self.move_picked(&mut inner, |e| worth(&e.info.pod, &e.rejectors, &event));
            self.reopen_gates(&mut inner, |e| worth(&e.info.pod, &e.rejectors, &event));
        }
    }

    /// Asks PreEnqueue again for the gated pods `pick` chooses (those whose
    /// gating plugin registered the event, e.g. DynamicResources for the
    /// pod's claim being created) and queues the ones it now admits, as
    /// kube-scheduler moves gated pods on their PreEnqueue plugins' events.
    fn reopen_gates(&self, inner: &mut super::Inner, pick: impl Fn(&super::Entry) -> bool) {
        let keys: Vec<String> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.place == super::Place::Gated && !e.rejectors.is_empty() && pick(e))
            .map(|(k, _)| k.clone())
            .collect();
        let now = tokio::time::Instant::now();
        for key in keys {
            let Some(e) = inner.entries.get(&key) else {
                continue;
            };
            if (self.pre_enqueue)(&e.info.pod).is_success()
                && let Some(e) = inner.entries.remove(&key)
            {
                self.place(inner, key, e.info, super::Place::Active, now);
            }
        }
    }
}
