//! The view of a pod that plugins read.
//!
//! Both the HTTP verbs (a Pod in kube-scheduler's JSON) and the watch cache
//! (k8s-openapi `Pod`s) produce a [`PodInfo`], so a plugin is written once.
//! Only the fields placer's plugins use are kept; everything else in the JSON
//! is skipped while decoding, which is both faster and more forgiving of
//! fields newer than this build.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;

/// The fields of a pod that scheduling decisions depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty when the JSON had none).
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.priority`; a missing priority counts as 0, as kube-scheduler does.
    pub priority: i32,
    /// `spec.schedulerName` (empty when absent; the API server defaults it).
    pub scheduler_name: String,
    /// `spec.nodeName`, set once the pod is bound (or assumed).
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
}

impl PodInfo {
    /// `namespace/name`, as used in events and logs.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Succeeded and Failed pods hold no resources and are not counted.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
}

impl From<&Pod> for PodInfo {
    fn from(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        PodInfo {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            scheduler_name: spec
                .and_then(|s| s.scheduler_name.clone())
                .unwrap_or_default(),
            node_name: spec
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
        }
    }
}

/// Decodes a Pod in Kubernetes' JSON form (camelCase keys) straight into a
/// [`PodInfo`]. `null` is accepted wherever a field may be absent.
impl<'de> Deserialize<'de> for PodInfo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(d)?;
        let meta = wire.metadata.unwrap_or_default();
        let spec = wire.spec.unwrap_or_default();
        Ok(PodInfo {
            name: meta.name.unwrap_or_default(),
            namespace: meta.namespace.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            annotations: meta.annotations.unwrap_or_default(),
            priority: spec.priority.unwrap_or(0),
            scheduler_name: spec.scheduler_name.unwrap_or_default(),
            node_name: spec.node_name.filter(|n| !n.is_empty()),
            phase: wire.status.and_then(|s| s.phase),
        })
    }
}

#[derive(Deserialize)]
#[serde(expecting = "a Pod object")]
struct WirePod {
    metadata: Option<WireMeta>,
    spec: Option<WireSpec>,
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    priority: Option<i32>,
    scheduler_name: Option<String>,
    node_name: Option<String>,
}

#[derive(Deserialize)]
struct WireStatus {
    phase: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_scheduler_json_and_tolerates_nulls() {
        let json = r#"{"metadata":{"name":"p","namespace":"ns","uid":"u1","creationTimestamp":null,
            "labels":{"qos":"latency-sensitive"},"annotations":null},
            "spec":{"containers":null,"priority":null,"schedulerName":"s"},"status":{}}"#;
        let pod: PodInfo = serde_json::from_str(json).unwrap();
        assert_eq!(pod.key(), "ns/p");
        assert_eq!(pod.uid, "u1");
        assert_eq!(pod.priority, 0);
        assert_eq!(pod.labels["qos"], "latency-sensitive");
        assert!(pod.annotations.is_empty());
        assert_eq!(pod.scheduler_name, "s");
        assert_eq!(pod.node_name, None);
    }

    #[test]
    fn from_api_pod_keeps_the_fields_plugins_need() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n", "labels": {"app": "x"}},
            "spec": {"containers": [], "nodeName": "node-1", "priority": 7},
            "status": {"phase": "Succeeded"}
        }))
        .unwrap();
        let info = PodInfo::from(&pod);
        assert_eq!(info.node_name.as_deref(), Some("node-1"));
        assert_eq!(info.priority, 7);
        assert!(info.is_terminal());
        assert_eq!(info.labels["app"], "x");
    }
}
