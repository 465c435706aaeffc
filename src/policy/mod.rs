//! The policy file (`placer/v1alpha1`, kind `Policy`): profiles, the plugins
//! they enable, weights and arguments (design §4).
//!
//! [`load`] reads and strictly validates a file; [`CompiledPolicy`] turns it
//! into one [`Framework`] per profile, ready to run.

mod load;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::cache::CountDimension;
use crate::framework::{Framework, Observer, QueueSort, WeightedPlugin};
use crate::k8s::fields::{NonEmpty, Weight};
use crate::plugins::{CacheNeeds, PluginArgs};

pub use load::{PolicyError, load, parse};

/// The API version this build understands.
pub const API_VERSION: &str = "placer/v1alpha1";
/// The kind of a policy document.
pub const KIND: &str = "Policy";

/// A validated policy with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// Settings of extender mode.
    pub extender: ExtenderSettings,
    /// Standalone mode: the share of nodes to find feasible before scoring,
    /// for profiles that set none (kube-scheduler's field; 0 = its adaptive
    /// share). Unset: every node is evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<u8>,
    /// The profiles, each owning one `schedulerName`.
    pub profiles: Vec<ProfileConfig>,
}

/// Settings of extender mode.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderSettings {
    /// Profile used for pods whose `schedulerName` matches no profile.
    pub default_profile: Option<String>,
    /// The `schedulerName`s of the kube-scheduler profiles this extender
    /// serves: `/bind` binds pods of these schedulers only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_names: Option<Vec<String>>,
    /// Without `scheduler_names`, `/bind` binds pods of any scheduler (but
    /// placer's own); false (the default) refuses every `/bind` then, as
    /// `--bind-any-scheduler` does not say otherwise.
    pub bind_any_scheduler: bool,
}

/// One profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileConfig {
    /// Pods with this `spec.schedulerName` use this profile.
    pub scheduler_name: NonEmpty,
    /// This profile's `percentageOfNodesToScore`, over the global one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<u8>,
    /// Enabled plugins, in the order they run.
    pub plugins: Vec<PluginConfig>,
}

/// One enabled plugin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Weight of its score.
    pub weight: Weight,
    /// Its arguments, defaults filled.
    pub args: PluginArgs,
}

/// A policy turned into runnable frameworks.
pub struct CompiledPolicy {
    policy: Policy,
    profiles: HashMap<String, Arc<Framework>>,
}

impl CompiledPolicy {
    /// Builds every profile's plugins.
    pub fn new(policy: Policy) -> Self {
        Self::build(policy, None)
    }

    /// Builds every profile's plugins, reporting plugin timings to `observer`.
    pub fn observed(policy: Policy, observer: Arc<dyn Observer>) -> Self {
        Self::build(policy, Some(observer))
    }

    fn build(policy: Policy, observer: Option<Arc<dyn Observer>>) -> Self {
        let profiles = policy
            .profiles
            .iter()
            .map(|p| {
                let mut plugins: Vec<WeightedPlugin> = p
                    .plugins
                    .iter()
                    .map(|c| WeightedPlugin {
                        plugin: c.args.build(),
                        weight: c.weight.get(),
                    })
                    .collect();
                // A profile binds with DefaultBinder unless it names a Bind
                // plugin, as kube-scheduler's default profile does.
                if !plugins.iter().any(|w| w.plugin.as_bind().is_some()) {
                    plugins.push(WeightedPlugin {
                        plugin: Arc::new(crate::plugins::DefaultBinder),
                        weight: 1,
                    });
                }
                let name = p.scheduler_name.to_string();
                let mut framework = Framework::new(name.clone(), plugins);
                if let Some(o) = &observer {
                    framework = framework.with_observer(o.clone());
                }
                (name, Arc::new(framework))
            })
            .collect();
        CompiledPolicy { policy, profiles }
    }

    /// The policy as loaded (defaults filled).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The profile named `scheduler_name`.
    pub fn profile(&self, scheduler_name: &str) -> Option<&Arc<Framework>> {
        self.profiles.get(scheduler_name)
    }

    /// The `percentageOfNodesToScore` in force for profile `scheduler_name`
    /// (its own, else the global one); `None`: evaluate every node.
    pub fn percentage_of_nodes_to_score(&self, scheduler_name: &str) -> Option<u8> {
        self.policy
            .profiles
            .iter()
            .find(|p| p.scheduler_name.as_str() == scheduler_name)
            .and_then(|p| p.percentage_of_nodes_to_score)
            .or(self.policy.percentage_of_nodes_to_score)
    }

    /// The profile for an extender call: the pod's own, else the default one.
    pub fn profile_for_extender(&self, scheduler_name: &str) -> Option<&Arc<Framework>> {
        self.profile(scheduler_name).or_else(|| {
            self.policy
                .extender
                .default_profile
                .as_deref()
                .and_then(|d| self.profile(d))
        })
    }

    /// The order of standalone mode's one queue: the QueueSort plugin the
    /// profiles enable (kube-scheduler requires every profile to use the
    /// same one; placer has only PrioritySort), else PrioritySort, which
    /// kube-scheduler enables by default.
    pub fn queue_sort(&self) -> QueueSort {
        self.profiles
            .values()
            .find_map(|f| f.queue_sort())
            .unwrap_or_else(crate::plugins::default_queue_sort)
    }

    /// The zone-index dimensions the policy's plugins count pods in.
    pub fn count_dimensions(&self) -> Vec<CountDimension> {
        self.union_of(|needs| needs.count_dimensions())
    }

    /// The node label keys the policy's plugins read on every node of a
    /// request: the cache keeps their values inline per node (see
    /// [`crate::objects::inputs`]), in this order of priority.
    pub fn node_label_keys(&self) -> Vec<String> {
        self.union_of(|needs| needs.node_label_keys())
    }

    /// Whether an enabled plugin reads Dynamic Resource Allocation's objects.
    pub fn needs_dra(&self) -> bool {
        self.policy
            .profiles
            .iter()
            .flat_map(|p| &p.plugins)
            .any(|p| p.args.cache_needs().dra())
    }

    /// What every enabled plugin's configuration asks for, each item once,
    /// in policy order.
    fn union_of<T: PartialEq>(&self, asks: impl Fn(&dyn CacheNeeds) -> Vec<T>) -> Vec<T> {
        let mut all: Vec<T> = Vec::new();
        for p in self.policy.profiles.iter().flat_map(|p| &p.plugins) {
            for item in asks(p.args.cache_needs()) {
                if !all.contains(&item) {
                    all.push(item);
                }
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CountSelector;

    #[test]
    fn the_cache_keeps_what_each_plugins_args_declare_once_in_policy_order() {
        let policy = CompiledPolicy::new(
            parse(
                r#"apiVersion: placer/v1alpha1
kind: Policy
profiles:
  - schedulerName: a
    plugins:
      - name: NodeResourcesFit
      - name: NetQoS
        args: {nodeLabel: tier}
      - name: ZoneSpread
  - schedulerName: b
    plugins:
      - name: CapabilityFilter
        args: {rules: [{podAnnotation: hw, nodeLabel: hw-label, reason: no hw}]}
      - name: ZoneSpread
  - schedulerName: c
    plugins:
      - name: ZoneSpread
        args: {countPods: All}
"#,
                "t.yaml",
            )
            .unwrap(),
        );
        assert_eq!(
            policy.node_label_keys(),
            ["tier", "topology.kubernetes.io/zone", "hw-label"],
            "NodeResourcesFit reads no label; ZoneSpread's zone label counts once"
        );
        let selectors: Vec<CountSelector> = policy
            .count_dimensions()
            .into_iter()
            .map(|d| d.selector)
            .collect();
        assert_eq!(selectors, [CountSelector::SamePriority, CountSelector::All]);
    }
}
