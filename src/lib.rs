//! # placer
//!
//! A Kubernetes scheduling service: a scheduler extender for stock
//! kube-scheduler and, with the same plugins, a standalone scheduler.
//!
//! The design is written up in `docs/design.md`; comments cite it as "design §n".
//!
//! Where to start reading:
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`protocol`] | the extender wire types (`ExtenderArgs`, `ExtenderFilterResult`, ...) |
//! | [`objects`] | views of API objects (pods, nodes, resources, volumes, budgets, ...): the ground floor |
//! | [`framework`] | statuses, cycle state, one trait per extension point, the runner, explanations |
//! | [`plugins`] | one file per plugin and the registry that builds them from the policy |
//! | [`cache`] | nodes, assigned pods and the zone index, plus keyed stores (claims, budgets, namespaces, ...), fed by watchers or a snapshot file |
//! | [`policy`] | the policy file: strict loading, defaults, compiled profiles |
//! | [`yaml`] | bounded YAML reading for policy and snapshot files: nesting and alias limits, field positions |
//! | [`explain`] | "why is my pod pending?": a live pod against every node, kube-scheduler's verdicts next to placer's |
//! | [`modes`] | extender mode (the HTTP verbs) and standalone mode |
//! | [`ops`] | health, debug endpoints, metrics, logging, signals, TLS and policy reload |
//! | [`server`] | the HTTP router and the listener: connection cap, timeouts, drain |
//! | [`cli`] | the command line |
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cache;
pub mod cli;
pub mod explain;
pub mod framework;
pub mod modes;
pub mod objects;
pub mod ops;
pub mod plugins;
pub mod policy;
pub mod protocol;
pub mod server;
pub mod yaml;
