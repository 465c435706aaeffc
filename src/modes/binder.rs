//! Creating Bindings through the API server, for both modes: the extender's
//! `/bind` verb and the standalone scheduler (kube-scheduler's DefaultBinder).
//!
//! Idempotent per pod UID: a pod already bound to the requested node is a
//! success; bound elsewhere is an error. The Binding carries the pod's UID as
//! a precondition, so a pod re-created under the same name is never bound by
//! mistake.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::protocol::ExtenderBindingArgs;

/// Creates Bindings through the API server.
pub struct Binder {
    client: Client,
}

impl Binder {
    /// A binder using `client`'s identity (needs `pods/binding` create, `pods` get).
    pub fn new(client: Client) -> Self {
        Binder { client }
    }

    /// Binds the pod, or explains why it could not.
    pub async fn bind(&self, args: &ExtenderBindingArgs) -> Result<(), String> {
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
                Some(n) if same_uid => {
                    return Err(format!(
                        "pod {}/{} is already bound to node {n}, not {}",
                        args.pod_namespace, args.pod_name, args.node
                    ));
                }
                _ => {}
            }
        }
        // The API server's own message reads best in an event; kube's
        // Display of an API error adds a debug dump of the Status.
        let why = match &err {
            kube::Error::Api(status) => status.message.clone(),
            other => other.to_string(),
        };
        Err(format!(
            "binding pod {}/{} to node {} failed: {why}",
            args.pod_namespace, args.pod_name, args.node
        ))
    }
}
