//! Creating Bindings through the API server, for both modes: the extender's
//! `/bind` verb and the standalone scheduler (kube-scheduler's DefaultBinder).
//!
//! Idempotent per pod UID: a pod already bound to the requested node is a
//! success; bound elsewhere is an error. The Binding carries the pod's UID as
//! a precondition, so a pod re-created under the same name is never bound by
//! mistake.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::metrics::Metrics;
use crate::protocol::ExtenderBindingArgs;

/// Why a pod was not bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// The pod is bound already, to another node.
    #[error("pod {namespace}/{name} is already bound to node {bound}, not {node}")]
    BoundElsewhere {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The node it is bound to.
        bound: String,
        /// The node asked for.
        node: String,
    },
    /// The API server (or the way to it) refused the Binding.
    #[error("binding pod {namespace}/{name} to node {node} failed: {reason}")]
    Rejected {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The node asked for.
        node: String,
        /// The API server's message, or the transport error.
        reason: String,
    },
}

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
    /// recorded by result, for both modes.
    pub async fn bind(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        let started = Instant::now();
        let result = self.create(args).await;
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

    async fn create(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &args.pod_namespace);
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(args.pod_name.clone()),
                namespace: Some(args.pod_namespace.clone()),
                uid: Some(args.pod_uid.clone()).filter(|u| !u.is_empty()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(args.node.clone()),
                ..Default::default()
            },
        };
        let created = api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &args.pod_name,
                &PostParams::default(),
                &binding,
            )
            .await;
        let err = match created {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        // A conflict may be our own earlier, unacknowledged bind: look before failing.
        if let kube::Error::Api(status) = &err
            && status.code == 409
            && let Ok(pod) = api.get(&args.pod_name).await
        {
            let same_uid = args.pod_uid.is_empty()
                || pod.metadata.uid.as_deref() == Some(args.pod_uid.as_str());
            match pod.spec.and_then(|s| s.node_name) {
                Some(n) if n == args.node && same_uid => return Ok(()),
                Some(bound) if same_uid => {
                    return Err(BindError::BoundElsewhere {
                        namespace: args.pod_namespace.clone(),
                        name: args.pod_name.clone(),
                        bound,
                        node: args.node.clone(),
                    });
                }
                _ => {}
            }
        }
        // The API server's own message reads best in an event; kube's
        // Display of an API error adds a debug dump of the Status.
        let reason = match &err {
            kube::Error::Api(status) => status.message.clone(),
            other => other.to_string(),
        };
        Err(BindError::Rejected {
            namespace: args.pod_namespace.clone(),
            name: args.pod_name.clone(),
            node: args.node.clone(),
            reason,
        })
    }
}
