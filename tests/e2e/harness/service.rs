//! A Service in front of placer replicas, as far as kube-scheduler can tell, for rollouts without
//! a kubelet: one address (`url`) whose new connections go to the endpoints that are published
//! ready, as kube-proxy sends them.
//!
//! What it plays, with the delays that make a rollout racy:
//! - the kubelet's readiness probe: `GET /readyz` on every endpoint each `probe_period` (one
//!   failure turns it unready, one success ready, as `failureThreshold: 1`);
//! - the endpoints controller and kube-proxy: a change of readiness, or a pod turning
//!   terminating (deleted), reaches the routing table `propagation` later;
//! - kube-proxy's routing: each new connection goes to the next published endpoint (round
//!   robin); the bytes are then copied both ways until either side closes, so an open keep-alive
//!   connection stays with its replica whatever the table says, as a conntrack entry does. A
//!   connection to a replica that refuses it is closed at once, which the client sees as `EOF`,
//!   as it would see a reset; with no endpoint published it is closed too (kube-proxy rejects).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::probe::http_get;

/// One replica behind the Service.
#[derive(Debug, Clone)]
struct Endpoint {
    port: u16,
    /// Deleted: unpublished (after the propagation delay) whatever its probe says.
    terminating: bool,
    /// What the probe last said.
    probed_ready: bool,
    /// What kube-proxy routes by.
    published: bool,
}

/// Counters of what the router saw.
#[derive(Debug, Default)]
pub struct RouterCounts {
    /// Connections routed to a replica.
    pub routed: AtomicU64,
    /// Connections whose replica refused them (closed on the client).
    pub refused: AtomicU64,
    /// Connections that found no published endpoint.
    pub no_endpoint: AtomicU64,
}

struct Shared {
    endpoints: Mutex<Vec<Endpoint>>,
    next: AtomicUsize,
    counts: RouterCounts,
    propagation: Duration,
}

/// The Service; its tasks end on drop.
pub struct ServiceRouter {
    port: u16,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl ServiceRouter {
    /// Listens on a free port of 127.0.0.1, probing every `probe_period` and applying changes
    /// `propagation` after they happen.
    pub async fn start(probe_period: Duration, propagation: Duration) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            endpoints: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            counts: RouterCounts::default(),
            propagation,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        let probe = tokio::spawn(probe_loop(shared.clone(), probe_period));
        Ok(Self {
            port,
            shared,
            tasks: vec![accept, probe],
        })
    }

    /// The Service's URL (kube-scheduler's `urlPrefix`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A new pod behind the Service: routed once its probe succeeds (and the change propagates).
    pub fn add(&self, port: u16) {
        lock(&self.shared.endpoints).push(Endpoint {
            port,
            terminating: false,
            probed_ready: false,
            published: false,
        });
    }

    /// The pod was deleted (the kubelet sends SIGTERM at the same time): its endpoint leaves the
    /// routing table after the propagation delay.
    pub fn terminating(&self, port: u16) {
        let shared = self.shared.clone();
        for e in lock(&shared.endpoints)
            .iter_mut()
            .filter(|e| e.port == port)
        {
            e.terminating = true;
        }
        tokio::spawn(async move {
            tokio::time::sleep(shared.propagation).await;
            for e in lock(&shared.endpoints)
                .iter_mut()
                .filter(|e| e.port == port)
            {
                e.published = false;
            }
        });
    }

    /// The pod is gone: forgets its endpoint.
    pub fn remove(&self, port: u16) {
        lock(&self.shared.endpoints).retain(|e| e.port != port);
    }

    /// Whether kube-proxy routes to `port` now.
    pub fn is_published(&self, port: u16) -> bool {
        lock(&self.shared.endpoints)
            .iter()
            .any(|e| e.port == port && e.published)
    }

    /// What the router saw so far.
    pub fn counts(&self) -> &RouterCounts {
        &self.shared.counts
    }
}

impl Drop for ServiceRouter {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((client, _)) = listener.accept().await {
        let published: Vec<u16> = lock(&shared.endpoints)
            .iter()
            .filter(|e| e.published)
            .map(|e| e.port)
            .collect();
        if published.is_empty() {
            shared.counts.no_endpoint.fetch_add(1, Ordering::Relaxed);
            continue; // dropping `client` closes it
        }
        let port = published[shared.next.fetch_add(1, Ordering::Relaxed) % published.len()];
        let shared = shared.clone();
        tokio::spawn(async move {
            let backend = SocketAddr::from(([127, 0, 0, 1], port));
            match TcpStream::connect(backend).await {
                Ok(mut server) => {
                    shared.counts.routed.fetch_add(1, Ordering::Relaxed);
                    let mut client = client;
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
                Err(_) => {
                    shared.counts.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

async fn probe_loop(shared: Arc<Shared>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        let ports: Vec<u16> = lock(&shared.endpoints).iter().map(|e| e.port).collect();
        for port in ports {
            let ready = matches!(http_get(port, "/readyz").await, Ok((200, _)));
            let changed = {
                let mut endpoints = lock(&shared.endpoints);
                let Some(e) = endpoints.iter_mut().find(|e| e.port == port) else {
                    continue;
                };
                let changed = e.probed_ready != ready;
                e.probed_ready = ready;
                changed
            };
            if changed {
                let shared = shared.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(shared.propagation).await;
                    for e in lock(&shared.endpoints)
                        .iter_mut()
                        .filter(|e| e.port == port)
                    {
                        // Another probe may have changed it back meanwhile.
                        e.published = e.probed_ready && !e.terminating;
                    }
                });
            }
        }
    }
}
