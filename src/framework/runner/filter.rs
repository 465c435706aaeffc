//! PreFilter, Filter and PostFilter.

use std::ops::ControlFlow;

use rayon::prelude::*;

use super::{ExtensionPoint, Framework, NodeRef, PARALLEL_CHUNK, PARALLEL_MIN_NODES, PluginError};
use crate::cache::ClusterState;
use crate::framework::interface::{Diagnosis, Nominating, PostFilterResult};
use crate::framework::{Code, CycleState, PreFilterResult, Reason, Status};
use crate::objects::{NodeInfo, PodInfo};

impl Framework {
    /// Runs every PreFilter plugin; the first rejection stops the run.
    pub fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> PreFilterResult {
        self.run_pre_filter(state, pod, cluster, true)
    }

    /// [`Framework::pre_filter`] without timing: for background re-checks,
    /// which must not skew the per-plugin latency of real requests.
    pub fn pre_filter_unobserved(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> PreFilterResult {
        self.run_pre_filter(state, pod, cluster, false)
    }

    fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        cluster: &ClusterState,
        observe: bool,
    ) -> PreFilterResult {
        let mut result = PreFilterResult::default();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_pre_filter() else {
                continue;
            };
            let mut run = || p.pre_filter(state, pod, cluster);
            let status = if observe {
                self.timed(p.name(), ExtensionPoint::PreFilter, run)
            } else {
                run()
            }
            .with_plugin(p.name());
            match status.code() {
                Code::Success => {
                    if let Some(names) = p.pre_filter_nodes(pod) {
                        result.narrow(p.name(), names);
                        if result.rejection.is_some() {
                            break;
                        }
                    }
                }
                Code::Skip => result.skipped.push(status),
                _ => {
                    result.rejection = Some(status);
                    break;
                }
            }
        }
        result
    }

    /// Runs the Filter plugins on one node in order, handing each status to
    /// `visit` until it breaks.
    fn visit_filters(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
        mut visit: impl FnMut(Status) -> ControlFlow<()>,
    ) {
        if let Some(rejection) = &pre.rejection {
            let _ = visit(rejection.clone());
            return;
        }
        if let Some(status) = pre.ruled_out(&node.name) {
            let _ = visit(status);
            return;
        }
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_filter() else {
                continue;
            };
            if let Some(skip) = pre.skipped(p.name()) {
                if visit(skip.clone()).is_break() {
                    return;
                }
                continue;
            }
            let status = p.filter(state, pod, node, cluster).with_plugin(p.name());
            if visit(status).is_break() {
                return;
            }
        }
    }

    /// The first rejecting status for `node`, or `None` when it fits.
    pub fn filter_node(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Option<Status> {
        let mut failure = None;
        self.visit_filters(state, pre, pod, node, cluster, |s| {
            if s.is_success() {
                ControlFlow::Continue(())
            } else {
                failure = Some(s);
                ControlFlow::Break(())
            }
        });
        failure
    }

    /// Runs the PostFilter plugins in order, as kube-scheduler's
    /// `RunPostFilterPlugins`: the first `Success`, `UnschedulableAndUnresolvable`
    /// or `Error` ends the run; otherwise the reasons of every plugin are
    /// joined and the last nomination change any of them asked for is kept.
    pub fn post_filter(
        &self,
        pod: &PodInfo,
        diagnosis: &Diagnosis<'_>,
        cluster: &mut ClusterState,
    ) -> PostFilterResult {
        let mut reasons: Vec<Reason> = Vec::new();
        let mut nominating = Nominating::Unchanged;
        let mut rejector = None;
        let mut writes = Vec::new();
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_post_filter() else {
                continue;
            };
            let mut r = self.timed(p.name(), ExtensionPoint::PostFilter, || {
                p.post_filter(self, pod, diagnosis, cluster)
            });
            r.status = r.status.with_plugin(p.name());
            match r.status.code() {
                Code::Success | Code::UnschedulableAndUnresolvable | Code::Error => {
                    // Earlier plugins' writes stand: kube-scheduler's made them already.
                    writes.append(&mut r.writes);
                    r.writes = writes;
                    return r;
                }
                _ => {}
            }
            if r.nominating != Nominating::Unchanged {
                nominating = r.nominating;
            }
            writes.append(&mut r.writes);
            reasons.extend(r.status.reasons().iter().cloned());
            rejector.get_or_insert(p.name());
        }
        let mut status = Status::from_reasons(Code::Unschedulable, reasons);
        if let Some(name) = rejector {
            status = status.with_plugin(name);
        }
        PostFilterResult {
            status,
            nominating,
            writes,
        }
    }

    /// Every Filter plugin's status for `node` (for explanations).
    pub fn filter_node_all(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Vec<Status> {
        let mut all = Vec::new();
        self.visit_filters(state, pre, pod, node, cluster, |s| {
            all.push(s);
            ControlFlow::Continue(())
        });
        all
    }

    /// The first rejecting status of every node (`None` = fits), in node order.
    pub fn filter_nodes<N: NodeRef>(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
    ) -> Vec<Option<Status>> {
        let mut verdicts: Vec<Option<Status>> = vec![None; nodes.len()];
        self.filter_nodes_each(state, pre, pod, nodes, cluster, |i, s| {
            verdicts[i] = Some(s)
        });
        verdicts
    }

    /// The verdicts of [`Framework::filter_nodes`] as calls of `reject`
    /// (node index, first rejecting status), once per rejected node, instead
    /// of a slot per node: a caller that only lists the rejections (extender
    /// `/filter`) keeps a few statuses, not 5,000 mostly empty ones.
    ///
    /// Runs plugin by plugin over the nodes still feasible (the same verdicts
    /// as node by node, since each node stops at its first rejection), so each
    /// plugin's time is measured once per request, and each plugin is called
    /// once per request
    /// ([`FilterPlugin::filter_batch`](crate::framework::FilterPlugin::filter_batch)),
    /// or once per chunk of nodes in parallel when the request is large. The
    /// calls come in that order: PreFilter's ruled-out nodes, then each
    /// plugin's rejections, each group in node order.
    pub fn filter_nodes_each<N: NodeRef>(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
        mut reject: impl FnMut(usize, Status),
    ) {
        if let Some(rejection) = &pre.rejection {
            for i in 0..nodes.len() {
                reject(i, rejection.clone());
            }
            return;
        }
        let mut fits = vec![true; nodes.len()];
        if pre.node_names.is_some() {
            for (i, n) in nodes.iter().enumerate() {
                if let Some(s) = pre.ruled_out(&n.name) {
                    fits[i] = false;
                    reject(i, s);
                }
            }
        }
        let refs = N::as_refs(nodes);
        for wp in &self.plugins {
            let Some(p) = wp.plugin.as_filter() else {
                continue;
            };
            if pre.skipped(p.name()).is_some() {
                continue;
            }
            self.timed(p.name(), ExtensionPoint::Filter, || {
                if nodes.len() >= PARALLEL_MIN_NODES {
                    // A batch per chunk; the chunks' rejections come back in
                    // node order.
                    let rejected: Vec<(usize, Status)> = refs
                        .par_chunks(PARALLEL_CHUNK)
                        .zip(fits.par_chunks(PARALLEL_CHUNK))
                        .enumerate()
                        .flat_map_iter(|(c, (chunk, candidates))| {
                            let mut rejected = Vec::new();
                            p.filter_batch(state, pod, chunk, candidates, cluster, &mut |i, s| {
                                rejected.push((c * PARALLEL_CHUNK + i, s));
                            });
                            rejected
                        })
                        .collect();
                    for (i, s) in rejected {
                        fits[i] = false;
                        reject(i, s.with_plugin(p.name()));
                    }
                } else {
                    let mut rejected = Vec::new();
                    p.filter_batch(state, pod, &refs, &fits, cluster, &mut |i, s| {
                        rejected.push(i);
                        reject(i, s.with_plugin(p.name()));
                    });
                    for i in rejected {
                        fits[i] = false;
                    }
                }
            });
        }
    }

    /// PreFilter of one scheduling attempt on a fresh cycle state (the first
    /// half of kube-scheduler's `findNodesThatFitPod`): an `Error` from any
    /// plugin fails the attempt; a rejection is left in the result.
    pub fn pre_filter_attempt(
        &self,
        pod: &PodInfo,
        cluster: &ClusterState,
    ) -> Result<(CycleState, PreFilterResult), PluginError> {
        let mut state = CycleState::new();
        let pre = self.pre_filter(&mut state, pod, cluster);
        if let Some(rejection) = pre.rejection.as_ref().filter(|r| r.code() == Code::Error) {
            return Err(PluginError {
                point: ExtensionPoint::PreFilter,
                status: rejection.clone(),
            });
        }
        Ok((state, pre))
    }

    /// [`Framework::filter_nodes`] for a scheduling attempt, after
    /// [`Framework::pre_filter_attempt`]: an `Error` from any plugin fails it.
    pub fn filter_attempt<N: NodeRef>(
        &self,
        state: &CycleState,
        pre: &PreFilterResult,
        pod: &PodInfo,
        nodes: &[N],
        cluster: &ClusterState,
    ) -> Result<Vec<Option<Status>>, PluginError> {
        let verdicts = self.filter_nodes(state, pre, pod, nodes, cluster);
        if let Some(s) = verdicts.iter().flatten().find(|s| s.code() == Code::Error) {
            return Err(PluginError {
                point: ExtensionPoint::Filter,
                status: s.clone(),
            });
        }
        Ok(verdicts)
    }
}
