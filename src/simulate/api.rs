//! The API server of a simulation: a [`kube::Client`] over an in-memory
//! service, handed to the binding cycle, its Bind and PreBind plugins and
//! the reporter exactly where standalone mode hands them the real client.
//!
//! The client is the seam: the plugins and the loop's binding code run
//! unchanged (no second implementation, no cost on the real path), and
//! their writes land here instead of on a cluster:
//!
//! - a Binding (DefaultBinder) is recorded, and the pod stays where the
//!   loop assumed it in the cache, as the watch would confirm it;
//! - the pod's status (`nominatedNodeName`, conditions) and events are
//!   accepted and dropped: the run's report says the same;
//! - any other write (a PersistentVolume bind, a claim allocation: objects
//!   a snapshot file does not hold) is refused with a message that names
//!   it, so the pod fails visibly rather than seeming placed on state the
//!   simulation does not have.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::http::{Method, Request, Response};
use kube::client::Body;
use parking_lot::Mutex;

/// Bindings the simulated API server accepted: `namespace/name` → node.
#[derive(Debug, Default, Clone)]
pub struct Bindings(Arc<Mutex<HashMap<String, String>>>);

impl Bindings {
    /// The node the pod `namespace/name` was bound to, if it was.
    pub fn node_of(&self, key: &str) -> Option<String> {
        self.0.lock().get(key).cloned()
    }
}

/// A client whose writes go to `bindings` (see the module's doc).
pub fn client(bindings: Bindings) -> kube::Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let bindings = bindings.clone();
        async move { Ok::<_, Infallible>(answer(req, &bindings).await) }
    });
    kube::Client::new(service, "default")
}

async fn answer(req: Request<Body>, bindings: &Bindings) -> Response<Body> {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(e) => return status(400, &format!("reading the request: {e}")),
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (&method, parts.as_slice()) {
        (&Method::POST, ["api", "v1", "namespaces", ns, "pods", name, "binding"]) => {
            let node = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|b| b["target"]["name"].as_str().map(str::to_owned));
            let Some(node) = node else {
                return status(400, "a Binding without target.name");
            };
            bindings.0.lock().insert(format!("{ns}/{name}"), node);
            json(201, br#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#.to_vec())
        }
        (&Method::PATCH, ["api", "v1", "namespaces", ns, "pods", name, "status"]) => json(
            200,
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}"}}}}"#
            )
            .into(),
        ),
        // An event is created as sent (echoed back, as the API server returns it).
        (&Method::POST, [.., "events"]) => json(201, body),
        (&Method::PATCH, ["apis", "events.k8s.io", "v1", "namespaces", ns, "events", name]) => {
            json(
                200,
                format!(
                    r#"{{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{{"name":"{name}","namespace":"{ns}"}},"eventTime":"1970-01-01T00:00:00.000000Z"}}"#
                )
                .into(),
            )
        }
        _ => status(
            501,
            &format!("placer simulate does not model this API call: {method} {path}"),
        ),
    }
}

fn json(code: u16, body: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn status(code: u16, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "reason": if code == 501 { "NotImplemented" } else { "BadRequest" },
        "code": code,
    });
    json(code, body.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::default_binder::{BindTarget, create_binding};

    #[tokio::test]
    async fn a_binding_is_recorded_and_other_writes_are_refused_by_name() {
        let bindings = Bindings::default();
        let client = client(bindings.clone());
        let target = BindTarget {
            namespace: "ns",
            name: "p",
            uid: "u",
            node: "n1",
        };
        create_binding(&client, &target).await.unwrap();
        assert_eq!(bindings.node_of("ns/p").as_deref(), Some("n1"));
        let pvs: kube::Api<k8s_openapi::api::core::v1::PersistentVolume> = kube::Api::all(client);
        let err = pvs.get("pv").await.unwrap_err().to_string();
        assert!(
            err.contains("does not model this API call: GET /api/v1/persistentvolumes/pv"),
            "{err}"
        );
    }
}
