//! Which victims a PodDisruptionBudget protects (kube-scheduler's
//! `FilterVictimsWithPDBViolation`).

use crate::cache::ClusterState;
use crate::k8s::label_selector;
use crate::objects::PodInfo;

use crate::objects::DisruptionBudget;

/// Splits `victims` (in order) into those whose eviction would take a
/// matching budget below zero and the rest. Each matching eviction uses one of
/// the budget's allowed disruptions, unless the API server already counted
/// the pod as disrupted.
pub(super) fn split(
    victims: Vec<PodInfo>,
    budgets: &[DisruptionBudget],
) -> (Vec<PodInfo>, Vec<PodInfo>) {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let mut violating = Vec::new();
    let mut clean = Vec::new();
    for v in victims {
        let mut violates = false;
        // A pod without labels matches no budget.
        if !v.labels.is_empty() {
            for (i, b) in budgets.iter().enumerate() {
                let selects = b.namespace == v.namespace
                    && b.selector.as_ref().is_some_and(|s| {
                        !label_selector::is_empty(s)
                            && label_selector::validate(s).is_ok()
                            && label_selector::matches(Some(s), &v.labels)
                    });
                if !selects || b.disrupted_pods.contains(&v.name) {
                    continue;
                }
                allowed[i] -= 1;
                violates |= allowed[i] < 0;
            }
        }
        if violates {
            violating.push(v);
        } else {
            clean.push(v);
        }
    }
    (violating, clean)
}

/// The budgets of `cluster` (copied: the dry run changes the cluster), sorted
/// by namespace and name.
pub(super) fn budgets_of(cluster: &ClusterState) -> Vec<DisruptionBudget> {
    let mut all: Vec<DisruptionBudget> = cluster
        .objects::<DisruptionBudget>()
        .iter()
        .cloned()
        .collect();
    all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    all
}
