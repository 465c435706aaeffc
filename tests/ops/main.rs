//! Operations against the real `placer` binary (SPEC §4 reload, §9
//! operations): HTTPS and certificate reload, mutual TLS, policy hot reload,
//! `/metrics`, graceful shutdown on SIGTERM.
//!
//! Every file-watch driven expectation is checked by bounded polling
//! ([`support::eventually`]), never by a fixed sleep.

mod fuzz;
mod metrics;
mod mtls;
mod policy_reload;
mod shutdown;
mod support;
mod tls;
