//! The scheduling queue of standalone mode, with kube-scheduler's three parts:
//!
//! - **active**: pods ready to be tried, ordered by the profile's QueueSort
//!   plugin (priority, then arrival);
//! - **backoff**: pods that failed recently, waiting 1 s doubling per attempt
//!   up to 10 s;
//! - **unschedulable**: pods no node could take; they move back when a
//!   relevant cluster event arrives ([`SchedulingQueue::move_all_on_event`])
//!   and at the latest after 5 minutes ([`SchedulingQueue::flush_unschedulable`]).
//!
//! Pods rejected by a PreEnqueue plugin (scheduling gates) are held outside
//! all three until they change. Deleted or bound pods leave the queue.
//! A popped pod is *in flight* until it is requeued or done: updates seen
//! meanwhile are kept for its requeue instead of queueing it a second time,
//! and a pod deleted meanwhile is not requeued.
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
use crate::framework::{QueueSort, QueuedPodInfo, Status};
use crate::objects::PodInfo;

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
    next_generation: u64,
    /// Popped pods not yet requeued or done, with the latest update seen meanwhile.
    in_flight: HashMap<String, Option<Arc<PodInfo>>>,
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
                next_generation: 0,
                in_flight: HashMap::new(),
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

    /// A new or updated unscheduled pod. A pod waiting in backoff or as
    /// unschedulable is retried at once when it changes, as kube-scheduler does;
    /// an update that changes nothing scheduling reads (such as the
    /// `PodScheduled` condition placer itself just wrote) leaves it waiting.
    /// An update of a pod in flight is kept for its requeue.
    pub fn add_or_update(&self, pod: PodInfo) {
        let key = key_of(&pod);
        // A nomination written before this replica started (or led) still holds.
        if let Some(node) = &pod.preemption.nominated_node
            && self.nominator.node_of(&pod).is_none()
        {
            self.nominator.nominate(&pod, node);
        }
        let pod = Arc::new(pod);
        let admitted = (self.pre_enqueue)(&pod).is_success();
        let mut inner = self.inner.lock();
        if let Some(latest) = inner.in_flight.get_mut(&key) {
            *latest = Some(pod);
            return;
        }
        if let Some(e) = inner.entries.get_mut(&key)
            && *e.info.pod == *pod
        {
            e.info.pod = pod;
            return;
        }
        let now = Instant::now();
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
        let place = if admitted {
            Place::Active
        } else {
            Place::Gated
        };
        if was_active && admitted {
            // Already queued: only refresh the pod object.
            if let Some(e) = inner.entries.get_mut(&key) {
                e.info.pod = info.pod;
            }
            return;
        }
        self.place(&mut inner, key, info, place, now);
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

    /// Returns a failed pod to the queue: to the unschedulable pool when no
    /// node fits (until a cluster event), else to backoff. A pod deleted while
    /// in flight is dropped; one updated meanwhile goes to backoff in its
    /// latest version.
    pub fn requeue(&self, mut info: QueuedPodInfo, mut unschedulable: bool) {
        info.attempts += 1;
        let key = key_of(&info.pod);
        let mut inner = self.inner.lock();
        match inner.in_flight.remove(&key) {
            None => return,
            Some(Some(latest)) => {
                unschedulable &= *latest == *info.pod;
                info.pod = latest;
            }
            Some(None) => {}
        }
        let place = if unschedulable {
            Place::Unschedulable
        } else {
            Place::Backoff
        };
        self.place(&mut inner, key, info, place, Instant::now());
    }

    /// A cluster event that may make unschedulable pods fit (node added or
    /// changed, pod deleted, policy reloaded): every unschedulable pod goes
    /// back to backoff, or to active if its backoff is already over.
    pub fn move_all_on_event(&self) {
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
        let now = Instant::now();
        let keys: Vec<String> = inner
            .entries
            .iter()
            .filter(|(_, e)| e.place == Place::Unschedulable && pick(e))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            if let Some(e) = inner.entries.remove(&key) {
                let place = if e.backoff_until <= now {
                    Place::Active
                } else {
                    Place::Backoff
                };
                let until = e.backoff_until;
                self.place(&mut inner, key.clone(), e.info, place, now);
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
                inner.backoff.push(BackoffItem {
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
            },
        );
    }

    /// Moves pods whose backoff ended to active; returns the next backoff end.
    fn promote_backoff(&self, inner: &mut Inner, now: Instant) -> Option<Instant> {
        while let Some(top) = inner.backoff.peek() {
            let current = inner
                .entries
                .get(&top.key)
                .is_some_and(|e| e.generation == top.generation && e.place == Place::Backoff);
            if !current {
                inner.backoff.pop();
                continue;
            }
            if top.until.0 > now {
                return Some(top.until.0);
            }
            let Some(item) = inner.backoff.pop() else {
                break;
            };
            if let Some(e) = inner.entries.remove(&item.key) {
                self.place(inner, item.key, e.info, Place::Active, now);
            }
        }
        None
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
                inner.entries.remove(&item.key);
                inner.in_flight.insert(item.key, None);
                return Some(item.info);
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
