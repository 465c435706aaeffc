//! Watching one namespace for bindings: when each pod was first seen with `spec.nodeName`, and
//! on which node. A watch instead of polling lists: a throughput run binds hundreds of pods per
//! second, and listing them all every few milliseconds would load the API server under test.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where and when a pod was first seen bound.
#[derive(Clone, Debug)]
pub struct Bound {
    /// `spec.nodeName`.
    pub node: String,
    /// When the watch delivered the first event showing it.
    pub at: Instant,
}

#[derive(Default)]
struct Seen {
    bound: HashMap<String, Bound>,
    /// Pods later seen on another node than first (the API forbids it; a scheduler bug
    /// or a deleted and re-created pod would show here).
    moved: Vec<String>,
}

/// A running watch of the pods of one namespace; stops when dropped.
pub struct BindWatch {
    seen: Arc<Mutex<Seen>>,
    count: watch::Receiver<usize>,
    task: JoinHandle<()>,
}

impl BindWatch {
    /// Starts watching `namespace` and returns once the initial list is in (so every later
    /// binding is seen as it happens).
    pub async fn start(client: &kube::Client, namespace: &str) -> anyhow::Result<Self> {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (count_tx, count) = watch::channel(0_usize);
        let (synced_tx, mut synced) = watch::channel(false);
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let stream = watcher(api, watcher::Config::default()).default_backoff();
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                            let (Some(name), Some(node)) =
                                (pod.metadata.name, pod.spec.and_then(|s| s.node_name))
                            else {
                                continue;
                            };
                            let mut seen = seen.lock().expect("bind watch lock");
                            match seen.bound.get(&name) {
                                Some(b) if b.node != node => seen.moved.push(name),
                                Some(_) => {}
                                None => {
                                    let at = Instant::now();
                                    seen.bound.insert(name, Bound { node, at });
                                    count_tx.send_replace(seen.bound.len());
                                }
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            synced_tx.send_replace(true);
                        }
                        Ok(_) => {}
                        Err(e) => eprintln!("bind watch: {e} (retrying)"),
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), synced.wait_for(|s| *s))
            .await
            .context("the bind watch did not sync in 30 s")?
            .context("the bind watch ended")?;
        Ok(Self { seen, count, task })
    }

    /// How many pods were seen bound so far.
    pub fn count(&self) -> usize {
        *self.count.borrow()
    }

    /// Waits until `n` pods were seen bound, at most `timeout`; returns every binding seen.
    pub async fn wait_for(
        &mut self,
        n: usize,
        timeout: Duration,
    ) -> anyhow::Result<HashMap<String, Bound>> {
        let waited = tokio::time::timeout(timeout, self.count.wait_for(|c| *c >= n))
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => Ok(self.bindings()),
            Ok(Err(_)) => bail!("the bind watch ended"),
            Err(_) => bail!(
                "timed out after {timeout:?}: {} of {n} pods bound",
                self.count()
            ),
        }
    }

    /// Every binding seen so far.
    pub fn bindings(&self) -> HashMap<String, Bound> {
        self.seen.lock().expect("bind watch lock").bound.clone()
    }

    /// Pods seen bound to one node and later to another.
    pub fn moved(&self) -> Vec<String> {
        self.seen.lock().expect("bind watch lock").moved.clone()
    }
}

impl Drop for BindWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
