//! The accept loop, one for plain HTTP and HTTPS: a cap on open
//! connections, the TLS handshake under the header-read timeout, and a
//! graceful drain with a deadline on shutdown.
//!
//! Over the cap a plain-HTTP client gets an immediate 503 with a JSON
//! `Error` and `Connection: close`; a TLS client is closed at once (answering
//! would cost a handshake, the very work being shed). Either way nobody
//! waits on an unanswered connection.
//!
//! Shutdown comes in two steps (see [`Lifecycle`]): while terminating, new
//! connections are still accepted and every request answered (HTTP/1
//! answers carry `Connection: close`, HTTP/2 connections get a GOAWAY), so
//! clients move to another replica without a refused connection; once
//! stopping, the listening socket closes and open requests drain.
//!
//! The listener runs on threads of its own (`--http-threads`, default one),
//! each a single-threaded runtime with its own registration of the
//! listening socket; a connection stays on the thread that accepted it.
//! kube-scheduler calls an extender one request at a time, with its own
//! work in between, so placer is idle when each request arrives. On the
//! multi-threaded runtime that carries the watches, the worker woken by the
//! socket also wakes a second one to look for work, which finds none and
//! sleeps again: four context switches per request instead of two, and
//! about 10 % more CPU per paced 500-name request (docs/benchmarks.md,
//! "Paced requests"). The connection cap and the drain hold across the
//! threads.

use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::conn::{self, Accepted, Timeouts};
use crate::metrics::Metrics;
use crate::ops::access::ClientCert;
use crate::ops::rate_limit::LogLimiter;
use crate::ops::tls::Reloadable;
use crate::state::Lifecycle;

/// Shed connections answered at the same time; beyond, they are closed
/// without an answer so shedding itself stays bounded.
const SHED_AT_ONCE: usize = 16;
/// How long a shed connection may take to read its 503.
const SHED_LINGER: Duration = Duration::from_secs(1);
/// File descriptors kept free for everything but connections (policy and
/// TLS files, watches, the API client, shed connections).
const RESERVED_FDS: u64 = 64;
/// Pause after a failed accept (out of file descriptors, typically), so
/// the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one log line per this for events any client can cause.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Limits of the listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Header-read and idle timeouts.
    pub timeouts: Timeouts,
    /// Connections open at once.
    pub max_connections: usize,
    /// How long shutdown waits for open requests before closing what remains.
    pub drain: Duration,
    /// Serving threads (see the module docs).
    pub threads: NonZeroUsize,
}

/// Plain HTTP or TLS with the reloadable configuration.
#[derive(Clone)]
pub enum Transport {
    /// HTTP/1.1 (and h2c) over TCP.
    Plain,
    /// HTTPS; each handshake uses the configuration in force.
    Tls(Reloadable),
}

/// Why the listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The address could not be bound (in use, not ours, no permission).
    #[error("listening on {addr}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The bound address could not be read back.
    #[error("reading the bound address")]
    LocalAddr {
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// A bound listener, not serving yet.
pub struct Listener {
    tcp: TcpListener,
    local: SocketAddr,
}

impl Listener {
    /// Binds `addr` (port 0 picks a free port, see [`Listener::local_addr`]).
    pub async fn bind(addr: SocketAddr) -> Result<Listener, BindError> {
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|source| BindError::Listen { addr, source })?;
        let local = tcp
            .local_addr()
            .map_err(|source| BindError::LocalAddr { source })?;
        Ok(Listener { tcp, local })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves `app` on `limits.threads` threads of its own until `lifecycle`
    /// is stopping, then drains: no new connections, open requests are
    /// answered, idle connections closed; whatever is still open after
    /// `limits.drain` is closed. Resolves when every serving thread has
    /// drained; an error if one ended any other way.
    pub fn serve(
        self,
        app: Router,
        transport: Transport,
        limits: Limits,
        metrics: Arc<Metrics>,
        lifecycle: &Lifecycle,
    ) -> io::Result<impl Future<Output = Result<(), ServeError>> + use<>> {
        let max = fd_bounded(limits.max_connections);
        let shared = Arc::new(Shared {
            app,
            transport,
            builder: conn::builder(),
            timeouts: limits.timeouts,
            metrics,
            stop: lifecycle.stopping(),
            terminating: lifecycle.terminating(),
            handshake_log: LogLimiter::new(LOG_EVERY),
            accept_log: LogLimiter::new(LOG_EVERY),
            permits: Arc::new(Semaphore::new(max)),
            shedding: Arc::new(Semaphore::new(SHED_AT_ONCE)),
            max,
            drain: limits.drain,
        });
        // Off this runtime's reactor: each serving thread registers its
        // own copy with its own.
        let tcp = self.tcp.into_std()?;
        let mut served = Vec::with_capacity(limits.threads.get());
        for n in 0..limits.threads.get() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // Registered here, so that a failure is a start-up error rather
            // than a thread that never serves.
            let tcp = {
                let _in = runtime.enter();
                TcpListener::from_std(tcp.try_clone()?)?
            };
            let shared = shared.clone();
            let (done, finished) = tokio::sync::oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("placer-http-{n}"))
                .spawn(move || {
                    runtime.block_on(shared.accept_until_stopped(tcp));
                    // Dropped unsent if the thread panics.
                    let _ = done.send(());
                })?;
            served.push(finished);
        }
        Ok(async move {
            futures::future::try_join_all(
                served
                    .into_iter()
                    .map(|finished| async { finished.await.map_err(|_| ServeError::ThreadEnded) }),
            )
            .await
            .map(drop)
        })
    }
}

/// Why serving ended other than by a drain.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A serving thread panicked outside a handler (handlers' panics are
    /// answered with 500): the process exits so that it is restarted.
    #[error("an HTTP serving thread ended unexpectedly")]
    ThreadEnded,
}

/// Holds a connection slot and the open-connections gauge until the task
/// ends, also when it is aborted at the drain deadline.
struct Open {
    metrics: Arc<Metrics>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics.http_connections.dec();
    }
}

/// What every serving thread and connection task needs.
struct Shared {
    app: Router,
    transport: Transport,
    builder: auto::Builder<TokioExecutor>,
    timeouts: Timeouts,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
    terminating: watch::Receiver<bool>,
    handshake_log: LogLimiter,
    accept_log: LogLimiter,
    /// Open connections, across the serving threads.
    permits: Arc<Semaphore>,
    /// Shed connections being answered.
    shedding: Arc<Semaphore>,
    /// The connection cap, as the 503 names it.
    max: usize,
    drain: Duration,
}

impl Shared {
    /// One serving thread's accept loop and drain.
    async fn accept_until_stopped(self: Arc<Self>, tcp: TcpListener) {
        let mut stop = self.stop.clone();
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                accepted = tcp.accept() => match accepted {
                    Ok((tcp, peer)) => match self.permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            tasks.spawn(self.clone().connection(tcp, peer, permit));
                        }
                        Err(_) => {
                            self.metrics.connection_closed("shed");
                            let plain = matches!(self.transport, Transport::Plain);
                            if let (true, Ok(slot)) = (plain, self.shedding.clone().try_acquire_owned()) {
                                tasks.spawn(shed(tcp, self.max, slot));
                            }
                            // Otherwise dropping `tcp` closes it now.
                        }
                    },
                    Err(e) => {
                        if let Some(suppressed) = self.accept_log.admit(std::time::Instant::now()) {
                            warn!(error = %e, suppressed, "accepting a connection failed; retrying");
                        }
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
        // Closing the listening socket refuses new connections from here
        // on (once every serving thread has closed its copy).
        drop(tcp);
        if tokio::time::timeout(self.drain, async {
            while tasks.join_next().await.is_some() {}
        })
        .await
        .is_err()
        {
            warn!(
                open = tasks.len(),
                drain = ?self.drain,
                "connections still open at the drain deadline (--shutdown-drain-seconds); closing them"
            );
            for _ in 0..tasks.len() {
                self.metrics.connection_closed("drain_deadline");
            }
            tasks.shutdown().await;
        }
    }

    /// Serves one accepted connection, holding its slot.
    async fn connection(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        permit: OwnedSemaphorePermit,
    ) {
        self.metrics.http_connections.inc();
        let _open = Open {
            metrics: self.metrics.clone(),
            _permit: permit,
        };
        let accepted = Instant::now();
        // Answers go out in small writes; waiting to fill packets only adds latency.
        let _ = tcp.set_nodelay(true);
        match &self.transport {
            Transport::Plain => {
                let accepted = Accepted {
                    at: accepted,
                    peer: None,
                };
                self.http(tcp, accepted).await;
            }
            Transport::Tls(config) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(config.current());
                let deadline = accepted + self.timeouts.header_read;
                match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        // rustls verified it against the client CA; the
                        // leaf names the user.
                        let peer = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(<[_]>::first)
                            .map(|leaf| Arc::new(ClientCert::from_der(leaf)));
                        let accepted = Accepted { at: accepted, peer };
                        self.http(tls, accepted).await;
                    }
                    Ok(Err(e)) => self.handshake_failed(peer, &e),
                    Err(_) => {
                        let e = io::Error::new(
                            io::ErrorKind::TimedOut,
                            "handshake not done within --header-read-timeout-seconds",
                        );
                        self.handshake_failed(peer, &e);
                    }
                }
            }
        }
    }

    async fn http<I>(&self, io: I, accepted: Accepted)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        conn::serve(
            io,
            accepted,
            self.app.clone(),
            &self.builder,
            self.timeouts,
            conn::Shutdown {
                terminating: self.terminating.clone(),
                stop: self.stop.clone(),
            },
            &self.metrics,
        )
        .await;
    }

    /// Counts every failed handshake; logs them, rate-limited, except a
    /// client closing before saying anything (TCP probes), which says nothing
    /// about TLS.
    fn handshake_failed(&self, peer: SocketAddr, e: &io::Error) {
        let reason = match e.kind() {
            io::ErrorKind::TimedOut => "timeout",
            io::ErrorKind::UnexpectedEof => "eof",
            _ => "rejected",
        };
        self.metrics.handshake_failed(reason);
        if reason == "eof" {
            debug!(%peer, error = %e, "client closed during the TLS handshake");
            return;
        }
        if let Some(suppressed) = self.handshake_log.admit(std::time::Instant::now()) {
            warn!(%peer, reason, error = %e, suppressed, "TLS handshake failed");
        }
    }
}

/// Answers a connection over the cap with 503 and closes it.
async fn shed(mut tcp: TcpStream, max: usize, _slot: OwnedSemaphorePermit) {
    let body = format!(
        r#"{{"Error":"placer is serving its maximum of {max} connections (--max-connections); retry shortly"}}"#
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(SHED_LINGER, async {
        tcp.write_all(response.as_bytes()).await?;
        tcp.shutdown().await?;
        // Read what the client sent until it closes: closing with unread
        // bytes makes the kernel send a reset, which can destroy the 503
        // before the client has read it.
        let mut sink = [0u8; 4096];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<_, io::Error>(())
    })
    .await;
}

/// The connection cap, lowered to what the file-descriptor limit allows
/// (else the process would run out of descriptors first and stop
/// accepting, /healthz included).
fn fd_bounded(requested: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes into the struct we pass and nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if rc != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return requested;
    }
    let room =
        usize::try_from(limit.rlim_cur.saturating_sub(RESERVED_FDS).max(1)).unwrap_or(usize::MAX);
    if requested > room {
        warn!(
            requested,
            max_connections = room,
            fd_limit = limit.rlim_cur,
            "--max-connections lowered to fit the open-file limit (ulimit -n)"
        );
        return room;
    }
    requested
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[tokio::test]
    async fn a_taken_address_names_itself_and_keeps_the_os_error_as_source() {
        let taken = Listener::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = taken.local_addr();
        let Err(e) = Listener::bind(addr).await else {
            panic!("bound {addr} twice");
        };
        assert_eq!(e.to_string(), format!("listening on {addr}"));
        let source = e
            .source()
            .unwrap()
            .downcast_ref::<std::io::Error>()
            .unwrap();
        assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse);
    }
}
