//! HTTP tests of placer's service: every route of design §3 and every status
//! code of §3.1, driven in-process through `placer::server::router` with
//! `tower::ServiceExt::oneshot`, plus one test module that runs the real
//! binary over TCP.
//!
//! Request bodies are written the way kube-scheduler's Go encoder writes them
//! (compact, PascalCase keys, `null` for the unused field, see
//! `support`), and answers are compared byte for byte wherever the protocol
//! fixes the bytes.
//!
//! Run with `cargo test --test http`.

mod support;

mod access;
mod bind;
mod errors;
mod explain;
mod explain_pods;
mod filter;
mod freshness;
mod invalid_pod;
mod ops;
mod preempt;
mod prioritize;
mod retry;
