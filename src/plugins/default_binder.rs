//! DefaultBinder: binds the pod by creating its `pods/binding` subresource
//! (design §8, "Binding").
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/defaultbinder/default_binder.go`: one
//! Binding with the pod's UID as precondition, so a pod re-created under the
//! same name is never bound by mistake. placer adds one thing: a conflict is
//! looked at before it fails the pod, so a bind whose answer was lost (and
//! the extender's `/bind` retried by kube-scheduler) succeeds when the pod
//! is already bound to the same node. A profile that lists no Bind plugin
//! binds with this one, as kube-scheduler's default profile does.
//!
//! [`create_binding`] is also what the extender's `/bind` verb calls.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use crate::framework::{BindPlugin, CycleState, Status};
use crate::objects::PodInfo;

/// Plugin name in the policy.
pub const NAME: &str = "DefaultBinder";

/// DefaultBinder takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultBinderArgs {}

impl crate::framework::CacheNeeds for DefaultBinderArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct DefaultBinder;

impl DefaultBinder {
    /// Builds the plugin.
    pub fn new(_: &DefaultBinderArgs) -> Self {
        DefaultBinder
    }
}

crate::plugin!(DefaultBinder, NAME, [bind]);

impl BindPlugin for DefaultBinder {
    fn bind<'a>(
        &'a self,
        _: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
        client: &'a Client,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let target = BindTarget {
                namespace: &pod.namespace,
                name: &pod.name,
                uid: &pod.uid,
                node,
            };
            match create_binding(client, &target).await {
                Ok(()) => Status::success(),
                // kube-scheduler's event carries the API server's own words.
                Err(BindError::Rejected { reason, .. }) => Status::error(reason),
                Err(e) => Status::error(e.to_string()),
            }
        })
    }
}

/// The pod to bind and where.
#[derive(Debug, Clone, Copy)]
pub struct BindTarget<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
    /// The pod's UID: the Binding's precondition (empty: none).
    pub uid: &'a str,
    /// The node.
    pub node: &'a str,
}

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

/// Creates the Binding of `target` with `client`'s identity (needs
/// `pods/binding` create, and `pods` get to look at a conflict).
/// Idempotent per pod UID: a pod already bound to the requested node is a
/// success; bound elsewhere is an error.
pub async fn create_binding(client: &Client, target: &BindTarget<'_>) -> Result<(), BindError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), target.namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(target.name.to_string()),
            namespace: Some(target.namespace.to_string()),
            uid: Some(target.uid.to_string()).filter(|u| !u.is_empty()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(target.node.to_string()),
            ..Default::default()
        },
    };
    let created = api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            target.name,
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
        && let Ok(pod) = api.get(target.name).await
    {
        let same_uid = target.uid.is_empty() || pod.metadata.uid.as_deref() == Some(target.uid);
        match pod.spec.and_then(|s| s.node_name) {
            Some(n) if n == target.node && same_uid => return Ok(()),
            Some(bound) if same_uid => {
                return Err(BindError::BoundElsewhere {
                    namespace: target.namespace.to_string(),
                    name: target.name.to_string(),
                    bound,
                    node: target.node.to_string(),
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
        namespace: target.namespace.to_string(),
        name: target.name.to_string(),
        node: target.node.to_string(),
        reason,
    })
}
