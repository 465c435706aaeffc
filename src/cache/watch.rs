//! Feeds the cache from the API server with kube-rs watchers.
//!
//! Each watcher keeps only the slim [`NodeInfo`]/[`PodInfo`] records; the full
//! objects are dropped as soon as they are converted, so nothing is held
//! twice. Watch errors are logged and retried with kube-rs' default backoff
//! (client-go's parameters); they never end the stream or the process.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tracing::{debug, info, warn};

use crate::cache::Cache;
use crate::framework::{NodeInfo, PodInfo};

/// Only pods bound to a node matter to placer's indexes.
const ASSIGNED_PODS: &str = "spec.nodeName!=";

/// Watches Nodes forever, applying every event to `cache`.
pub async fn watch_nodes(client: Client, cache: Arc<Cache>) {
    let api: Api<Node> = Api::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut relist: Vec<NodeInfo> = Vec::new();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relist.clear(),
            Ok(watcher::Event::InitApply(n)) => relist.push(NodeInfo::from(&n)),
            Ok(watcher::Event::InitDone) => {
                let count = relist.len();
                cache.write().replace_nodes(std::mem::take(&mut relist));
                cache.mark_nodes_synced();
                info!(nodes = count, "node list synced");
            }
            Ok(watcher::Event::Apply(n)) => {
                debug!(
                    node = n.metadata.name.as_deref().unwrap_or(""),
                    "node applied"
                );
                cache.write().apply_node(NodeInfo::from(&n));
            }
            Ok(watcher::Event::Delete(n)) => {
                if let Some(name) = n.metadata.name.as_deref() {
                    cache.write().delete_node(name);
                }
            }
            Err(e) => warn!(error = %e, "node watch failed; retrying with backoff"),
        }
    }
}

/// Watches assigned Pods forever, applying every event to `cache`.
pub async fn watch_pods(client: Client, cache: Arc<Cache>) {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(ASSIGNED_PODS);
    let stream = watcher(api, config).default_backoff();
    let mut relist: Vec<PodInfo> = Vec::new();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relist.clear(),
            Ok(watcher::Event::InitApply(p)) => relist.push(PodInfo::from(&p)),
            Ok(watcher::Event::InitDone) => {
                let count = relist.len();
                cache.write().replace_pods(std::mem::take(&mut relist));
                cache.mark_pods_synced();
                info!(pods = count, "assigned pod list synced");
            }
            Ok(watcher::Event::Apply(p)) => cache.write().apply_pod(PodInfo::from(&p)),
            Ok(watcher::Event::Delete(p)) => {
                let info = PodInfo::from(&p);
                cache.write().delete_pod(&info.namespace, &info.name);
            }
            Err(e) => warn!(error = %e, "pod watch failed; retrying with backoff"),
        }
    }
}
