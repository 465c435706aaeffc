//! Would the API server accept this pod's scheduling fields?
//!
//! A pod read from the API server always passes: the server validated it on
//! create. A pod POSTed to a verb by hand, or by a client that builds its own
//! bodies, may not. Plugins mirror kube-scheduler, which meets such a field
//! one plugin at a time and in as many ways (a required term that never
//! matches, a PreScore error, a skipped constraint). The verbs instead check
//! the fields placer's plugins read once, before any plugin runs, and refuse
//! the pod as a bad request naming the field, so that every verb answers
//! such a pod the same way and never with a 5xx.

use k8s_openapi::api::core::v1::PodAffinityTerm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::k8s::{label_selector, node_affinity};
use crate::objects::PodInfo;

/// `whenUnsatisfiable` values the API server accepts.
const WHEN_UNSATISFIABLE: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];

/// The first field of `pod` that the API server's validation would reject,
/// as `spec.<path>: <what is wrong>`.
///
/// Runs on every verb, so field paths are only spelled out for the field that
/// fails: a valid pod costs no formatting. (Node-affinity terms are parsed
/// with their paths, as the NodeAffinity plugin parses them anyway.)
pub fn validate(pod: &PodInfo) -> Result<(), String> {
    let spec = &pod.spec;
    if let Some(affinity) = &spec.affinity {
        if let Some(na) = &affinity.node_affinity {
            let at = "spec.affinity.nodeAffinity";
            if let Some(required) = &na.required_during_scheduling_ignored_during_execution {
                for (i, term) in required.node_selector_terms.iter().enumerate() {
                    let path = format!(
                        "{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
                    );
                    first(node_affinity::term_errors(term, &path))?;
                }
            }
            for (i, t) in na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
            {
                let path = || format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                weight(t.weight, &path)?;
                first(node_affinity::term_errors(
                    &t.preference,
                    &format!("{}.preference", path()),
                ))?;
            }
        }
        let kinds = [
            (
                "podAffinity",
                affinity.pod_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
            ),
            (
                "podAntiAffinity",
                affinity.pod_anti_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
            ),
        ];
        for (kind, terms) in kinds {
            let Some((required, preferred)) = terms else {
                continue;
            };
            for (i, t) in required.iter().flatten().enumerate() {
                pod_affinity_term(t, &|| {
                    format!(
                        "spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
                    )
                })?;
            }
            for (i, t) in preferred.iter().flatten().enumerate() {
                let path = || {
                    format!(
                        "spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
                    )
                };
                weight(t.weight, &path)?;
                pod_affinity_term(&t.pod_affinity_term, &|| {
                    format!("{}.podAffinityTerm", path())
                })?;
            }
        }
    }
    for (i, c) in spec.topology_spread_constraints.iter().enumerate() {
        let path = || format!("spec.topologySpreadConstraints[{i}]");
        if c.max_skew <= 0 {
            return Err(format!(
                "{}.maxSkew: Invalid value: {}: must be greater than zero",
                path(),
                c.max_skew
            ));
        }
        if c.topology_key.is_empty() {
            return Err(format!(
                "{}.topologyKey: Required value: can not be empty",
                path()
            ));
        }
        if !WHEN_UNSATISFIABLE.contains(&c.when_unsatisfiable.as_str()) {
            return Err(format!(
                "{}.whenUnsatisfiable: Unsupported value: {:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
                path(),
                c.when_unsatisfiable
            ));
        }
        if let Some(min) = c.min_domains
            && min <= 0
        {
            return Err(format!(
                "{}.minDomains: Invalid value: {min}: must be greater than zero",
                path()
            ));
        }
        if let Some(selector) = &c.label_selector {
            selector_at(selector, &|| format!("{}.labelSelector", path()))?;
        }
    }
    Ok(())
}

fn pod_affinity_term(t: &PodAffinityTerm, path: &dyn Fn() -> String) -> Result<(), String> {
    if t.topology_key.is_empty() {
        return Err(format!(
            "{}.topologyKey: Required value: can not be empty",
            path()
        ));
    }
    if let Some(selector) = &t.label_selector {
        selector_at(selector, &|| format!("{}.labelSelector", path()))?;
    }
    if let Some(selector) = &t.namespace_selector {
        selector_at(selector, &|| format!("{}.namespaceSelector", path()))?;
    }
    Ok(())
}

/// [`label_selector::validate_at`], with the path spelled out only on failure.
fn selector_at(selector: &LabelSelector, path: &dyn Fn() -> String) -> Result<(), String> {
    match label_selector::validate(selector) {
        Ok(()) => Ok(()),
        Err(_) => label_selector::validate_at(selector, &path()),
    }
}

/// Preferred terms weigh 1 to 100.
fn weight(w: i32, path: &dyn Fn() -> String) -> Result<(), String> {
    if (1..=100).contains(&w) {
        Ok(())
    } else {
        Err(format!(
            "{}.weight: Invalid value: {w}: must be in the range 1-100",
            path()
        ))
    }
}

fn first(errs: Vec<String>) -> Result<(), String> {
    errs.into_iter().next().map_or(Ok(()), Err)
}
