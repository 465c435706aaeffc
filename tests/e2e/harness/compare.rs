//! Standalone placer next to stock kube-scheduler, both running the same plugins.
//!
//! One [`ProfilePlugin`] list renders both placer's policy profile ([`placer_policy`]) and a
//! kube-scheduler profile ([`KubeSchedulerYaml`]). A kube-scheduler profile either disables every
//! default (`multiPoint: {disabled: [{name: "*"}]}`) and enables exactly the listed plugins in
//! that order through `multiPoint`, plus `DefaultBinder` (kube-scheduler refuses a profile
//! without a bind plugin; placer binds without one) ([`KubeSchedulerYaml::profile`]), or is its
//! default profile with only the plugins placer lacks disabled by name
//! ([`KubeSchedulerYaml::default_profile`], against [`comparable_plugins`] on placer's side). Both run `DefaultPreemption`, so their
//! `FailedScheduling` messages end with the same preemption part. Both schedulers run their
//! Filter plugins in list order and stop at a node's first rejection, so the order decides which
//! reason a node reports: keep the lists in kube-scheduler's default order.
//!
//! kube-scheduler's client defaults (`clientConnection` qps 50, burst 100) would throttle it in a
//! throughput run; the YAML sets both (see [`KubeSchedulerYaml::client_rate`]). placer's kube-rs
//! client has no client-side rate limit.

use serde_json::{Value, json};

use super::env::TestEnv;
use super::policy::Policy;
use super::{Placer, Scheduler};

/// One plugin of a profile: name, score weight (`None` for plugins without a Score point) and
/// args, which both schedulers read with the same schema (`None`: each one's defaults).
#[derive(Clone, Debug)]
pub struct ProfilePlugin {
    /// The plugin name, the same in both schedulers.
    pub name: &'static str,
    /// The score weight, for plugins that score.
    pub weight: Option<u32>,
    /// The plugin args (placer: `args`; kube-scheduler: `pluginConfig`).
    pub args: Option<Value>,
}

/// A plugin without args.
pub const fn plugin(name: &'static str, weight: Option<u32>) -> ProfilePlugin {
    ProfilePlugin {
        name,
        weight,
        args: None,
    }
}

/// The filter-relevant safety plugins in kube-scheduler's default order (its
/// `getDefaultPlugins`): queue sort, pre-enqueue gate, then the filters `NodeName`,
/// `NodeUnschedulable`, `TaintToleration`, `NodeAffinity`, `NodePorts`, `NodeResourcesFit`, with
/// kube-scheduler's default score weights, and the PostFilter `DefaultPreemption`.
pub fn safety_filter_plugins() -> Vec<ProfilePlugin> {
    vec![
        plugin("SchedulingGates", None),
        plugin("PrioritySort", None),
        plugin("NodeName", None),
        plugin("NodeUnschedulable", None),
        plugin("TaintToleration", Some(3)),
        plugin("NodeAffinity", Some(2)),
        plugin("NodePorts", None),
        least_allocated_fit(),
        plugin("DefaultPreemption", None),
    ]
}

/// kube-scheduler v1.37's default plugins that placer does not implement: a default profile
/// with these disabled by name runs what [`comparable_plugins`] runs. None since
/// DynamicResources: the default profile runs with nothing disabled.
pub const PLACER_LACKS: [&str; 0] = [];

/// Every kube-scheduler default plugin placer implements, in kube-scheduler's default order and
/// with its default weights: [`safety_filter_plugins`] with the volume filters
/// (`VolumeRestrictions`, `NodeVolumeLimits`, `VolumeBinding`, `VolumeZone`), `PodTopologySpread`
/// (kube-scheduler's system default constraints), `InterPodAffinity`,
/// `NodeResourcesBalancedAllocation`, `ImageLocality` and `NodeDeclaredFeatures` in their places.
/// kube-scheduler's defaults that placer lacks ([`PLACER_LACKS`]) are left out.
pub fn comparable_plugins() -> Vec<ProfilePlugin> {
    let mut plugins = safety_filter_plugins();
    let preemption = plugins.pop();
    plugins.extend([
        plugin("VolumeRestrictions", None),
        plugin("NodeVolumeLimits", None),
        plugin("VolumeBinding", None),
        plugin("VolumeZone", None),
        plugin("PodTopologySpread", Some(2)),
        plugin("InterPodAffinity", Some(2)),
        plugin("DynamicResources", Some(2)),
    ]);
    plugins.extend(preemption);
    plugins.extend([
        plugin("NodeResourcesBalancedAllocation", Some(1)),
        plugin("ImageLocality", Some(1)),
        plugin("NodeDeclaredFeatures", None),
    ]);
    plugins
}

/// `NodeResourcesFit` with kube-scheduler's default scoring (`LeastAllocated`, cpu and memory
/// weight 1), spelled out for both schedulers.
fn least_allocated_fit() -> ProfilePlugin {
    ProfilePlugin {
        name: "NodeResourcesFit",
        weight: Some(1),
        args: Some(
            json!({ "scoringStrategy": { "type": "LeastAllocated", "resources": [
            { "name": "cpu", "weight": 1 }, { "name": "memory", "weight": 1 },
        ] } }),
        ),
    }
}

/// A placer policy with one profile `profile` running `plugins` in order (YAML).
pub fn placer_policy(profile: &str, plugins: &[ProfilePlugin]) -> String {
    plugins
        .iter()
        .fold(Policy::new(profile), |policy, p| {
            policy.plugin(
                p.name,
                p.weight,
                p.args.clone().unwrap_or_else(|| json!({})),
            )
        })
        .to_yaml()
}

/// placer standalone next to stock kube-scheduler on one control plane: placer's profile
/// `<run id>-placer` runs `plugins`, kube-scheduler's (the env's scheduler name) exactly the same
/// ([`SideBySide::start`]) or its default profile without [`PLACER_LACKS`]
/// ([`SideBySide::start_against_default`]). Both stop when this drops.
pub struct SideBySide {
    /// placer's profile, for the pods placer schedules.
    pub placer_name: String,
    /// kube-scheduler's profile.
    pub kube_name: String,
    _placer: Placer,
    _kube: Scheduler,
}

impl SideBySide {
    /// Both schedulers running exactly `plugins`.
    pub async fn start(env: &TestEnv, plugins: &[ProfilePlugin]) -> anyhow::Result<Self> {
        let yaml = KubeSchedulerYaml::new().profile(&env.scheduler_name(), plugins);
        Self::start_with(env, plugins, yaml).await
    }

    /// placer running `plugins`, kube-scheduler its default profile with only the plugins
    /// placer lacks disabled.
    pub async fn start_against_default(
        env: &TestEnv,
        plugins: &[ProfilePlugin],
    ) -> anyhow::Result<Self> {
        let yaml = KubeSchedulerYaml::new().default_profile(&env.scheduler_name(), &PLACER_LACKS);
        Self::start_with(env, plugins, yaml).await
    }

    async fn start_with(
        env: &TestEnv,
        plugins: &[ProfilePlugin],
        yaml: KubeSchedulerYaml,
    ) -> anyhow::Result<Self> {
        let placer_name = env.name("placer");
        let placer = Placer::start_with(
            env,
            &placer_policy(&placer_name, plugins),
            "placer",
            "standalone",
            &[],
        )
        .await?;
        let kube = Scheduler::start_with_yaml(env, &yaml.render(env)).await?;
        Ok(Self {
            placer_name,
            kube_name: env.scheduler_name(),
            _placer: placer,
            _kube: kube,
        })
    }

    /// Each copy's tag (`p`, `k`) with the profile that schedules its pods.
    pub fn copies(&self) -> [(&'static str, String); 2] {
        [
            ("p", self.placer_name.clone()),
            ("k", self.kube_name.clone()),
        ]
    }
}

/// A `KubeSchedulerConfiguration` with one or more profiles.
#[derive(Clone, Debug)]
pub struct KubeSchedulerYaml {
    profiles: Vec<(String, Plugins)>,
    qps: f64,
    burst: u32,
}

/// What one kube-scheduler profile runs.
#[derive(Clone, Debug)]
enum Plugins {
    /// Exactly these (every default disabled with `*`), plus `DefaultBinder`.
    Exactly(Vec<ProfilePlugin>),
    /// The default profile with these disabled by name.
    DefaultsWithout(Vec<&'static str>),
}

impl KubeSchedulerYaml {
    /// No profiles yet; client rate limits at kube-scheduler's defaults (qps 50, burst 100).
    pub fn new() -> Self {
        Self {
            profiles: Vec::new(),
            qps: 50.0,
            burst: 100,
        }
    }

    /// Adds a profile `scheduler_name` running exactly `plugins` (plus `DefaultBinder`).
    #[must_use]
    pub fn profile(mut self, scheduler_name: &str, plugins: &[ProfilePlugin]) -> Self {
        self.profiles.push((
            scheduler_name.to_owned(),
            Plugins::Exactly(plugins.to_vec()),
        ));
        self
    }

    /// Adds a profile `scheduler_name` running kube-scheduler's default plugins with their
    /// default args, but for `disabled` (by name; never `*`).
    #[must_use]
    pub fn default_profile(mut self, scheduler_name: &str, disabled: &[&'static str]) -> Self {
        self.profiles.push((
            scheduler_name.to_owned(),
            Plugins::DefaultsWithout(disabled.to_vec()),
        ));
        self
    }

    /// Sets `clientConnection.qps` and `.burst`.
    #[must_use]
    pub fn client_rate(mut self, qps: f64, burst: u32) -> Self {
        self.qps = qps;
        self.burst = burst;
        self
    }

    /// The configuration (JSON, a subset of YAML) reaching the API through the env's kubeconfig.
    /// Leader election off, pod backoff 1 s doubling to 2 s, as `SchedulerConfig` does.
    pub fn render(&self, env: &TestEnv) -> String {
        let profiles: Vec<Value> = self
            .profiles
            .iter()
            .map(|(name, plugins)| {
                let plugins = match plugins {
                    Plugins::Exactly(plugins) => plugins,
                    Plugins::DefaultsWithout(disabled) => {
                        let disabled: Vec<Value> =
                            disabled.iter().map(|n| json!({ "name": n })).collect();
                        return json!({
                            "schedulerName": name,
                            "plugins": { "multiPoint": { "disabled": disabled } },
                        });
                    }
                };
                let mut enabled: Vec<Value> = plugins
                    .iter()
                    .map(|p| match p.weight {
                        Some(w) => json!({ "name": p.name, "weight": w }),
                        None => json!({ "name": p.name }),
                    })
                    .collect();
                enabled.push(json!({ "name": "DefaultBinder" }));
                let plugin_config: Vec<Value> = plugins
                    .iter()
                    .filter_map(|p| {
                        p.args
                            .as_ref()
                            .map(|a| json!({ "name": p.name, "args": a }))
                    })
                    .collect();
                json!({
                    "schedulerName": name,
                    "plugins": { "multiPoint": {
                        "enabled": enabled,
                        "disabled": [{ "name": "*" }],
                    } },
                    "pluginConfig": plugin_config,
                })
            })
            .collect();
        let config = json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {
                "kubeconfig": env.cluster().kubeconfig(),
                "qps": self.qps,
                "burst": self.burst,
            },
            "leaderElection": { "leaderElect": false },
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": 2,
            "profiles": profiles,
        });
        serde_json::to_string_pretty(&config).expect("config serializes")
    }
}

impl Default for KubeSchedulerYaml {
    fn default() -> Self {
        Self::new()
    }
}

/// Asserts that placer's and kube-scheduler's FailedScheduling texts (`texts`, in
/// [`SideBySide::copies`] order) are the same, byte for byte, and name `reason`; prints both.
pub fn assert_same_failure(texts: &[String], reason: &str) {
    let [placer, kube] = texts else {
        panic!("expected one text per scheduler, got {texts:?}");
    };
    eprintln!("placer: {placer}\nkube-scheduler: {kube}");
    assert_eq!(placer, kube);
    assert!(placer.contains(reason), "{placer}");
}
