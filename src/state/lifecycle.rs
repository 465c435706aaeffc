//! Where the process is in its life, for everything that must act on a
//! shutdown before the listener drains.
//!
//! | phase | from | `/readyz` | requests | standalone |
//! | --- | --- | --- | --- | --- |
//! | serving | start-up | 200 once synced | answered | schedules while leading |
//! | terminating | SIGTERM (SIGQUIT) | 503 | answered for `--shutdown-delay-seconds`; HTTP/1 answers say `Connection: close`, HTTP/2 connections get GOAWAY | stops, waits for binds in flight, releases the Lease |
//! | stopping | the end of the delay (at once for SIGINT) | – | the drain: no new connections, open requests finish | – |
//!
//! The delay is kube-apiserver's `--shutdown-delay-duration`: the pod is
//! still an endpoint of its Service until the endpoint controller and every
//! node's kube-proxy have seen it terminating, and connections opened in
//! that time must still be answered, or kube-scheduler's calls fail.

use std::time::Duration;

use tokio::sync::watch;
use tracing::info;

/// The two shutdown phases, each a one-way switch.
#[derive(Debug)]
pub struct Lifecycle {
    terminating: watch::Sender<bool>,
    stopping: watch::Sender<bool>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            terminating: watch::Sender::new(false),
            stopping: watch::Sender::new(false),
        }
    }
}

impl Lifecycle {
    /// A serving process.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the shutdown: terminating now, stopping after `delay` (on a
    /// task of its own). False if a shutdown had already begun.
    pub fn begin_shutdown(self: &std::sync::Arc<Self>, delay: Duration) -> bool {
        if self.terminating.send_replace(true) {
            return false;
        }
        if delay.is_zero() {
            self.stopping.send_replace(true);
        } else {
            info!(
                ?delay,
                "not ready from now on; still answering requests until the delay (--shutdown-delay-seconds) is over"
            );
            let this = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                this.stopping.send_replace(true);
            });
        }
        true
    }

    /// True from the shutdown signal on.
    pub fn is_terminating(&self) -> bool {
        *self.terminating.borrow()
    }

    /// Turns true when the shutdown begins.
    pub fn terminating(&self) -> watch::Receiver<bool> {
        self.terminating.subscribe()
    }

    /// Turns true when the drain begins (the delay is over).
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn terminating_comes_first_and_stopping_after_the_delay() {
        let life = Arc::new(Lifecycle::new());
        let mut stopping = life.stopping();
        assert!(!life.is_terminating());
        assert!(life.begin_shutdown(Duration::from_secs(5)));
        assert!(life.is_terminating());
        assert!(!*stopping.borrow(), "the drain waits for the delay");
        assert!(!life.begin_shutdown(Duration::ZERO), "only once");
        tokio::time::sleep(Duration::from_millis(4900)).await;
        assert!(!*stopping.borrow_and_update());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(*stopping.borrow_and_update());
    }

    #[tokio::test]
    async fn without_a_delay_both_switch_at_once() {
        let life = Arc::new(Lifecycle::new());
        assert!(life.begin_shutdown(Duration::ZERO));
        assert!(life.is_terminating() && *life.stopping().borrow());
    }
}
