//! kube-scheduler's own plugins, as placer runs them, for explaining pods of
//! an extender deployment: kube-scheduler filters and scores with its in-tree
//! plugins first and asks placer only about the nodes they let through, so a
//! faithful "why pending" needs both verdicts.
//!
//! [`InTree::defaults`] is kube-scheduler's default profile (its
//! `getDefaultPlugins` order, default weights and default args) restricted to
//! the plugins placer implements; [`InTree::from_file`] reads a
//! `KubeSchedulerConfiguration` instead (`--explain-kube-scheduler-config`).
//! Either way the plugins placer lacks are listed in every explanation
//! (`notEvaluated`), because their verdicts are missing from it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::framework::Framework;
use crate::plugins::PLUGIN_NAMES;
use crate::policy::{self, CompiledPolicy};

/// kube-scheduler v1.37's default plugins in its order, with their default
/// score weights: `getDefaultPlugins` (NodeName before NodeUnschedulable)
/// after `applyFeatureGates` with the gates at their v1.37 defaults
/// (DynamicResources before DefaultPreemption, NodeDeclaredFeatures last;
/// DeferredPodScheduling, GangScheduling and the topology-aware workload
/// plugins are behind gates that are off).
pub const DEFAULT_PLUGINS: &[(&str, Option<i64>)] = &[
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeName", None),
    ("NodeUnschedulable", None),
    ("TaintToleration", Some(3)),
    ("NodeAffinity", Some(2)),
    ("NodePorts", None),
    ("NodeResourcesFit", Some(1)),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", Some(2)),
    ("InterPodAffinity", Some(2)),
    ("DynamicResources", Some(2)),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", Some(1)),
    ("ImageLocality", Some(1)),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
];

/// The profile name of kube-scheduler's default profile.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Binding is not a verdict: no explanation misses it.
const NOT_A_VERDICT: &[&str] = &["DefaultBinder"];

/// kube-scheduler's plugins as placer runs them.
pub struct InTree {
    profiles: HashMap<String, Profile>,
    /// The profile used for pods whose schedulerName names none.
    first: String,
    /// The `weight` of the extender entry that prioritizes (kube-scheduler
    /// multiplies placer's 0–10 score by it and by 10).
    pub extender_weight: i64,
    /// Where the configuration came from, for the explanation.
    pub source: String,
}

struct Profile {
    framework: Arc<Framework>,
    not_evaluated: Vec<String>,
}

/// One plugin of a profile being assembled.
#[derive(Debug, Clone)]
struct Enabled {
    name: String,
    weight: Option<i64>,
}

impl InTree {
    /// kube-scheduler's default profile with default args.
    pub fn defaults() -> anyhow::Result<Self> {
        let plugins = default_list();
        let profile = build_profile(DEFAULT_SCHEDULER, &plugins, &HashMap::new(), "defaults")?;
        Ok(InTree {
            profiles: HashMap::from([(DEFAULT_SCHEDULER.to_string(), profile)]),
            first: DEFAULT_SCHEDULER.to_string(),
            extender_weight: 1,
            source: "kube-scheduler defaults".into(),
        })
    }

    /// Reads a `KubeSchedulerConfiguration` (YAML or JSON).
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses a `KubeSchedulerConfiguration`; errors name `file` and the field.
    pub fn parse(text: &str, file: &str) -> anyhow::Result<Self> {
        crate::yaml::check_limits(text).map_err(|e| {
            anyhow::anyhow!("{file}:{}:{}: {}", e.mark.line, e.mark.column, e.message)
        })?;
        let doc: Value =
            serde_yaml_ng::from_str(text).with_context(|| format!("{file}: not YAML"))?;
        if doc["kind"] != "KubeSchedulerConfiguration" {
            bail!("{file}: kind must be KubeSchedulerConfiguration");
        }
        let mut profiles = HashMap::new();
        let mut first = None;
        let listed = match &doc["profiles"] {
            Value::Null => vec![json!({})],
            Value::Array(a) if !a.is_empty() => a.clone(),
            _ => bail!("{file}: profiles must be a non-empty list"),
        };
        for (i, p) in listed.iter().enumerate() {
            let name = p["schedulerName"]
                .as_str()
                .unwrap_or(DEFAULT_SCHEDULER)
                .to_string();
            let at = format!("{file}: profiles[{i}] ({name})");
            let plugins = profile_plugins(&p["plugins"], &at)?;
            let args = plugin_args(&p["pluginConfig"], &at)?;
            let profile = build_profile(&name, &plugins, &args, &at)?;
            first.get_or_insert_with(|| name.clone());
            profiles.insert(name, profile);
        }
        let extender_weight = match doc["extenders"].as_array() {
            None => 1,
            Some(list) => list
                .iter()
                .find(|e| e["prioritizeVerb"].as_str().is_some_and(|v| !v.is_empty()))
                .map_or(Ok(1), |e| match &e["weight"] {
                    Value::Null => Ok(1),
                    w => w.as_i64().filter(|w| *w > 0).ok_or_else(|| {
                        anyhow::anyhow!(
                            "{file}: extenders[].weight must be a positive integer, not {w}"
                        )
                    }),
                })?,
        };
        Ok(InTree {
            profiles,
            first: first.unwrap_or_else(|| DEFAULT_SCHEDULER.into()),
            extender_weight,
            source: file.to_string(),
        })
    }

    /// The profile for a pod named `scheduler_name`: its own, else the first.
    /// Returns the framework and kube-scheduler's plugins it cannot run.
    pub fn profile_for(&self, scheduler_name: &str) -> Option<(&Arc<Framework>, &[String])> {
        self.profiles
            .get(scheduler_name)
            .or_else(|| self.profiles.get(&self.first))
            .map(|p| (&p.framework, p.not_evaluated.as_slice()))
    }
}

fn default_list() -> Vec<Enabled> {
    DEFAULT_PLUGINS
        .iter()
        .map(|(name, weight)| Enabled {
            name: (*name).to_string(),
            weight: *weight,
        })
        .collect()
}

/// The plugins of one profile from its `plugins` field. `multiPoint` is
/// applied to the defaults as kube-scheduler does (`disabled` first, `*` for
/// all, then `enabled` appended or re-weighted); `score.enabled` sets
/// weights. Disabling one extension point of a plugin that has others cannot
/// be expressed in placer, whose plugins run at every point they implement:
/// it is an error rather than a silently different profile.
fn profile_plugins(plugins: &Value, at: &str) -> anyhow::Result<Vec<Enabled>> {
    let mut list = default_list();
    let entries = |point: &str, which: &str| -> anyhow::Result<Vec<(String, Option<i64>)>> {
        match &plugins[point][which] {
            Value::Null => Ok(Vec::new()),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let name = e["name"].as_str().ok_or_else(|| {
                        anyhow::anyhow!("{at}: plugins.{point}.{which}[{i}].name must be a string")
                    })?;
                    let weight = match &e["weight"] {
                        Value::Null => None,
                        w => Some(w.as_i64().filter(|w| *w > 0).ok_or_else(|| {
                            anyhow::anyhow!(
                                "{at}: plugins.{point}.{which}[{i}].weight must be a positive integer"
                            )
                        })?),
                    };
                    Ok((name.to_string(), weight))
                })
                .collect(),
            _ => bail!("{at}: plugins.{point}.{which} must be a list"),
        }
    };
    let disabled = entries("multiPoint", "disabled")?;
    if disabled.iter().any(|(n, _)| n == "*") {
        list.clear();
    } else {
        list.retain(|p| !disabled.iter().any(|(n, _)| *n == p.name));
    }
    for (name, weight) in entries("multiPoint", "enabled")? {
        match list.iter_mut().find(|p| p.name == name) {
            Some(p) => p.weight = weight.or(p.weight),
            None => list.push(Enabled { name, weight }),
        }
    }
    for (name, weight) in entries("score", "enabled")? {
        match list.iter_mut().find(|p| p.name == name) {
            Some(p) => p.weight = weight.or(p.weight).or(Some(1)),
            None => list.push(Enabled {
                name,
                weight: weight.or(Some(1)),
            }),
        }
    }
    for point in [
        "preEnqueue",
        "queueSort",
        "preFilter",
        "filter",
        "postFilter",
        "preScore",
        "score",
        "reserve",
        "permit",
        "preBind",
        "bind",
        "postBind",
    ] {
        for (name, _) in entries(point, "disabled")? {
            let known = name == "*" || list.iter().any(|p| p.name == name);
            if known && !NOT_A_VERDICT.contains(&name.as_str()) && point != "bind" {
                bail!(
                    "{at}: plugins.{point}.disabled ({name}): placer runs a plugin at every \
                     extension point it implements; disable it under multiPoint instead"
                );
            }
        }
    }
    Ok(list)
}

/// `pluginConfig` as plugin name → args (without `apiVersion` and `kind`).
fn plugin_args(config: &Value, at: &str) -> anyhow::Result<HashMap<String, Value>> {
    let mut out = HashMap::new();
    let Some(list) = config.as_array() else {
        return match config {
            Value::Null => Ok(out),
            _ => bail!("{at}: pluginConfig must be a list"),
        };
    };
    for (i, c) in list.iter().enumerate() {
        let name = c["name"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("{at}: pluginConfig[{i}].name must be a string"))?;
        let mut args = c["args"].clone();
        if let Some(map) = args.as_object_mut() {
            map.remove("apiVersion");
            map.remove("kind");
        }
        out.insert(name.to_string(), args);
    }
    Ok(out)
}

/// Compiles the plugins placer implements into a framework; the rest are
/// reported as not evaluated.
fn build_profile(
    name: &str,
    plugins: &[Enabled],
    args: &HashMap<String, Value>,
    at: &str,
) -> anyhow::Result<Profile> {
    let mut entries = Vec::new();
    let mut not_evaluated = Vec::new();
    for p in plugins {
        if !PLUGIN_NAMES.contains(&p.name.as_str()) {
            if !NOT_A_VERDICT.contains(&p.name.as_str()) {
                not_evaluated.push(p.name.clone());
            }
            continue;
        }
        let mut e = json!({ "name": p.name });
        if let Some(w) = p.weight {
            e["weight"] = json!(w);
        }
        if let Some(a) = args.get(&p.name).filter(|a| !a.is_null()) {
            e["args"] = a.clone();
        }
        entries.push(e);
    }
    let doc = json!({
        "apiVersion": policy::API_VERSION,
        "kind": policy::KIND,
        "profiles": [{ "schedulerName": name, "plugins": entries }],
    });
    let text = serde_json::to_string_pretty(&doc).context("encoding the in-tree profile")?;
    let parsed = policy::parse(&text, at)
        .map_err(|e| anyhow::anyhow!("{at}: kube-scheduler's plugins as placer runs them: {e}"))?;
    let compiled = CompiledPolicy::new(parsed);
    let framework = compiled
        .profile(name)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{at}: profile {name} did not compile"))?;
    Ok(Profile {
        framework,
        not_evaluated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: &Framework) -> Vec<(&'static str, i64)> {
        f.plugins()
            .iter()
            .map(|p| (p.plugin.name(), p.weight))
            .collect()
    }

    #[test]
    fn defaults_follow_kube_scheduler_order_and_weights() {
        let t = InTree::defaults().unwrap();
        let (f, missing) = t.profile_for("anything").unwrap();
        let got = names(f);
        assert_eq!(got[2], ("NodeName", 1));
        assert_eq!(got[3], ("NodeUnschedulable", 1));
        assert_eq!(got[4], ("TaintToleration", 3));
        assert!(got.contains(&("InterPodAffinity", 2)));
        assert!(got.contains(&("DynamicResources", 2)));
        assert!(missing.is_empty());
        assert_eq!(t.extender_weight, 1);
    }

    #[test]
    fn a_configuration_reweights_disables_and_reads_the_extender_weight() {
        let yaml = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: custom
  plugins:
    multiPoint:
      disabled: [{name: ImageLocality}, {name: InterPodAffinity}]
      enabled: [{name: TaintToleration, weight: 7}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}
extenders:
- urlPrefix: http://placer:8888
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
"#;
        let t = InTree::parse(yaml, "ks.yaml").unwrap();
        assert_eq!(t.extender_weight, 5);
        let (f, missing) = t.profile_for("custom").unwrap();
        let got = names(f);
        assert!(got.contains(&("TaintToleration", 7)));
        assert!(!got.iter().any(|(n, _)| *n == "InterPodAffinity"));
        assert!(!missing.contains(&"ImageLocality".to_string()));
    }

    #[test]
    fn per_point_disables_and_bad_args_are_errors_naming_the_place() {
        let per_point = "kind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      disabled: [{name: TaintToleration}]\n";
        let e = InTree::parse(per_point, "ks.yaml")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(
                "ks.yaml: profiles[0] (default-scheduler): plugins.score.disabled (TaintToleration)"
            ),
            "{e}"
        );
        let bad = "kind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {nope: 1}\n";
        let e = InTree::parse(bad, "ks.yaml").err().unwrap().to_string();
        assert!(e.contains("nope"), "{e}");
        let e = InTree::parse("kind: Policy\n", "ks.yaml")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("KubeSchedulerConfiguration"), "{e}");
    }

    /// kube-scheduler's `NodeAffinityArgs.addedAffinity` is read (issue 23),
    /// and the in-tree side then enforces it.
    #[test]
    fn added_affinity_is_read_and_enforced() {
        let yaml = r#"
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pinned
  pluginConfig:
  - name: NodeAffinity
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeAffinityArgs
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [batch]}]
"#;
        let t = InTree::parse(yaml, "ks.yaml").unwrap();
        let (f, _) = t.profile_for("pinned").unwrap();
        let affinity = f
            .plugins()
            .iter()
            .find(|p| p.plugin.name() == "NodeAffinity")
            .unwrap();
        let mut state = crate::framework::CycleState::new();
        let pod = crate::objects::PodInfo::default();
        let cluster = crate::cache::ClusterState::default();
        let pre = affinity.plugin.as_pre_filter().unwrap();
        assert!(pre.pre_filter(&mut state, &pod, &cluster).is_success());
        let filter = affinity.plugin.as_filter().unwrap();
        let other = crate::objects::NodeInfo::new("n", [("pool", "web")]);
        assert_eq!(
            filter.filter(&state, &pod, &other, &cluster).message(),
            "node(s) didn't match scheduler-enforced node affinity"
        );
        let batch = crate::objects::NodeInfo::new("n", [("pool", "batch")]);
        assert!(filter.filter(&state, &pod, &batch, &cluster).is_success());
    }
}
