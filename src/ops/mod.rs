//! Operations: who may call what, health and readiness, introspection endpoints,
//! logging, signals, TLS, hot reload of the policy and certificates, and
//! handing freed heap back to the system.

pub mod access;
pub mod debug;
pub mod file_watch;
pub mod health;
pub mod memory;
pub mod panic;
pub mod policy_reload;
pub mod rate_limit;
pub mod signals;
pub mod telemetry;
pub mod tls;

/// What asked for a reload of the policy or the TLS files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The watched files changed: skip contents already tried.
    FileChange,
    /// SIGHUP: re-read and apply even if nothing seems to have changed.
    Signal,
}

impl Trigger {
    /// The name in log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::FileChange => "file change",
            Trigger::Signal => "SIGHUP",
        }
    }
}
