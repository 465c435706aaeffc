//! QueueSort and PreEnqueue: the points standalone mode's queue runs.

use std::sync::Arc;

use super::{ExtensionPoint, Framework};
use crate::cache::ClusterState;
use crate::framework::Status;
use crate::framework::interface::{Plugin, QueueSortPlugin, QueuedPodInfo};
use crate::objects::PodInfo;

/// The order of the scheduling queue: one QueueSort plugin, as
/// kube-scheduler's `QueueSortFunc`. Not timed: the queue calls it for every
/// comparison, under its lock, where a clock read would cost more than the
/// comparison (kube-scheduler does not time it either).
#[derive(Clone)]
pub struct QueueSort(Sort);

/// Where the order comes from: an enabled plugin (asked through
/// [`Plugin::as_queue_sort`], as a profile's plugins only come as
/// `dyn Plugin`) or a QueueSort plugin given directly.
#[derive(Clone)]
enum Sort {
    Enabled(Arc<dyn Plugin>),
    Direct(Arc<dyn QueueSortPlugin>),
}

impl QueueSort {
    /// The order of `plugin`; `None` when it is no QueueSort plugin.
    pub fn new(plugin: Arc<dyn Plugin>) -> Option<Self> {
        plugin.as_queue_sort()?;
        Some(QueueSort(Sort::Enabled(plugin)))
    }

    /// The order of a QueueSort plugin.
    pub fn from_sort<P: QueueSortPlugin + 'static>(plugin: Arc<P>) -> Self {
        QueueSort(Sort::Direct(plugin))
    }

    /// The plugin's name.
    pub fn name(&self) -> &'static str {
        match &self.0 {
            Sort::Enabled(p) => p.name(),
            Sort::Direct(p) => p.name(),
        }
    }

    /// True when `a` should be scheduled before `b`.
    pub fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        match &self.0 {
            // `new` admitted only QueueSort plugins.
            Sort::Enabled(p) => p.as_queue_sort().is_some_and(|s| s.less(a, b)),
            Sort::Direct(p) => p.less(a, b),
        }
    }
}

impl Framework {
    /// The profile's QueueSort plugin, if it enables one (the first, in
    /// policy order).
    pub fn queue_sort(&self) -> Option<QueueSort> {
        self.plugins
            .iter()
            .find_map(|wp| QueueSort::new(wp.plugin.clone()))
    }

    /// Runs the PreEnqueue plugins in order: the first status other than
    /// `Success` keeps the pod out of the active queue until it changes.
    pub fn pre_enqueue(&self, pod: &PodInfo, cluster: &ClusterState) -> Status {
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_enqueue() else {
                continue;
            };
            let status = self.timed(p.name(), ExtensionPoint::PreEnqueue, || {
                p.pre_enqueue(pod, cluster)
            });
            if !status.is_success() {
                return status.with_plugin(p.name());
            }
        }
        Status::success()
    }
}
