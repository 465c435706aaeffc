//! Unix signals, handled the way daemons and Kubernetes components do:
//!
//! | signal | effect |
//! | --- | --- |
//! | SIGTERM, SIGQUIT | graceful shutdown: not ready at once, requests answered for `--shutdown-delay-seconds`, then the drain (see [`Lifecycle`]) |
//! | SIGINT | the same without the delay (a terminal's Ctrl-C; Kubernetes sends SIGTERM) |
//! | a second one of these | exits at once (status 1) |
//! | SIGHUP | re-read the policy and the TLS files |
//! | SIGUSR1, SIGUSR2 | logged and ignored |
//!
//! Without handlers, SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT would end the
//! process silently, so all of them are installed first thing at start-up.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing::{info, warn};

use crate::ops::Trigger;
use crate::ops::policy_reload::PolicyReloader;
use crate::ops::tls::TlsReloader;
use crate::state::Lifecycle;

/// What SIGHUP reloads.
pub struct Reloaders {
    /// The policy file.
    pub policy: Arc<PolicyReloader>,
    /// The TLS files, when serving HTTPS.
    pub tls: Option<Arc<TlsReloader>>,
}

/// The installed handlers.
pub struct Signals {
    term: Signal,
    int: Signal,
    quit: Signal,
    hup: Signal,
    usr1: Signal,
    usr2: Signal,
    reloaders: Arc<OnceLock<Reloaders>>,
}

/// Hands the reloaders to the signal task once they exist (after start-up
/// built the state and the TLS configuration).
#[derive(Clone)]
pub struct ReloadHandle(Arc<OnceLock<Reloaders>>);

impl ReloadHandle {
    /// Makes SIGHUP reload these from now on.
    pub fn set(&self, reloaders: Reloaders) {
        // Set once by serve; a second call would be a bug with no harm done.
        let _ = self.0.set(reloaders);
    }
}

impl Signals {
    /// Installs every handler; signals that arrive before [`Signals::run`]
    /// are kept until it starts.
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            quit: signal(SignalKind::quit())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
            reloaders: Arc::new(OnceLock::new()),
        })
    }

    /// Where to register what SIGHUP reloads.
    pub fn reload_handle(&self) -> ReloadHandle {
        ReloadHandle(self.reloaders.clone())
    }

    /// Handles signals until the process ends; the first terminating one
    /// begins `lifecycle`'s shutdown, the drain following after `delay`
    /// (at once for SIGINT).
    pub async fn run(mut self, lifecycle: Arc<Lifecycle>, delay: Duration) {
        loop {
            let (name, delay) = tokio::select! {
                Some(()) = self.term.recv() => ("SIGTERM", delay),
                Some(()) = self.int.recv() => ("SIGINT", Duration::ZERO),
                Some(()) = self.quit.recv() => ("SIGQUIT", delay),
                Some(()) = self.hup.recv() => {
                    self.reload().await;
                    continue;
                }
                Some(()) = self.usr1.recv() => {
                    info!(signal = "SIGUSR1", "signal received; ignored");
                    continue;
                }
                Some(()) = self.usr2.recv() => {
                    info!(signal = "SIGUSR2", "signal received; ignored");
                    continue;
                }
                else => return,
            };
            if lifecycle.is_terminating() {
                warn!(
                    signal = name,
                    "second shutdown signal during the shutdown; exiting now"
                );
                std::process::exit(1);
            }
            info!(
                signal = name,
                "shutdown signal received; finishing in-flight requests"
            );
            lifecycle.begin_shutdown(delay);
        }
    }

    async fn reload(&self) {
        let Some(reloaders) = self.reloaders.get() else {
            warn!(
                signal = "SIGHUP",
                "signal received during start-up; nothing to reload yet"
            );
            return;
        };
        info!(signal = "SIGHUP", "reloading the policy and the TLS files");
        reloaders.policy.reload(Trigger::Signal);
        if let Some(tls) = &reloaders.tls {
            tls.reload(Trigger::Signal).await;
        }
    }
}
