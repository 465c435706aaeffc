//! Stock kube-scheduler as a per-test process, configured through a `KubeSchedulerConfiguration`.
//!
//! Each test runs its own scheduler with a single profile named after the test
//! ([`TestEnv::scheduler_name`]), so schedulers of concurrent tests never compete for a pod.
//! Leader election is off and pod backoff short (1 s initial, 2 s max) to keep retries fast.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::env::TestEnv;
use super::probe::{free_port, https_get_insecure, wait_ready};
use super::process::{ChildProcess, STOP_GRACE};

/// How long kube-scheduler may take to report `/readyz` (its informers must sync).
const READY_TIMEOUT: Duration = Duration::from_mins(1);

/// One `extenders:` entry of the scheduler configuration.
#[derive(Clone, Debug)]
pub struct ExtenderConfig {
    url_prefix: String,
    filter_verb: Option<String>,
    prioritize_verb: Option<String>,
    bind_verb: Option<String>,
    preempt_verb: Option<String>,
    weight: i64,
    node_cache_capable: bool,
    ignorable: bool,
    http_timeout: String,
    tls: Option<Value>,
}

impl ExtenderConfig {
    /// An extender at `url_prefix` with `filter` and `prioritize` verbs, weight 1,
    /// `nodeCacheCapable: true`, not ignorable, 5 s HTTP timeout.
    pub fn new(url_prefix: &str) -> Self {
        Self {
            url_prefix: url_prefix.to_owned(),
            filter_verb: Some("filter".into()),
            prioritize_verb: Some("prioritize".into()),
            bind_verb: None,
            preempt_verb: None,
            weight: 1,
            node_cache_capable: true,
            ignorable: false,
            http_timeout: "5s".into(),
            tls: None,
        }
    }

    /// Sets (or with `None` removes) the filter verb.
    #[must_use]
    pub fn filter_verb(mut self, verb: Option<&str>) -> Self {
        self.filter_verb = verb.map(str::to_owned);
        self
    }

    /// Sets (or with `None` removes) the prioritize verb.
    #[must_use]
    pub fn prioritize_verb(mut self, verb: Option<&str>) -> Self {
        self.prioritize_verb = verb.map(str::to_owned);
        self
    }

    /// Sets (or with `None` removes) the bind verb: the extender then binds pods.
    #[must_use]
    pub fn bind_verb(mut self, verb: Option<&str>) -> Self {
        self.bind_verb = verb.map(str::to_owned);
        self
    }

    /// Sets (or with `None` removes) the preempt verb.
    #[must_use]
    pub fn preempt_verb(mut self, verb: Option<&str>) -> Self {
        self.preempt_verb = verb.map(str::to_owned);
        self
    }

    /// Sets the weight kube-scheduler multiplies the extender's 0–10 scores with.
    #[must_use]
    pub fn weight(mut self, weight: i64) -> Self {
        self.weight = weight;
        self
    }

    /// Sets `nodeCacheCapable` (true: node names are sent instead of full Node objects).
    #[must_use]
    pub fn node_cache_capable(mut self, capable: bool) -> Self {
        self.node_cache_capable = capable;
        self
    }

    /// Sets `ignorable` (true: scheduling goes on when the extender fails).
    #[must_use]
    pub fn ignorable(mut self, ignorable: bool) -> Self {
        self.ignorable = ignorable;
        self
    }

    /// Sets `httpTimeout` (a Go duration such as `"5s"`).
    #[must_use]
    pub fn http_timeout(mut self, timeout: &str) -> Self {
        timeout.clone_into(&mut self.http_timeout);
        self
    }

    /// `enableHTTPS: true` with `tlsConfig` naming the CA that verifies placer and the client
    /// certificate kube-scheduler presents (as the README's mutual-TLS example).
    #[must_use]
    pub fn tls(mut self, ca: &Path, cert: &Path, key: &Path) -> Self {
        self.tls = Some(json!({ "caFile": ca, "certFile": cert, "keyFile": key }));
        self
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "urlPrefix": self.url_prefix,
            "weight": self.weight,
            "nodeCacheCapable": self.node_cache_capable,
            "ignorable": self.ignorable,
            "httpTimeout": self.http_timeout,
        });
        if let Some(tls) = &self.tls {
            e["enableHTTPS"] = json!(true);
            e["tlsConfig"] = tls.clone();
        }
        for (key, verb) in [
            ("filterVerb", &self.filter_verb),
            ("prioritizeVerb", &self.prioritize_verb),
            ("bindVerb", &self.bind_verb),
            ("preemptVerb", &self.preempt_verb),
        ] {
            if let Some(verb) = verb {
                e[key] = json!(verb);
            }
        }
        e
    }
}

/// Which of kube-scheduler's own score plugins the profile runs.
#[derive(Clone, Debug)]
pub enum ScorePlugins {
    /// The default set.
    Defaults,
    /// Only these `(plugin, weight)` pairs (empty: none, so only extender scores count).
    Only(Vec<(String, i64)>),
}

/// A `KubeSchedulerConfiguration` with one profile.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    scheduler_name: String,
    extenders: Vec<ExtenderConfig>,
    score: ScorePlugins,
    client_rate: Option<(f64, u32)>,
    percentage_of_nodes_to_score: Option<u8>,
}

impl SchedulerConfig {
    /// One profile named `scheduler_name` with default plugins and no extenders.
    pub fn new(scheduler_name: &str) -> Self {
        Self {
            scheduler_name: scheduler_name.to_owned(),
            extenders: Vec::new(),
            score: ScorePlugins::Defaults,
            client_rate: None,
            percentage_of_nodes_to_score: None,
        }
    }

    /// Adds an extender.
    #[must_use]
    pub fn extender(mut self, extender: ExtenderConfig) -> Self {
        self.extenders.push(extender);
        self
    }

    /// Chooses the profile's score plugins.
    #[must_use]
    pub fn score_plugins(mut self, score: ScorePlugins) -> Self {
        self.score = score;
        self
    }

    /// Sets `clientConnection.qps` and `.burst` (default: kube-scheduler's own, qps 50, burst 100).
    #[must_use]
    pub fn client_rate(mut self, qps: f64, burst: u32) -> Self {
        self.client_rate = Some((qps, burst));
        self
    }

    /// Sets `percentageOfNodesToScore` (default: unset, kube-scheduler's adaptive share).
    #[must_use]
    pub fn percentage_of_nodes_to_score(mut self, percentage: u8) -> Self {
        self.percentage_of_nodes_to_score = Some(percentage);
        self
    }

    /// The configuration as YAML (JSON, a subset of YAML) using `kubeconfig` to reach the API.
    pub fn render(&self, kubeconfig: &Path) -> String {
        let mut profile = json!({ "schedulerName": self.scheduler_name });
        if let ScorePlugins::Only(plugins) = &self.score {
            let enabled: Vec<Value> = plugins
                .iter()
                .map(|(name, weight)| json!({ "name": name, "weight": weight }))
                .collect();
            profile["plugins"] =
                json!({ "score": { "disabled": [{ "name": "*" }], "enabled": enabled } });
        }
        let mut client = json!({ "kubeconfig": kubeconfig });
        if let Some((qps, burst)) = self.client_rate {
            client["qps"] = json!(qps);
            client["burst"] = json!(burst);
        }
        let mut config = json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": client,
            "leaderElection": { "leaderElect": false },
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": 2,
            "profiles": [profile],
            "extenders": self.extenders.iter().map(ExtenderConfig::to_json).collect::<Vec<_>>(),
        });
        if let Some(percentage) = self.percentage_of_nodes_to_score {
            config["percentageOfNodesToScore"] = json!(percentage);
        }
        serde_json::to_string_pretty(&config).expect("config serializes")
    }
}

/// A running kube-scheduler; stopped on drop, restartable with the same config and port.
pub struct Scheduler {
    process: Option<ChildProcess>,
    binary: PathBuf,
    config: PathBuf,
    cert_dir: PathBuf,
    log: PathBuf,
    port: u16,
    verbosity: u8,
}

impl Scheduler {
    /// Starts kube-scheduler with `config` and waits for its `/readyz`.
    pub async fn start(env: &TestEnv, config: &SchedulerConfig) -> anyhow::Result<Self> {
        Self::start_with_yaml(env, &config.render(env.cluster().kubeconfig())).await
    }

    /// Starts kube-scheduler with a hand-written configuration (which must set
    /// `clientConnection.kubeconfig`, e.g. to `env.cluster().kubeconfig()`).
    pub async fn start_with_yaml(env: &TestEnv, yaml: &str) -> anyhow::Result<Self> {
        Self::start_with_yaml_verbosity(env, yaml, 2).await
    }

    /// Like [`Scheduler::start_with_yaml`] logging at `--v=<verbosity>` (10: every plugin's
    /// score per node, "Plugin scored node for pod").
    pub async fn start_with_yaml_verbosity(
        env: &TestEnv,
        yaml: &str,
        verbosity: u8,
    ) -> anyhow::Result<Self> {
        let config = env.dir().join("kube-scheduler.yaml");
        std::fs::write(&config, yaml)?;
        let log = env.dir().join("kube-scheduler.log");
        env.register_log("kube-scheduler", &log);
        let mut scheduler = Self {
            process: None,
            binary: env.cluster().binaries().path("kube-scheduler"),
            config,
            cert_dir: env.dir().join("kube-scheduler-pki"),
            log,
            port: free_port(),
            verbosity,
        };
        scheduler.restart().await?;
        Ok(scheduler)
    }

    /// Stops (SIGTERM, then SIGKILL) the scheduler if it runs, then starts it again and waits for
    /// its `/readyz`.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        let mut cmd = Command::new(&self.binary);
        cmd.args([
            format!("--config={}", self.config.display()),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={}", self.port),
            format!("--cert-dir={}", self.cert_dir.display()),
            // Anonymous reads of /metrics, as of the health endpoints (the scale benchmark
            // reads kube-scheduler's own latency histograms).
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
            format!("--v={}", self.verbosity),
        ]);
        let process = ChildProcess::spawn("kube-scheduler", cmd, &self.log)?;
        let base = format!("https://127.0.0.1:{}", self.port);
        wait_ready(&process, &[], READY_TIMEOUT, || async {
            Ok(https_get_insecure(&base, "/readyz").await? == "ok")
        })
        .await?;
        self.process = Some(process);
        Ok(())
    }

    /// The process id while the scheduler runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ChildProcess::pid)
    }

    /// kube-scheduler's `/metrics` (Prometheus text).
    pub async fn metrics(&self) -> anyhow::Result<String> {
        https_get_insecure(&format!("https://127.0.0.1:{}", self.port), "/metrics").await
    }

    /// kube-scheduler's log file (`--v=2`: it logs every binding it makes or delegates).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Stops the scheduler (no-op when stopped).
    pub fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.stop(STOP_GRACE);
        }
    }
}
