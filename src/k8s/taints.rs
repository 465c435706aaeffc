//! Taints and tolerations (`k8s.io/component-helpers/scheduling/corev1`'s
//! `ToleratesTaint` and `FindMatchingUntoleratedTaint`), read by
//! TaintToleration, NodeUnschedulable, PodTopologySpread and explain.

use k8s_openapi::api::core::v1::{Taint, Toleration};

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
