//! The extender's `/bind` verb binds through DefaultBinder's Binding call
//! ([`crate::plugins::default_binder::create_binding`]), timed into
//! `placer_bind_duration_seconds` by result, as standalone binds are.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

use crate::metrics::Metrics;
use crate::plugins::default_binder::{BindTarget, create_binding};
use crate::protocol::ExtenderBindingArgs;

pub use crate::plugins::default_binder::BindError;

/// Creates Bindings through the API server.
pub struct Binder {
    client: Client,
    metrics: Arc<Metrics>,
}

impl Binder {
    /// A binder using `client`'s identity (needs `pods/binding` create, `pods`
    /// get), timing every bind into `metrics` (`placer_bind_duration_seconds`).
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        Binder { client, metrics }
    }

    /// Binds the pod, or explains why it could not; the time it took is
    /// recorded by result.
    pub async fn bind(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        let started = Instant::now();
        let target = BindTarget {
            namespace: &args.pod_namespace,
            name: &args.pod_name,
            uid: &args.pod_uid,
            node: &args.node,
        };
        let result = create_binding(&self.client, &target).await;
        self.metrics
            .bound(result.is_ok(), started.elapsed().as_secs_f64());
        result
    }

    /// The pod `namespace/name` as the API server has it (`None`: there is
    /// none); the error is the API server's message or the transport's.
    pub async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name).await.map_err(|e| match e {
            kube::Error::Api(status) => status.message,
            other => other.to_string(),
        })
    }
}
