//! The views of Services and workload controllers that PodTopologySpread's
//! default constraints read: which pods they select (kube-scheduler's
//! `helper.DefaultSelector`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::objects::{Keyed, namespace_and_name};

/// A Service's pod selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceSelector {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.selector`; `None` selects nothing (an empty map selects every pod).
    pub selector: Option<BTreeMap<String, String>>,
}

/// The pod selector of a ReplicationController, ReplicaSet or StatefulSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControllerSelector {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.selector` (a ReplicationController's map becomes `matchLabels`).
    pub selector: Option<LabelSelector>,
}

/// Marks which kind a [`ControllerSelector`] came from, so each kind has its
/// own store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Controller<const KIND: u8>(pub ControllerSelector);

/// ReplicationControllers.
pub type ReplicationControllerSelector = Controller<0>;
/// ReplicaSets.
pub type ReplicaSetSelector = Controller<1>;
/// StatefulSets.
pub type StatefulSetSelector = Controller<2>;

impl Keyed for ServiceSelector {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl<const KIND: u8> Keyed for Controller<KIND> {
    fn key(&self) -> String {
        format!("{}/{}", self.0.namespace, self.0.name)
    }
}

impl From<&Service> for ServiceSelector {
    fn from(s: &Service) -> Self {
        let (namespace, name) = namespace_and_name(&s.metadata);
        ServiceSelector {
            namespace,
            name,
            selector: s.spec.as_ref().and_then(|s| s.selector.clone()),
        }
    }
}

impl From<&ReplicationController> for ReplicationControllerSelector {
    fn from(rc: &ReplicationController) -> Self {
        let (namespace, name) = namespace_and_name(&rc.metadata);
        Controller(ControllerSelector {
            namespace,
            name,
            selector: rc
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .map(|m| LabelSelector {
                    match_labels: Some(m),
                    match_expressions: None,
                }),
        })
    }
}

impl From<&ReplicaSet> for ReplicaSetSelector {
    fn from(rs: &ReplicaSet) -> Self {
        let (namespace, name) = namespace_and_name(&rs.metadata);
        Controller(ControllerSelector {
            namespace,
            name,
            selector: Some(rs.spec.selector.clone()),
        })
    }
}

impl From<&StatefulSet> for StatefulSetSelector {
    fn from(ss: &StatefulSet) -> Self {
        let (namespace, name) = namespace_and_name(&ss.metadata);
        Controller(ControllerSelector {
            namespace,
            name,
            selector: Some(ss.spec.selector.clone()),
        })
    }
}
