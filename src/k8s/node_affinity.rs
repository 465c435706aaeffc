//! Parsed node selector terms: what a pod requires of its node and what it
//! prefers (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`),
//! read by every plugin that honours node affinity (NodeAffinity,
//! PodTopologySpread, VolumeBinding, DynamicResources), the DRA allocator
//! and the verbs' pod validation.

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorTerm, PreferredSchedulingTerm};

use crate::cache::node_inputs::LabelSlots;
use crate::k8s::validation::{
    FieldRequirement, LabelRequirement, aggregate, parse_field_requirement, parse_label_requirement,
};
use crate::objects::inputs::WantedLabel;
use crate::objects::{NodeInfo, PodInfo};

/// The pod's required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`).
pub(crate) fn required_selector(pod: &PodInfo) -> Option<&NodeSelector> {
    pod.spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// One parsed, non-empty `NodeSelectorTerm`: its requirements, ANDed.
#[derive(Debug, Clone, PartialEq)]
pub struct TermMatcher {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

impl TermMatcher {
    /// Parses `term`; errors are reported under `path`, as kube-scheduler does.
    fn parse(term: &NodeSelectorTerm, path: &str) -> Result<Self, Vec<String>> {
        let mut errs = Vec::new();
        let mut labels = Vec::new();
        for (i, r) in term.match_expressions.iter().flatten().enumerate() {
            if let Some(l) =
                parse_label_requirement(r, &format!("{path}.matchExpressions[{i}]"), &mut errs)
            {
                labels.push(l);
            }
        }
        let mut fields = Vec::new();
        for (i, r) in term.match_fields.iter().flatten().enumerate() {
            if let Some(f) =
                parse_field_requirement(r, &format!("{path}.matchFields[{i}]"), &mut errs)
            {
                fields.push(f);
            }
        }
        if errs.is_empty() {
            Ok(TermMatcher { labels, fields })
        } else {
            Err(errs)
        }
    }

    /// True when every requirement holds for `node`. Field requirements are
    /// not checked on a node without a name (kube-scheduler has no fields for it).
    pub fn matches(&self, node: &NodeInfo) -> bool {
        self.labels.iter().all(|r| r.matches(&node.labels))
            && (node.name.is_empty() || self.fields.iter().all(|f| f.matches(&node.name)))
    }
}

/// What the API server's validation would say of `term` (every requirement
/// checked, errors under `path`); empty when it would accept it.
pub(crate) fn term_errors(term: &NodeSelectorTerm, path: &str) -> Vec<String> {
    TermMatcher::parse(term, path).err().unwrap_or_default()
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && term.match_fields.as_ref().is_none_or(Vec::is_empty)
}

/// What a pod requires of its node: `spec.nodeSelector` and the required
/// node affinity (`nodeaffinity.RequiredNodeAffinity`). Other plugins that
/// honour node affinity (PodTopologySpread's `nodeAffinityPolicy`) can reuse it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequiredNodeAffinity {
    /// `key`, `value`, and the pair as the cache's inline tables answer it
    /// (see [`RequiredNodeAffinity::with_label_ids`]).
    node_selector: Vec<(String, String, Option<WantedLabel>)>,
    /// `None`: no required affinity. `Some`: the terms that parsed, ORed
    /// (empty: no node matches).
    terms: Option<Vec<TermMatcher>>,
}

impl RequiredNodeAffinity {
    /// Parses the pod's requirements (unparsable terms match nothing).
    pub fn new(pod: &PodInfo) -> Self {
        let required = required_selector(pod);
        RequiredNodeAffinity {
            node_selector: pod
                .spec
                .node_selector
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), None))
                .collect(),
            terms: required.map(parse_required_terms),
        }
    }

    /// Reads the node selector by the ids of `slots` (the cache's) on nodes
    /// whose inline table they filled, instead of by string: a node's
    /// labels sit in two more allocations, which at thousands of nodes per
    /// attempt are cache misses. Other nodes are still read by string.
    #[must_use]
    pub fn with_label_ids(mut self, slots: &LabelSlots) -> Self {
        for (key, value, wanted) in &mut self.node_selector {
            *wanted = slots.wanted(key, value);
        }
        self
    }

    /// The label keys of the pod's node selector (the ones
    /// [`RequiredNodeAffinity::with_label_ids`] can read by id).
    pub fn selector_keys(pod: &PodInfo) -> impl Iterator<Item = &str> {
        pod.spec.node_selector.keys().map(String::as_str)
    }

    /// The node label keys the pod's node selector and required terms read
    /// (what [`RequiredNodeAffinity::matches`] can depend on, with the
    /// node's name), from the pod as it is, without parsing it.
    pub fn label_keys(pod: &PodInfo) -> impl Iterator<Item = &str> {
        let terms = required_selector(pod)
            .into_iter()
            .flat_map(|s| &s.node_selector_terms)
            .flat_map(|t| t.match_expressions.iter().flatten())
            .map(|r| r.key.as_str());
        Self::selector_keys(pod).chain(terms)
    }

    /// No requirement at all: every node matches.
    pub fn anywhere() -> Self {
        RequiredNodeAffinity {
            node_selector: Vec::new(),
            terms: None,
        }
    }

    /// Just the terms of `selector`, ORed, as `MatchNodeSelectorTerms` reads
    /// them (a PersistentVolume's `nodeAffinity.required`).
    pub fn from_selector(selector: &NodeSelector) -> Self {
        RequiredNodeAffinity {
            node_selector: Vec::new(),
            terms: Some(parse_required_terms(selector)),
        }
    }

    /// The terms of `selector`, ORed, where any requirement that does not
    /// parse is an error (`nodeaffinity.NewNodeSelector`, errors under
    /// `path`): how kube-scheduler reads the selector of its own args.
    pub(crate) fn strict(selector: &NodeSelector, path: &str) -> Result<Self, Vec<String>> {
        let mut errs = Vec::new();
        let mut terms = Vec::new();
        for (i, t) in selector.node_selector_terms.iter().enumerate() {
            if is_empty_term(t) {
                continue;
            }
            match TermMatcher::parse(t, &format!("{path}.nodeSelectorTerms[{i}]")) {
                Ok(m) => terms.push(m),
                Err(e) => errs.extend(e),
            }
        }
        if errs.is_empty() {
            Ok(RequiredNodeAffinity {
                node_selector: Vec::new(),
                terms: Some(terms),
            })
        } else {
            Err(errs)
        }
    }

    /// True when `node` satisfies the node selector and some required term.
    pub fn matches(&self, node: &NodeInfo) -> bool {
        self.node_selector.iter().all(|(k, v, wanted)| {
            wanted
                .and_then(|w| w.carried_by(&node.inputs))
                .unwrap_or_else(|| node.labels.get(k) == Some(v.as_str()))
        }) && self
            .terms
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| t.matches(node)))
    }
}

/// `NewLazyErrorNodeSelector`: empty terms are dropped, and so are terms that
/// fail to parse (they could never match, and their errors are ignored).
fn parse_required_terms(selector: &NodeSelector) -> Vec<TermMatcher> {
    selector
        .node_selector_terms
        .iter()
        .enumerate()
        .filter(|(_, t)| !is_empty_term(t))
        .filter_map(|(i, t)| TermMatcher::parse(t, &format!("nodeSelectorTerms[{i}]")).ok())
        .collect()
}

/// The pod's preferred terms with their weights (`nodeaffinity.PreferredSchedulingTerms`).
#[derive(Debug, Clone, PartialEq)]
pub struct PreferredTerms {
    terms: Vec<(i64, TermMatcher)>,
}

impl PreferredTerms {
    /// Parses `terms`, skipping those with weight 0 or no requirement; any
    /// parse error fails the whole list, with kube-scheduler's aggregated message.
    pub fn new(terms: &[PreferredSchedulingTerm]) -> Result<Self, String> {
        Self::parse_at(terms, "").map_err(aggregate)
    }

    /// Parses `terms` as [`PreferredTerms::new`] does, with each error under
    /// `path` (the list's own path), one string per error.
    pub(crate) fn parse_at(
        terms: &[PreferredSchedulingTerm],
        path: &str,
    ) -> Result<Self, Vec<String>> {
        let mut errs = Vec::new();
        let mut parsed = Vec::new();
        for (i, t) in terms.iter().enumerate() {
            if t.weight == 0 || is_empty_term(&t.preference) {
                continue;
            }
            match TermMatcher::parse(&t.preference, &format!("{path}[{i}]")) {
                Ok(m) => parsed.push((i64::from(t.weight), m)),
                Err(e) => errs.extend(e),
            }
        }
        if errs.is_empty() {
            Ok(PreferredTerms { terms: parsed })
        } else {
            Err(errs)
        }
    }

    /// The sum of the weights of the terms `node` matches.
    pub fn score(&self, node: &NodeInfo) -> i64 {
        self.terms
            .iter()
            .filter(|(_, t)| t.matches(node))
            .map(|(w, _)| w)
            .sum()
    }
}
