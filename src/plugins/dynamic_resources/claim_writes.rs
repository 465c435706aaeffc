//! The writes DynamicResources makes to ResourceClaims outside PreBind's
//! allocation: taking a pod out of `reservedFor` (Unreserve), clearing an
//! allocation (PostFilter) and deleting the claim made for a pod's extended
//! resources (Unreserve, PostFilter). Both halves of the plugin use them,
//! so they live beside both rather than in either.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::kobj;
use crate::framework::ApiWrite;
use crate::objects::PodInfo;

/// The finalizer that keeps an allocated claim from vanishing under its
/// pod (`resourceapi.Finalizer`).
pub(super) const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// Attempts at a claim's status write (`retry.DefaultRetry`'s steps).
pub(super) const WRITE_ATTEMPTS: usize = 5;

/// Takes `pod` out of `claim`'s `status.reservedFor` with a strategic merge
/// patch on the status (it removes the one entry without the latest
/// claim), guarded by the claim's uid, as kube-scheduler's Unreserve does.
pub(super) fn unreserve_claim(claim: &ResourceClaim, pod: &PodInfo) -> ApiWrite {
    let patch = Patch::Strategic(json!({
        "metadata": {"uid": claim.metadata.uid},
        "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
    }));
    let what = format!(
        "take pod {} out of ResourceClaim {}'s reservedFor",
        pod.key(),
        kobj(claim)
    );
    status_write(what, claim, move |api, name| {
        let patch = patch.clone();
        Box::pin(async move {
            api.patch_status(&name, &PatchParams::default(), &patch)
                .await
        })
    })
}

/// PostFilter's deallocation of `claim` (as the cache has it): its status
/// without allocation, reservations and device status, written with the
/// claim's resourceVersion, so a claim that changed meanwhile is left alone
/// (the write fails with a conflict).
pub(super) fn deallocate(claim: &ResourceClaim) -> ApiWrite {
    let mut cleared = claim.clone();
    if let Some(status) = cleared.status.as_mut() {
        status.reserved_for = None;
        status.allocation = None;
        status.devices = None;
    }
    let cleared = Arc::new(cleared);
    let what = format!("deallocate ResourceClaim {}", kobj(claim));
    status_write(what, claim, move |api, name| {
        let cleared = cleared.clone();
        Box::pin(async move {
            api.replace_status(&name, &PostParams::default(), &*cleared)
                .await
        })
    })
}

/// Deletes `claim` (one this scheduler created for a pod's extended
/// resources), its delete-protection finalizer removed first, as
/// kube-scheduler's `deleteClaim` does. A claim already gone is no error.
pub(super) fn delete_claim(claim: &ResourceClaim) -> ApiWrite {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    ApiWrite::new(
        format!("delete ResourceClaim {}", kobj(claim)),
        move |client| {
            let api: Api<ResourceClaim> = Api::namespaced(client, &namespace);
            let name = name.clone();
            Box::pin(async move {
                for _ in 0..WRITE_ATTEMPTS {
                    let mut current = match api.get_opt(&name).await {
                        Ok(Some(c)) => c,
                        Ok(None) => return Ok(()),
                        Err(e) => return Err(api_message(&e)),
                    };
                    let finalizers = current.metadata.finalizers.get_or_insert_with(Vec::new);
                    let before = finalizers.len();
                    finalizers.retain(|f| f != FINALIZER);
                    if finalizers.len() == before {
                        break;
                    }
                    match api.replace(&name, &PostParams::default(), &current).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(e)) if e.code == 409 => continue,
                        Err(e) => return Err(api_message(&e)),
                    }
                }
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    Err(e) => Err(api_message(&e)),
                }
            })
        },
    )
}

/// One write to `claim`'s status subresource, described as `what`: `write`
/// gets the claim's namespaced API and its name for each send, and the
/// error is reported as kube-scheduler reports it ([`api_message`]).
fn status_write<F>(what: String, claim: &ResourceClaim, write: F) -> ApiWrite
where
    F: Fn(Api<ResourceClaim>, String) -> BoxFuture<'static, kube::Result<ResourceClaim>>
        + Send
        + Sync
        + 'static,
{
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    ApiWrite::new(what, move |client| {
        let api = Api::namespaced(client, &namespace);
        let sent = write(api, name.clone());
        Box::pin(async move { sent.await.map(drop).map_err(|e| api_message(&e)) })
    })
}

/// An API error as kube-scheduler prints it: the API server's message.
pub(super) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}
