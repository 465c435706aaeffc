//! [`TestEnv`]: one test's slice of the shared cluster.
//!
//! Tests share the control plane but never each other's objects: each gets a run id, used as its
//! namespace, as the prefix of its node, zone and priority-class names, as the value of the
//! [`RUN_LABEL`] on its nodes (its pods select it with a `nodeSelector`), and in its scheduler name
//! (its pods name it in `spec.schedulerName`, its kube-scheduler's profile uses it). placer's cache
//! sees every node in the cluster, which is fine: zones are named per test too.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::PostParams;

use super::control_plane::{self, ControlPlane};
use super::ids;
use super::process::format_log_tail;
use super::workdir::TestDir;

/// Node label carrying the run id; test pods select their own nodes with it.
pub const RUN_LABEL: &str = "e2e.placer.io/run";

/// One test's context: client, names, temp dir and the logs worth printing when it fails.
pub struct TestEnv {
    cluster: &'static ControlPlane,
    client: kube::Client,
    run_id: String,
    logs: Mutex<Vec<(String, PathBuf)>>,
    /// The control plane is the test's own: kill it when the test ends.
    owns_cluster: bool,
    // The test's processes write here; they are created after the env and so dropped before it.
    dir: TestDir,
}

impl TestEnv {
    /// Joins (starting if needed) the shared control plane and creates the test's namespace.
    /// Fails, never skips, when the control plane cannot start.
    pub async fn new(test: &str) -> anyhow::Result<Self> {
        Self::on(control_plane::shared().await?, test, false).await
    }

    /// Like [`TestEnv::new`] on a control plane of the test's own (for tests that restart the
    /// API server), killed when the env drops.
    pub async fn with_own_control_plane(test: &str) -> anyhow::Result<Self> {
        let cluster = control_plane::private(&format!("cluster-{test}")).await?;
        Self::on(cluster, test, true).await
    }

    async fn on(
        cluster: &'static ControlPlane,
        test: &str,
        owns_cluster: bool,
    ) -> anyhow::Result<Self> {
        let client = cluster.client().await?;
        let run_id = ids::run_id(test);
        let dir = TestDir::new(&run_id).context("create the test's temp dir")?;
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": run_id, "labels": { RUN_LABEL: run_id } }
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("create namespace {run_id}"))?;
        Ok(Self {
            cluster,
            client,
            run_id,
            logs: Mutex::new(Vec::new()),
            owns_cluster,
            dir,
        })
    }

    /// The shared control plane.
    pub fn cluster(&self) -> &'static ControlPlane {
        self.cluster
    }

    /// An admin client bound to this test's runtime.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The run id (also the namespace name and the [`RUN_LABEL`] value).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        &self.run_id
    }

    /// The scheduler name the test's pods use and its kube-scheduler profile serves.
    pub fn scheduler_name(&self) -> String {
        format!("sched-{}", self.run_id)
    }

    /// A cluster-unique name for one of the test's objects: `<run id>-<suffix>`.
    pub fn name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.run_id)
    }

    /// Pods in the test's namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.run_id)
    }

    /// The test's temp dir (configs, policies, process logs); removed when the env drops.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Remembers a log file to print when a wait times out or the test panics.
    pub fn register_log(&self, name: &str, path: &Path) {
        let mut logs = self
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !logs.iter().any(|(_, p)| p == path) {
            logs.push((name.to_owned(), path.to_owned()));
        }
    }

    /// Tails of the test's registered logs and of the API server's log.
    pub fn log_tails(&self, lines: usize) -> String {
        let logs = self
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: String = logs
            .iter()
            .map(|(name, path)| format_log_tail(name, path, lines))
            .collect();
        out.push_str(&self.cluster.log_tails(lines / 2));
        out
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "test run {} failed; recent logs:\n{}",
                self.run_id,
                self.log_tails(60)
            );
        }
        if self.owns_cluster {
            self.cluster.kill();
        }
    }
}
