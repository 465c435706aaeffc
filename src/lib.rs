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
//! | [`yaml`] | bounded YAML reading for policy and snapshot files: nesting and alias limits, field positions |
//! | [`objects`] | views of API objects (pods, nodes, resources, volumes, budgets, ...) |
//! | [`cache`] | nodes, assigned pods and the zone index, plus keyed stores (claims, budgets, namespaces, ...), fed by watchers or a snapshot file |
//! | [`k8s`] | Kubernetes' own rules plugins and explain read: label selectors, taints, node affinity terms, resource names, pod field validation, argument value types |
//! | [`dra`] | Dynamic Resource Allocation's device allocator (CEL selectors, pools, capacity, the search), which the DynamicResources plugin drives |
//! | [`framework`] | statuses, cycle state, one trait per extension point, the runner, explanations |
//! | [`plugins`] | one file per plugin and the registry that builds them from the policy |
//! | [`policy`] | the policy file: strict loading, defaults, compiled profiles |
//! | [`metrics`] | the Prometheus families (`placer_` prefix) and `/metrics` |
//! | [`state`] | what the whole service shares (live policy, cache, metrics) and the substates handlers take |
//! | [`explain`] | "why is my pod pending?": a live pod against every node, kube-scheduler's verdicts next to placer's |
//! | [`ops`] | health, debug endpoints, the panic layer, logging, signals, TLS and policy reload |
//! | [`modes`] | extender mode (the HTTP verbs and their state), standalone mode, the binder both use |
//! | [`simulate`] | `placer simulate`: standalone mode's loop over an in-memory cluster, on simulated time |
//! | [`server`] | the HTTP router and the listener: connection cap, timeouts, drain |
//! | [`cli`] | the command line |
//!
//! The table runs from the ground floor up: a module uses only those on its
//! floor or below (design §1; the `floors` test checks it).
//!
//! Lints: the ones every target keeps are in the `[lints]` table of
//! `Cargo.toml`. The two below hold for the library alone: it must never
//! panic on what a request, a file or the API server sends. Tests, benches
//! and unit tests (`allow-*-in-tests` in `clippy.toml`) may unwrap their own
//! fixtures, so these are not in the table, which would bind them too.
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod cache;
pub mod cli;
pub mod dra;
pub mod explain;
pub mod framework;
pub mod k8s;
pub mod metrics;
pub mod modes;
pub mod objects;
pub mod ops;
pub mod plugins;
pub mod policy;
pub mod protocol;
pub mod server;
pub mod simulate;
pub mod state;
pub mod yaml;

#[cfg(test)]
mod floors;
#[cfg(test)]
mod testing;
