//! The two ways placer runs: as an extender of kube-scheduler (HTTP verbs)
//! and as a standalone scheduler.

pub mod binder;
pub mod extender;
pub mod standalone;

use clap::ValueEnum;

/// What `placer serve` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Serve the extender verbs for kube-scheduler.
    Extender,
    /// Schedule pods that name one of placer's profiles.
    Standalone,
    /// Both at once.
    Both,
}

impl Mode {
    /// True when the extender verbs are served.
    pub fn serves_verbs(self) -> bool {
        matches!(self, Mode::Extender | Mode::Both)
    }

    /// True when the scheduling loop runs.
    pub fn schedules(self) -> bool {
        matches!(self, Mode::Standalone | Mode::Both)
    }
}
