//! VolumeBinding's Reserve, Unreserve and PreBind (kube-scheduler's
//! `AssumePodVolumes`, `RevertAssumedPodVolumes` and `BindPodVolumes`).
//!
//! Reserve assumes the chosen static volumes and the provisioned claims'
//! selected node in the plugin's own table, so the next pod's Filter skips
//! those volumes and places a pod sharing such a claim on that node only,
//! until the PV controller's binding (or PreBind's annotation) shows in the
//! cache. PreBind writes each volume's `claimRef` (read, checked
//! still free, replaced with the read's resource version so a racing writer
//! makes it fail rather than steal the volume) and each provisioned claim's
//! selected node, then polls the claims once a second until all are bound,
//! failing after `bindTimeoutSeconds` with kube-scheduler's message.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::api::PostParams;
use kube::{Api, Client};

use super::{ClaimsState, PodVolumes, VolumeBinding};
use crate::framework::{ApiWrite, CycleState, PreBindPlugin, ReservePlugin, Status};
use crate::objects::Keyed;
use crate::objects::PodInfo;
use crate::objects::volume::{ClaimInfo, SELECTED_NODE};

/// Set on a volume the scheduler (or the PV controller) bound.
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// Set by the PV controller once a claim's binding is complete.
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// How often PreBind looks at the claims (kube-scheduler's poll interval).
const POLL: Duration = Duration::from_secs(1);

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, _: &PodInfo, node: &str) -> Status {
        let Some(claims) = state.read::<ClaimsState>() else {
            // PreFilter skipped: the pod has no claims.
            return Status::success();
        };
        let volumes = claims.on(node).unwrap_or_default();
        let volumes: &PodVolumes = &volumes;
        let mut assumed = self.assumed.lock();
        for (claim, volume) in &volumes.static_bindings {
            assumed.volumes.insert(volume.name.clone(), claim.key());
        }
        for (claim, _) in &volumes.provisions {
            assumed.selected.insert(claim.key(), node.to_owned());
        }
        *claims.all_bound.lock() = volumes.is_empty();
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _: &PodInfo, node: &str) -> Vec<ApiWrite> {
        if let Some(volumes) = state.read::<ClaimsState>().and_then(|c| c.on(node)) {
            self.forget(&volumes, node);
        }
        // What PreBind wrote stays: the PV controller goes on with it.
        Vec::new()
    }
}

impl VolumeBinding {
    /// Takes the static volumes and provisioned claims of `volumes` on
    /// `node` out of the assumed table (when still assumed for them).
    fn forget(&self, volumes: &PodVolumes, node: &str) {
        let mut assumed = self.assumed.lock();
        for (claim, volume) in &volumes.static_bindings {
            if assumed.volumes.get(&volume.name) == Some(&claim.key()) {
                assumed.volumes.remove(&volume.name);
            }
        }
        for (claim, _) in &volumes.provisions {
            let key = claim.key();
            if assumed.selected.get(&key).is_some_and(|n| n == node) {
                assumed.selected.remove(&key);
            }
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind_pre_flight(&self, state: &CycleState, _: &PodInfo, node: &str) -> Status {
        let Some(claims) = state.read::<ClaimsState>() else {
            return Status::skip("pod has no PersistentVolumeClaims");
        };
        if *claims.all_bound.lock() {
            return Status::skip("every claim is bound");
        }
        if claims.on(node).is_none() {
            return Status::error(format!("no pod volume found for node {node:?}"));
        }
        Status::success()
    }

    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        _: &'a PodInfo,
        node: &'a str,
        client: &'a Client,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let Some(volumes) = state.read::<ClaimsState>().and_then(|c| c.on(node)) else {
                return Status::error(format!("no pod volume found for node {node:?}"));
            };
            let result = self.bind_volumes(client, &volumes, node).await;
            // Bound or failed, the cache (or the next attempt) takes over.
            self.forget(&volumes, node);
            match result {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e),
            }
        })
    }
}

impl VolumeBinding {
    /// `BindPodVolumes`: write, then wait for the PV controller.
    async fn bind_volumes(
        &self,
        client: &Client,
        volumes: &PodVolumes,
        node: &str,
    ) -> Result<(), String> {
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        for (claim, volume) in &volumes.static_bindings {
            bind_volume(&pvs, claim, &volume.name).await?;
        }
        for (claim, _) in &volumes.provisions {
            let claims: Api<PersistentVolumeClaim> =
                Api::namespaced(client.clone(), &claim.namespace);
            let mut c = claims
                .get(&claim.name)
                .await
                .map_err(|e| format!("binding volumes: {e}"))?;
            c.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(SELECTED_NODE.into(), node.into());
            claims
                .replace(&claim.name, &PostParams::default(), &c)
                .await
                .map_err(|e| format!("binding volumes: {e}"))?;
        }
        let deadline = Instant::now() + self.bind_timeout;
        loop {
            if self.all_claims_bound(client, volumes).await? {
                return Ok(());
            }
            if Instant::now() + POLL > deadline {
                return Err("binding volumes: context deadline exceeded".into());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// kube-scheduler's `checkBindings`: every claim bound, and a
    /// provisioned one still selected for its node.
    async fn all_claims_bound(
        &self,
        client: &Client,
        volumes: &PodVolumes,
    ) -> Result<bool, String> {
        let claims = volumes
            .static_bindings
            .iter()
            .map(|(c, _)| (c, false))
            .chain(volumes.provisions.iter().map(|(c, _)| (c, true)));
        for (claim, provisioned) in claims {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &claim.namespace);
            let current = api
                .get_opt(&claim.name)
                .await
                .map_err(|e| format!("binding volumes: {e}"))?
                .ok_or_else(|| {
                    format!(
                        "binding volumes: failed to check binding: cannot get pvc {:?}",
                        claim.key()
                    )
                })?;
            let annotations = current.metadata.annotations.as_ref();
            if provisioned && !annotations.is_some_and(|a| a.contains_key(SELECTED_NODE)) {
                return Err(format!(
                    "binding volumes: selectedNode annotation reset for PVC {:?}",
                    claim.name
                ));
            }
            let named = current
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .is_some_and(|v| !v.is_empty());
            if !named || !annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Points volume `name`'s `claimRef` at `claim` (kube-scheduler's
/// `GetBindVolumeToClaim` and update), unless it went to another claim.
async fn bind_volume(
    pvs: &Api<PersistentVolume>,
    claim: &ClaimInfo,
    name: &str,
) -> Result<(), String> {
    let mut pv = pvs
        .get(name)
        .await
        .map_err(|e| format!("binding volumes: {e}"))?;
    let spec = pv.spec.get_or_insert_with(Default::default);
    if let Some(r) = &spec.claim_ref {
        let ours = r.namespace.as_deref() == Some(claim.namespace.as_str())
            && r.name.as_deref() == Some(claim.name.as_str());
        if !ours {
            return Err(format!(
                "binding volumes: volume {name:?} is bound to another claim"
            ));
        }
        if r.uid.as_deref() == Some(claim.uid.as_str()) {
            return Ok(());
        }
    }
    spec.claim_ref = Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(claim.namespace.clone()),
        name: Some(claim.name.clone()),
        uid: Some(claim.uid.clone()),
        ..Default::default()
    });
    pv.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(BOUND_BY_CONTROLLER.into(), "yes".into());
    pvs.replace(name, &PostParams::default(), &pv)
        .await
        .map_err(|e| format!("binding volumes: {e}"))?;
    Ok(())
}
