//! The simulation loop: standalone mode's scheduling loop with the API
//! server replaced (design §8, "Simulation"). The same queue
//! ([`SchedulingQueue`], its sort, backoff and queueing hints), the same
//! attempt ([`schedule_on`] on a [`CycleView`], sampling as
//! `percentageOfNodesToScore` says, the seeded [`TieBreak`]), the same
//! Reserve, Permit and binding cycle ([`reserve_and_permit`],
//! [`BindingCycle`]) with the plugins' writes going to the in-memory API
//! ([`super::api`]), the same preemption (victims deleted from the cache as
//! their deletion's watch event would, the preemptor nominated and backed
//! off).
//!
//! Time is tokio's paused clock: backoffs, Permit waits and a timed
//! workload's arrivals and departures take no wall time, and a run does the
//! same thing every time. Differences from a live run, each because there
//! is no second process: binds finish before the next pod is tried (the
//! live loop binds concurrently, but a pod is assumed in the cache before
//! either, so the next attempt sees the same cluster), and a pod that fails
//! again on an unchanged cluster is left pending instead of retried forever.

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::api::{self, Bindings};
use crate::cache::{Cache, share_counted};
use crate::framework::{Nominating, PluginError, QueuedPodInfo, Status, WaitingPods};
use crate::metrics::Metrics;
use crate::modes::standalone::binding::{BindingCycle, failure_of, reserve_and_permit};
use crate::modes::standalone::cycle::{Failure, Nominated, TieBreak, schedule_on};
use crate::modes::standalone::queue::{PreEnqueue, QueueTimings, Retry, SchedulingQueue};
use crate::modes::standalone::report::Reporter;
use crate::modes::standalone::sample::{NodeSearch, Search};
use crate::modes::standalone::scheduler::worth_retrying;
use crate::modes::standalone::view::{CycleView, slot_selector_labels};
use crate::objects::PodInfo;
use crate::policy::CompiledPolicy;

/// A pod of the workload and when it comes and goes.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// When it is created, from the start of the run.
    pub at: Duration,
    /// How long it runs once bound; `None`: until the run ends.
    pub runs_for: Option<Duration>,
    /// The pod (bound already when `node_name` is set).
    pub pod: PodInfo,
}

/// What happened to one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRecord {
    /// `namespace/name`.
    pub key: String,
    /// Where it runs (or ran, if it left or was evicted).
    pub node: Option<String>,
    /// The last FailedScheduling message, while it is not placed.
    pub message: Option<String>,
    /// Scheduling attempts.
    pub attempts: u32,
    /// The pod that preempted it, if one did.
    pub preempted_by: Option<String>,
    /// It left at the end of its run time.
    pub departed: bool,
    /// Simulated seconds from its arrival to its (last) placement.
    pub waited: Option<f64>,
    /// When it arrived.
    arrived: Option<Instant>,
}

/// Everything a run decided, in the order pods first arrived.
#[derive(Debug, Default)]
pub struct Record {
    /// One record per pod of the workload.
    pub pods: Vec<PodRecord>,
    /// `namespace/name` → index in `pods`.
    index: HashMap<String, usize>,
    /// Simulated seconds the run covered.
    pub simulated_seconds: f64,
}

impl Record {
    fn entry(&mut self, key: &str) -> &mut PodRecord {
        let next = self.pods.len();
        let i = *self.index.entry(key.to_string()).or_insert(next);
        if i == next {
            self.pods.push(PodRecord {
                key: key.to_string(),
                ..PodRecord::default()
            });
        }
        &mut self.pods[i]
    }
}

/// A departure due at a time (the earliest first out of the heap).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Departure(std::cmp::Reverse<Instant>, String);

/// One simulation over one cluster.
pub struct Engine {
    policy: Arc<CompiledPolicy>,
    cache: Arc<Cache>,
    queue: SchedulingQueue,
    view: CycleView,
    tie_break: TieBreak,
    search: NodeSearch,
    waiting: WaitingPods,
    client: kube::Client,
    reporter: Arc<Reporter>,
    slots: Arc<Semaphore>,
    metrics: Metrics,
    /// The cache generation at each pod's last failure (a retry on the
    /// same cluster would fail the same way).
    failed_at: HashMap<String, u64>,
    runs_for: HashMap<String, Duration>,
    departures: BinaryHeap<Departure>,
    record: Record,
    /// End the run at the first pod that does not fit (`--max-of`).
    stop_at_first_failure: bool,
    failed: bool,
}

impl Engine {
    /// An engine scheduling with `policy` on `cache` (filled from the
    /// cluster), breaking ties from `seed`.
    pub fn new(policy: Arc<CompiledPolicy>, cache: Arc<Cache>, seed: u64) -> Self {
        let (p, c) = (policy.clone(), cache.clone());
        let pre_enqueue: PreEnqueue = Arc::new(move |pod: &PodInfo| {
            p.profile(&pod.scheduler_name)
                .map_or_else(Status::success, |f| f.pre_enqueue(pod, &c.read()))
        });
        let client = api::client(Bindings::default());
        cache.events().enable();
        Engine {
            queue: SchedulingQueue::new(policy.queue_sort(), pre_enqueue, QueueTimings::default()),
            reporter: Arc::new(Reporter::new(client.clone(), "placer", "simulate")),
            client,
            policy,
            cache,
            view: CycleView::default(),
            tie_break: TieBreak::seeded(seed),
            search: NodeSearch::default(),
            waiting: WaitingPods::default(),
            slots: Arc::new(Semaphore::new(1)),
            metrics: Metrics::new(),
            failed_at: HashMap::new(),
            runs_for: HashMap::new(),
            departures: BinaryHeap::new(),
            record: Record::default(),
            stop_at_first_failure: false,
            failed: false,
        }
    }

    /// Ends the run at the first pod that does not fit: the pods after it
    /// are never tried (counting how many copies of a pod fit).
    #[must_use]
    pub fn stopping_at_first_failure(mut self) -> Self {
        self.stop_at_first_failure = true;
        self
    }

    /// Runs `arrivals` (in order of `at`, ties in their order) to the end:
    /// until no pod can be placed any more and nothing is due to arrive or
    /// leave. Needs tokio's clock paused (see [`super::run_blocking`]).
    pub async fn run(mut self, mut arrivals: Vec<Arrival>) -> Record {
        arrivals.sort_by_key(|a| a.at);
        let start = Instant::now();
        let mut next = arrivals.into_iter().peekable();
        while !(self.stop_at_first_failure && self.failed) {
            let now = Instant::now();
            while let Some(a) = next.next_if(|a| start + a.at <= now) {
                self.arrive(a);
                // Pods created one after another: the queue orders equal
                // priorities by arrival.
                tokio::time::advance(Duration::from_micros(1)).await;
            }
            self.depart_due(Instant::now());
            self.deliver_events();
            if let Some(info) = self.queue.try_pop() {
                self.schedule(info).await;
                continue;
            }
            let due = [
                next.peek().map(|a| start + a.at),
                self.departures.peek().map(|d| d.0.0),
            ];
            let Some(wake) = due.into_iter().flatten().min() else {
                if self.queue.lengths().backoff > 0 {
                    let info = self.queue.pop().await;
                    self.schedule(info).await;
                    continue;
                }
                break;
            };
            tokio::time::sleep_until(wake).await;
            self.queue.flush_unschedulable();
        }
        self.record.simulated_seconds = start.elapsed().as_secs_f64();
        self.record
    }

    fn arrive(&mut self, a: Arrival) {
        let key = a.pod.key();
        self.record.entry(&key).arrived = Some(Instant::now());
        if let Some(d) = a.runs_for {
            self.runs_for.insert(key.clone(), d);
        }
        if let Some(node) = a.pod.node_name.clone() {
            self.cache.write().apply_pod(a.pod);
            self.placed(&key, &node);
            return;
        }
        let policy = self.policy.clone();
        self.queue.add_or_update(a.pod, &|pod, rejectors, event| {
            worth_retrying(&policy, pod, rejectors, event)
        });
    }

    fn placed(&mut self, key: &str, node: &str) {
        let r = self.record.entry(key);
        r.node = Some(node.to_string());
        r.message = None;
        r.waited = r.arrived.map(|at| at.elapsed().as_secs_f64());
        if let Some(d) = self.runs_for.get(key) {
            let at = Instant::now() + *d;
            self.departures
                .push(Departure(std::cmp::Reverse(at), key.to_string()));
        }
    }

    /// Pods whose run time is over leave, as their deletion's watch event
    /// would take them out of the cache.
    fn depart_due(&mut self, now: Instant) {
        while self.departures.peek().is_some_and(|d| d.0.0 <= now) {
            let Some(Departure(_, key)) = self.departures.pop() else {
                break;
            };
            if let Some((ns, name)) = key.split_once('/') {
                self.cache.forget_pod(ns, name);
            }
            self.record.entry(&key).departed = true;
        }
    }

    /// Cluster events (deletions, evictions) move unschedulable pods as
    /// their rejecting plugins' queueing hints say, as the live loop's
    /// event task does.
    fn deliver_events(&self) {
        let events = self.cache.events().take();
        let policy = &self.policy;
        self.queue.on_events(events, &|pod, rejectors, event| {
            worth_retrying(policy, pod, rejectors, event)
        });
    }

    fn requeue(&mut self, info: QueuedPodInfo, retry: Retry) {
        let key = info.pod.key();
        let generation = self.cache.generation();
        if self.failed_at.insert(key, generation) == Some(generation) {
            // Nothing changed since its last failure: it stays pending.
            self.queue.done(&info.pod);
            return;
        }
        let policy = self.policy.clone();
        self.queue.requeue(info, retry, &|pod, rejectors, event| {
            worth_retrying(&policy, pod, rejectors, event)
        });
    }

    async fn schedule(&mut self, info: QueuedPodInfo) {
        let pod = info.pod.clone();
        let key = pod.key();
        self.record.entry(&key).attempts += 1;
        let Some(framework) = self.policy.profile(&pod.scheduler_name).cloned() else {
            self.record.entry(&key).message = Some(format!(
                "no profile for schedulerName {:?}",
                pod.scheduler_name
            ));
            self.queue.done(&pod);
            return;
        };
        let nominator = self.queue.nominator();
        let own = nominator.node_of(&pod);
        let others = nominator.ahead_of(&pod);
        let percentage = self
            .policy
            .percentage_of_nodes_to_score(&pod.scheduler_name);
        slot_selector_labels(&self.cache, &pod);
        let (tie_break, search) = (&self.tie_break, &self.search);
        let result = self.view.attempt(&self.cache, |cluster, nodes| {
            let nominated = Nominated {
                others: &others,
                own: own.as_deref(),
            };
            let search = Search {
                percentage,
                start: Some(search),
            };
            schedule_on(
                &framework, &pod, cluster, nodes, nominated, tie_break, search,
            )
        });
        let placement = match result {
            Ok(p) => p,
            Err(failure) => return self.after_failure(info, failure, own.is_some()).await,
        };
        let (node, mut state) = (placement.node, placement.state);
        let mut assumed = (*pod).clone();
        assumed.node_name = Some(node.clone());
        share_counted(&mut assumed);
        self.cache.write().apply_pod(assumed);
        let permitted = reserve_and_permit(
            &framework,
            &mut state,
            &pod,
            &node,
            &self.waiting,
            &self.client,
        );
        let bound = match permitted {
            Err(e) => Err(e),
            Ok(waits) => {
                let slot = if waits.is_some() {
                    None
                } else {
                    self.slots.clone().acquire_owned().await.ok()
                };
                let cycle = BindingCycle {
                    framework: &framework,
                    client: &self.client,
                    reporter: &self.reporter,
                    waiting: &self.waiting,
                    slots: &self.slots,
                    metrics: &self.metrics,
                };
                cycle.run(&mut state, &pod, &node, slot).await
            }
        };
        match bound {
            Ok(()) => {
                self.queue.done(&pod);
                self.placed(&key, &node);
            }
            Err(e) => {
                self.cache.forget_pod(&pod.namespace, &pod.name);
                self.fail_reserved(info, &e);
            }
        }
    }

    /// What the live loop's `after_failure` does, with the API calls made
    /// on the cache: PostFilter's writes (refused by the in-memory API, so
    /// the message says so, as a failed write does live), the victims
    /// deleted, the preemptor nominated and backed off.
    async fn after_failure(&mut self, info: QueuedPodInfo, mut failure: Failure, nominated: bool) {
        let pod = info.pod.clone();
        if let Some(pending) = failure.take_writes() {
            for write in &pending.writes {
                if let Err(e) = write.send(self.client.clone()).await {
                    failure.post_filter_write_failed(pending.message_start, &e);
                    break;
                }
            }
        }
        let nominator = self.queue.nominator();
        let retry = match failure.nominating() {
            Nominating::Nominate(n) => {
                nominator.nominate(&pod, &n.node);
                nominator.take_lower(&n.node, pod.priority);
                for victim in &n.victims {
                    if !victim.deleting {
                        self.cache.forget_pod(&victim.namespace, &victim.name);
                        self.record.entry(&victim.key()).preempted_by = Some(pod.key());
                    }
                }
                Retry::Backoff
            }
            Nominating::Clear => {
                let _ = nominated;
                nominator.remove(&pod.key());
                Retry::AfterEvent(failure.rejectors().to_vec())
            }
            Nominating::Unchanged => Retry::AfterEvent(failure.rejectors().to_vec()),
        };
        let retry = match failure {
            Failure::Error { .. } => Retry::Error,
            _ => retry,
        };
        self.record.entry(&pod.key()).message = Some(failure.message().to_string());
        self.failed = true;
        self.deliver_events();
        self.requeue(info, retry);
    }

    /// A failure after the node was chosen, as the live loop's `fail_reserved`.
    fn fail_reserved(&mut self, info: QueuedPodInfo, e: &PluginError) {
        let (failure, waits) = failure_of(e);
        let retry = match &failure {
            _ if waits => Retry::AfterEvent(failure.rejectors().to_vec()),
            Failure::Error { .. } => Retry::Error,
            Failure::Unschedulable { .. } => Retry::Backoff,
        };
        self.record.entry(&info.pod.key()).message = Some(failure.message().to_string());
        self.failed = true;
        self.deliver_events();
        self.requeue(info, retry);
    }
}
