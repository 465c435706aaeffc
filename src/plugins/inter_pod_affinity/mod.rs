//! InterPodAffinity: place a pod relative to the pods already running, by
//! their labels and a topology key, as kube-scheduler does (design §5.2).
//!
//! Mirrors kube-scheduler's `pkg/scheduler/framework/plugins/interpodaffinity`
//! (`filtering.go`, `scoring.go`, `plugin.go`) and the term matching of
//! `framework.AffinityTerm`:
//!
//! - Filter (`filter.rs`): the incoming pod's required affinity (some existing
//!   pod matching *all* its terms in the node's domain of every term; the
//!   first pod of a group that matches its own terms may go anywhere the
//!   topology keys exist), its required anti-affinity (no matching pod in the
//!   node's domain of that term) and the existing pods' required
//!   anti-affinity against the incoming pod;
//! - Score (`score.rs`): weights of the incoming pod's preferred terms for the
//!   domains of the existing pods they select (anti-affinity subtracts), and
//!   of the existing pods' preferred terms (and required affinity terms, with
//!   `hardPodAffinityWeight`) that select the incoming pod; normalized to
//!   0..=100 between the lowest and highest node.
//!
//! A term selects a pod when its `labelSelector` does (none selects nothing)
//! and the pod's namespace is allowed: `namespaces` if listed, the term
//! owner's namespace when neither `namespaces` nor `namespaceSelector` is set,
//! every namespace with an empty `namespaceSelector: {}`, and the namespaces
//! whose labels a non-empty `namespaceSelector` selects (a namespace placer
//! does not know has no labels, as in kube-scheduler).
//! `matchLabelKeys`/`mismatchLabelKeys` are not read: the API server merges
//! them into `labelSelector` when the pod is created.
//!
//! Namespace labels come from the cache, which watches Namespaces in
//! standalone mode. Where it does not (extender mode), a non-empty
//! `namespaceSelector` cannot be decided: on the incoming pod's required
//! terms, PreFilter fails with an `Error` status naming the term (every node
//! gets it); on its preferred terms, PreScore does. An existing pod's required
//! anti-affinity term with one, whose label selector selects the incoming pod
//! in a namespace it does not list, turns the nodes of its domain into
//! `Error`s (it may or may not apply); an existing pod's preferred or
//! required-affinity term with one is ignored when scoring.

mod filter;
mod hints;
mod score;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{PodAffinityTerm, WeightedPodAffinityTerm};
use serde::{Deserialize, Serialize};

use crate::cache::Objects;
use crate::k8s::label_selector;
use crate::objects::namespace::NamespaceInfo;
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "InterPodAffinity";

/// Filter reason for the incoming pod's required affinity
/// (`ErrReasonAffinityRulesNotMatch`, code `UnschedulableAndUnresolvable`).
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";

/// Filter reason for the incoming pod's required anti-affinity
/// (`ErrReasonAntiAffinityRulesNotMatch`, code `Unschedulable`).
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";

/// Filter reason for existing pods' required anti-affinity
/// (`ErrReasonExistingAntiAffinityRulesNotMatch`, code `Unschedulable`).
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// Arguments of InterPodAffinity (kube-scheduler's `InterPodAffinityArgs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", try_from = "RawArgs")]
pub struct InterPodAffinityArgs {
    /// Score weight of an existing pod's required affinity term that selects
    /// the incoming pod, 0..=100 (default 1).
    pub hard_pod_affinity_weight: i32,
    /// Skip scoring when the incoming pod has no preferred terms, instead of
    /// scoring by the existing pods' preferences (default false).
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl crate::framework::CacheNeeds for InterPodAffinityArgs {}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    #[serde(default = "default_hard_weight")]
    hard_pod_affinity_weight: i32,
    #[serde(default)]
    ignore_preferred_terms_of_existing_pods: bool,
}

fn default_hard_weight() -> i32 {
    1
}

impl TryFrom<RawArgs> for InterPodAffinityArgs {
    type Error = String;
    fn try_from(r: RawArgs) -> Result<Self, String> {
        if !(0..=100).contains(&r.hard_pod_affinity_weight) {
            return Err(format!(
                "hardPodAffinityWeight: Invalid value: {}: not in valid range [0-100]",
                r.hard_pod_affinity_weight
            ));
        }
        Ok(InterPodAffinityArgs {
            hard_pod_affinity_weight: r.hard_pod_affinity_weight,
            ignore_preferred_terms_of_existing_pods: r.ignore_preferred_terms_of_existing_pods,
        })
    }
}

/// The plugin.
#[derive(Debug)]
pub struct InterPodAffinity {
    hard_pod_affinity_weight: i64,
    ignore_preferred_terms_of_existing_pods: bool,
}

impl InterPodAffinity {
    /// Builds the plugin from its arguments.
    pub fn new(args: &InterPodAffinityArgs) -> Self {
        InterPodAffinity {
            hard_pod_affinity_weight: i64::from(args.hard_pod_affinity_weight),
            ignore_preferred_terms_of_existing_pods: args.ignore_preferred_terms_of_existing_pods,
        }
    }
}

crate::plugin!(
    InterPodAffinity,
    NAME,
    [
        pre_filter,
        pre_filter_extensions,
        filter,
        pre_score,
        score,
        enqueue_extensions
    ]
);

/// The four term lists of a pod's `spec.affinity`, empty when absent.
struct Terms<'a> {
    required_affinity: &'a [PodAffinityTerm],
    required_anti: &'a [PodAffinityTerm],
    preferred_affinity: &'a [WeightedPodAffinityTerm],
    preferred_anti: &'a [WeightedPodAffinityTerm],
}

impl<'a> Terms<'a> {
    fn of(pod: &'a PodInfo) -> Self {
        let a = pod.spec.affinity.as_ref();
        let aff = a.and_then(|a| a.pod_affinity.as_ref());
        let anti = a.and_then(|a| a.pod_anti_affinity.as_ref());
        Terms {
            required_affinity: aff
                .and_then(|p| {
                    p.required_during_scheduling_ignored_during_execution
                        .as_deref()
                })
                .unwrap_or_default(),
            required_anti: anti
                .and_then(|p| {
                    p.required_during_scheduling_ignored_during_execution
                        .as_deref()
                })
                .unwrap_or_default(),
            preferred_affinity: aff
                .and_then(|p| {
                    p.preferred_during_scheduling_ignored_during_execution
                        .as_deref()
                })
                .unwrap_or_default(),
            preferred_anti: anti
                .and_then(|p| {
                    p.preferred_during_scheduling_ignored_during_execution
                        .as_deref()
                })
                .unwrap_or_default(),
        }
    }

    /// `framework.NewPodInfo`'s parsing of the incoming pod: every selector
    /// of every term must be valid.
    fn validate(&self) -> Result<(), String> {
        let required = self.required_affinity.iter().chain(self.required_anti);
        let preferred = self
            .preferred_affinity
            .iter()
            .chain(self.preferred_anti)
            .map(|w| &w.pod_affinity_term);
        for t in required.chain(preferred) {
            for s in [&t.label_selector, &t.namespace_selector]
                .into_iter()
                .flatten()
            {
                label_selector::validate(s)?;
            }
        }
        Ok(())
    }
}

/// Fails when one of the incoming pod's `terms` (the list at `path`) has a
/// non-empty `namespaceSelector` and namespace labels are not known.
fn reject_namespace_selectors<'t>(
    pod: &PodInfo,
    path: &str,
    terms: impl IntoIterator<Item = &'t PodAffinityTerm>,
    namespaces: &Objects<NamespaceInfo>,
) -> Result<(), String> {
    if namespaces.is_synced() {
        return Ok(());
    }
    for (i, t) in terms.into_iter().enumerate() {
        if t.namespace_selector
            .as_ref()
            .is_some_and(|s| !label_selector::is_empty(s))
        {
            return Err(format!(
                "{path}[{i}] of pod {} has a non-empty namespaceSelector; placer does \
                 not cache namespace labels, so only an empty namespaceSelector (all \
                 namespaces) is supported",
                pod.key()
            ));
        }
    }
    Ok(())
}

/// Whether a term selects a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TermMatch {
    Yes,
    No,
    /// Only the namespace's labels could tell (non-empty `namespaceSelector`),
    /// and they are not known.
    Unknown,
}

/// `AffinityTerm.Matches`: whether `term`, declared by a pod in namespace
/// `owner_ns`, selects `target`.
fn term_matches(
    term: &PodAffinityTerm,
    owner_ns: &str,
    target: &PodInfo,
    namespaces: &Objects<NamespaceInfo>,
) -> TermMatch {
    if !label_selector::matches(term.label_selector.as_ref(), &target.labels) {
        return TermMatch::No;
    }
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let in_namespaces = if listed.is_empty() && term.namespace_selector.is_none() {
        owner_ns == target.namespace
    } else {
        listed.contains(&target.namespace)
    };
    match &term.namespace_selector {
        _ if in_namespaces => TermMatch::Yes,
        None => TermMatch::No,
        Some(s) if label_selector::is_empty(s) => TermMatch::Yes,
        Some(_) if !namespaces.is_synced() => TermMatch::Unknown,
        Some(s) => {
            let none = BTreeMap::new();
            let labels = namespaces
                .get(&target.namespace)
                .map_or(&none, |n| &n.labels);
            if label_selector::matches(Some(s), labels) {
                TermMatch::Yes
            } else {
                TermMatch::No
            }
        }
    }
}

/// Counts (or weights) per topology pair, keyed by topology key then value so
/// that a node's lookup borrows its labels and allocates nothing.
#[derive(Debug, Default, Clone, PartialEq)]
struct TopologyCounts(HashMap<String, HashMap<String, i64>>);

impl TopologyCounts {
    /// Adds `delta` to the pair (`key`, the node's value for it), if the node
    /// has the key.
    fn add(&mut self, node: &NodeInfo, key: &str, delta: i64) {
        let Some(value) = node.label(key) else {
            return;
        };
        let values = match self.0.get_mut(key) {
            Some(v) => v,
            None => self.0.entry(key.to_string()).or_default(),
        };
        match values.get_mut(value) {
            Some(n) => *n += delta,
            None => {
                values.insert(value.to_string(), delta);
            }
        }
        // A pair back at 0 is dropped, as kube-scheduler's `updateWithPod`
        // does: "no pod matches anywhere" is tested with `is_empty`, so a
        // removal must leave what counting without the pod would.
        if values.get(value) == Some(&0) {
            values.remove(value);
            if values.is_empty() {
                self.0.remove(key);
            }
        }
    }

    /// The count of the pair (`key`, `value`); 0 when never added.
    fn get(&self, key: &str, value: &str) -> i64 {
        self.0
            .get(key)
            .and_then(|v| v.get(value))
            .copied()
            .unwrap_or(0)
    }

    /// True when nothing was ever added.
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs `node` belongs to, with their counts.
    fn of_node<'a>(&'a self, node: &'a NodeInfo) -> impl Iterator<Item = i64> + 'a {
        self.0
            .iter()
            .filter_map(|(key, values)| node.label(key).and_then(|v| values.get(v)).copied())
    }
}

#[cfg(test)]
mod tests;
