//! The scheduling framework: statuses, cycle state, one trait per extension
//! point, and the runner that executes a profile's plugins.
//!
//! Both modes and the offline tools go through here: the extender verbs call
//! [`Framework::filter_nodes`] and [`Framework::score`], `/explain` and
//! `placer score` call [`explain()`], and standalone mode adds
//! [`Framework::post_filter`] (preemption) when no node fits and, once a node
//! is chosen, the binding points (Reserve, Permit, PreBind, Bind, PostBind:
//! `runner/binding.rs`, with Permit's [`WaitingPods`]); its queue runs
//! [`Framework::pre_enqueue`] and orders pods by [`Framework::queue_sort`]. Plugins read
//! the views in [`crate::objects`] and the cluster in [`crate::cache`]; both
//! sit below this floor.

mod api_write;
mod cache_needs;
mod cycle_state;
pub mod explain;
mod fit_error;
pub mod interface;
mod pod_events;
mod pre_filter_result;
pub mod queueing;
mod runner;
pub mod scoring;
mod status;
mod waiting;

pub use api_write::ApiWrite;
pub use cache_needs::CacheNeeds;
pub use cycle_state::CycleState;
pub use explain::{Explanation, NODE_NOT_FOUND, explain};
pub use fit_error::{ReasonHistogram, fit_error_message};
pub use interface::{
    BindPlugin, Diagnosis, FilterPlugin, MAX_NODE_SCORE, MIN_NODE_SCORE, NodeScore, Nominating,
    Nomination, Permit, PermitPlugin, Plugin, PostBindPlugin, PostFilterPlugin, PostFilterResult,
    PreBindPlugin, PreEnqueuePlugin, PreFilterExtensions, PreFilterPlugin, PreScorePlugin,
    QueueSortPlugin, QueuedPodInfo, ReservePlugin, ScorePlugin, candidates,
};
pub use pod_events::{PodEventSink, PodEvents};
pub use pre_filter_result::PreFilterResult;
pub use queueing::{EnqueueExtensions, EventHint, QueueingHint, queue_if};
pub use runner::{
    ExtensionPoint, Framework, MAX_EXTENDER_SCORE, NodeRef, Observer, PluginError, PluginScores,
    QueueSort, ScoreTable, WeightedPlugin,
};
pub use status::{Code, Reason, Status};
pub use waiting::{MAX_PERMIT_WAIT, WaitingPod, WaitingPods, go_duration, parse_go_duration};
