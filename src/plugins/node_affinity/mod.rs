//! NodeAffinity: `spec.nodeSelector` and required node affinity filter nodes;
//! preferred node affinity scores them (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`, with the
//! matching rules of `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`
//! and `k8s.io/apimachinery/pkg/labels` (`NewRequirement`, `Requirement.Matches`):
//!
//! - `nodeSelector`: every pair must be a node label (exact, case-sensitive).
//! - required affinity: `nodeSelectorTerms` are ORed; within a term,
//!   `matchExpressions` (on labels) and `matchFields` (on `metadata.name`) are
//!   ANDed. A term with neither matches nothing; no term at all matches no node.
//!   `NotIn` and `DoesNotExist` match a node without the label; `Gt`/`Lt`
//!   compare integers and never match a missing or non-integer label.
//! - A requirement that does not parse (unknown operator, bad key or value,
//!   wrong number of values, non-integer `Gt`/`Lt` value) makes its whole term
//!   match nothing; for required terms that is silent (kube-scheduler ignores
//!   those errors "for backwards compatibility"), for preferred terms PreScore
//!   fails with the parse errors, as kube-scheduler's does.
//! - Score: the sum of the weights of the matching preferred terms (weight 0
//!   and empty terms are ignored), normalized with `DefaultNormalizeScore`.
//!
//! Not supported: the `addedAffinity` plugin argument (scheduler-enforced
//! affinity; rejected as an unknown field rather than silently ignored), the
//! PreFilter narrowing to the nodes named by `matchFields` `metadata.name In`
//! (placer's runner evaluates every node; the verdicts are the same, but
//! kube-scheduler reports the nodes it skipped as
//! "node(s) didn't satisfy plugin(s) [NodeAffinity]"), and the resize-deferred
//! PreFilter `Skip`.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};
use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::{
    CycleState, FilterPlugin, NodeScore, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status,
};
use crate::objects::{NodeInfo, PodInfo};
use crate::plugins::helper::default_normalize_score;

/// Plugin name in the policy.
pub const NAME: &str = "NodeAffinity";

/// Filter reason (kube-scheduler `ErrReasonPod`).
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

/// PreFilter reason when every required term names (`metadata.name In`) a set
/// of nodes and those sets are all empty (kube-scheduler `errReasonConflict`).
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The node field `matchFields` can select on.
const OBJECT_NAME_FIELD: &str = "metadata.name";

/// Arguments of NodeAffinity.
///
/// kube-scheduler's `NodeAffinityArgs.addedAffinity` is not supported yet: it
/// is rejected as an unknown field, so a policy that relies on it fails to
/// load instead of silently scheduling without it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAffinityArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct NodeAffinity;

impl NodeAffinity {
    /// Builds the plugin.
    pub fn new(_: &NodeAffinityArgs) -> Self {
        NodeAffinity
    }
}

/// A label requirement's operator, with its parsed operand.
#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// One parsed `matchExpressions` entry (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq)]
struct LabelRequirement {
    key: String,
    op: LabelOp,
}

impl LabelRequirement {
    /// `Requirement.Matches`.
    fn matches(&self, labels: &crate::objects::Labels) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            LabelOp::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
            LabelOp::NotIn(values) => value.is_none_or(|v| !values.iter().any(|x| x == v)),
            LabelOp::Exists => value.is_some(),
            LabelOp::DoesNotExist => value.is_none(),
            LabelOp::Gt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelOp::Lt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// One parsed `matchFields` entry: `key` equals (or, for `NotIn`, differs
/// from) `value`.
#[derive(Debug, Clone, PartialEq)]
struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl FieldRequirement {
    /// A node has exactly one field, `metadata.name`; any other key reads as "".
    fn matches(&self, node_name: &str) -> bool {
        let actual = if self.key == OBJECT_NAME_FIELD {
            node_name
        } else {
            ""
        };
        (actual == self.value) == self.equal
    }
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
    node_selector: Vec<(String, String)>,
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
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            terms: required.map(parse_required_terms),
        }
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

    /// True when `node` satisfies the node selector and some required term.
    pub fn matches(&self, node: &NodeInfo) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v.as_str()))
            && self
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
        let mut errs = Vec::new();
        let mut parsed = Vec::new();
        for (i, t) in terms.iter().enumerate() {
            if t.weight == 0 || is_empty_term(&t.preference) {
                continue;
            }
            match TermMatcher::parse(&t.preference, &format!("[{i}]")) {
                Ok(m) => parsed.push((i64::from(t.weight), m)),
                Err(e) => errs.extend(e),
            }
        }
        if errs.is_empty() {
            Ok(PreferredTerms { terms: parsed })
        } else {
            Err(aggregate(errs))
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

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several
/// (deduplicated) as `[a, b]`.
fn aggregate(errs: Vec<String>) -> String {
    let mut seen = HashSet::new();
    let unique: Vec<String> = errs
        .into_iter()
        .filter(|e| seen.insert(e.clone()))
        .collect();
    if unique.len() == 1 {
        unique.into_iter().collect()
    } else {
        format!("[{}]", unique.join(", "))
    }
}

/// A Go `json.Marshal` of a value list (`null` when absent).
fn json_values(values: Option<&Vec<String>>) -> String {
    serde_json::to_string(&values).unwrap_or_default()
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `nodeSelectorRequirementsAsSelector` for one expression, then
/// `labels.NewRequirement`'s validation.
fn parse_label_requirement(
    r: &NodeSelectorRequirement,
    path: &str,
    errs: &mut Vec<String>,
) -> Option<LabelRequirement> {
    let empty = Vec::new();
    let values = r.values.as_ref().unwrap_or(&empty);
    let before = errs.len();
    let key_errs = label_key_errors(&r.key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "{path}.key: Invalid value: {:?}: {}",
            r.key,
            key_errs.join("; ")
        ));
    }
    let invalid_values = |detail: &str| {
        format!(
            "{path}.values: Invalid value: {}: {detail}",
            json_values(r.values.as_ref())
        )
    };
    let op = match r.operator.as_str() {
        "In" | "NotIn" => {
            if values.is_empty() {
                errs.push(invalid_values(
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
            if r.operator == "In" {
                LabelOp::In(values.clone())
            } else {
                LabelOp::NotIn(values.clone())
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                errs.push(invalid_values(
                    "values set must be empty for exists and does not exist",
                ));
            }
            if r.operator == "Exists" {
                LabelOp::Exists
            } else {
                LabelOp::DoesNotExist
            }
        }
        "Gt" | "Lt" => {
            if values.len() != 1 {
                errs.push(invalid_values(
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            let mut n = 0;
            for (i, v) in values.iter().enumerate() {
                match v.parse::<i64>() {
                    Ok(x) => n = x,
                    Err(_) => errs.push(format!(
                        "{path}.values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                    )),
                }
            }
            if r.operator == "Gt" {
                LabelOp::Gt(n)
            } else {
                LabelOp::Lt(n)
            }
        }
        other => {
            // Reported alone: the requirement is not built at all.
            errs.truncate(before);
            errs.push(format!(
                "{path}.operator: Unsupported value: {}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
                json_str(other)
            ));
            return None;
        }
    };
    for (i, v) in values.iter().enumerate() {
        let value_errs = label_value_errors(v);
        if !value_errs.is_empty() {
            errs.push(format!(
                "{path}.values[{i}][{}]: Invalid value: {v:?}: {}",
                r.key,
                value_errs.join("; ")
            ));
        }
    }
    (errs.len() == before).then(|| LabelRequirement {
        key: r.key.clone(),
        op,
    })
}

/// `nodeSelectorRequirementsAsFieldSelector` for one entry: `In`/`NotIn`
/// with exactly one value; the key is not checked.
fn parse_field_requirement(
    r: &NodeSelectorRequirement,
    path: &str,
    errs: &mut Vec<String>,
) -> Option<FieldRequirement> {
    let equal = match r.operator.as_str() {
        "In" => true,
        "NotIn" => false,
        other => {
            errs.push(format!(
                "{path}.operator: Unsupported value: {}: supported values: \"In\", \"NotIn\"",
                json_str(other)
            ));
            return None;
        }
    };
    match r.values.as_deref() {
        Some([value]) => Some(FieldRequirement {
            key: r.key.clone(),
            value: value.clone(),
            equal,
        }),
        _ => {
            errs.push(format!(
                "{path}.values: Invalid value: {}: must have one element",
                json_values(r.values.as_ref())
            ));
            None
        }
    }
}

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// `content.RegexError`.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{msg} (e.g. {examples}regex used for validation is '{re}')")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        }
        _ => false,
    }
}

/// `content.IsDNS1123Subdomain`'s regex: dot-separated lowercase RFC 1123 labels.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => {
                let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                ok(f) && ok(l) && b.iter().all(|c| ok(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

/// `content.IsLabelKey`.
fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 bytes".to_string());
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    LABEL_KEY_ERR,
                    LABEL_KEY_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !is_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `content.IsLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !value.is_empty() && !is_label_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            &format!("({LABEL_KEY_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// The nodes the required terms allow by name, when every term restricts
/// `metadata.name` with `In` (the union over terms of the intersection within
/// each); `None` when some term allows any name (kube-scheduler's PreFilter).
fn required_node_names(selector: &NodeSelector) -> Option<HashSet<String>> {
    let terms = &selector.node_selector_terms;
    if terms.is_empty() {
        return None;
    }
    let mut union: HashSet<String> = HashSet::new();
    for t in terms {
        let mut names: Option<HashSet<&str>> = None;
        for r in t.match_fields.iter().flatten() {
            if r.key == OBJECT_NAME_FIELD && r.operator == "In" {
                let set: HashSet<&str> = r.values.iter().flatten().map(String::as_str).collect();
                names = Some(match names {
                    None => set,
                    Some(prev) => prev.intersection(&set).copied().collect(),
                });
            }
        }
        // A term without a name restriction allows every node.
        union.extend(names?.into_iter().map(str::to_string));
    }
    Some(union)
}

fn required_selector(pod: &PodInfo) -> Option<&NodeSelector> {
    pod.spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// The pod's parsed requirements, written in PreFilter.
struct PreFilterState(RequiredNodeAffinity);

/// The pod's parsed preferred terms, written in PreScore.
struct PreScoreState(PreferredTerms);

crate::plugin!(NodeAffinity, NAME, [pre_filter, filter, pre_score, score]);

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &ClusterState) -> Status {
        let required = required_selector(pod);
        if required.is_none() && pod.spec.node_selector.is_empty() {
            return Status::skip("pod has no node selector or required node affinity");
        }
        state.write(PreFilterState(RequiredNodeAffinity::new(pod)));
        if required
            .and_then(required_node_names)
            .is_some_and(|n| n.is_empty())
        {
            return Status::unresolvable(ERR_REASON_CONFLICT);
        }
        Status::success()
    }

    fn pre_filter_nodes(&self, pod: &PodInfo) -> Option<HashSet<String>> {
        required_selector(pod).and_then(required_node_names)
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        let Some(PreFilterState(required)) = state.read() else {
            return Status::error("PreFilter state missing");
        };
        if required.matches(node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &ClusterState,
    ) -> Status {
        let Some(preferred) = pod
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
        else {
            return Status::skip("pod has no preferred node affinity");
        };
        match PreferredTerms::new(preferred) {
            Ok(terms) => {
                state.write(PreScoreState(terms));
                Status::success()
            }
            Err(e) => Status::error(e),
        }
    }
}

impl ScorePlugin for NodeAffinity {
    /// The sum of the weights of the preferred terms the node matches.
    fn score(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        _: &ClusterState,
    ) -> Result<NodeScore, Status> {
        let Some(PreScoreState(terms)) = state.read() else {
            return Err(Status::error("PreScore state missing"));
        };
        Ok(NodeScore::value(terms.score(node)))
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(scores, false);
        Status::success()
    }
}

#[cfg(test)]
mod tests;
