//! placer itself, run as a real process from the binary cargo built for this test target.
//!
//! `placer serve --mode extender --policy <file> --listen 127.0.0.1:<port> --kubeconfig <admin>`
//! (the binary is `PLACER_E2E_PLACER_BIN` if set, e.g. a release build, else cargo's build of it);
//! ready when `GET /readyz` answers 200 (policy loaded, caches synced). The port stays the same
//! across [`Placer::restart`], so a kube-scheduler configured with its URL keeps working after an
//! outage.
//!
//! Out of cluster without delegated authentication placer closes its reads (`/metrics`,
//! `/policy`, `/debug/*`, `/explain/*`), and the tests read them without credentials: unless a
//! test sets up access itself (one of [`ACCESS_FLAGS`]), the harness opens them on purpose, as an
//! operator would, with [`OPEN_READS`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, ensure};

use super::env::TestEnv;
use super::probe::{free_port, http_get, https_get_insecure, wait_ready};
use super::process::{ChildProcess, STOP_GRACE};

/// Flags that set up who may read; a test giving one decides access itself.
const ACCESS_FLAGS: [&str; 4] = [
    "--authorization-always-allow-paths",
    "--authentication-kubeconfig",
    "--authorization-kubeconfig",
    "--client-ca-file",
];
/// What the harness adds when a test gives none of [`ACCESS_FLAGS`]: every read open.
const OPEN_READS: &str = "--authorization-always-allow-paths=/*";

/// How long placer may take to report `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_mins(1);

/// A placer process serving the extender verbs; stopped on drop.
pub struct Placer {
    process: Option<ChildProcess>,
    policy: PathBuf,
    kubeconfig: PathBuf,
    log: PathBuf,
    port: u16,
    mode: &'static str,
    extra_args: Vec<String>,
    /// Whether the harness turns leader election off (see [`Placer::restart`]).
    election_off: bool,
}

impl Placer {
    /// Writes `policy` (YAML) to the test dir, starts placer in extender mode
    /// on a free port and waits for `/readyz`.
    pub async fn start(env: &TestEnv, policy: &str) -> anyhow::Result<Self> {
        Self::start_with(env, policy, "placer", "extender", &[]).await
    }

    /// Like [`Placer::start`] in `mode` (`extender`, `standalone`, `both`) with
    /// `extra_args` (e.g. `--leader-elect`); `name` tells several placers of
    /// one test apart (policy file, log file).
    pub async fn start_with(
        env: &TestEnv,
        policy: &str,
        name: &str,
        mode: &'static str,
        extra_args: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_as(
            env,
            policy,
            name,
            mode,
            extra_args,
            env.cluster().kubeconfig(),
        )
        .await
    }

    /// Like [`Placer::start_with`] with the identity of `kubeconfig` instead of the admin's.
    pub async fn start_as(
        env: &TestEnv,
        policy: &str,
        name: &str,
        mode: &'static str,
        extra_args: &[&str],
        kubeconfig: &Path,
    ) -> anyhow::Result<Self> {
        Self::launch(env, policy, name, mode, extra_args, kubeconfig, true).await
    }

    /// Like [`Placer::start_with`] with the admin identity and no arguments of the test's, the
    /// harness's leader-election default included: placer's own defaults decide (in the
    /// scheduling modes, leader election on the Lease `placer` in namespace `default`).
    pub async fn start_electing_by_default(
        env: &TestEnv,
        policy: &str,
        name: &str,
        mode: &'static str,
    ) -> anyhow::Result<Self> {
        let kubeconfig = env.cluster().kubeconfig();
        Self::launch(env, policy, name, mode, &[], kubeconfig, false).await
    }

    async fn launch(
        env: &TestEnv,
        policy: &str,
        name: &str,
        mode: &'static str,
        extra_args: &[&str],
        kubeconfig: &Path,
        election_off: bool,
    ) -> anyhow::Result<Self> {
        // In a directory of its own, as a ConfigMap volume mounts it: placer watches the
        // directory, and the logs written beside it (kwok's, busy in the scale runs) are no
        // concern of a deployed placer.
        let policy_dir = env.dir().join(format!("{name}-policy"));
        std::fs::create_dir_all(&policy_dir)?;
        let policy_path = policy_dir.join("policy.yaml");
        std::fs::write(&policy_path, policy)?;
        let log = env.dir().join(format!("{name}.log"));
        env.register_log(name, &log);
        let mut placer = Self {
            process: None,
            policy: policy_path,
            kubeconfig: kubeconfig.to_owned(),
            log,
            port: free_port(),
            mode,
            extra_args: extra_args.iter().map(|a| (*a).to_string()).collect(),
            election_off,
        };
        placer.restart().await?;
        Ok(placer)
    }

    /// The base URL, `http://127.0.0.1:<port>` (kube-scheduler's `urlPrefix`), `https://` when
    /// placer serves TLS (`--tls-cert-file` among its arguments).
    pub fn url(&self) -> String {
        let scheme = if self.https() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    fn https(&self) -> bool {
        self.extra_args
            .iter()
            .any(|a| a.starts_with("--tls-cert-file"))
    }

    /// The policy file it was started with.
    pub fn policy_path(&self) -> &Path {
        &self.policy
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id while placer runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ChildProcess::pid)
    }

    /// placer's log file (stdout and stderr of every start).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `GET <path>` on placer's port (e.g. `/debug/zones`, `/policy`); the body as JSON.
    pub async fn get_json(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        let (status, body) = http_get(self.port, path).await?;
        ensure!(status == 200, "GET {path}: status {status}: {body}");
        serde_json::from_str(&body).with_context(|| format!("GET {path}: not JSON: {body}"))
    }

    /// placer's `/metrics` (Prometheus text).
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let (status, body) = http_get(self.port, "/metrics").await?;
        ensure!(status == 200, "GET /metrics: status {status}: {body}");
        Ok(body)
    }

    /// The value of one series of placer's `/metrics`, given exactly as exposed, e.g.
    /// `placer_requests_total{verb="bind",outcome="success"}`; `None` when it is not exposed.
    pub async fn metric(&self, series: &str) -> anyhow::Result<Option<f64>> {
        let body = self.metrics().await?;
        body.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map(|value| {
                value
                    .trim()
                    .parse()
                    .with_context(|| format!("{series}: bad value {value:?}"))
            })
            .transpose()
    }

    /// Replaces placer's policy file with `policy` (YAML); placer reloads it on its own.
    pub fn rewrite_policy(&self, policy: &str) -> anyhow::Result<()> {
        std::fs::write(&self.policy, policy)
            .with_context(|| format!("write {}", self.policy.display()))
    }

    /// (Re)starts placer on the same port and waits for `/readyz`; stops a running one first.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        let binary = std::env::var_os("PLACER_E2E_PLACER_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_placer")),
            PathBuf::from,
        );
        let mut cmd = Command::new(binary);
        cmd.arg("serve").arg(format!("--mode={}", self.mode));
        // Tests stop placer often and nothing routes to it through a Service: no shutdown delay
        // unless the test asks for one.
        if !self
            .extra_args
            .iter()
            .any(|a| a.starts_with("--shutdown-delay-seconds"))
        {
            cmd.arg("--shutdown-delay-seconds=0");
        }
        let sets_access = self
            .extra_args
            .iter()
            .any(|a| ACCESS_FLAGS.iter().any(|flag| a.starts_with(flag)));
        if !sets_access {
            cmd.arg(OPEN_READS);
        }
        // Leader election is on by default in the scheduling modes, on one Lease name: every
        // test's replica on the shared control plane would contend for it. Tests run one replica
        // unless they elect, so the harness turns it off unless the test passes a --leader-elect
        // flag of its own (tests/e2e/standalone/leader.rs) or asks for placer's defaults.
        let schedules = matches!(self.mode, "standalone" | "both");
        if schedules
            && self.election_off
            && !self
                .extra_args
                .iter()
                .any(|a| a == "--leader-elect" || a.starts_with("--leader-elect="))
        {
            cmd.arg("--leader-elect=false");
        }
        cmd.args(&self.extra_args)
            .arg(format!("--policy={}", self.policy.display()))
            .arg(format!("--listen=127.0.0.1:{}", self.port))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .env(
                "RUST_LOG",
                std::env::var("PLACER_E2E_RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env_remove("KUBECONFIG")
            // The Lease's namespace and this replica's identity default to these (as in a pod):
            // the tests choose them.
            .env_remove("POD_NAMESPACE")
            .env_remove("POD_NAME");
        let process = ChildProcess::spawn("placer", cmd, &self.log)?;
        let port = self.port;
        let (https, url) = (self.https(), self.url());
        // Readiness as the kubelet probes it: no client certificate, no token.
        wait_ready(&process, &[], READY_TIMEOUT, || async {
            if https {
                https_get_insecure(&url, "/readyz").await?;
                return Ok(true);
            }
            Ok(http_get(port, "/readyz").await?.0 == 200)
        })
        .await?;
        self.process = Some(process);
        Ok(())
    }

    /// Kills placer with SIGKILL, as a crash would (no-op when stopped).
    pub fn kill(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
    }

    /// Sends SIGTERM and returns at once, as the kubelet does when the pod is deleted; see
    /// [`Placer::wait_exit`].
    pub fn terminate(&self) {
        if let Some(process) = &self.process {
            process.signal(libc::SIGTERM);
        }
    }

    /// Waits up to `timeout` for placer to exit on its own (after [`Placer::terminate`]); its
    /// exit status, reaped. Fails if it still runs.
    pub async fn wait_exit(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<std::process::ExitStatus> {
        let process = self.process.as_ref().context("placer is not running")?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = process.exit_status() {
                self.process = None;
                return Ok(status);
            }
            ensure!(
                std::time::Instant::now() < deadline,
                "placer still running {timeout:?} after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops placer gracefully: SIGTERM, SIGKILL after a grace period (no-op when stopped).
    pub fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.stop(STOP_GRACE);
        }
    }
}

/// Runs `placer <args>` (the command line, not the service) without the caller's `KUBECONFIG`;
/// returns its standard output, or fails with its standard error.
pub async fn placer_cli<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> anyhow::Result<String> {
    let args: Vec<std::ffi::OsString> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_placer"))
            .args(&args)
            .env_remove("KUBECONFIG")
            .output()
    })
    .await??;
    ensure!(
        out.status.success(),
        "placer {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
