//! Telling users what happened, as kube-scheduler does: a `Scheduled` or
//! `FailedScheduling` event on the pod, and its `PodScheduled` condition.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client};
use serde_json::json;
use tracing::warn;

use super::cycle::Failure;
use super::events::EventRecorder;
use crate::framework::PodEvents;
use crate::objects::PodInfo;

/// Publishes scheduling outcomes.
pub struct Reporter {
    client: Client,
    recorder: EventRecorder,
}

/// The `PodScheduled=False` reason for a failure.
pub fn condition_reason(failure: &Failure) -> &'static str {
    match failure {
        Failure::Unschedulable { .. } => "Unschedulable",
        Failure::Error { .. } => "SchedulerError",
    }
}

fn object_ref(pod: &PodInfo) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
        ..Default::default()
    }
}

impl Reporter {
    /// Events are reported by `controller` (the profile's scheduler name, as
    /// kube-scheduler reports under its own) from `instance`.
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        Reporter {
            recorder: EventRecorder::new(client.clone(), controller, instance),
            client,
        }
    }

    /// Publishes `event` about `pod`; a failure is logged, never the caller's.
    async fn record(&self, pod: &PodInfo, event: &Event) {
        if let Err(e) = self.recorder.publish(event, &object_ref(pod)).await {
            warn!(pod = %pod.key(), reason = %event.reason, error = %e, "could not record an event");
        }
    }

    /// "Successfully assigned ns/pod to node".
    pub async fn scheduled(&self, pod: &PodInfo, node: &str) {
        let event = Event {
            type_: EventType::Normal,
            reason: "Scheduled".into(),
            note: Some(format!(
                "Successfully assigned {}/{} to {node}",
                pod.namespace, pod.name
            )),
            action: "Binding".into(),
            secondary: None,
        };
        self.record(pod, &event).await;
    }

    /// A `Normal` event a plugin reports about `pod` ([`PodEvents`]).
    async fn plugin_event(&self, pod: &PodInfo, reason: &str, action: &str, note: String) {
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        self.record(pod, &event).await;
    }

    /// The `Preempted` event on a victim, naming its preemptor.
    pub async fn preempted(&self, victim: &PodInfo, preemptor: &PodInfo, node: &str) {
        let event = Event {
            type_: EventType::Normal,
            reason: "Preempted".into(),
            note: Some(format!("Preempted by pod {} on node {node}", preemptor.uid)),
            action: "Preempting".into(),
            secondary: Some(object_ref(preemptor)),
        };
        self.record(victim, &event).await;
    }

    /// Sets `status.nominatedNodeName` to the node the pod is about to be
    /// bound to, while PreBind or Permit's wait take their time (kube-scheduler
    /// does so for the cluster autoscaler and for preemption's accounting).
    pub async fn nominated(&self, pod: &PodInfo, node: &str) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = json!({"status": {"nominatedNodeName": node}});
        api.patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
    }

    /// A FailedScheduling event and `PodScheduled=False` with the reason;
    /// `nominated` sets (`Some(node)`) or clears (`None`) `nominatedNodeName`
    /// in the same patch, or leaves it when absent.
    pub async fn failed(&self, pod: &PodInfo, failure: &Failure, nominated: Option<Option<&str>>) {
        let event = Event {
            type_: EventType::Warning,
            reason: "FailedScheduling".into(),
            note: Some(failure.message().to_string()),
            action: "Scheduling".into(),
            secondary: None,
        };
        self.record(pod, &event).await;
        let mut condition = json!({"status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": condition_reason(failure),
            "message": failure.message(),
            "lastProbeTime": null,
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now(),
        }]}});
        if let Some(node) = nominated {
            condition["status"]["nominatedNodeName"] = json!(node);
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        if let Err(e) = api
            .patch_status(
                &pod.name,
                &PatchParams::default(),
                &Patch::Strategic(condition),
            )
            .await
        {
            warn!(pod = %pod.key(), error = %e, "could not set PodScheduled condition");
        }
    }
}

impl PodEvents for Reporter {
    fn normal<'a>(
        &'a self,
        pod: &'a PodInfo,
        reason: &'a str,
        action: &'a str,
        note: String,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.plugin_event(pod, reason, action, note))
    }
}
