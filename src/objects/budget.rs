//! The view of a PodDisruptionBudget that preemption reads.

use std::collections::BTreeSet;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::objects::{Keyed, namespace_and_name};

/// A PodDisruptionBudget reduced to what victim selection needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DisruptionBudget {
    /// `metadata.namespace`: the budget covers pods of this namespace only.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.selector`; `None` or empty selects no pod (kube-scheduler's rule).
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods` names: evictions the API server already counted.
    pub disrupted_pods: BTreeSet<String>,
}

impl Keyed for DisruptionBudget {
    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl From<&PodDisruptionBudget> for DisruptionBudget {
    fn from(pdb: &PodDisruptionBudget) -> Self {
        let status = pdb.status.as_ref();
        let (namespace, name) = namespace_and_name(&pdb.metadata);
        DisruptionBudget {
            namespace,
            name,
            selector: pdb.spec.as_ref().and_then(|s| s.selector.clone()),
            disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted_pods: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }
}
