//! The state the whole service shares: the policy in force, the cluster cache
//! and the metrics, and the [`Mode`] it runs in.
//!
//! It is built once at start-up and cloned into every part that reads it:
//! both modes, the ops handlers and the policy reloader. Each mode keeps its
//! own parts next to it (the extender its binder, limits and parked pods in
//! [`crate::modes::extender::ExtenderState`]; the standalone loop its queue).
//! Handlers take only the part they read, as axum substates: [`Arc<Cache>`],
//! [`LivePolicy`] or [`Arc<Metrics>`], through the [`FromRef`] impls below.

pub mod leader_health;
mod lifecycle;

use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::extract::FromRef;
use clap::ValueEnum;

use crate::cache::Cache;
use crate::metrics::Metrics;
use crate::policy::CompiledPolicy;

pub use leader_health::LeaderHealth;
pub use lifecycle::Lifecycle;

/// What `placer serve` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Serve the extender verbs for kube-scheduler.
    Extender,
    /// Schedule pods that name one of placer's profiles.
    Standalone,
    /// Both at once.
    Both,
}

impl Mode {
    /// True when the extender verbs are served.
    pub fn serves_verbs(self) -> bool {
        matches!(self, Mode::Extender | Mode::Both)
    }

    /// True when the scheduling loop runs.
    pub fn schedules(self) -> bool {
        matches!(self, Mode::Standalone | Mode::Both)
    }
}

/// The policy in force; replaced atomically on reload, read lock-free.
pub type LivePolicy = Arc<ArcSwap<CompiledPolicy>>;

/// What every part of the service reaches.
#[derive(Clone)]
pub struct AppState {
    /// The policy in force.
    pub policy: LivePolicy,
    /// The cluster cache.
    pub cache: Arc<Cache>,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Serving, terminating or stopping (`/readyz`, the listener, the scheduling loop).
    pub lifecycle: Arc<Lifecycle>,
    /// What leader election last confirmed (`/healthz`).
    pub leader_health: Arc<LeaderHealth>,
}

impl AppState {
    /// State for `policy` over `cache`, with fresh metrics that the policy's
    /// runner reports plugin timings to.
    pub fn new(policy: CompiledPolicy, cache: Arc<Cache>) -> Self {
        let metrics = Arc::new(Metrics::new());
        let policy = CompiledPolicy::observed(policy.policy().clone(), metrics.clone());
        AppState {
            policy: Arc::new(ArcSwap::from_pointee(policy)),
            cache,
            metrics,
            lifecycle: Arc::default(),
            leader_health: Arc::default(),
        }
    }
}

impl FromRef<AppState> for Arc<Cache> {
    fn from_ref(state: &AppState) -> Self {
        state.cache.clone()
    }
}

impl FromRef<AppState> for LivePolicy {
    fn from_ref(state: &AppState) -> Self {
        state.policy.clone()
    }
}

impl FromRef<AppState> for Arc<Lifecycle> {
    fn from_ref(state: &AppState) -> Self {
        state.lifecycle.clone()
    }
}

impl FromRef<AppState> for Arc<LeaderHealth> {
    fn from_ref(state: &AppState) -> Self {
        state.leader_health.clone()
    }
}

impl FromRef<AppState> for Arc<Metrics> {
    fn from_ref(state: &AppState) -> Self {
        state.metrics.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::policy;

    /// The service state over the repository's policy and an empty (unsynced) cache.
    pub(crate) fn state() -> AppState {
        let policy = policy::parse(include_str!("../policy.yaml"), "policy.yaml").unwrap();
        AppState::new(CompiledPolicy::new(policy), Arc::new(Cache::new()))
    }
}
