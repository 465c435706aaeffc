//! NodeAffinity's arguments: kube-scheduler's `NodeAffinityArgs`, whose only
//! field is `addedAffinity` (node affinity the scheduler enforces on every
//! pod of the profile, on top of the pod's own).
//!
//! Decoded strictly (unknown keys are errors at every level, as in
//! `KubeSchedulerConfiguration`) and validated as
//! `validation.ValidateNodeAffinityArgs` does: every requirement of the
//! required terms and of the preferred terms must parse, with the errors
//! under kube-scheduler's field paths. The parsed terms are kept beside the
//! API form, so building the plugin cannot fail.

use k8s_openapi::api::core::v1::{
    NodeAffinity as ApiNodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PreferredSchedulingTerm,
};
use serde::{Deserialize, Serialize};

use crate::k8s::node_affinity::{PreferredTerms, RequiredNodeAffinity};
use crate::k8s::validation::aggregate;

/// Arguments of NodeAffinity.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawArgs")]
pub struct NodeAffinityArgs {
    /// `addedAffinity`, as written.
    #[serde(rename = "addedAffinity", skip_serializing_if = "Option::is_none")]
    pub added_affinity: Option<ApiNodeAffinity>,
    /// The same, parsed (what the plugin runs).
    #[serde(skip)]
    pub(super) added: Added,
}

impl crate::framework::CacheNeeds for NodeAffinityArgs {}

/// `addedAffinity` parsed: kube-scheduler's `addedNodeSelector` (set when
/// `requiredDuringSchedulingIgnoredDuringExecution` is, even with no term,
/// which then matches no node) and `addedPrefSchedTerms` (set when there is
/// at least one preferred term).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Added {
    pub(super) required: Option<RequiredNodeAffinity>,
    pub(super) preferred: Option<PreferredTerms>,
}

const REQUIRED_PATH: &str = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED_PATH: &str = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution";

impl TryFrom<RawArgs> for NodeAffinityArgs {
    type Error = String;

    fn try_from(raw: RawArgs) -> Result<Self, String> {
        let Some(affinity) = raw.added_affinity.map(RawNodeAffinity::into_api) else {
            return Ok(Self::default());
        };
        let mut errs = Vec::new();
        let required = affinity
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .and_then(|s| {
                RequiredNodeAffinity::strict(s, REQUIRED_PATH)
                    .map_err(|e| errs.extend(e))
                    .ok()
            });
        let preferred = affinity
            .preferred_during_scheduling_ignored_during_execution
            .as_deref()
            .filter(|t| !t.is_empty())
            .and_then(|t| {
                PreferredTerms::parse_at(t, PREFERRED_PATH)
                    .map_err(|e| errs.extend(e))
                    .ok()
            });
        if !errs.is_empty() {
            return Err(aggregate(errs));
        }
        Ok(NodeAffinityArgs {
            added_affinity: Some(affinity),
            added: Added {
                required,
                preferred,
            },
        })
    }
}

// The API types' own decoders ignore unknown keys; these mirrors refuse them.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArgs {
    #[serde(default)]
    added_affinity: Option<RawNodeAffinity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawNodeAffinity {
    #[serde(default)]
    required_during_scheduling_ignored_during_execution: Option<RawNodeSelector>,
    #[serde(default)]
    preferred_during_scheduling_ignored_during_execution: Option<Vec<RawPreferredTerm>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawNodeSelector {
    #[serde(default)]
    node_selector_terms: Vec<RawTerm>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPreferredTerm {
    #[serde(default)]
    weight: i32,
    #[serde(default)]
    preference: RawTerm,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTerm {
    #[serde(default)]
    match_expressions: Option<Vec<RawRequirement>>,
    #[serde(default)]
    match_fields: Option<Vec<RawRequirement>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequirement {
    key: String,
    operator: String,
    #[serde(default)]
    values: Option<Vec<String>>,
}

impl RawNodeAffinity {
    fn into_api(self) -> ApiNodeAffinity {
        ApiNodeAffinity {
            required_during_scheduling_ignored_during_execution: self
                .required_during_scheduling_ignored_during_execution
                .map(|s| NodeSelector {
                    node_selector_terms: s
                        .node_selector_terms
                        .into_iter()
                        .map(RawTerm::into_api)
                        .collect(),
                }),
            preferred_during_scheduling_ignored_during_execution: self
                .preferred_during_scheduling_ignored_during_execution
                .map(|terms| {
                    terms
                        .into_iter()
                        .map(|t| PreferredSchedulingTerm {
                            weight: t.weight,
                            preference: t.preference.into_api(),
                        })
                        .collect()
                }),
        }
    }
}

impl RawTerm {
    fn into_api(self) -> NodeSelectorTerm {
        let reqs = |list: Option<Vec<RawRequirement>>| {
            list.map(|l| {
                l.into_iter()
                    .map(|r| NodeSelectorRequirement {
                        key: r.key,
                        operator: r.operator,
                        values: r.values,
                    })
                    .collect()
            })
        };
        NodeSelectorTerm {
            match_expressions: reqs(self.match_expressions),
            match_fields: reqs(self.match_fields),
        }
    }
}
