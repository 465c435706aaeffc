//! Helpers several plugins share, as kube-scheduler's
//! `pkg/scheduler/framework/plugins/helper` and
//! `k8s.io/component-helpers/scheduling/corev1` are shared: score
//! normalization, toleration matching and resource name classes. Plugins
//! never call each other; they call these.

use k8s_openapi::api::core::v1::{Taint, Toleration};

use crate::framework::{MAX_NODE_SCORE, NodeScore};
use crate::objects::pod::DEVICE_CLASS_PREFIX;
use crate::plugins::validation::is_qualified_name;

/// The `TaintTolerationComparisonOperators` feature gate: `Lt`/`Gt`
/// tolerations. Alpha since v1.35 and off by default in v1.37, so such a
/// toleration matches no taint, as in a default kube-scheduler.
pub const COMPARISON_OPERATORS_ENABLED: bool = false;

/// True when `t` tolerates the taint `key=value:effect`
/// (`Toleration.ToleratesTaint`, with the comparison-operator gate as given).
///
/// An empty effect matches every effect, an empty key every key; operator
/// `Exists` matches every value, `Equal` (or none) the exact value; `Lt`/`Gt`
/// compare decimal integers when `comparison_operators` is on; any other
/// operator matches nothing.
pub fn toleration_tolerates(
    t: &Toleration,
    key: &str,
    value: &str,
    effect: &str,
    comparison_operators: bool,
) -> bool {
    let t_effect = t.effect.as_deref().unwrap_or("");
    if !t_effect.is_empty() && t_effect != effect {
        return false;
    }
    let t_key = t.key.as_deref().unwrap_or("");
    if !t_key.is_empty() && t_key != key {
        return false;
    }
    let t_value = t.value.as_deref().unwrap_or("");
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t_value == value,
        "Exists" => true,
        op @ ("Lt" | "Gt") => comparison_operators && compare_numeric(t_value, value, op == "Lt"),
        _ => false,
    }
}

/// True when any of `tolerations` tolerates the taint `key=value:effect`
/// (`TolerationsTolerateTaint`), with the default feature gates.
pub fn tolerations_tolerate(
    tolerations: &[Toleration],
    key: &str,
    value: &str,
    effect: &str,
) -> bool {
    tolerations
        .iter()
        .any(|t| toleration_tolerates(t, key, value, effect, COMPARISON_OPERATORS_ENABLED))
}

/// True when any of `tolerations` tolerates `taint`.
pub fn tolerates_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations_tolerate(
        tolerations,
        &taint.key,
        taint.value.as_deref().unwrap_or(""),
        &taint.effect,
    )
}

/// True when one of `taints` keeps pods off the node (effect `NoSchedule`
/// or `NoExecute`) and `tolerations` do not tolerate it
/// (`FindMatchingUntoleratedTaint` with `DoNotScheduleTaintsFilterFunc`).
pub fn has_untolerated_taint(taints: &[Taint], tolerations: &[Toleration]) -> bool {
    taints.iter().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerates_taint(tolerations, taint)
    })
}

/// `compareNumericValues`: both values must be strict decimal integers
/// (`content.IsDecimalInteger`: no sign but `-`, no leading zeros) fitting
/// an i64; `Lt` holds when the taint's value is below the toleration's.
fn compare_numeric(toleration: &str, taint: &str, less: bool) -> bool {
    let (Some(t), Some(n)) = (decimal_integer(toleration), decimal_integer(taint)) else {
        return false;
    };
    if less { n < t } else { n > t }
}

fn decimal_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let b = digits.as_bytes();
    let valid = match b {
        [] => false,
        [b'0'] => digits.len() == s.len(),
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    };
    if valid { s.parse().ok() } else { None }
}

/// kube-scheduler's `helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)`:
/// maps `0..=max` onto `0..=100` (integer division), reversed if asked; when
/// every score is 0 they stay 0, or all become 100 when reversed.
pub fn default_normalize_score(scores: &mut [NodeScore], reverse: bool) {
    let max = scores.iter().map(|s| s.score).fold(0, i64::max);
    if max == 0 {
        if reverse {
            for s in scores {
                s.score = MAX_NODE_SCORE;
            }
        }
        return;
    }
    for s in scores {
        let v = MAX_NODE_SCORE * s.score / max;
        s.score = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// `v1helper.IsExtendedResourceName`: outside the `kubernetes.io` domain,
/// not a quota name, and valid once prefixed with `requests.`.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && is_qualified_name(&format!("requests.{name}"))
}

/// kube-scheduler's `IsDRAExtendedResourceName`: an extended resource name
/// or a DeviceClass's implicit name (`deviceclass.resource.kubernetes.io/<class>`),
/// which a DeviceClass may serve (DRAExtendedResource).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    name.starts_with(DEVICE_CLASS_PREFIX) || is_extended_resource_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `IsDRAExtendedResourceName`: extended resource names and the
    /// implicit class names, not native or quota names.
    #[test]
    fn dra_extended_names_are_extended_names_and_implicit_class_names() {
        assert!(is_dra_extended_resource_name("example.com/gpu"));
        assert!(is_dra_extended_resource_name(
            "deviceclass.resource.kubernetes.io/gpu"
        ));
        for name in [
            "cpu",
            "hugepages-2Mi",
            "kubernetes.io/batch",
            "requests.example.com/gpu",
        ] {
            assert!(!is_dra_extended_resource_name(name), "{name}");
        }
    }
}
