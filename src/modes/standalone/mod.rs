//! Standalone mode: placer as a scheduler of its own for the pods whose
//! `spec.schedulerName` names one of its profiles (design §8).
//!
//! - [`queue`]: active / backoff / unschedulable sub-queues, gated pods held out;
//! - [`cycle`]: one attempt on a snapshot (filter, post-filter, score, a random pick among
//!   the best, as kube-scheduler picks);
//! - [`sample`]: `percentageOfNodesToScore` and where each attempt starts looking;
//! - [`view`]: the snapshot: a replica of the cache synced per attempt, so no lock is held meanwhile;
//! - [`nominator`]: pods waiting for the room their preemption made;
//! - [`preempt`]: evicting the victims preemption chose;
//! - [`scheduler`]: the loop: watch → queue → cycle → assume → asynchronous bind;
//! - [`binding`]: Reserve and Permit after the cycle, then the binding cycle
//!   (Permit's wait, PreBind, Bind, PostBind), unreserving on any failure;
//! - [`events`]: events.k8s.io events with kube-scheduler's series;
//! - [`report`]: `Scheduled` / `FailedScheduling` events and `PodScheduled`;
//! - [`leader`]: Lease-based leader election so only one replica schedules.
//!
//! Pods are bound by the profile's Bind plugins: DefaultBinder
//! (`crate::plugins::default_binder`) unless the profile names another.

pub mod binding;
pub mod cycle;
pub mod events;
pub mod leader;
pub mod nominator;
pub mod preempt;
pub mod queue;
pub mod report;
pub mod sample;
pub mod scheduler;
pub mod view;

#[cfg(test)]
mod tests;
