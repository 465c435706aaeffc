//! One small trait per extension point, as in kube-scheduler's
//! `framework/interface.go`.
//!
//! A plugin is one struct implementing [`Plugin`] plus the extension-point
//! traits it takes part in; its `as_*` methods tell the runner which ones.
//! Enabling a plugin in a profile enables every point it implements. Plugins
//! never call each other, never block and never do I/O: everything they read
//! comes from the pod, the node, the [`CycleState`] and the cluster snapshot.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::cache::ClusterState;
use crate::framework::ApiWrite;
use crate::framework::{CycleState, EnqueueExtensions, Framework, Status, WaitingPods};
use crate::objects::{NodeInfo, PodInfo};

/// Highest score a score plugin may give a node (kube-scheduler's `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;
/// Lowest score a score plugin may give a node.
pub const MIN_NODE_SCORE: i64 = 0;

/// Common to every plugin: its name and which extension points it implements.
pub trait Plugin: Send + Sync {
    /// The name used in the policy, in statuses and in metrics.
    fn name(&self) -> &'static str;

    /// This plugin as a QueueSort plugin, if it is one.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// This plugin as a PreEnqueue plugin, if it is one.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// This plugin as a PreFilter plugin, if it is one.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// This plugin's PreFilter extensions, if its PreFilter state depends on
    /// other pods.
    fn as_pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
    /// This plugin as a Filter plugin, if it is one.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// This plugin as a PostFilter plugin, if it is one.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// This plugin as a PreScore plugin, if it is one.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// This plugin as a Score plugin, if it is one.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// This plugin as a Reserve plugin, if it is one.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// This plugin as a Permit plugin, if it is one.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// This plugin as a PreBind plugin, if it is one.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// This plugin as a Bind plugin, if it is one.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    /// This plugin as a PostBind plugin, if it is one.
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
    /// The events this plugin's rejections wait for; `None`: every event.
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        None
    }
}

/// A pod waiting in the scheduling queue.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// When it (last) entered the queue; ties in priority go to the earlier.
    pub timestamp: std::time::Instant,
    /// Scheduling attempts so far.
    pub attempts: u32,
}

/// Orders the active queue (standalone mode). Exactly one per profile.
pub trait QueueSortPlugin: Plugin {
    /// True when `a` should be scheduled before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// Decides whether a pod may enter the active queue at all (standalone
/// mode). Anything but `Success` keeps it out until the pod changes, or
/// until a cluster event the plugin registered (with its hint) makes the
/// queue ask again.
pub trait PreEnqueuePlugin: Plugin {
    /// Checks `pod` before it is queued; `cluster` is the shared cache's
    /// state (read it briefly: the queue waits).
    fn pre_enqueue(&self, pod: &PodInfo, cluster: &ClusterState) -> Status;
}

/// Implements [`ScorePlugin::score`] and [`ScorePlugin::score_batch`], inside
/// `impl ScorePlugin for …`, for a plugin whose score reads what its PreScore
/// wrote (`$written`). One node's score comes from the plugin's method
/// `per_node(&self, &$written, &NodeInfo, &ClusterState) -> NodeScore`, or
/// from a function of the last three (`fn path`); the batch reads the cycle
/// state once for all its nodes, e.g.
/// `placer::score_from_pre_score!(PodRequests, node_score);` or
/// `placer::score_from_pre_score!(PreScoreState, fn spread_score);`.
#[macro_export]
macro_rules! score_from_pre_score {
    ($written:ty, fn $per_node:path) => {
        $crate::score_from_pre_score!(@with $written, |_plugin, written, node, cluster| {
            $per_node(written, node, cluster)
        });
    };
    ($written:ty, $per_node:ident) => {
        $crate::score_from_pre_score!(@with $written, |plugin, written, node, cluster| {
            plugin.$per_node(written, node, cluster)
        });
    };
    (@with $written:ty, |$plugin:ident, $w:ident, $node:ident, $cluster:ident| $one:block) => {
        fn score(
            &self,
            state: &$crate::framework::CycleState,
            _: &$crate::objects::PodInfo,
            $node: &$crate::objects::NodeInfo,
            $cluster: &$crate::cache::ClusterState,
        ) -> Result<$crate::framework::NodeScore, $crate::framework::Status> {
            let ($plugin, $w) = (self, state.from_pre_score::<$written>()?);
            Ok($one)
        }

        fn score_batch(
            &self,
            state: &$crate::framework::CycleState,
            _: &$crate::objects::PodInfo,
            nodes: &[&$crate::objects::NodeInfo],
            $cluster: &$crate::cache::ClusterState,
            scores: &mut [$crate::framework::NodeScore],
        ) -> Result<(), $crate::framework::Status> {
            let ($plugin, $w) = (self, state.from_pre_score::<$written>()?);
            for (slot, $node) in scores.iter_mut().zip(nodes) {
                *slot = $one;
            }
            Ok(())
        }
    };
}

/// Implements [`Plugin`] for a plugin type: its name and the extension
/// points it takes part in, e.g.
/// `placer::plugin!(NetQos, "NetQoS", [pre_score, score]);`.
/// Points: `queue_sort`, `pre_enqueue`, `pre_filter`, `pre_filter_extensions`,
/// `filter`, `post_filter`, `pre_score`, `score`, `reserve`, `permit`,
/// `pre_bind`, `bind`, `post_bind`, `enqueue_extensions` (queueing hints).
#[macro_export]
macro_rules! plugin {
    ($ty:ty, $name:expr, [$($point:ident),* $(,)?]) => {
        impl $crate::framework::Plugin for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            $($crate::plugin!(@as $point);)*
        }
    };
    (@as queue_sort) => {
        fn as_queue_sort(&self) -> Option<&dyn $crate::framework::QueueSortPlugin> { Some(self) }
    };
    (@as pre_enqueue) => {
        fn as_pre_enqueue(&self) -> Option<&dyn $crate::framework::PreEnqueuePlugin> { Some(self) }
    };
    (@as pre_filter) => {
        fn as_pre_filter(&self) -> Option<&dyn $crate::framework::PreFilterPlugin> { Some(self) }
    };
    (@as pre_filter_extensions) => {
        fn as_pre_filter_extensions(&self) -> Option<&dyn $crate::framework::PreFilterExtensions> { Some(self) }
    };
    (@as filter) => {
        fn as_filter(&self) -> Option<&dyn $crate::framework::FilterPlugin> { Some(self) }
    };
    (@as post_filter) => {
        fn as_post_filter(&self) -> Option<&dyn $crate::framework::PostFilterPlugin> { Some(self) }
    };
    (@as pre_score) => {
        fn as_pre_score(&self) -> Option<&dyn $crate::framework::PreScorePlugin> { Some(self) }
    };
    (@as score) => {
        fn as_score(&self) -> Option<&dyn $crate::framework::ScorePlugin> { Some(self) }
    };
    (@as reserve) => {
        fn as_reserve(&self) -> Option<&dyn $crate::framework::ReservePlugin> { Some(self) }
    };
    (@as permit) => {
        fn as_permit(&self) -> Option<&dyn $crate::framework::PermitPlugin> { Some(self) }
    };
    (@as pre_bind) => {
        fn as_pre_bind(&self) -> Option<&dyn $crate::framework::PreBindPlugin> { Some(self) }
    };
    (@as bind) => {
        fn as_bind(&self) -> Option<&dyn $crate::framework::BindPlugin> { Some(self) }
    };
    (@as post_bind) => {
        fn as_post_bind(&self) -> Option<&dyn $crate::framework::PostBindPlugin> { Some(self) }
    };
    (@as enqueue_extensions) => {
        fn as_enqueue_extensions(&self) -> Option<&dyn $crate::framework::EnqueueExtensions> { Some(self) }
    };
}

/// Runs once per pod before any Filter. May store data for Filter in the
/// cycle state. `Skip` disables this plugin's Filter for the pod; a rejection
/// rejects every node with this status.
pub trait PreFilterPlugin: Plugin {
    /// Prepares filtering of `pod`.
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, cluster: &ClusterState) -> Status;

    /// The only nodes `pod` can go to, when the plugin can tell before Filter
    /// (kube-scheduler's `PreFilterResult.NodeNames`); `None` means every
    /// node. Asked after a successful `pre_filter`. The other nodes are not
    /// filtered and fail with "node(s) didn't satisfy plugin(s) [..]".
    fn pre_filter_nodes(&self, _pod: &PodInfo) -> Option<HashSet<String>> {
        None
    }
}

/// Updates what a plugin's PreFilter wrote when one pod is added to or
/// removed from the cluster, as kube-scheduler's `PreFilterExtensions`: the
/// preemption dry run uses them on a clone of the cycle state instead of
/// re-running PreFilter per victim. After `remove_pod(p)` the state must be
/// what PreFilter would write without `p` (for Filter's verdicts), and
/// `add_pod` undoes it. Only called when the plugin's PreFilter succeeded.
pub trait PreFilterExtensions: PreFilterPlugin {
    /// `to_add`, placed on `node`, now counts for `pod`'s filtering.
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status;

    /// `to_remove`, on `node`, no longer counts for `pod`'s filtering.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status;
}

/// Decides whether `pod` may run on `node`. Called concurrently for
/// different nodes. Returns `Success`, `Unschedulable` (eviction could help),
/// `UnschedulableAndUnresolvable` (it cannot) or `Error`.
pub trait FilterPlugin: Plugin {
    /// Checks one node.
    fn filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status;

    /// Checks each of `nodes` whose `candidates` flag is set (see
    /// [`candidates`]), calling `reject` with its index and status for each
    /// one that does not fit, in node order: how the runner filters a
    /// request's nodes, one dynamic call per plugin instead of one per node.
    /// A plugin overrides it to read its cycle state once per batch instead
    /// of once per node; a node must get the status `filter` gives it.
    fn filter_batch(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        candidates: &[bool],
        cluster: &ClusterState,
        reject: &mut dyn FnMut(usize, Status),
    ) {
        for (i, node) in self::candidates(nodes, candidates) {
            let status = self.filter(state, pod, node, cluster);
            if !status.is_success() {
                reject(i, status);
            }
        }
    }
}

/// The nodes of a [`FilterPlugin::filter_batch`] to check, with their indexes.
pub fn candidates<'n>(
    nodes: &'n [&'n NodeInfo],
    candidates: &'n [bool],
) -> impl Iterator<Item = (usize, &'n NodeInfo)> + 'n {
    nodes
        .iter()
        .zip(candidates)
        .enumerate()
        .filter_map(|(i, (node, &candidate))| candidate.then_some((i, *node)))
}

/// What filtering found for a pod no node fits: every node with the status
/// that rejected it (a PreFilter rejection stands for every node).
#[derive(Debug, Clone, Copy)]
pub struct Diagnosis<'a> {
    /// Nodes evaluated.
    pub total: usize,
    /// The rejected nodes with their first rejecting status.
    pub failed: &'a [(Arc<NodeInfo>, Status)],
    /// The attempt's cycle state after PreFilter, where known (kube-scheduler
    /// hands PostFilter the cycle state; a plugin whose PreFilter never ran,
    /// because an earlier one rejected the pod, finds nothing of its own).
    pub state: Option<&'a CycleState>,
}

/// A node the pod is nominated to once the victims are gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Nomination {
    /// The node.
    pub node: String,
    /// Pods to evict from it, most important first.
    pub victims: Vec<PodInfo>,
}

/// What should happen to the pod's `status.nominatedNodeName` after a
/// failed attempt (kube-scheduler's `NominatingInfo`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Nominating {
    /// Leave it as it is.
    #[default]
    Unchanged,
    /// Clear it: the pod has no node waiting for it.
    Clear,
    /// Evict the victims and nominate the node.
    Nominate(Nomination),
}

/// A PostFilter plugin's (or the whole PostFilter point's) answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PostFilterResult {
    /// `Success` when a nomination was found; otherwise why not. Its
    /// message is appended to the FitError message.
    pub status: Status,
    /// What to do with the pod's nomination.
    pub nominating: Nominating,
    /// Writes the scheduling loop sends before it reports the attempt
    /// (DynamicResources deallocating a claim that blocks the pod); when
    /// one fails, its error replaces the PostFilter part of the message,
    /// as kube-scheduler's plugin returns it.
    pub writes: Vec<ApiWrite>,
}

/// Runs when no node fits a pod (standalone mode), to make it fit in a later
/// attempt, typically by preemption. Plugins only decide: the scheduling loop
/// evicts the victims and writes the nomination.
pub trait PostFilterPlugin: Plugin {
    /// Looks for a way to make `pod` fit. `handle` runs the profile's PreFilter
    /// and Filter plugins; to try hypothetical states the plugin may remove
    /// pods from `cluster` and put them back (kube-scheduler's mutable
    /// snapshot), which costs O(pods moved) instead of a copy of the cluster.
    /// It must leave `cluster` exactly as it found it.
    fn post_filter(
        &self,
        handle: &Framework,
        pod: &PodInfo,
        diagnosis: &Diagnosis<'_>,
        cluster: &mut ClusterState,
    ) -> PostFilterResult;
}

/// Runs once per pod before any Score, with the nodes that passed filtering.
/// `Skip` means the plugin does not apply to this pod: its Score is not run
/// and its weight does not count.
pub trait PreScorePlugin: Plugin {
    /// Prepares scoring of `pod` on `nodes`.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        cluster: &ClusterState,
    ) -> Status;
}

/// The score of one node from one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeScore {
    /// What the plugin measured, before normalization; `None` when the plugin
    /// has no value for this node (it then scores 0 and is left out of
    /// normalization).
    pub raw: Option<i64>,
    /// The score after normalization, clamped by the runner to 0..=100.
    pub score: i64,
    /// Why the node got this score, when that is not obvious (shown by `/explain`).
    pub note: Option<Arc<str>>,
}

impl NodeScore {
    /// A measured value that is also the initial score.
    pub fn value(raw: i64) -> Self {
        NodeScore {
            raw: Some(raw),
            score: raw,
            note: None,
        }
    }

    /// No value for this node: score 0, with the reason.
    pub fn none(note: Arc<str>) -> Self {
        NodeScore {
            raw: None,
            score: 0,
            note: Some(note),
        }
    }

    /// Adds an explanation.
    #[must_use]
    pub fn with_note(mut self, note: Arc<str>) -> Self {
        self.note = Some(note);
        self
    }
}

/// Ranks nodes that passed filtering. `score` is called concurrently per
/// node; `normalize` once with every node's score, to map raw values onto
/// 0..=100. The runner clamps whatever comes out to 0..=100.
pub trait ScorePlugin: Plugin {
    /// Scores one node.
    fn score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<NodeScore, Status>;

    /// Scores each of `nodes` into the slot of `scores` at its index (the two
    /// have one length): how the runner scores a request's nodes, one dynamic
    /// call per plugin (or per chunk of nodes in parallel) instead of one per
    /// node, with `score` called directly in between. A plugin overrides it
    /// to read its cycle state once per batch instead of once per node; a
    /// node must get the score `score` gives it. The first `Error` ends the
    /// batch.
    fn score_batch(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        cluster: &ClusterState,
        scores: &mut [NodeScore],
    ) -> Result<(), Status> {
        for (slot, node) in scores.iter_mut().zip(nodes) {
            *slot = self.score(state, pod, node, cluster)?;
        }
        Ok(())
    }

    /// Rewrites `scores[i].score` from the raw values; the default keeps them.
    fn normalize(&self, _state: &CycleState, _pod: &PodInfo, _scores: &mut [NodeScore]) -> Status {
        Status::success()
    }
}

/// Claims what the pod will use on its node before the binding cycle starts
/// (standalone mode), so the next pod's cycle does not count it as free:
/// kube-scheduler's `ReservePlugin`. Runs right after the pod is assumed in
/// the cache, in plugin order; the first failure stops the run, and then
/// every Reserve plugin's `unreserve` runs, in reverse order.
pub trait ReservePlugin: Plugin {
    /// Reserves what `pod` needs on `node`. `Unschedulable` rejects the
    /// pod for this attempt (it waits for a cluster change); `Error` fails it.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;

    /// Gives back what `reserve` took. Called when any later step of the
    /// pod's scheduling or binding fails, also for plugins whose `reserve`
    /// did not run or failed, so it must be idempotent and must not fail.
    /// Returns the API writes that undo what PreBind wrote (kube-scheduler's
    /// DynamicResources takes the pod out of a claim's `reservedFor`): the
    /// caller sends them, and only logs their failures, as kube-scheduler
    /// does (the next attempt finds the claim as it is).
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Vec<ApiWrite>;
}

/// A Permit plugin's verdict on a reserved pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Permit {
    /// The pod may be bound.
    Allow,
    /// The binding cycle waits at most this long for the plugin (or
    /// another one) to allow the pod through [`WaitingPods`]; at the end of
    /// it the pod is rejected. Longer than 15 minutes counts as 15.
    Wait(Duration),
    /// The pod is not bound: `Unschedulable` (or unresolvable) sends it
    /// back to wait for a cluster change, `Error` to backoff.
    Deny(Status),
}

/// The last word before a reserved pod is bound (standalone mode):
/// kube-scheduler's `PermitPlugin`, for gang scheduling and admission
/// gates. Runs in the scheduling cycle; a `Wait` is waited for in the
/// binding cycle, so the loop goes on with the next pod meanwhile.
pub trait PermitPlugin: Plugin {
    /// Decides for `pod` on `node`. `waiting` holds the pods other Permit
    /// calls told to wait, for a plugin that allows or rejects them now.
    fn permit(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        waiting: &WaitingPods,
    ) -> Permit;
}

/// Makes what a pod needs on its node real before the pod is bound there
/// (standalone mode): kube-scheduler's `PreBindPlugin`, e.g. binding the
/// pod's volumes or allocating its claims. Runs in the binding cycle, in
/// plugin order, with the API client; the first failure stops the cycle
/// and unreserves the pod.
pub trait PreBindPlugin: Plugin {
    /// Whether `pre_bind` has anything to do for this pod (kube-scheduler's
    /// `PreBindPreFlight`): `Success` if it will act, `Skip` if not (its
    /// `pre_bind` is then not called), `Error` to fail the pod. When any
    /// plugin will act, the binding cycle first records the node in the
    /// pod's `status.nominatedNodeName`, so other components see where the
    /// pod is going while PreBind takes its time.
    fn pre_bind_pre_flight(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;

    /// Does the work. `Unschedulable` sends the pod back to wait for a
    /// cluster change, anything else but `Success` fails it to backoff.
    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
        client: &'a kube::Client,
    ) -> BoxFuture<'a, Status>;
}

/// Binds the pod to its node (standalone mode): kube-scheduler's
/// `BindPlugin`. Bind plugins run in order until one does not `Skip`; a
/// profile whose plugins include none binds with DefaultBinder.
pub trait BindPlugin: Plugin {
    /// Binds `pod` to `node`, or `Skip`s to leave it to the next plugin.
    fn bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
        client: &'a kube::Client,
    ) -> BoxFuture<'a, Status>;
}

/// Told that a pod was bound (standalone mode): kube-scheduler's
/// `PostBindPlugin`, informational, for cleaning up what a plugin kept.
pub trait PostBindPlugin: Plugin {
    /// `pod` is bound to `node`.
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str);
}
