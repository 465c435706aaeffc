//! The end-to-end harness: a real control plane, stock kube-scheduler and placer as processes.
//!
//! Start with [`TestEnv::new`]: it joins the control plane shared by the test binary
//! (`control_plane`), and gives the test its own namespace, node label, scheduler name and temp
//! dir (`env`). From there:
//! - `fixtures`: `Node`s (schedulable without kubelets), `Pod`s, `PriorityClass`es;
//! - `scheduler`: kube-scheduler with a `KubeSchedulerConfiguration` builder;
//! - `placer` and `policy`: the placer process and its policy file;
//! - `scenario`: placer + kube-scheduler as one rig, node shapes (`nodeCacheCapable`), the
//!   capability policy, zone layouts;
//! - `wait`: bound pods, `PodScheduled` conditions, `FailedScheduling` events;
//! - `logs`: lines and `key=value` fields of placer's and kube-scheduler's logs;
//! - `manifests`: loading `manifests/` and applying it with server-side dry run;
//! - `compare` and `bind_watch`: standalone placer and stock kube-scheduler running the same
//!   plugins; when and where each pod of a namespace got bound; `bound_once`: every pod bound
//!   exactly once according to the scheduler's log and events;
//! - `kwok`: fake nodes whose kubelet kwok plays (Ready, leases, pods Running, deletions done);
//! - `service`: a Service in front of placer replicas (readiness probes, endpoint propagation,
//!   kube-proxy's routing of new connections), for rollouts;
//! - `procstat` and `prom`: CPU seconds and RSS from `/proc`, histograms from `/metrics`;
//! - `standalone`: placer as the only scheduler: the shipped standalone profile under the test's
//!   scheduler name, events and FitError texts, the leader-election Lease, restricted identities.
//!
//! Plumbing: `process` (children that die with the test binary, logs), `workdir` (temp dirs that
//! are removed even after a crash), `probe` (free ports, readiness), `pki` (certificates), `ids`.

// The harness is a library for all test modules; not every item is used by every test.
#![allow(dead_code, unused_imports)]

pub mod bind_watch;
pub mod bound_once;
pub mod compare;
mod control_plane;
pub mod controller_manager;
mod env;
mod fixtures;
mod ids;
pub mod kwok;
pub mod logs;
pub mod manifests;
pub mod pki;
mod placer;
mod policy;
pub mod probe;
pub mod process;
pub mod procstat;
pub mod prom;
mod scenario;
mod scheduler;
pub mod service;
mod standalone;
mod wait;
mod workdir;

pub use env::{RUN_LABEL, TestEnv};
pub use fixtures::{NodeBuilder, PodBuilder, node_allocation};
pub use placer::{Placer, placer_cli};
pub use policy::Policy;
pub use probe::{Caller, http_get};
pub(crate) use scenario::per_node_shape;
pub use scenario::{
    ExtenderRig, HW_ANNOTATION, HW_LABEL, HW_REASON, NodeShape, ZONE_LABEL, ZONE_LAYOUT, ZonePods,
    capability_policy, zone_spread_policy,
};
pub use scheduler::{ExtenderConfig, Scheduler, SchedulerConfig, ScorePlugins};
pub use standalone::{
    FOREIGN_NODE_REASONS, NO_VICTIMS, NOT_HELPFUL, REPORTING_CONTROLLER, both_policy,
    check_fit_error, fit_error, shipped_leader_election_rules, shipped_rules_in,
    shipped_standalone_rules, standalone_policy,
};
pub use wait::SCHEDULING_TIMEOUT;
