//! Kubernetes label selectors (`metav1.LabelSelector`), evaluated in place.
//!
//! Same semantics as apimachinery's `LabelSelectorAsSelector` followed by
//! `Selector.Matches`, without building an intermediate selector (so matching
//! an existing pod's affinity term costs no allocation):
//!
//! - no selector (`nil`) selects nothing; an empty selector `{}` selects
//!   everything;
//! - `matchLabels` and `matchExpressions` are ANDed;
//! - `In`: the label is present with one of the values; `NotIn`: the label is
//!   absent or has none of the values; `Exists` / `DoesNotExist`: presence.
//!
//! A selector `LabelSelectorAsSelector` would reject (unknown operator, `In`
//! without values, `Exists` with values) is reported by [`validate`] and
//! matches nothing. Label key and value syntax is not checked again: the API
//! server validated it when the pod was created.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// True when `selector` has neither `matchLabels` nor `matchExpressions`
/// (it selects everything).
pub(crate) fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

/// Why `LabelSelectorAsSelector` would reject `selector`, if it would.
pub(crate) fn validate(selector: &LabelSelector) -> Result<(), String> {
    for r in selector.match_expressions.iter().flatten() {
        requirement(r, &BTreeMap::new())?;
    }
    Ok(())
}

/// Like [`validate`], with the failing expression's field path under `path`.
pub(crate) fn validate_at(selector: &LabelSelector, path: &str) -> Result<(), String> {
    for (i, r) in selector.match_expressions.iter().flatten().enumerate() {
        requirement(r, &BTreeMap::new())
            .map_err(|e| format!("{path}.matchExpressions[{i}]: {e}"))?;
    }
    Ok(())
}

/// True when `selector` selects a pod or node carrying `labels`.
pub(crate) fn matches(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement(r, labels).unwrap_or(false))
}

/// Evaluates one expression; `Err` when the expression is invalid.
fn requirement(
    r: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let values = r.values.as_deref().unwrap_or_default();
    let value = labels.get(&r.key);
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => Err(format!(
            "values: Invalid value: {values:?}: for 'in', 'notin' operators, values set can't be empty (key {:?})",
            r.key
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => Err(format!(
            "values: Invalid value: {values:?}: values set must be empty for exists and does not exist (key {:?})",
            r.key
        )),
        "In" => Ok(value.is_some_and(|v| values.contains(v))),
        "NotIn" => Ok(value.is_none_or(|v| !values.contains(v))),
        "Exists" => Ok(value.is_some()),
        "DoesNotExist" => Ok(value.is_none()),
        op => Err(format!("{op:?} is not a valid label selector operator")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Labels from `[("k", "v"), ...]`.
    pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A selector from its JSON form.
    pub(crate) fn selector(json: serde_json::Value) -> LabelSelector {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn nil_selects_nothing_and_empty_selects_everything() {
        let l = labels(&[("app", "a")]);
        assert!(!matches(None, &l));
        let empty = selector(serde_json::json!({}));
        assert!(is_empty(&empty));
        assert!(matches(Some(&empty), &l));
        assert!(matches(Some(&empty), &labels(&[])));
        let also_empty = selector(serde_json::json!({"matchLabels": {}, "matchExpressions": []}));
        assert!(is_empty(&also_empty));
    }

    #[test]
    fn labels_and_expressions_are_anded() {
        let s = selector(serde_json::json!({
            "matchLabels": {"app": "a"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["web", "api"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "team", "operator": "Exists"}
            ]
        }));
        assert!(validate(&s).is_ok());
        let ok = labels(&[("app", "a"), ("tier", "web"), ("team", "x")]);
        assert!(matches(Some(&s), &ok));
        let mut l = ok.clone();
        l.insert("env".into(), "prod".into());
        assert!(matches(Some(&s), &l), "NotIn holds for another value");
        l.insert("env".into(), "dev".into());
        assert!(!matches(Some(&s), &l));
        for (k, v) in [("app", "b"), ("tier", "db"), ("canary", "1")] {
            let mut l = ok.clone();
            l.insert(k.into(), v.into());
            assert!(!matches(Some(&s), &l), "{k}={v}");
        }
        let mut l = ok.clone();
        l.remove("team");
        assert!(!matches(Some(&s), &l), "Exists needs the key");
    }

    #[test]
    fn invalid_selectors_are_reported_and_match_nothing() {
        for (expr, msg) in [
            (
                serde_json::json!({"key": "a", "operator": "In", "values": []}),
                "can't be empty",
            ),
            (
                serde_json::json!({"key": "a", "operator": "NotIn"}),
                "can't be empty",
            ),
            (
                serde_json::json!({"key": "a", "operator": "Exists", "values": ["x"]}),
                "must be empty",
            ),
            (
                serde_json::json!({"key": "a", "operator": "Gt", "values": ["1"]}),
                "\"Gt\" is not a valid label selector operator",
            ),
        ] {
            let s = selector(serde_json::json!({"matchExpressions": [expr]}));
            let e = validate(&s).unwrap_err();
            assert!(e.contains(msg), "{e}");
            assert!(!matches(Some(&s), &labels(&[("a", "1")])));
            assert!(!matches(Some(&s), &labels(&[])));
        }
    }
}
