//! Kubernetes' own rules that plugins, explain and the verbs read: label
//! selectors, taints and tolerations, node affinity terms, resource name
//! classes, what the API server's validation would accept of a pod's
//! scheduling fields, and the self-validating value types of plugin
//! arguments. Each mirrors the upstream helper it names
//! (`k8s.io/apimachinery`, `k8s.io/component-helpers`, kube-scheduler's
//! `v1helper`), and none knows about plugins: a plugin that needs a rule
//! another plugin also reads finds it here (design §1).

pub mod fields;
pub(crate) mod label_selector;
pub mod node_affinity;
pub mod pod_spec;
pub mod resource_names;
pub mod taints;
pub(crate) mod validation;
