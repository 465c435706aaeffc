//! The view of a Namespace that pod affinity's `namespaceSelector` reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;

use crate::objects::Keyed;

/// A Namespace: its name and labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

impl Keyed for NamespaceInfo {
    fn key(&self) -> String {
        self.name.clone()
    }
}

impl From<&Namespace> for NamespaceInfo {
    fn from(n: &Namespace) -> Self {
        NamespaceInfo {
            name: n.metadata.name.clone().unwrap_or_default(),
            labels: n.metadata.labels.clone().unwrap_or_default(),
        }
    }
}
