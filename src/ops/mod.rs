//! Operations: health and readiness, metrics, introspection endpoints,
//! logging, TLS, and hot reload of the policy and certificates.

pub mod debug;
pub mod file_watch;
pub mod health;
pub mod metrics;
pub mod policy_reload;
pub mod telemetry;
pub mod tls;
