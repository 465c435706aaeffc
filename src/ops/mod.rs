//! Operations: health and readiness, introspection endpoints, logging.

pub mod debug;
pub mod health;
pub mod telemetry;
