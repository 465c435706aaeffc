//! Carrying out a preemption DefaultPreemption decided on: each victim gets
//! a `DisruptionTarget` condition and is deleted, and a `Preempted` event
//! names the preemptor, as kube-scheduler's preemption executor does.

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;
use tracing::{info, warn};

use super::report::Reporter;
use crate::framework::Nomination;
use crate::objects::PodInfo;

/// Why a victim was not evicted.
#[derive(Debug, thiserror::Error)]
pub enum EvictError {
    /// Its `DisruptionTarget` condition could not be set.
    #[error("marking {victim} as preempted: {source}")]
    Mark {
        /// The victim, `namespace/name`.
        victim: String,
        /// What the API server (or the way to it) said.
        source: kube::Error,
    },
    /// It could not be deleted.
    #[error("deleting {victim}: {source}")]
    Delete {
        /// The victim, `namespace/name`.
        victim: String,
        /// What the API server (or the way to it) said.
        source: kube::Error,
    },
}

/// Evicts victims through the API server.
pub struct Evictor {
    client: Client,
}

impl Evictor {
    /// An evictor using `client`.
    pub fn new(client: Client) -> Self {
        Evictor { client }
    }

    /// Evicts every victim of `nomination` in parallel on behalf of
    /// `preemptor` (scheduled by profile `scheduler`). A victim already gone
    /// is not an error; the first other failure is returned.
    pub async fn evict(
        &self,
        scheduler: &str,
        preemptor: &PodInfo,
        nomination: &Nomination,
        reporter: &Reporter,
    ) -> Result<(), EvictError> {
        let results = join_all(nomination.victims.iter().map(|victim| async move {
            let evicted = self.evict_one(scheduler, victim).await?;
            if evicted {
                info!(victim = %victim.key(), preemptor = %preemptor.key(), node = %nomination.node, "preempted pod");
                reporter.preempted(victim, preemptor, &nomination.node).await;
            }
            Ok::<(), EvictError>(())
        }))
        .await;
        results.into_iter().collect()
    }

    /// Marks and deletes one victim; `false` when it was already gone or
    /// already being deleted.
    async fn evict_one(&self, scheduler: &str, victim: &PodInfo) -> Result<bool, EvictError> {
        // Graceful deletion has started: another delete would change nothing
        // (kube-scheduler skips victims with a deletion timestamp too).
        if victim.deleting {
            return Ok(false);
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &victim.namespace);
        let condition = json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": format!("{scheduler}: preempting to accommodate a higher priority pod"),
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now(),
        }]}});
        match api
            .patch_status(
                &victim.name,
                &PatchParams::default(),
                &Patch::Strategic(condition),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
            Err(source) => {
                return Err(EvictError::Mark {
                    victim: victim.key(),
                    source,
                });
            }
        }
        // The UID precondition keeps a pod re-created under the same name safe.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(victim.uid.clone()).filter(|u| !u.is_empty()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&victim.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                warn!(victim = %victim.key(), "victim already gone");
                Ok(false)
            }
            Err(source) => Err(EvictError::Delete {
                victim: victim.key(),
                source,
            }),
        }
    }

    /// Clears the `nominatedNodeName` of pods whose nomination a preemption
    /// on the same node took away, so they look for room elsewhere.
    pub async fn clear_nominations(&self, pods: &[PodInfo]) {
        for p in pods {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &p.namespace);
            let patch = json!({"status": {"nominatedNodeName": null}});
            if let Err(e) = api
                .patch_status(&p.name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                warn!(pod = %p.key(), error = %e, "could not clear nominatedNodeName");
            }
        }
    }
}
