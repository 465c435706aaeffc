//! The configurations a scale run compares, each started on the shared control plane with its
//! own scheduler name, and what each exposes: processes, `/metrics`, its binding log line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;

use crate::harness::bound_once::{KUBE_SCHEDULER_BOUND_LINE, PLACER_BOUND_LINE};
use crate::harness::compare::{KubeSchedulerYaml, comparable_plugins};
use crate::harness::probe::{free_port, http_get, wait_ready};
use crate::harness::process::ChildProcess;
use crate::harness::{
    ExtenderConfig, Placer, Scheduler, SchedulerConfig, TestEnv, both_policy, standalone_policy,
};

/// kube-scheduler's `clientConnection` rate limit in every configuration (its default, qps 50,
/// would cap every kube-scheduler run near 50 binds/s; placer's client has no such limit).
const KUBE_QPS: f64 = 1000.0;
const KUBE_BURST: u32 = 1000;

/// One of the compared configurations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// a. stock kube-scheduler alone, default plugins.
    KubeDefault,
    /// b. stock kube-scheduler with placer as extender (filter + prioritize, names), the
    /// shipped `policy.yaml`.
    KubeWithPlacer,
    /// c. placer standalone, the shipped standalone profile.
    PlacerStandalone,
    /// d. kube-scheduler with the plugins of (c) it also has (`comparable_plugins`).
    KubeComparable,
    /// e. stock kube-scheduler with the floor (a minimal extender) serving a snapshot.
    KubeWithFloor,
    /// f. placer `--mode both`: (c)'s profile binds the pods while the same process answers
    /// the extender verbs (shipped extender profile) to the test's probe (`probe`).
    PlacerBoth,
    /// g. placer standalone with kube-scheduler's default profile
    /// (`examples/default-profile.yaml`), sampling nodes as (a) does: the reference for (a).
    PlacerDefaultProfile,
    /// h. (a) with `percentageOfNodesToScore: 100`: every node evaluated.
    KubeDefaultAllNodes,
    /// i. (g) with `percentageOfNodesToScore: 100`: the reference for (h).
    PlacerDefaultProfileAllNodes,
}

impl Config {
    pub const ALL: [Self; 9] = [
        Self::KubeDefault,
        Self::KubeWithPlacer,
        Self::PlacerStandalone,
        Self::KubeComparable,
        Self::KubeWithFloor,
        Self::PlacerBoth,
        Self::PlacerDefaultProfile,
        Self::KubeDefaultAllNodes,
        Self::PlacerDefaultProfileAllNodes,
    ];

    /// The letter that selects it in `PLACER_SCALE_CONFIGS`.
    pub fn letter(self) -> char {
        match self {
            Self::KubeDefault => 'a',
            Self::KubeWithPlacer => 'b',
            Self::PlacerStandalone => 'c',
            Self::KubeComparable => 'd',
            Self::KubeWithFloor => 'e',
            Self::PlacerBoth => 'f',
            Self::PlacerDefaultProfile => 'g',
            Self::KubeDefaultAllNodes => 'h',
            Self::PlacerDefaultProfileAllNodes => 'i',
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::KubeDefault => "kube-scheduler, defaults",
            Self::KubeWithPlacer => "kube-scheduler + placer extender",
            Self::PlacerStandalone => "placer standalone",
            Self::KubeComparable => "kube-scheduler, comparable plugins",
            Self::KubeWithFloor => "kube-scheduler + floor extender",
            Self::PlacerBoth => "placer --mode both + extender probe",
            Self::PlacerDefaultProfile => "placer standalone, default profile",
            Self::KubeDefaultAllNodes => "kube-scheduler, defaults, 100 % of nodes",
            Self::PlacerDefaultProfileAllNodes => {
                "placer standalone, default profile, 100 % of nodes"
            }
        }
    }

    /// Whether the configuration applies the shipped policy's CapabilityFilter.
    pub fn enforces_capability(self) -> bool {
        matches!(
            self,
            Self::KubeWithPlacer | Self::PlacerStandalone | Self::KubeWithFloor | Self::PlacerBoth
        )
    }

    /// Whether the test probes the extender verbs while the pods are scheduled.
    pub fn probes_extender(self) -> bool {
        self == Self::PlacerBoth
    }
}

/// A process of a running configuration, for CPU and memory readings.
pub struct Proc {
    pub name: &'static str,
    pub pid: u32,
}

/// A configuration, running: its processes stop when it drops (scheduler first).
pub struct Running {
    scheduler: Option<Scheduler>,
    placer: Option<Placer>,
    floor: Option<ChildProcess>,
}

impl Running {
    /// Starts `config` for pods naming `scheduler_name`; `snapshot` is the floor's input (e).
    pub async fn start(
        env: &TestEnv,
        config: Config,
        scheduler_name: &str,
        snapshot: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let kube = |c: SchedulerConfig| c.client_rate(KUBE_QPS, KUBE_BURST);
        let mut running = Self {
            scheduler: None,
            placer: None,
            floor: None,
        };
        match config {
            Config::KubeDefault => {
                let c = kube(SchedulerConfig::new(scheduler_name));
                running.scheduler = Some(Scheduler::start(env, &c).await?);
            }
            Config::KubeDefaultAllNodes => {
                let c =
                    kube(SchedulerConfig::new(scheduler_name)).percentage_of_nodes_to_score(100);
                running.scheduler = Some(Scheduler::start(env, &c).await?);
            }
            Config::PlacerDefaultProfile | Config::PlacerDefaultProfileAllNodes => {
                let percentage = if config == Config::PlacerDefaultProfile {
                    ADAPTIVE
                } else {
                    100
                };
                let policy = default_profile_policy(scheduler_name, percentage)?;
                let placer = Placer::start_with(env, &policy, "placer", "standalone", &[]).await?;
                running.placer = Some(placer);
            }
            Config::KubeWithPlacer => {
                let shipped = repo_file("policy.yaml");
                let policy = std::fs::read_to_string(&shipped)
                    .with_context(|| format!("read {}", shipped.display()))?;
                let placer = Placer::start(env, &policy).await?;
                let c = kube(SchedulerConfig::new(scheduler_name))
                    .extender(ExtenderConfig::new(&placer.url()));
                running.placer = Some(placer);
                running.scheduler = Some(Scheduler::start(env, &c).await?);
            }
            Config::PlacerStandalone => {
                let policy = standalone_policy(scheduler_name)?;
                let placer = Placer::start_with(env, &policy, "placer", "standalone", &[]).await?;
                running.placer = Some(placer);
            }
            Config::PlacerBoth => {
                let policy = both_policy(scheduler_name)?;
                let placer = Placer::start_with(env, &policy, "placer", "both", &[]).await?;
                running.placer = Some(placer);
            }
            Config::KubeComparable => {
                let yaml = KubeSchedulerYaml::new()
                    .profile(scheduler_name, &comparable_plugins())
                    .client_rate(KUBE_QPS, KUBE_BURST)
                    .render(env);
                running.scheduler = Some(Scheduler::start_with_yaml(env, &yaml).await?);
            }
            Config::KubeWithFloor => {
                let snapshot = snapshot.context("configuration e needs a snapshot")?;
                let (floor, url) = start_floor(env, snapshot).await?;
                let c =
                    kube(SchedulerConfig::new(scheduler_name)).extender(ExtenderConfig::new(&url));
                running.floor = Some(floor);
                running.scheduler = Some(Scheduler::start(env, &c).await?);
            }
        }
        Ok(running)
    }

    /// The scheduler processes (kube-scheduler, placer, floor) that run.
    pub fn processes(&self) -> Vec<Proc> {
        let mut procs = Vec::new();
        if let Some(pid) = self.scheduler.as_ref().and_then(Scheduler::pid) {
            procs.push(Proc {
                name: "kube-scheduler",
                pid,
            });
        }
        if let Some(pid) = self.placer.as_ref().and_then(Placer::pid) {
            procs.push(Proc {
                name: "placer",
                pid,
            });
        }
        if let Some(floor) = &self.floor {
            procs.push(Proc {
                name: "floor",
                pid: floor.pid(),
            });
        }
        procs
    }

    /// placer's port, where it serves the extender verbs in (f).
    pub fn placer_port(&self) -> Option<u16> {
        self.placer.as_ref().map(Placer::port)
    }

    /// The log with one line per binding, and that line's text.
    pub fn binding_log(&self) -> anyhow::Result<(&Path, &'static str)> {
        match (&self.scheduler, &self.placer) {
            (Some(s), _) => Ok((s.log_path(), KUBE_SCHEDULER_BOUND_LINE)),
            (None, Some(p)) => Ok((p.log_path(), PLACER_BOUND_LINE)),
            (None, None) => anyhow::bail!("no scheduler runs"),
        }
    }

    /// `/metrics` of kube-scheduler and of placer (empty where the process does not run).
    pub async fn scrape(&self) -> anyhow::Result<(String, String)> {
        let kube = match &self.scheduler {
            Some(s) => s.metrics().await?,
            None => String::new(),
        };
        let placer = match &self.placer {
            Some(p) => p.metrics().await?,
            None => String::new(),
        };
        Ok((kube, placer))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The scheduler first, so it never calls a stopped extender.
        self.scheduler.take();
        self.placer.take();
        self.floor.take();
    }
}

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// `percentageOfNodesToScore: 0`, kube-scheduler's adaptive share (`50 - nodes/125`, at least
/// 5 %). kube-scheduler applies it when the field is unset; placer evaluates every node then, so
/// (g) sets it to sample as (a) does.
const ADAPTIVE: u8 = 0;

/// `examples/default-profile.yaml` (kube-scheduler's default plugins, order and weights) with its
/// only profile renamed to `scheduler_name` and `percentageOfNodesToScore` set to `percentage`.
fn default_profile_policy(scheduler_name: &str, percentage: u8) -> anyhow::Result<String> {
    let path = repo_file("examples/default-profile.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let mut policy: serde_json::Value = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("parse {} as YAML", path.display()))?;
    let profiles = policy["profiles"]
        .as_array_mut()
        .with_context(|| format!("{} has no profiles", path.display()))?;
    anyhow::ensure!(
        profiles.len() == 1,
        "{} has {} profiles, the scale test expects one",
        path.display(),
        profiles.len()
    );
    profiles[0]["schedulerName"] = serde_json::json!(scheduler_name);
    policy["percentageOfNodesToScore"] = serde_json::json!(percentage);
    Ok(serde_yaml_ng::to_string(&policy)?)
}

/// Starts `floor floor-serve <snapshot>` (binary from `PLACER_SCALE_FLOOR_BIN`); returns it and
/// its URL once it accepts connections.
async fn start_floor(env: &TestEnv, snapshot: &Path) -> anyhow::Result<(ChildProcess, String)> {
    let binary = std::env::var_os("PLACER_SCALE_FLOOR_BIN")
        .context("configuration e needs PLACER_SCALE_FLOOR_BIN (see scripts/scale.sh)")?;
    let port = free_port();
    let mut cmd = Command::new(binary);
    cmd.arg("floor-serve")
        .arg(snapshot)
        .arg(format!("127.0.0.1:{port}"));
    let log = env.dir().join("floor.log");
    env.register_log("floor", &log);
    let floor = ChildProcess::spawn("floor", cmd, &log)?;
    // The floor has no health endpoint: any HTTP answer (404 for GET /) means it serves.
    wait_ready(&floor, &[], Duration::from_mins(1), || async {
        Ok(http_get(port, "/").await.is_ok())
    })
    .await?;
    Ok((floor, format!("http://127.0.0.1:{port}")))
}
