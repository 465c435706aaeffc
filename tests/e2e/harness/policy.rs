//! placer policy files (`apiVersion: placer/v1alpha1`, `kind: Policy`, design §4) for scenarios.

use std::fmt::Write as _;

use serde_json::Value;

/// A policy with a single profile that is also the extender's default profile, and whose
/// name is the one scheduler whose pods `/bind` binds (`extender.schedulerNames`: the test's
/// kube-scheduler profile has the same name).
#[derive(Clone, Debug)]
pub struct Policy {
    profile: String,
    plugins: Vec<(String, Option<u32>, Value)>,
}

impl Policy {
    /// An empty profile named `profile` (use the test's scheduler name so pods route to it by
    /// `spec.schedulerName`; it is the default profile as well).
    pub fn new(profile: &str) -> Self {
        Self {
            profile: profile.to_owned(),
            plugins: Vec::new(),
        }
    }

    /// Enables plugin `name` with an optional score weight and its `args` object.
    #[must_use]
    pub fn plugin(mut self, name: &str, weight: Option<u32>, args: Value) -> Self {
        self.plugins.push((name.to_owned(), weight, args));
        self
    }

    /// The policy file's YAML text (args are written as JSON flow mappings, which YAML accepts).
    pub fn to_yaml(&self) -> String {
        let mut out = format!(
            "apiVersion: placer/v1alpha1\nkind: Policy\nextender:\n  defaultProfile: {0}\n  schedulerNames: [{0}]\nprofiles:\n  - schedulerName: {0}\n    plugins:\n",
            self.profile
        );
        if self.plugins.is_empty() {
            out.push_str("      []\n");
        }
        for (name, weight, args) in &self.plugins {
            let _ = writeln!(out, "      - name: {name}");
            if let Some(weight) = weight {
                let _ = writeln!(out, "        weight: {weight}");
            }
            let _ = writeln!(out, "        args: {args}");
        }
        out
    }
}
