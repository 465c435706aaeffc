//! Operations against the real `placer` binary (design §4 reload, §9
//! operations): HTTPS and certificate reload, mutual TLS, policy hot reload,
//! `/metrics`, graceful shutdown on SIGTERM, signals, connection limits and
//! timeouts, and a seeded fuzz of every verb.
//!
//! Every file-watch driven expectation is checked by bounded polling
//! ([`support::eventually`]), never by a fixed sleep; the few sleeps let
//! time pass on purpose (a connection idle past a timeout).

mod binary;
mod fuzz;
mod limits;
mod listener;
mod metrics;
mod mtls;
mod policy_reload;
mod shutdown;
mod signals;
mod support;
mod tls;
