//! The standalone scheduling loop: watch unscheduled pods into the queue,
//! pop one at a time, run the cycle on its own view of the cache (see
//! [`super::view`]: no cache lock is held while it runs), assume the pod in
//! the cache, reserve and permit it, and run its binding cycle
//! asynchronously (bounded, [`super::binding`]) while the next pod is
//! scheduled. A failure after the node was chosen unreserves and forgets
//! the assumed pod and requeues it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch as signal};
use tracing::{debug, info, warn};

use super::binding::{BindingCycle, failure_of, reserve_and_permit};
use super::cycle::{Failure, Nominated, TieBreak, schedule_on};
use super::leader::Leadership;
use super::preempt::Evictor;
use super::queue::{PreEnqueue, QueueTimings, Retry, SchedulingQueue};
use super::report::Reporter;
use super::sample::{NodeSearch, Search};
use super::view::{CycleView, slot_selector_labels};
use crate::cache::events::Observed;
use crate::cache::lean::Lean;
use crate::cache::watch_stream::{self, Step};
use crate::cache::{Cache, share_counted};
use crate::explain::Diagnoses;
use crate::explain::pending::PendingFeed;
use crate::framework::{
    CycleState, Framework, Nominating, PluginError, QueuedPodInfo, Status, WaitingPods,
};
use crate::metrics::Attempt;
use crate::objects::PodInfo;
use crate::policy::CompiledPolicy;
use crate::state::AppState;

/// Binds in flight at once (kube-scheduler binds in goroutines, unbounded;
/// this keeps the API server load bounded). Binds are the loop's ceiling:
/// pods/s ≤ binds in flight / bind latency. The scale run at 1,000 nodes
/// with 16 measured 258 pods/s at a bind latency of 45 ms p50 and 109 ms
/// p90, exactly that ceiling, with placer using 0.22 of a core
/// (docs/benchmarks.md); kube-scheduler had about 75 binds in flight in the
/// same run. The API client has no client-side rate limit (kube-rs has
/// none; client-go's default is 50 QPS), so this bound is the only throttle.
const MAX_BINDS_IN_FLIGHT: usize = 64;

/// Upper bound on background tasks (a bind with its event, or a failure
/// report) that shutdown waits for.
const MAX_TASKS: u32 = 4096;

/// Only unassigned pods are candidates.
const UNASSIGNED_PODS: &str = "spec.nodeName=";

/// Everything the loop needs.
pub struct Standalone {
    client: Client,
    state: AppState,
    queue: Arc<SchedulingQueue>,
    reporter: Arc<Reporter>,
    /// Pods a Permit plugin told to wait; they outlive a policy reload.
    waiting: Arc<WaitingPods>,
    evictor: Arc<Evictor>,
    tie_break: TieBreak,
    view: Arc<CycleView>,
    search: NodeSearch,
    binds: Arc<Semaphore>,
    /// One permit per background task, so shutdown can wait for all of them.
    tasks: Arc<Semaphore>,
    /// Where failed attempts are recorded for `/explain/pods`.
    diagnoses: Option<Arc<Diagnoses>>,
    /// The `/explain/pods` store of pending pods, fed by the queue's watch.
    pending: Option<PendingFeed>,
}

impl Standalone {
    /// Prepares the loop with kube-scheduler's default backoff and flush;
    /// `identity` names this replica in events.
    pub fn new(client: Client, state: AppState, identity: &str) -> Self {
        Self::with_timings(client, state, identity, QueueTimings::default())
    }

    /// Prepares the loop with the queue's backoff and flush `timings`.
    pub fn with_timings(
        client: Client,
        state: AppState,
        identity: &str,
        timings: QueueTimings,
    ) -> Self {
        let sort = state.policy.load().queue_sort();
        let policy = state.policy.clone();
        let cache = state.cache.clone();
        let pre_enqueue: PreEnqueue = Arc::new(move |pod: &PodInfo| {
            policy
                .load()
                .profile(&pod.scheduler_name)
                .map_or_else(Status::success, |f| f.pre_enqueue(pod, &cache.read()))
        });
        Standalone {
            queue: Arc::new(SchedulingQueue::new(sort, pre_enqueue, timings)),
            reporter: Arc::new(Reporter::new(client.clone(), "placer", identity)),
            waiting: Arc::default(),
            evictor: Arc::new(Evictor::new(client.clone())),
            client,
            state,
            tie_break: TieBreak::default(),
            view: Arc::default(),
            search: NodeSearch::default(),
            binds: Arc::new(Semaphore::new(MAX_BINDS_IN_FLIGHT)),
            tasks: Arc::new(Semaphore::new(MAX_TASKS as usize)),
            diagnoses: None,
            pending: None,
        }
    }

    /// Feeds `/explain/pods`' store of pending pods from the queue's watch
    /// of unassigned pods, so the API server sends each of them once.
    #[must_use]
    pub fn feeding(mut self, pending: PendingFeed) -> Self {
        self.pending = Some(pending);
        self
    }

    /// Records every attempt's outcome in `diagnoses` (`/explain/pods`, and
    /// the simulator annotations when they are on).
    #[must_use]
    pub fn with_diagnoses(mut self, diagnoses: Arc<Diagnoses>) -> Self {
        self.diagnoses = Some(diagnoses);
        self
    }

    /// Runs until `stop` turns true (the shutdown signal), then waits for
    /// the binds in flight (at most `release_after`), gives the Lease up, so
    /// another replica takes over at once, and waits for the events and
    /// reports still being sent. With `leadership`, schedules only while
    /// holding the Lease.
    pub async fn run(
        self,
        mut leadership: Option<Leadership>,
        mut stop: signal::Receiver<bool>,
        release_after: Duration,
    ) {
        let this = Arc::new(self);
        tokio::spawn(watch_unscheduled(
            this.client.clone(),
            this.state.clone(),
            this.queue.clone(),
            this.pending.clone(),
        ));
        // From now on the cache reports cluster events for the queue.
        this.state.cache.events().enable();
        tokio::spawn(requeue_on_events(
            this.state.cache.clone(),
            this.queue.clone(),
            this.state.clone(),
        ));
        if wait_for_cache_sync(&this.state.cache, &mut stop).await {
            Self::schedule_until_stopped(&this, &mut leadership, &mut stop).await;
        }
        info!("scheduling loop stopping; waiting for binds in flight");
        let binds = this.binds.acquire_many(MAX_BINDS_IN_FLIGHT as u32);
        if tokio::time::timeout(release_after, binds).await.is_err() {
            warn!(waited = ?release_after, "binds still in flight; releasing the Lease anyway (a second bind of the same pod fails on the API server)");
        }
        this.state.metrics.leader.set(0);
        if let Some(l) = leadership {
            l.release().await;
        }
        let _ = this.tasks.acquire_many(MAX_TASKS).await;
        info!("scheduling loop stopped");
    }

    /// Pops and schedules pods while leading, until `stop` turns true or
    /// leader election ends.
    async fn schedule_until_stopped(
        this: &Arc<Self>,
        leadership: &mut Option<Leadership>,
        stop: &mut signal::Receiver<bool>,
    ) {
        loop {
            let leading = leadership.as_ref().is_none_or(Leadership::is_leader);
            this.state.metrics.leader.set(i64::from(leading));
            if !leading {
                let Some(l) = leadership.as_mut() else { break };
                tokio::select! {
                    alive = l.changed() => if !alive { warn!("leader election ended; not scheduling"); break },
                    _ = stop.changed() => break,
                }
                continue;
            }
            let next = tokio::select! {
                info = this.queue.pop() => info,
                _ = stop.changed() => break,
                alive = async { match leadership.as_mut() { Some(l) => l.changed().await, None => std::future::pending().await } } => {
                    if !alive { break }
                    continue;
                }
            };
            this.clone().schedule(next).await;
        }
    }

    async fn schedule(self: Arc<Self>, info: QueuedPodInfo) {
        let pod = info.pod.clone();
        let policy = self.state.policy.load();
        let Some(framework) = policy.profile(&pod.scheduler_name).cloned() else {
            debug!(pod = %pod.key(), "no profile for the pod any more; dropping it");
            self.queue.done(&pod);
            return;
        };
        let nominator = self.queue.nominator();
        // The queue feeds the nominator from `status.nominatedNodeName`, so it
        // is the one place to ask (the status may be stale after a clear).
        let own = nominator.node_of(&pod);
        let others = nominator.ahead_of(&pod);
        let percentage = policy.percentage_of_nodes_to_score(&pod.scheduler_name);
        drop(policy);
        slot_selector_labels(&self.state.cache, &pod);
        let (this, fw, p, own_node) = (self.clone(), framework.clone(), pod.clone(), own.clone());
        let attempt = self
            .view
            .attempt_off_runtime(&self.state.cache, move |cluster, nodes| {
                let nominated = Nominated {
                    others: &others,
                    own: own_node.as_deref(),
                };
                let search = Search {
                    percentage,
                    start: Some(&this.search),
                };
                schedule_on(&fw, &p, cluster, nodes, nominated, &this.tie_break, search)
            })
            .await;
        let result = attempt.unwrap_or_else(|e| {
            warn!(pod = %pod.key(), error = %e, "scheduling attempt panicked; the pod is retried");
            Err(Failure::Error {
                message: format!("scheduling attempt failed: {e}"),
            })
        });
        match result {
            Ok(placement) => {
                self.state.metrics.attempt(Attempt::Scheduled);
                if let Some(d) = &self.diagnoses {
                    d.record_placement(&pod, &placement.node);
                }
                let node = placement.node;
                let mut state = placement.state;
                let mut assumed = (*pod).clone();
                assumed.node_name = Some(node.clone());
                // Shared like a watched pod, since the watch's copy of the
                // bound pod may equal it and then leaves it in place.
                share_counted(&mut assumed);
                self.state.cache.write().apply_pod(assumed);
                let waits = match reserve_and_permit(
                    &framework,
                    &mut state,
                    &pod,
                    &node,
                    &self.waiting,
                    &self.client,
                ) {
                    Ok(waits) => waits.is_some(),
                    Err(e) => {
                        self.forget(&pod);
                        self.fail_reserved(info, &e).await;
                        return;
                    }
                };
                // A pod that waits at Permit takes its bind slot once the wait is over.
                let slot = if waits {
                    None
                } else {
                    let Ok(slot) = self.binds.clone().acquire_owned().await else {
                        return;
                    };
                    Some(slot)
                };
                let this = self.clone();
                let Ok(task) = self.tasks.clone().acquire_owned().await else {
                    return;
                };
                tokio::spawn(async move {
                    this.bind(info, framework, state, node, slot).await;
                    drop(task);
                });
            }
            Err(failure) => {
                let unschedulable = matches!(failure, Failure::Unschedulable { .. });
                self.state.metrics.attempt(if unschedulable {
                    Attempt::Unschedulable
                } else {
                    Attempt::Error
                });
                debug!(pod = %pod.key(), reason = failure.message(), "pod did not fit");
                if let Some(d) = &self.diagnoses {
                    d.record_attempt(&pod, failure.message(), self.state.cache.generation());
                }
                // A pod whose PostFilter acts (evictions, writes) is held until it has.
                let preempting = matches!(failure.nominating(), Nominating::Nominate(_));
                let writing = matches!(
                    failure,
                    Failure::Unschedulable {
                        writes: Some(_),
                        ..
                    }
                );
                let info = if preempting || writing {
                    Some(info)
                } else {
                    let retry = if unschedulable {
                        Retry::AfterEvent(failure.rejectors().to_vec())
                    } else {
                        Retry::Error
                    };
                    self.requeue(info, retry);
                    None
                };
                let Ok(task) = self.tasks.clone().acquire_owned().await else {
                    return;
                };
                let this = self.clone();
                let profile = framework.profile().to_string();
                // Evicting and reporting are API calls; the next pod need not wait for them.
                tokio::spawn(async move {
                    let was_nominated = own.is_some() || pod.preemption.nominated_node.is_some();
                    this.after_failure(&pod, info, failure, was_nominated, &profile)
                        .await;
                    drop(task);
                });
            }
        }
    }

    /// Carries out what a failed attempt decided: PostFilter's API writes
    /// (kube-scheduler's plugins send them during PostFilter), then evict
    /// the victims and nominate the node, or clear a nomination; then the
    /// FailedScheduling event and condition. A pod held for that (`info`)
    /// is requeued only once it is done, as kube-scheduler holds it back
    /// meanwhile: a preempting pod to backoff rather than the unschedulable
    /// pool, since the deletions it waits for may already have been seen;
    /// a pod whose PostFilter only wrote waits for a cluster event as any
    /// unschedulable pod (its own write's event included).
    async fn after_failure(
        &self,
        pod: &PodInfo,
        info: Option<QueuedPodInfo>,
        mut failure: Failure,
        was_nominated: bool,
        profile: &str,
    ) {
        if let Some(pending) = failure.take_writes() {
            for write in &pending.writes {
                if let Err(e) = write.send(self.client.clone()).await {
                    warn!(pod = %pod.key(), write = write.what(), error = %e, "PostFilter's write failed");
                    failure.post_filter_write_failed(pending.message_start, &e);
                    break;
                }
            }
        }
        let nominator = self.queue.nominator();
        let nominated = match failure.nominating() {
            Nominating::Unchanged => None,
            Nominating::Clear => {
                nominator.remove(&pod.key());
                was_nominated.then_some(None)
            }
            Nominating::Nominate(n) => {
                let metrics = &self.state.metrics;
                metrics.preemption_attempts.inc();
                metrics.preemption_victims.observe(n.victims.len() as f64);
                nominator.nominate(pod, &n.node);
                let displaced = nominator.take_lower(&n.node, pod.priority);
                if let Err(e) = self.evictor.evict(profile, pod, n, &self.reporter).await {
                    warn!(pod = %pod.key(), node = %n.node, error = %e, "preemption incomplete");
                }
                self.evictor.clear_nominations(&displaced).await;
                Some(Some(n.node.as_str()))
            }
        };
        // The nomination is written before the pod can be tried again: once
        // bound, the API server refuses `nominatedNodeName` on it.
        self.reporter.failed(pod, &failure, nominated).await;
        if let Some(info) = info {
            let retry = if matches!(failure.nominating(), Nominating::Nominate(_)) {
                Retry::Backoff
            } else {
                Retry::AfterEvent(failure.rejectors().to_vec())
            };
            self.requeue(info, retry);
        }
    }

    /// Returns a failed pod to the queue, judging the cluster events seen
    /// while it was in flight by its profile's queueing hints.
    fn requeue(&self, info: QueuedPodInfo, retry: Retry) {
        let policy = self.state.policy.load();
        self.queue.requeue(info, retry, &|pod, rejectors, event| {
            worth_retrying(&policy, pod, rejectors, event)
        });
    }

    /// Runs the binding cycle (Permit's wait, PreBind, Bind, PostBind),
    /// holding a bind slot only from PreBind through Bind: the event that
    /// follows must not keep the next pod's bind waiting.
    async fn bind(
        &self,
        info: QueuedPodInfo,
        framework: Arc<Framework>,
        mut state: CycleState,
        node: String,
        slot: Option<OwnedSemaphorePermit>,
    ) {
        let pod = info.pod.clone();
        let cycle = BindingCycle {
            framework: &framework,
            client: &self.client,
            reporter: &self.reporter,
            waiting: &self.waiting,
            slots: &self.binds,
            metrics: &self.state.metrics,
        };
        match cycle.run(&mut state, &pod, &node, slot).await {
            Ok(()) => {
                self.state
                    .metrics
                    .scheduling_duration
                    .observe(info.timestamp.elapsed().as_secs_f64());
                info!(pod = %pod.key(), node = %node, "bound pod");
                self.queue.done(&pod);
                self.reporter.scheduled(&pod, &node).await;
            }
            Err(e) => {
                warn!(pod = %pod.key(), node = %node, error = %e, "binding cycle failed; forgetting the assumed pod");
                self.forget(&pod);
                self.fail_reserved(info, &e).await;
            }
        }
    }

    /// Takes a pod assumed on a node out of the cache again: what it held
    /// there is free for the next attempt, as a pod deletion would free it.
    fn forget(&self, pod: &PodInfo) {
        self.state.cache.forget_pod(&pod.namespace, &pod.name);
    }

    /// Requeues and reports a pod that failed after its node was chosen (it
    /// has been unreserved and forgotten).
    async fn fail_reserved(&self, info: QueuedPodInfo, e: &PluginError) {
        let (failure, waits) = failure_of(e);
        let pod = info.pod.clone();
        if let Some(d) = &self.diagnoses {
            d.record_attempt(&pod, failure.message(), self.state.cache.generation());
        }
        let retry = match &failure {
            _ if waits => Retry::AfterEvent(failure.rejectors().to_vec()),
            Failure::Error { .. } => Retry::Error,
            Failure::Unschedulable { .. } => Retry::Backoff,
        };
        self.requeue(info, retry);
        self.reporter.failed(&pod, &failure, None).await;
    }
}

/// How often the loop checks, before its first attempt, whether the cache
/// has listed every node and pod.
const SYNC_POLL: Duration = Duration::from_millis(50);

/// Waits until the cache holds a complete list of nodes and pods, as
/// kube-scheduler waits for its informers' caches before scheduling: an
/// attempt on a partial cache fails pods for nodes not listed yet (a
/// FailedScheduling event, then backoff), or fits them on nodes whose pods
/// are not all counted yet. Pods queue meanwhile. False if `stop` came first.
async fn wait_for_cache_sync(cache: &Cache, stop: &mut signal::Receiver<bool>) -> bool {
    if cache.is_synced() {
        return true;
    }
    info!("waiting for the cache to list every node and pod before scheduling");
    let started = std::time::Instant::now();
    let mut poll = tokio::time::interval(SYNC_POLL);
    while !cache.is_synced() {
        tokio::select! {
            _ = poll.tick() => {}
            _ = stop.changed() => return false,
        }
    }
    info!(waited = ?started.elapsed(), "cache synced; scheduling starts");
    true
}

/// Feeds unassigned pods of placer's profiles into the queue; pods deleted
/// or bound (they leave the `spec.nodeName=` selector) leave it, including
/// those that left while the watch was down (a relist drops every queued pod
/// it no longer lists). Every pod it sees, of any scheduler, also goes to
/// `pending` when set. The watch runs on the cache's list-and-watch loop
/// (short capped backoff, health as kind `unassignedpod` in `placer_watch_*`
/// and `/readyz`), as the cache's own watches do.
async fn watch_unscheduled(
    client: Client,
    state: AppState,
    queue: Arc<SchedulingQueue>,
    pending: Option<PendingFeed>,
) {
    // Decoded without managedFields; listed pages converted as they arrive.
    let api: Api<Lean<Pod>> = Api::all(client);
    // Its own kind, not the `pendingpod` of /explain's watch in extender mode: the metrics
    // then show that only one of the two runs.
    let health = state.cache.watches().kind("unassignedpod");
    let (tx, mut rx) =
        tokio::sync::mpsc::channel::<(std::time::Instant, Step<Lean<Pod>, PodInfo>)>(1024);
    tokio::spawn(watch_stream::run_converting(
        api,
        Some(UNASSIGNED_PODS.to_owned()),
        health,
        tx,
        |p: Lean<Pod>| PodInfo::from(&p.0),
    ));
    while let Some((_, step)) = rx.recv().await {
        match step {
            Step::Listed(all) => {
                let mut relisted = HashSet::with_capacity(all.len());
                let mut listed = Vec::new();
                for p in all {
                    let pod = offer(&state, &queue, p);
                    relisted.insert(pod.key());
                    if pending.is_some() {
                        listed.push(pod);
                    }
                }
                if let Some(feed) = &pending {
                    feed.listed(listed);
                }
                let dropped = queue.retain_only(&relisted);
                if dropped > 0 {
                    info!(
                        dropped,
                        "relist: dropped queued pods that were deleted or bound meanwhile"
                    );
                }
            }
            Step::Applied(p) => {
                let pod = offer(&state, &queue, PodInfo::from(&p.0));
                if let Some(feed) = &pending {
                    feed.applied(pod);
                }
            }
            Step::Deleted(p) => {
                let pod = PodInfo::from(&p.0);
                queue.delete(&pod.namespace, &pod.name);
                if let Some(feed) = &pending {
                    feed.deleted(&pod.namespace, &pod.name);
                }
            }
        }
    }
}

/// Queues (or requeues, or drops) one unassigned pod seen by the watch.
fn offer(state: &AppState, queue: &SchedulingQueue, pod: PodInfo) -> PodInfo {
    // A late event of a pod placer already bound (in the cache with a
    // node, no longer in flight) must not queue it a second time.
    let placed = state
        .cache
        .read()
        .pod(&pod.namespace, &pod.name)
        .is_some_and(|c| c.uid == pod.uid && c.node_name.is_some());
    if placed && !queue.is_in_flight(&pod) {
        return pod;
    }
    let policy = state.policy.load();
    if policy.profile(&pod.scheduler_name).is_some() && !pod.is_terminal() && !pod.deleting {
        queue.add_or_update(pod.clone(), &|pod, rejectors, event| {
            worth_retrying(&policy, pod, rejectors, event)
        });
    } else {
        queue.delete(&pod.namespace, &pod.name);
    }
    pod
}

/// Whether `event` may make `pod`, rejected by `rejectors`, schedulable:
/// its profile's queueing hints (a pod whose profile is gone: yes, so that
/// its next attempt drops it).
pub fn worth_retrying(
    policy: &CompiledPolicy,
    pod: &PodInfo,
    rejectors: &[&'static str],
    event: &Observed,
) -> bool {
    policy
        .profile(&pod.scheduler_name)
        .is_none_or(|f| f.worth_retrying(pod, rejectors, event))
}

/// How often queue lengths are published and long-unschedulable pods flushed.
const QUEUE_TICK: Duration = Duration::from_millis(200);

/// Moves unschedulable pods back when a cluster event may help them (their
/// rejecting plugins' queueing hints decide), flushes the ones waiting over
/// 5 minutes, and publishes queue lengths.
async fn requeue_on_events(cache: Arc<Cache>, queue: Arc<SchedulingQueue>, state: AppState) {
    let mut tick = tokio::time::interval(QUEUE_TICK);
    loop {
        tokio::select! {
            () = cache.events().changed() => {
                let events = cache.events().take();
                let policy = state.policy.load();
                queue.on_events(events, &|pod, rejectors, event| {
                    worth_retrying(&policy, pod, rejectors, event)
                });
                continue;
            }
            _ = tick.tick() => {}
        }
        queue.flush_unschedulable();
        let l = queue.lengths();
        for (name, n) in [
            ("active", l.active),
            ("backoff", l.backoff),
            ("unschedulable", l.unschedulable),
            ("gated", l.gated),
        ] {
            state
                .metrics
                .pending_pods
                .get_or_create(&crate::metrics::QueueLabels { queue: name })
                .set(n as i64);
        }
    }
}
