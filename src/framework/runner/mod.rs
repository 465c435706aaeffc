//! Runs a profile's plugins: the one place that calls them, as
//! kube-scheduler's framework runtime is.
//!
//! The runner owns every extension point: the order of the plugins, the
//! parallelism over nodes, normalization, clamping and the weighted sum of
//! design §6, the timing reported to the [`Observer`], and the wording of a
//! plugin's `Error` ([`PluginError`]). Plugins only see one pod and one node
//! (or the node list in PreScore). One file per group of points:
//!
//! | file | points |
//! | --- | --- |
//! | `queue.rs` | QueueSort, PreEnqueue (standalone queue) |
//! | `filter.rs` | PreFilter, Filter, PostFilter |
//! | `extensions.rs` | PreFilter extensions (AddPod, RemovePod) |
//! | `score.rs` | PreScore, Score, NormalizeScore and the weighted sum |
//! | `binding.rs` | Reserve, Unreserve, Permit, PreBind, Bind, PostBind (standalone) |

mod binding;
mod extensions;
mod filter;
mod queue;
mod score;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Instant;

use crate::framework::Status;
use crate::framework::interface::Plugin;
use crate::framework::queueing::Registrations;
use crate::objects::NodeInfo;

pub use queue::QueueSort;
pub use score::{PluginScores, ScoreTable};

/// Below this many nodes the per-node work is cheaper than handing it to
/// another thread: on 2 cores rayon did not pay at 5,000 nodes (~0.08 µs per
/// node and plugin after the label-store change; the scale-shaped standalone
/// cycle, measured again: 20-70 % more CPU per attempt, no faster; see
/// docs/benchmarks.md).
const PARALLEL_MIN_NODES: usize = 16_384;

/// Nodes per parallel Filter or Score batch: large enough that a batch's
/// dynamic call and its cycle-state read are lost in its nodes' work.
const PARALLEL_CHUNK: usize = 1024;

/// Highest score the extender protocol allows (`MaxExtenderPriority`).
pub const MAX_EXTENDER_SCORE: i64 = 10;

/// How a caller holds the nodes it hands the runner: records shared with the
/// cache (`Arc<NodeInfo>`, as the standalone cycle and `/explain` keep them)
/// or borrowed under the cache's read guard (`&NodeInfo`, as the extender
/// verbs do, so a request touches no reference count per node: at 5,000
/// names that was 20,000 atomic operations per request).
pub trait NodeRef: Deref<Target = NodeInfo> + Sync + Sized {
    /// `nodes` as PreScore plugins receive them.
    fn as_refs(nodes: &[Self]) -> Cow<'_, [&NodeInfo]>;
}

impl NodeRef for Arc<NodeInfo> {
    fn as_refs(nodes: &[Self]) -> Cow<'_, [&NodeInfo]> {
        Cow::Owned(nodes.iter().map(|n| &**n).collect())
    }
}

impl NodeRef for &NodeInfo {
    fn as_refs(nodes: &[Self]) -> Cow<'_, [&NodeInfo]> {
        Cow::Borrowed(nodes)
    }
}

/// A plugin enabled in a profile, with the weight of its score.
#[derive(Clone)]
pub struct WeightedPlugin {
    /// The plugin.
    pub plugin: Arc<dyn Plugin>,
    /// Multiplies its score; > 0 (checked by the policy loader).
    pub weight: i64,
}

/// An extension point, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionPoint {
    /// PreEnqueue (standalone mode, when a pod enters the queue).
    PreEnqueue,
    /// PreFilter.
    PreFilter,
    /// PreFilter extension AddPod (preemption dry run).
    AddPod,
    /// PreFilter extension RemovePod (preemption dry run).
    RemovePod,
    /// Filter (one observation covers every node of the request).
    Filter,
    /// PostFilter (standalone mode, when no node fits).
    PostFilter,
    /// PreScore.
    PreScore,
    /// Score (one observation covers every node of the request).
    Score,
    /// NormalizeScore.
    NormalizeScore,
    /// Reserve (standalone mode, once a node is chosen).
    Reserve,
    /// Unreserve (standalone mode, when a reserved pod is not bound).
    Unreserve,
    /// Permit (standalone mode; its wait is observed as the same point).
    Permit,
    /// PreBindPreFlight (standalone mode, at the start of the binding cycle).
    PreBindPreFlight,
    /// PreBind (standalone mode).
    PreBind,
    /// Bind (standalone mode).
    Bind,
    /// PostBind (standalone mode).
    PostBind,
}

impl ExtensionPoint {
    /// The name kube-scheduler uses for the point.
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionPoint::PreEnqueue => "PreEnqueue",
            ExtensionPoint::PreFilter => "PreFilter",
            ExtensionPoint::AddPod => "PreFilterExtensionAddPod",
            ExtensionPoint::RemovePod => "PreFilterExtensionRemovePod",
            ExtensionPoint::Filter => "Filter",
            ExtensionPoint::PostFilter => "PostFilter",
            ExtensionPoint::PreScore => "PreScore",
            ExtensionPoint::Score => "Score",
            ExtensionPoint::NormalizeScore => "NormalizeScore",
            ExtensionPoint::Reserve => "Reserve",
            ExtensionPoint::Unreserve => "Unreserve",
            ExtensionPoint::Permit => "Permit",
            ExtensionPoint::PreBindPreFlight => "PreBindPreFlight",
            ExtensionPoint::PreBind => "PreBind",
            ExtensionPoint::Bind => "Bind",
            ExtensionPoint::PostBind => "PostBind",
        }
    }
}

/// A plugin's `Error` status at an extension point, which fails the whole
/// attempt. Displays as kube-scheduler words it: `running PreFilter plugin
/// "X": ...`, but `running "X" filter plugin: ...` for Filter (its
/// `RunFilterPlugins` words it so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PluginError {
    /// Where it happened.
    pub point: ExtensionPoint,
    /// The plugin's status, naming the plugin.
    pub status: Status,
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (plugin, message) = (self.status.plugin(), self.status.message());
        match self.point {
            ExtensionPoint::Filter => write!(f, "running {plugin:?} filter plugin: {message}"),
            point => write!(f, "running {} plugin {plugin:?}: {message}", point.as_str()),
        }
    }
}

/// Receives how long each plugin took at each extension point (metrics).
pub trait Observer: Send + Sync {
    /// `plugin` spent `seconds` at `point` for one pod.
    fn plugin_duration(&self, plugin: &'static str, point: ExtensionPoint, seconds: f64);
}

/// The plugins of one profile, in policy order, and the logic that runs them.
#[derive(Clone)]
pub struct Framework {
    profile: String,
    plugins: Vec<WeightedPlugin>,
    observer: Option<Arc<dyn Observer>>,
    /// What each plugin's rejections wait for (queueing hints).
    registrations: Registrations,
}

impl Framework {
    /// A framework for profile `profile` running `plugins` in this order.
    pub fn new(profile: impl Into<String>, plugins: Vec<WeightedPlugin>) -> Self {
        let registrations = Registrations::of(plugins.iter().map(|p| &*p.plugin));
        Framework {
            profile: profile.into(),
            plugins,
            observer: None,
            registrations,
        }
    }

    /// Whether `observed` may make `pod`, rejected by `rejectors` (plugin
    /// names), schedulable: the queueing hints of those plugins decide
    /// ([`crate::framework::queueing`]).
    pub fn worth_retrying(
        &self,
        pod: &crate::objects::PodInfo,
        rejectors: &[&'static str],
        observed: &crate::framework::queueing::Observed,
    ) -> bool {
        self.registrations.worth_retrying(pod, rejectors, observed)
    }

    /// Reports plugin durations to `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Runs `f`, reporting its duration as `plugin` at `point`.
    fn timed<T>(&self, plugin: &'static str, point: ExtensionPoint, f: impl FnOnce() -> T) -> T {
        let Some(observer) = &self.observer else {
            return f();
        };
        let start = Instant::now();
        let out = f();
        observer.plugin_duration(plugin, point, start.elapsed().as_secs_f64());
        out
    }

    /// The profile's scheduler name.
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// The enabled plugins with their weights.
    pub fn plugins(&self) -> &[WeightedPlugin] {
        &self.plugins
    }

    /// True if any enabled plugin filters.
    pub fn has_filters(&self) -> bool {
        self.plugins.iter().any(|p| p.plugin.as_filter().is_some())
    }

    /// True if any enabled plugin binds.
    pub fn has_bind_plugins(&self) -> bool {
        self.plugins.iter().any(|p| p.plugin.as_bind().is_some())
    }

    /// True if any enabled plugin runs at PostFilter.
    pub fn has_post_filters(&self) -> bool {
        self.plugins
            .iter()
            .any(|p| p.plugin.as_post_filter().is_some())
    }
}
