//! One connection: hyper speaks HTTP/1.1 or HTTP/2, and this module adds
//! the timeouts hyper does not give as we need them.
//!
//! hyper's own `header_read_timeout` starts as soon as it waits for the next
//! request, so it would also cut idle keep-alive connections after a few
//! seconds — well before kube-scheduler's client (Go's `IdleConnTimeout`,
//! 90 s) gives them up, which turns connection reuse into errors. So the
//! connection is watched here instead, in three phases:
//!
//! | phase | from | deadline | on expiry |
//! | --- | --- | --- | --- |
//! | head | accept (TLS handshake included), or the first byte after an idle spell | header-read timeout | closed |
//! | busy | a request head was parsed, until its response body is sent | idle timeout after the last byte read or written | closed (`stalled`) |
//! | idle | the last response was sent | idle timeout | graceful close |
//!
//! A busy connection always makes progress within the request deadline
//! (which bounds the handlers), so "no byte for the idle timeout" only
//! catches clients that stop reading their answer. On HTTP/2, bytes between
//! requests are pings and settings, not a request head: after its first
//! request such a connection only knows busy and idle.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::header::{CONNECTION, HeaderValue};
use axum::http::{Request, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tower::ServiceExt;
use tracing::debug;

use crate::metrics::Metrics;
use crate::ops::access::ClientCert;

/// Per-connection timeouts.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Accept (or first byte) to a complete request head.
    pub header_read: Duration,
    /// Keep-alive without a request; also a busy connection without progress.
    pub idle: Duration,
}

/// The protocol half, shared by every connection.
pub fn builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Off: the phases above time the request head (see the module docs).
    builder.http1().keep_alive(true).header_read_timeout(None);
    builder
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head(Instant),
    Busy(usize),
    Idle(Instant),
}

#[derive(Debug)]
struct State {
    phase: Phase,
    last_io: Instant,
    /// HTTP/2 seen: bytes between requests are not a request head.
    multiplexed: bool,
}

/// What the I/O wrapper, the service and the driver of one connection share.
#[derive(Debug)]
struct Activity {
    state: Mutex<State>,
    /// Wakes the driver when the deadline may have moved closer.
    changed: Notify,
}

/// Why the driver closes a connection (the metric's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Header,
    Idle,
    Stalled,
}

impl Expiry {
    fn reason(self) -> &'static str {
        match self {
            Expiry::Header => "header_timeout",
            Expiry::Idle => "idle_timeout",
            Expiry::Stalled => "stalled",
        }
    }
}

impl Activity {
    fn new(accepted: Instant) -> Self {
        Activity {
            state: Mutex::new(State {
                phase: Phase::Head(accepted),
                last_io: accepted,
                multiplexed: false,
            }),
            changed: Notify::new(),
        }
    }

    fn read(&self) {
        let now = Instant::now();
        let mut state = self.state.lock();
        state.last_io = now;
        if matches!(state.phase, Phase::Idle(_)) && !state.multiplexed {
            state.phase = Phase::Head(now);
            drop(state);
            self.changed.notify_one();
        }
    }

    fn wrote(&self) {
        self.state.lock().last_io = Instant::now();
    }

    fn begin(self: &Arc<Self>, version: Version) -> InFlight {
        let mut state = self.state.lock();
        if version == Version::HTTP_2 && !state.multiplexed {
            state.multiplexed = true;
            // A terminating server sends this connection a GOAWAY now.
            self.changed.notify_one();
        }
        state.phase = match state.phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        InFlight(self.clone())
    }

    fn end(&self) {
        let mut state = self.state.lock();
        state.phase = match state.phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        };
    }

    fn is_multiplexed(&self) -> bool {
        self.state.lock().multiplexed
    }

    fn deadline(&self, t: Timeouts) -> (Instant, Expiry) {
        let state = self.state.lock();
        match state.phase {
            Phase::Head(since) => (since + t.header_read, Expiry::Header),
            Phase::Idle(since) => (since + t.idle, Expiry::Idle),
            Phase::Busy(_) => (state.last_io + t.idle, Expiry::Stalled),
        }
    }
}

/// One request from its head to the end of its response body (or until
/// hyper drops it).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The transport, with every byte read or written noted.
struct Watched<I> {
    inner: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What the accept loop knows of a connection.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// When it was accepted.
    pub at: Instant,
    /// The client certificate its TLS handshake verified, handed to every
    /// request on it as an extension (the access checks read it).
    pub peer: Option<Arc<ClientCert>>,
}

/// The shutdown phases a connection acts on (see [`crate::state::Lifecycle`]).
#[derive(Debug, Clone)]
pub struct Shutdown {
    /// True from the shutdown signal on: HTTP/1 answers say
    /// `Connection: close` (the client reconnects, through the Service, to
    /// a replica that is not going away), HTTP/2 connections get a GOAWAY.
    pub terminating: watch::Receiver<bool>,
    /// True once the drain begins: open requests finish, idle connections close.
    pub stop: watch::Receiver<bool>,
}

/// Serves `io` until the client closes, a timeout expires, or — after
/// `shutdown.stop` — the open requests are answered.
pub async fn serve<I>(
    io: I,
    accepted: Accepted,
    app: Router,
    builder: &auto::Builder<TokioExecutor>,
    timeouts: Timeouts,
    shutdown: Shutdown,
    metrics: &Metrics,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new(accepted.at));
    let peer = accepted.peer;
    let io = TokioIo::new(Watched {
        inner: io,
        activity: activity.clone(),
    });
    let Shutdown {
        mut terminating,
        mut stop,
    } = shutdown;
    let service = {
        let activity = activity.clone();
        let terminating = terminating.clone();
        hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let version = req.version();
            let in_flight = activity.begin(version);
            if let Some(peer) = &peer {
                req.extensions_mut().insert(peer.clone());
            }
            let app = app.clone();
            let terminating = terminating.clone();
            async move {
                let mut response = app.oneshot(req).await?;
                if *terminating.borrow() && version < Version::HTTP_2 {
                    response
                        .headers_mut()
                        .insert(CONNECTION, HeaderValue::from_static("close"));
                }
                // The request ends when hyper is done with the body.
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _in_flight = &in_flight;
                        frame
                    }))
                }))
            }
        })
    };
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    // A graceful shutdown of the connection was asked for (once is enough).
    let mut shut = false;
    let mut draining = false;
    let mut terminated = false;
    // After a graceful close has begun for idleness, how long it may take.
    let mut closing: Option<Instant> = None;
    loop {
        if terminated && !shut && activity.is_multiplexed() {
            // HTTP/2: GOAWAY now; streams already open are answered.
            shut = true;
            conn.as_mut().graceful_shutdown();
        }
        let (at, expiry) = match closing {
            Some(at) => (at, Expiry::Idle),
            None => activity.deadline(timeouts),
        };
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(at) => {
                if closing.is_none() && activity.deadline(timeouts).0 > Instant::now() {
                    // Bytes moved meanwhile: the deadline is later now.
                    continue;
                }
                if expiry == Expiry::Idle && closing.is_none() {
                    metrics.connection_closed(expiry.reason());
                    shut = true;
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + timeouts.header_read);
                    continue;
                }
                if closing.is_none() {
                    metrics.connection_closed(expiry.reason());
                }
                debug!(reason = expiry.reason(), "closing the connection");
                return;
            }
            () = activity.changed.notified() => {}
            _ = terminating.wait_for(|t| *t), if !terminated => terminated = true,
            _ = stop.wait_for(|s| *s), if !draining => {
                draining = true;
                if !shut {
                    shut = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timeouts = Timeouts {
        header_read: Duration::from_secs(10),
        idle: Duration::from_secs(120),
    };

    #[test]
    fn phases_pick_their_deadline() {
        let t0 = Instant::now();
        let activity = Arc::new(Activity::new(t0));
        assert_eq!(activity.deadline(T), (t0 + T.header_read, Expiry::Header));
        let request = activity.begin(Version::HTTP_11);
        assert_eq!(activity.deadline(T).1, Expiry::Stalled);
        drop(request);
        let (at, expiry) = activity.deadline(T);
        assert_eq!(expiry, Expiry::Idle);
        assert!(at >= t0 + T.idle);
        // The next request's first byte starts the header-read timer.
        activity.read();
        assert_eq!(activity.deadline(T).1, Expiry::Header);
    }

    #[test]
    fn http2_reads_between_requests_keep_the_connection_idle() {
        let activity = Arc::new(Activity::new(Instant::now()));
        let (a, b) = (
            activity.begin(Version::HTTP_2),
            activity.begin(Version::HTTP_2),
        );
        drop(a);
        assert_eq!(activity.deadline(T).1, Expiry::Stalled, "one still open");
        drop(b);
        activity.read();
        assert_eq!(activity.deadline(T).1, Expiry::Idle);
    }
}
