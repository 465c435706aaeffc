//! `placer check-policy FILE`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::explain::in_tree::DEFAULT_PLUGINS;
use crate::plugins::PLUGIN_NAMES;
use crate::policy::Policy;

/// Validates the policy and prints it with defaults filled, after a comment
/// per profile naming kube-scheduler's default plugins it leaves out; an
/// invalid policy is an error naming `file:line:column`.
pub fn check_policy(path: &Path) -> anyhow::Result<()> {
    let policy = crate::policy::load(path)?;
    let yaml = serde_yaml_ng::to_string(&policy).context("rendering the effective policy")?;
    print!("{}{yaml}", left_out_notes(&policy));
    Ok(())
}

/// One YAML comment line per profile that does not run every plugin of
/// kube-scheduler's default profile: what a standalone profile meant as a
/// drop-in for `default-scheduler` misses. Plugins placer does not
/// implement are named apart. DefaultBinder is never missing: a profile
/// without a Bind plugin binds with it.
fn left_out_notes(policy: &Policy) -> String {
    let mut notes = String::new();
    for profile in &policy.profiles {
        let enabled = |name: &str| profile.plugins.iter().any(|p| p.name == name);
        let (mut omitted, mut missing) = (Vec::new(), Vec::new());
        for &(name, _) in DEFAULT_PLUGINS {
            if name == crate::plugins::default_binder::NAME || enabled(name) {
                continue;
            }
            if PLUGIN_NAMES.contains(&name) {
                omitted.push(name);
            } else {
                missing.push(name);
            }
        }
        if omitted.is_empty() && missing.is_empty() {
            continue;
        }
        let _ = write!(
            notes,
            "# profile {}: leaves out kube-scheduler's default plugins",
            profile.scheduler_name
        );
        if !omitted.is_empty() {
            let _ = write!(notes, " {}", omitted.join(", "));
        }
        if !missing.is_empty() {
            let sep = if omitted.is_empty() { "" } else { ";" };
            let _ = write!(
                notes,
                "{sep} not implemented by placer: {}",
                missing.join(", ")
            );
        }
        notes.push('\n');
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_profile_is_told_which_default_plugins_it_leaves_out() {
        let policy = crate::policy::parse(
            "apiVersion: placer/v1alpha1\nkind: Policy\nprofiles:\n- schedulerName: few\n  plugins:\n  - name: NodeResourcesFit\n  - name: ZoneSpread\n",
            "t.yaml",
        )
        .unwrap();
        let notes = left_out_notes(&policy);
        assert!(notes.starts_with("# profile few: leaves out kube-scheduler's default plugins SchedulingGates, PrioritySort, "), "{notes}");
        assert!(!notes.contains("NodeResourcesFit"), "enabled: {notes}");
        assert!(!notes.contains("DefaultBinder"), "implied: {notes}");
        assert_eq!(notes.lines().count(), 1);
        let unimplemented: Vec<&str> = DEFAULT_PLUGINS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !PLUGIN_NAMES.contains(n))
            .collect();
        if !unimplemented.is_empty() {
            assert!(
                notes.contains(&format!(
                    "; not implemented by placer: {}",
                    unimplemented.join(", ")
                )),
                "{notes}"
            );
        }
    }

    /// `examples/default-profile.yaml` names every default plugin placer
    /// has, in kube-scheduler's order and with its weights.
    #[test]
    fn the_shipped_default_profile_is_kube_schedulers_where_placer_has_the_plugin() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/default-profile.yaml");
        let policy = crate::policy::load(&path).unwrap();
        let [profile] = policy.profiles.as_slice() else {
            panic!("one profile");
        };
        let named: Vec<(&str, i64)> = profile
            .plugins
            .iter()
            .map(|p| (p.name.as_str(), p.weight.get()))
            .collect();
        let expected: Vec<(&str, i64)> = DEFAULT_PLUGINS
            .iter()
            .filter(|(n, _)| PLUGIN_NAMES.contains(n))
            .map(|&(n, w)| (n, w.unwrap_or(1)))
            .collect();
        assert_eq!(named, expected);
        let notes = left_out_notes(&policy);
        assert!(
            notes.is_empty() || notes.contains("default plugins not implemented by placer: "),
            "{notes}"
        );
    }
}
