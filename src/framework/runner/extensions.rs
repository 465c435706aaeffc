//! PreFilter extensions: AddPod and RemovePod, as kube-scheduler's
//! `RunPreFilterExtensionAddPod`/`RunPreFilterExtensionRemovePod`.

use super::{ExtensionPoint, Framework, PluginError};
use crate::cache::ClusterState;
use crate::framework::{Code, CycleState, PreFilterResult, Status};
use crate::objects::{NodeInfo, PodInfo};

/// Which extension to run.
#[derive(Clone, Copy)]
enum Change {
    Add,
    Remove,
}

impl Framework {
    /// Tells every plugin with PreFilter extensions that `to_add` is now on
    /// `node`, updating `state` as PreFilter over the changed cluster would
    /// have written it. Plugins whose PreFilter skipped the pod (in `pre`)
    /// are left out, as kube-scheduler does. Not timed: it only runs in
    /// simulations (the preemption dry run), which must not skew the
    /// per-plugin latency of real attempts.
    pub fn add_pod(
        &self,
        state: &mut CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        to_add: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<(), PluginError> {
        self.run_extensions(Change::Add, state, pre, pod, to_add, node, cluster)
    }

    /// As [`Framework::add_pod`], for `to_remove` leaving `node`.
    pub fn remove_pod(
        &self,
        state: &mut CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        to_remove: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<(), PluginError> {
        self.run_extensions(Change::Remove, state, pre, pod, to_remove, node, cluster)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_extensions(
        &self,
        change: Change,
        state: &mut CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Result<(), PluginError> {
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_filter_extensions() else {
                continue;
            };
            if pre.skipped(p.name()).is_some() {
                continue;
            }
            let (status, point) = match change {
                Change::Add => (
                    p.add_pod(state, pod, other, node, cluster),
                    ExtensionPoint::AddPod,
                ),
                Change::Remove => (
                    p.remove_pod(state, pod, other, node, cluster),
                    ExtensionPoint::RemovePod,
                ),
            };
            if status.code() != Code::Success {
                return Err(PluginError {
                    point,
                    status: as_error(status).with_plugin(p.name()),
                });
            }
        }
        Ok(())
    }
}

/// An extension has no verdict to give: anything but success is an error.
fn as_error(status: Status) -> Status {
    match status.code() {
        Code::Error => status,
        _ => Status::error(status.message()),
    }
}
