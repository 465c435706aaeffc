//! The scheduling queue of standalone mode, with kube-scheduler's three parts:
//!
//! - **active**: pods ready to be tried, ordered by the profile's QueueSort
//!   plugin (priority, then arrival);
//! - **backoff**: pods that failed recently, waiting 1 s doubling per attempt
//!   up to 10 s;
//! - **unschedulable**: pods no node could take; they move back when a
//!   cluster event arrives that one of the plugins which rejected them says
//!   may help (queueing hints, [`SchedulingQueue::on_events`] in `hints.rs`),
//!   when an update of the pod itself may help (the same hints, on
//!   kube-scheduler's TargetPod events), and at the latest after 5 minutes
//!   ([`SchedulingQueue::flush_unschedulable`]).
//!
//! When the active queue is empty, the pod whose backoff ends first is
//! popped early (kube-scheduler's SchedulerPopFromBackoffQ), unless it
//! backs off after an error.
//!
//! Pods rejected by a PreEnqueue plugin (scheduling gates) are held outside
//! all three until they change. Deleted or bound pods leave the queue.
//! A popped pod is *in flight* until it is requeued or done: updates seen
//! meanwhile are kept for its requeue instead of queueing it a second time,
//! a pod deleted meanwhile is not requeued, and cluster events seen meanwhile
//! are checked when it comes back unschedulable (one that may help sends it
//! to backoff instead).
//! Entries are keyed by `namespace/name`; heaps use lazy deletion (a
//! generation per key), so removal and update are O(log n).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::nominator::Nominator;
use crate::cache::events::target_pod_update;
use crate::framework::{QueueSort, QueuedPodInfo, Status};
use crate::objects::PodInfo;

mod hints;

pub use hints::Worth;

/// How a failed pod comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retry {
    /// No node fits: wait in the unschedulable pool for a cluster event that
    /// one of these plugins (those that rejected it) says may help.
    AfterEvent(Vec<&'static str>),
    /// Back off, then try again (a failure after the node was chosen, or a
    /// preemption whose victims are on their way out).
    Backoff,
    /// An error: back off, and never be popped early.
    Error,
}

/// Backoff and flush timings (kube-scheduler's defaults).
#[derive(Debug, Clone, Copy)]
pub struct QueueTimings {
    /// First backoff.
    pub initial_backoff: Duration,
    /// Backoff ceiling.
    pub max_backoff: Duration,
    /// Longest stay in the unschedulable pool without a retry.
    pub max_unschedulable: Duration,
}

impl Default for QueueTimings {
    fn default() -> Self {
        QueueTimings {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(300),
        }
    }
}

/// How many pods wait where (for metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLengths {
    /// Ready to be tried.
    pub active: usize,
    /// Waiting out a backoff.
    pub backoff: usize,
    /// Waiting for a cluster event.
    pub unschedulable: usize,
    /// Held by a PreEnqueue plugin (scheduling gates).
    pub gated: usize,
}

/// Decides whether a pod may be queued: the pod's profile's
/// [`crate::framework::Framework::pre_enqueue`].
pub type PreEnqueue = Arc<dyn Fn(&PodInfo) -> Status + Send + Sync>;

/// Where a queued pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active,
    Backoff,
    Unschedulable,
    Gated,
}

struct Entry {
    info: QueuedPodInfo,
    place: Place,
    generation: u64,
    /// When the current backoff ends.
    backoff_until: Instant,
    /// When the pod entered the unschedulable pool.
    unschedulable_since: Instant,
    /// The plugins that rejected it last (unschedulable pool).
    rejectors: Arc<[&'static str]>,
}

struct ActiveItem {
    info: QueuedPodInfo,
    key: String,
    generation: u64,
    sort: QueueSort,
}

impl PartialEq for ActiveItem {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ActiveItem {}
impl PartialOrd for ActiveItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ActiveItem {
    /// BinaryHeap pops the greatest: "greater" = should go first.
    fn cmp(&self, other: &Self) -> Ordering {
        if self.sort.less(&self.info, &other.info) {
            Ordering::Greater
        } else if self.sort.less(&other.info, &self.info) {
            Ordering::Less
        } else {
            Ordering::Equal
        }
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct BackoffItem {
    until: std::cmp::Reverse<Instant>,
    key: String,
    generation: u64,
}

struct Inner {
    entries: HashMap<String, Entry>,
    active: BinaryHeap<ActiveItem>,
    backoff: BinaryHeap<BackoffItem>,
    /// Pods backing off after an error: never popped early.
    error_backoff: BinaryHeap<BackoffItem>,
    next_generation: u64,
    /// Popped pods not yet requeued or done.
    in_flight: HashMap<String, InFlight>,
    /// Cluster events seen while pods were in flight (`hints.rs`).
    history: hints::History,
}

/// A popped pod.
struct InFlight {
    /// The latest update seen meanwhile.
    latest: Option<Arc<PodInfo>>,
    /// The event history's sequence number when it was popped.
    since: u64,
}

/// The queue; shared between the informer handlers and the scheduling loop.
pub struct SchedulingQueue {
    inner: Mutex<Inner>,
    ready: Notify,
    sort: QueueSort,
    pre_enqueue: PreEnqueue,
    timings: QueueTimings,
    nominator: Nominator,
}

fn key_of(pod: &PodInfo) -> String {
    pod.key()
}

impl SchedulingQueue {
    /// An empty queue ordered by `sort`, admitting pods through `pre_enqueue`.
    pub fn new(sort: QueueSort, pre_enqueue: PreEnqueue, timings: QueueTimings) -> Self {
        SchedulingQueue {
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                active: BinaryHeap::new(),
                backoff: BinaryHeap::new(),
                error_backoff: BinaryHeap::new(),
                next_generation: 0,
                in_flight: HashMap::new(),
                history: hints::History::default(),
            }),
            ready: Notify::new(),
            sort,
            pre_enqueue,
            timings,
            nominator: Nominator::default(),
        }
    }

    /// Pods waiting for the room their preemption made; they leave it when
    /// they leave the queue.
    pub fn nominator(&self) -> &Nominator {
        &self.nominator
    }

    /// The backoff after `attempts` failed attempts: 1 s, 2 s, 4 s, ... ≤ 10 s.
    pub fn backoff_for(&self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(16);
        self.timings
            .initial_backoff
            .saturating_mul(1 << exp)
            .min(self.timings.max_backoff)
    }

    /// A new or updated unscheduled pod. A pod waiting in backoff is retried
    /// at once when it changes. An unschedulable one is retried (to backoff,
    /// or active if its backoff is over) only when `worth`, the queueing
    /// hints of the plugins that rejected it, says the change may help
    /// (kube-scheduler's TargetPod events); otherwise it keeps waiting in
    /// its new version. An update that changes nothing scheduling reads
    /// (such as the `PodScheduled` condition placer itself just wrote)
    /// leaves it waiting. An update of a pod in flight is kept for its requeue.
    pub fn add_or_update(&self, pod: PodInfo, worth: &Worth<'_>) {
        let key = key_of(&pod);
        // A nomination written before this replica started (or led) still holds.
        if let Some(node) = &pod.preemption.nominated_node
            && self.nominator.node_of(&pod).is_none()
        {
            self.nominator.nominate(&pod, node);
        }
        let pod = Arc::new(pod);
        let verdict = (self.pre_enqueue)(&pod);
        let admitted = verdict.is_success();
        let mut inner = self.inner.lock();
        if let Some(flying) = inner.in_flight.get_mut(&key) {
            flying.latest = Some(pod);
            return;
        }
        if let Some(e) = inner.entries.get_mut(&key)
            && *e.info.pod == *pod
        {
            e.info.pod = pod;
            return;
        }
        let now = Instant::now();
        if admitted
            && let Some(e) = inner.entries.get_mut(&key)
            && e.place == Place::Unschedulable
        {
            let helps = target_pod_update(e.info.pod.clone(), pod.clone())
                .is_none_or(|event| worth(&pod, &e.rejectors, &event));
            e.info.pod = pod;
            if helps {
                self.release(&mut inner, key, now);
            }
            return;
        }
        let previous = inner.entries.get(&key).map(|e| (e.info.clone(), e.place));
        let was_active = previous.as_ref().map(|(_, p)| *p) == Some(Place::Active);
        let info = match previous {
            Some((old, _)) => QueuedPodInfo { pod, ..old },
            None => QueuedPodInfo {
                pod,
                timestamp: now.into_std(),
                attempts: 0,
            },
        };
        let (place, gate): (_, Arc<[&'static str]>) = if admitted {
            (Place::Active, Arc::new([]))
        } else {
            // The gate's plugin: its events (and hints) may open it.
            (Place::Gated, Arc::new([verdict.plugin()]))
        };
        if was_active && admitted {
            // Already queued: only refresh the pod object.
            if let Some(e) = inner.entries.get_mut(&key) {
                e.info.pod = info.pod;
            }
            return;
        }
        self.place_as(&mut inner, key, info, place, now, (gate, false));
    }

    /// Removes a pod (deleted, or bound by someone else); if it is in flight,
    /// its requeue will drop it.
    pub fn delete(&self, namespace: &str, name: &str) {
        let key = format!("{namespace}/{name}");
        self.nominator.remove(&key);
        let mut inner = self.inner.lock();
        inner.entries.remove(&key);
        inner.in_flight.remove(&key);
    }

    /// After a relist of unscheduled pods: drops every pod not in `present`
    /// (`namespace/name`), deleted or bound while the watch was down.
    /// Returns how many were dropped.
    pub fn retain_only(&self, present: &HashSet<String>) -> usize {
        let mut inner = self.inner.lock();
        let gone: Vec<String> = inner
            .entries
            .keys()
            .chain(inner.in_flight.keys())
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in &gone {
            inner.entries.remove(key);
            inner.in_flight.remove(key);
            self.nominator.remove(key);
        }
        gone.len()
    }

    /// Whether the pod was popped and is not yet requeued or done.
    pub fn is_in_flight(&self, pod: &PodInfo) -> bool {
        self.inner.lock().in_flight.contains_key(&key_of(pod))
    }

    /// The popped pod was bound (or dropped): it is no longer in flight.
    pub fn done(&self, pod: &PodInfo) {
        let key = key_of(pod);
        self.nominator.remove(&key);
        self.inner.lock().in_flight.remove(&key);
    }

    /// Returns a failed pod to the queue as `retry` says, in its latest
    /// version. A pod deleted while in flight is dropped; an unschedulable
    /// one goes to backoff instead of the pool when its own update or a
    /// cluster event seen while it was in flight may help it (`worth`, the
    /// queueing hints of its profile).
    pub fn requeue(&self, mut info: QueuedPodInfo, retry: Retry, worth: &Worth<'_>) {
        info.attempts += 1;
        let key = key_of(&info.pod);
        let mut inner = self.inner.lock();
        let Some(flying) = inner.in_flight.remove(&key) else {
            return;
        };
        let rejectors: Arc<[&'static str]> = match &retry {
            Retry::AfterEvent(plugins) => plugins.as_slice().into(),
            _ => Arc::new([]),
        };
        // The pod's own update while in flight: its rejectors' hints decide,
        // as for an update of a waiting pod.
        let mut updated_helps = false;
        if let Some(latest) = flying.latest {
            updated_helps = target_pod_update(info.pod.clone(), latest.clone())
                .is_some_and(|event| worth(&latest, &rejectors, &event));
            info.pod = latest;
        }
        let place = match retry {
            Retry::AfterEvent(_)
                if updated_helps
                    || inner
                        .history
                        .any_since(flying.since, |ev| worth(&info.pod, &rejectors, ev)) =>
            {
                Place::Backoff
            }
            Retry::AfterEvent(_) => Place::Unschedulable,
            Retry::Backoff | Retry::Error => Place::Backoff,
        };
        let after_error = matches!(retry, Retry::Error);
        let now = Instant::now();
        self.place_as(&mut inner, key, info, place, now, (rejectors, after_error));
        let inner = &mut *inner;
        inner
            .history
            .prune(inner.in_flight.values().map(|f| f.since));
    }

    /// Every unschedulable pod goes back to backoff, or to active if its
    /// backoff is already over, whatever rejected it.
    pub fn move_all(&self) {
        self.move_unschedulable(|_| true);
    }

    /// Retries pods that have been unschedulable for longer than the limit.
    pub fn flush_unschedulable(&self) {
        let limit = self.timings.max_unschedulable;
        let now = Instant::now();
        self.move_unschedulable(|e| now.duration_since(e.unschedulable_since) >= limit);
    }

    fn move_unschedulable(&self, pick: impl Fn(&Entry) -> bool) {
        let mut inner = self.inner.lock();
        Self::move_picked(self, &mut inner, pick);
    }

    /// Moves the unschedulable pods `pick` chooses to backoff or active.
    fn move_picked(&self, inner: &mut Inner, pick: impl Fn(&Entry) -> bool) {
        let now = Instant::now();
        let keys: Vec<String> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.place == Place::Unschedulable && pick(e))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.release(inner, key, now);
        }
    }

    /// Moves one unschedulable pod to active, or to backoff until its
    /// current backoff ends.
    fn release(&self, inner: &mut Inner, key: String, now: Instant) {
        let Some(e) = inner.entries.remove(&key) else {
            return;
        };
        let place = if e.backoff_until <= now {
            Place::Active
        } else {
            Place::Backoff
        };
        let until = e.backoff_until;
        self.place(inner, key.clone(), e.info, place, now);
        if let Some(e) = inner.entries.get_mut(&key) {
            e.backoff_until = until;
        }
        if place == Place::Backoff {
            let generation = inner.entries[&key].generation;
            inner.backoff.push(BackoffItem {
                until: std::cmp::Reverse(until),
                key,
                generation,
            });
        }
    }

    fn place(
        &self,
        inner: &mut Inner,
        key: String,
        info: QueuedPodInfo,
        place: Place,
        now: Instant,
    ) {
        self.place_as(inner, key, info, place, now, (Arc::new([]), false));
    }

    /// [`Self::place`], with the plugins that rejected the pod and whether it
    /// backs off after an error (its own heap: never popped early).
    fn place_as(
        &self,
        inner: &mut Inner,
        key: String,
        info: QueuedPodInfo,
        place: Place,
        now: Instant,
        (rejectors, after_error): (Arc<[&'static str]>, bool),
    ) {
        inner.next_generation += 1;
        let generation = inner.next_generation;
        let backoff_until = now + self.backoff_for(info.attempts);
        match place {
            Place::Active => {
                inner.active.push(ActiveItem {
                    info: info.clone(),
                    key: key.clone(),
                    generation,
                    sort: self.sort.clone(),
                });
                self.ready.notify_one();
            }
            Place::Backoff => {
                let heap = if after_error {
                    &mut inner.error_backoff
                } else {
                    &mut inner.backoff
                };
                heap.push(BackoffItem {
                    until: std::cmp::Reverse(backoff_until),
                    key: key.clone(),
                    generation,
                });
                // A waiting `pop` must learn of the new deadline.
                self.ready.notify_one();
            }
            Place::Unschedulable | Place::Gated => {}
        }
        inner.entries.insert(
            key,
            Entry {
                info,
                place,
                generation,
                backoff_until,
                unschedulable_since: now,
                rejectors,
            },
        );
    }

    /// Moves pods whose backoff ended to active; returns the next backoff end.
    fn promote_backoff(&self, inner: &mut Inner, now: Instant) -> Option<Instant> {
        let plain = self.promote_from(inner, now, false);
        let errors = self.promote_from(inner, now, true);
        plain.into_iter().chain(errors).min()
    }

    /// [`Self::promote_backoff`] for one of the two backoff heaps.
    fn promote_from(&self, inner: &mut Inner, now: Instant, errors: bool) -> Option<Instant> {
        loop {
            let Inner {
                entries,
                backoff,
                error_backoff,
                ..
            } = &mut *inner;
            let heap = if errors { error_backoff } else { backoff };
            let top = heap.peek()?;
            let current = entries
                .get(&top.key)
                .is_some_and(|e| e.generation == top.generation && e.place == Place::Backoff);
            if current && top.until.0 > now {
                return Some(top.until.0);
            }
            let item = heap.pop()?;
            if !current {
                continue;
            }
            if let Some(e) = entries.remove(&item.key) {
                self.place(inner, item.key, e.info, Place::Active, now);
            }
        }
    }

    /// The next pod to schedule without waiting, if any is ready. The pod
    /// leaves the queue; [`SchedulingQueue::requeue`] brings it back on failure.
    pub fn try_pop(&self) -> Option<QueuedPodInfo> {
        let mut inner = self.inner.lock();
        self.promote_backoff(&mut inner, Instant::now());
        while let Some(item) = inner.active.pop() {
            let current = inner
                .entries
                .get(&item.key)
                .is_some_and(|e| e.generation == item.generation && e.place == Place::Active);
            if current {
                return Some(Self::take_in_flight(&mut inner, item.key, item.info));
            }
        }
        let key = Self::earliest_backoff(&mut inner)?;
        let entry = inner.entries.remove(&key)?;
        Some(Self::take_in_flight(&mut inner, key, entry.info))
    }

    /// The pod leaves the queue to be scheduled.
    fn take_in_flight(inner: &mut Inner, key: String, info: QueuedPodInfo) -> QueuedPodInfo {
        inner.entries.remove(&key);
        let since = inner.history.now();
        inner.in_flight.insert(
            key,
            InFlight {
                latest: None,
                since,
            },
        );
        info
    }

    /// With the active queue empty, the backing-off pod whose backoff ends
    /// first, unless it backs off after an error (SchedulerPopFromBackoffQ).
    fn earliest_backoff(inner: &mut Inner) -> Option<String> {
        while let Some(top) = inner.backoff.pop() {
            let current = inner
                .entries
                .get(&top.key)
                .is_some_and(|e| e.generation == top.generation && e.place == Place::Backoff);
            if current {
                return Some(top.key);
            }
        }
        None
    }

    /// Waits for the next pod to schedule.
    pub async fn pop(&self) -> QueuedPodInfo {
        loop {
            let notified = self.ready.notified();
            if let Some(info) = self.try_pop() {
                return info;
            }
            let next_backoff = {
                let mut inner = self.inner.lock();
                self.promote_backoff(&mut inner, Instant::now())
            };
            match next_backoff {
                Some(at) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// How many pods wait where.
    pub fn lengths(&self) -> QueueLengths {
        let inner = self.inner.lock();
        let mut l = QueueLengths::default();
        for e in inner.entries.values() {
            match e.place {
                Place::Active => l.active += 1,
                Place::Backoff => l.backoff += 1,
                Place::Unschedulable => l.unschedulable += 1,
                Place::Gated => l.gated += 1,
            }
        }
        l
    }
}

#[cfg(test)]
mod tests;
