//! Reserve, Unreserve, Permit, PreBindPreFlight, PreBind, Bind and PostBind:
//! the points between choosing a node and the pod being bound there
//! (standalone mode), as kube-scheduler's framework runtime runs them.
//!
//! The scheduling loop decides when each runs (`modes/standalone/binding.rs`,
//! after kube-scheduler's `schedule_one.go`); here each point runs its
//! plugins in order, times them and words their errors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ExtensionPoint, Framework, PluginError};
use crate::framework::interface::Permit;
use crate::framework::{ApiWrite, Code, CycleState, Status, WaitingPod, WaitingPods};
use crate::objects::PodInfo;

/// The PreBind plugins whose PreBindPreFlight skipped, for PreBind.
#[derive(Debug, Clone, Default)]
struct PreBindSkips(Vec<&'static str>);

impl Framework {
    /// Runs every Reserve plugin in order; the first that does not succeed
    /// stops the run and is returned. The caller then runs [`Framework::unreserve`].
    pub fn reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Result<(), PluginError> {
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_reserve() else {
                continue;
            };
            let status = self
                .timed(p.name(), ExtensionPoint::Reserve, || {
                    p.reserve(state, pod, node)
                })
                .with_plugin(p.name());
            if !status.is_success() {
                return Err(PluginError {
                    point: ExtensionPoint::Reserve,
                    status,
                });
            }
        }
        Ok(())
    }

    /// Runs every Reserve plugin's Unreserve, in reverse order; returns the
    /// API writes they asked for, in that order.
    #[must_use = "the writes undo what PreBind wrote; send them"]
    pub fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Vec<ApiWrite> {
        let mut writes = Vec::new();
        for wp in self.plugins.iter().rev() {
            if let Some(p) = wp.plugin.as_reserve() {
                let mut w = self.timed(p.name(), ExtensionPoint::Unreserve, || {
                    p.unreserve(state, pod, node)
                });
                writes.append(&mut w);
            }
        }
        writes
    }

    /// Runs every Permit plugin. A denial stops the run and is returned; when
    /// none denies but some asked to wait, the pod is added to `waiting`
    /// (for the binding cycle's [`Framework::wait_on_permit`]) and returned.
    pub fn permit(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
        waiting: &WaitingPods,
    ) -> Result<Option<Arc<WaitingPod>>, PluginError> {
        let mut waits: Vec<(&'static str, Duration)> = Vec::new();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_permit() else {
                continue;
            };
            let verdict = self.timed(p.name(), ExtensionPoint::Permit, || {
                p.permit(state, pod, node, waiting)
            });
            match verdict {
                Permit::Allow => {}
                Permit::Wait(wait) => waits.push((p.name(), wait)),
                Permit::Deny(status) => {
                    // A plugin that denies with Success or Skip still denies.
                    let status = match status.code() {
                        Code::Success | Code::Skip => Status::error(format!(
                            "Permit denied with status {}",
                            status.code().as_str()
                        )),
                        _ => status,
                    };
                    return Err(PluginError {
                        point: ExtensionPoint::Permit,
                        status: status.with_plugin(p.name()),
                    });
                }
            }
        }
        if waits.is_empty() {
            return Ok(None);
        }
        Ok(Some(waiting.add(&pod.uid, pod.key(), waits)))
    }

    /// Waits until the pod's Permit wait (if any) is over: allowed by every
    /// plugin it waited for, or rejected (by a plugin, or when one's time ran out).
    pub async fn wait_on_permit(
        &self,
        pod: &PodInfo,
        waiting: &WaitingPods,
    ) -> Result<(), PluginError> {
        let Some(waiter) = waiting.get(&pod.uid) else {
            return Ok(());
        };
        let started = Instant::now();
        let outcome = waiter.wait().await;
        waiting.remove(&pod.uid);
        if let Some(observer) = &self.observer {
            let plugin = outcome.as_ref().err().map_or("", Status::plugin);
            observer.plugin_duration(
                plugin,
                ExtensionPoint::Permit,
                started.elapsed().as_secs_f64(),
            );
        }
        outcome.map_err(|status| PluginError {
            point: ExtensionPoint::Permit,
            status,
        })
    }

    /// Asks every PreBind plugin whether it has work for this pod. True if
    /// any has (a plugin that skips is then not run at PreBind).
    pub fn pre_bind_pre_flight(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Result<bool, PluginError> {
        let mut skips = PreBindSkips::default();
        let mut acting = false;
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_bind() else {
                continue;
            };
            let status = self
                .timed(p.name(), ExtensionPoint::PreBindPreFlight, || {
                    p.pre_bind_pre_flight(state, pod, node)
                })
                .with_plugin(p.name());
            match status.code() {
                Code::Success => acting = true,
                Code::Skip => skips.0.push(p.name()),
                Code::Error => {
                    return Err(PluginError {
                        point: ExtensionPoint::PreBindPreFlight,
                        status,
                    });
                }
                other => {
                    return Err(PluginError {
                        point: ExtensionPoint::PreBindPreFlight,
                        status: Status::error(format!(
                            "returned {:?}, which is unsupported: PreBindPreFlight returns Success, Skip or Error",
                            other.as_str()
                        ))
                        .with_plugin(p.name()),
                    });
                }
            }
        }
        state.write(skips);
        Ok(acting)
    }

    /// Runs the PreBind plugins that did not skip at PreBindPreFlight, in
    /// order; the first that does not succeed stops the run.
    pub async fn pre_bind(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
        client: &kube::Client,
    ) -> Result<(), PluginError> {
        let skips = state.read::<PreBindSkips>();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_bind() else {
                continue;
            };
            if skips.is_some_and(|s| s.0.contains(&p.name())) {
                continue;
            }
            let started = Instant::now();
            let status = p
                .pre_bind(state, pod, node, client)
                .await
                .with_plugin(p.name());
            self.observe(p.name(), ExtensionPoint::PreBind, started);
            if !status.is_success() {
                return Err(PluginError {
                    point: ExtensionPoint::PreBind,
                    status,
                });
            }
        }
        Ok(())
    }

    /// Runs the Bind plugins in order until one does not skip. The profile
    /// must have one (the policy adds DefaultBinder to a profile that lists
    /// none); if every one skips, the pod is not bound and that is an error.
    pub async fn bind(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
        client: &kube::Client,
    ) -> Result<(), PluginError> {
        let mut last = None;
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_bind() else {
                continue;
            };
            let started = Instant::now();
            let status = p.bind(state, pod, node, client).await.with_plugin(p.name());
            self.observe(p.name(), ExtensionPoint::Bind, started);
            match status.code() {
                Code::Success => return Ok(()),
                Code::Skip => last = Some(p.name()),
                _ => {
                    return Err(PluginError {
                        point: ExtensionPoint::Bind,
                        status,
                    });
                }
            }
        }
        let status = Status::error(match last {
            Some(_) => "every Bind plugin skipped the pod",
            None => "the profile has no Bind plugin",
        });
        Err(PluginError {
            point: ExtensionPoint::Bind,
            status: status.with_plugin(last.unwrap_or("")),
        })
    }

    /// Tells every PostBind plugin that the pod is bound.
    pub fn post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        for wp in &self.plugins {
            if let Some(p) = wp.plugin.as_post_bind() {
                self.timed(p.name(), ExtensionPoint::PostBind, || {
                    p.post_bind(state, pod, node);
                });
            }
        }
    }

    /// Reports an asynchronous plugin's duration since `started`.
    fn observe(&self, plugin: &'static str, point: ExtensionPoint, started: Instant) {
        if let Some(observer) = &self.observer {
            observer.plugin_duration(plugin, point, started.elapsed().as_secs_f64());
        }
    }
}
