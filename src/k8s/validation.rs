//! Validation of label selectors and names, shared by the plugins: the
//! parser of `NodeSelectorRequirement`s (`labels.NewRequirement` and the
//! field-selector form) and the apimachinery validators behind it
//! (`IsQualifiedName`/`IsLabelKey`, `IsLabelValue`, `IsDNS1123Subdomain`),
//! with kube-scheduler's exact messages.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

/// The node field `matchFields` can select on.
pub(crate) const OBJECT_NAME_FIELD: &str = "metadata.name";

/// A label requirement's operator, with its parsed operand.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LabelOp {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// One parsed `matchExpressions` entry (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LabelRequirement {
    key: String,
    op: LabelOp,
}

impl LabelRequirement {
    /// `Requirement.Matches`.
    pub(crate) fn matches(&self, labels: &crate::objects::Labels) -> bool {
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
pub(crate) struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl FieldRequirement {
    /// A node has exactly one field, `metadata.name`; any other key reads as "".
    pub(crate) fn matches(&self, node_name: &str) -> bool {
        let actual = if self.key == OBJECT_NAME_FIELD {
            node_name
        } else {
            ""
        };
        (actual == self.value) == self.equal
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several
/// (deduplicated) as `[a, b]`.
pub(crate) fn aggregate(errs: Vec<String>) -> String {
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
pub(crate) fn parse_label_requirement(
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
pub(crate) fn parse_field_requirement(
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
pub(crate) fn label_key_errors(key: &str) -> Vec<String> {
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
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
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

/// Kubernetes' `IsQualifiedName` (label keys, resource names): the same
/// check as `IsLabelKey`.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    label_key_errors(s).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_key_and_value_validation() {
        assert!(label_key_errors("zone").is_empty());
        assert!(label_key_errors("topology.kubernetes.io/zone").is_empty());
        assert!(label_key_errors("A.b-c_d").is_empty());
        for bad in [
            "",
            "-a",
            "a-",
            "a b",
            "/a",
            "a/",
            "a/b/c",
            "Upper.com/a",
            "a..b/c",
            &"x".repeat(64),
        ] {
            assert!(!label_key_errors(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(label_key_errors("/a"), ["prefix part must be non-empty"]);
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("a.b_c-D9").is_empty());
        for bad in ["-1", "a ", "_a", &"x".repeat(64)] {
            assert!(!label_value_errors(bad).is_empty(), "{bad:?}");
        }
    }

    #[test]
    fn qualified_names_are_label_keys() {
        assert!(is_qualified_name("a.b/c_d.e-f"));
        for bad in ["a/b/c", "/a", "a/", "Upper.com/a", ""] {
            assert!(!is_qualified_name(bad), "{bad:?}");
        }
    }
}
