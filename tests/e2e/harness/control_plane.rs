//! The shared control plane: etcd and kube-apiserver, started once per test binary.
//!
//! Starting an API server costs seconds to tens of seconds on two cores, so all tests of the
//! binary share one, started lazily by the first test that asks for it ([`shared`]). Tests isolate
//! themselves with their own namespace, nodes and scheduler name (see `env`). The handle holds no
//! runtime-bound state: every test builds its own [`kube::Client`] from the kubeconfig with
//! [`ControlPlane::client`]. A failed start is remembered, so every test fails fast with the same
//! error instead of retrying; tests never skip when the control plane is missing.
//!
//! Binaries come from `PLACER_E2E_BIN_DIR` if set, else from `tests/cluster/build.sh` (a cache hit
//! after the first build; it prints the binary directory on its last stdout line).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, ensure};
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::ids::random_hex;
use super::pki;
use super::probe::{free_port, http_get, wait_ready, wait_ready_every};
use super::process::ChildProcess;
use super::workdir::{at_exit, run_dir};

/// How long the API server may take to report `/readyz` (it can exceed 30 s on a loaded 2-core box).
const APISERVER_READY_TIMEOUT: Duration = Duration::from_mins(2);
/// How long etcd may take to report `/readyz`.
const ETCD_READY_TIMEOUT: Duration = Duration::from_mins(1);

/// Directory holding `etcd`, `kube-apiserver` and `kube-scheduler`.
#[derive(Clone, Debug)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// `PLACER_E2E_BIN_DIR`, or the directory printed by `tests/cluster/build.sh`.
    fn locate() -> anyhow::Result<Self> {
        let dir = match std::env::var_os("PLACER_E2E_BIN_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => build_with_script("tests/cluster/build.sh")?,
        };
        let bins = Self { dir };
        for name in ["etcd", "kube-apiserver", "kube-scheduler"] {
            let path = bins.path(name);
            ensure!(
                path.is_file(),
                "control-plane binary {} is missing",
                path.display()
            );
        }
        Ok(bins)
    }

    /// Full path of the binary `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Runs the build script at `relative` (to the repository root; its stderr goes to the test
/// output) and returns the directory it prints on its last line.
pub(super) fn build_with_script(relative: &str) -> anyhow::Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let output = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("run {}", script.display()))?;
    ensure!(
        output.status.success(),
        "{} failed with {}",
        script.display(),
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    last.map(|l| PathBuf::from(l.trim()))
        .ok_or_else(|| anyhow!("{} printed no binary directory", script.display()))
}

/// How long each start-up phase took (measured by the test that started the control plane).
#[derive(Clone, Copy, Debug)]
pub struct StartTimings {
    /// Locating (or building) the binaries.
    pub binaries: Duration,
    /// etcd spawn until `/readyz` is 200.
    pub etcd: Duration,
    /// kube-apiserver spawn until `/readyz` is 200.
    pub apiserver: Duration,
}

/// What it takes to start the API server again on the same port and etcd.
struct ApiserverSpawn {
    pki: pki::Pki,
    tokens: PathBuf,
    etcd_port: u16,
    api_port: u16,
}

/// A running etcd + kube-apiserver pair and the files describing how to reach it.
pub struct ControlPlane {
    binaries: Binaries,
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    timings: StartTimings,
    etcd: ChildProcess,
    /// Behind a lock so [`ControlPlane::restart_apiserver`] can replace it.
    apiserver: Mutex<ChildProcess>,
    spawn: ApiserverSpawn,
}

/// The control plane shared by every test of this binary, started on first use.
pub async fn shared() -> anyhow::Result<&'static ControlPlane> {
    static SHARED: tokio::sync::OnceCell<Result<&'static ControlPlane, String>> =
        tokio::sync::OnceCell::const_new();
    let started = SHARED
        .get_or_init(|| async {
            match ControlPlane::start("cluster").await {
                Ok(cp) => {
                    let cp: &'static ControlPlane = Box::leak(Box::new(cp));
                    at_exit(move || cp.kill());
                    Ok(cp)
                }
                Err(e) => Err(format!("{e:#}")),
            }
        })
        .await;
    started
        .clone()
        .map_err(|e| anyhow!("the shared test control plane failed to start: {e}"))
}

/// A control plane of the caller's own, for a test that restarts the API server (which would
/// break every other test on the shared one). Killed at process exit, or earlier with
/// [`ControlPlane::kill`].
pub async fn private(name: &str) -> anyhow::Result<&'static ControlPlane> {
    let cp: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(name).await?));
    at_exit(move || cp.kill());
    Ok(cp)
}

impl ControlPlane {
    async fn start(name: &str) -> anyhow::Result<Self> {
        let t0 = Instant::now();
        let binaries = tokio::task::spawn_blocking(Binaries::locate).await??;
        let binaries_time = t0.elapsed();

        let dir = run_dir().join(name);
        fs::create_dir_all(&dir)?;
        let pki = pki::generate(&dir.join("pki"))?;
        let token = random_hex(16);
        let tokens = dir.join("tokens.csv");
        fs::write(
            &tokens,
            format!("{token},placer-e2e-admin,uid-placer-e2e-admin,\"system:masters\"\n"),
        )?;

        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("kubeconfig");
        fs::write(
            &kubeconfig,
            kubeconfig_yaml(&server, &pki.ca_cert, "admin", &token),
        )?;

        let etcd = spawn_etcd(&binaries, &dir, etcd_port, peer_port)?;
        let etcd_time = wait_ready(&etcd, &[], ETCD_READY_TIMEOUT, || async {
            Ok(http_get(etcd_port, "/readyz").await?.0 == 200)
        })
        .await?;

        let spawn = ApiserverSpawn {
            pki,
            tokens,
            etcd_port,
            api_port,
        };
        let apiserver = spawn_apiserver(&binaries, &dir, &spawn)?;
        let client = client_from(&kubeconfig).await?;
        let apiserver_time = wait_ready(&apiserver, &[&etcd], APISERVER_READY_TIMEOUT, || async {
            let request = http::Request::get("/readyz").body(Vec::new())?;
            Ok(client.request_text(request).await? == "ok")
        })
        .await?;

        let timings = StartTimings {
            binaries: binaries_time,
            etcd: etcd_time,
            apiserver: apiserver_time,
        };
        Ok(Self {
            binaries,
            dir,
            kubeconfig,
            server,
            timings,
            etcd,
            apiserver: Mutex::new(apiserver),
            spawn,
        })
    }

    fn apiserver(&self) -> MutexGuard<'_, ChildProcess> {
        self.apiserver
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kills kube-apiserver with SIGKILL (etcd and its data stay).
    pub fn kill_apiserver(&self) {
        self.apiserver().kill();
    }

    /// Starts kube-apiserver again on the same port and etcd, and waits (probing every 20 ms)
    /// until its `/readyz` says ok; returns the `Instant` it did.
    pub async fn start_apiserver(&self) -> anyhow::Result<Instant> {
        let process = spawn_apiserver(&self.binaries, &self.dir, &self.spawn)?;
        let client = self.client().await?;
        wait_ready_every(
            &process,
            &[&self.etcd],
            APISERVER_READY_TIMEOUT,
            Duration::from_millis(20),
            || async {
                let request = http::Request::get("/readyz").body(Vec::new())?;
                Ok(client.request_text(request).await? == "ok")
            },
        )
        .await?;
        let ready = Instant::now();
        *self.apiserver() = process;
        Ok(ready)
    }

    /// A new client with the admin identity (group `system:masters`), bound to the caller's runtime.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_from(&self.kubeconfig).await
    }

    /// The admin kubeconfig (token auth, CA file), also used by kube-scheduler and placer.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The control-plane binaries (kube-scheduler is started per test from here).
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// How long the start-up phases took.
    pub fn timings(&self) -> StartTimings {
        self.timings
    }

    /// Tails of the etcd and API server logs, for failure reports.
    pub fn log_tails(&self, lines: usize) -> String {
        self.apiserver().log_tail(lines) + &self.etcd.log_tail(lines)
    }

    /// The process ids of kube-apiserver and etcd (to read their CPU time and memory).
    pub fn pids(&self) -> (u32, u32) {
        (self.apiserver().pid(), self.etcd.pid())
    }

    /// The directory holding PKI, etcd data and logs of the control plane.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills both processes at once (at process exit, or when a private control plane's test
    /// ends: the data is thrown away anyway).
    pub fn kill(&self) {
        self.apiserver().kill();
        self.etcd.kill();
    }
}

async fn client_from(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// A kubeconfig for the test API server at `server` (CA file `ca`) as `user`
/// with bearer `token`.
pub fn kubeconfig_yaml(server: &str, ca: &Path, user: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: placer-e2e
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: placer-e2e
  context: {{cluster: placer-e2e, user: {user}}}
current-context: placer-e2e
",
        ca = ca.display()
    )
}

fn spawn_etcd(
    bins: &Binaries,
    dir: &Path,
    client_port: u16,
    peer_port: u16,
) -> anyhow::Result<ChildProcess> {
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let mut cmd = Command::new(bins.path("etcd"));
    cmd.args([
        "--name=placer-e2e".to_owned(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=placer-e2e={peer_url}"),
        "--unsafe-no-fsync".to_owned(),
        "--log-level=warn".to_owned(),
    ]);
    ChildProcess::spawn("etcd", cmd, &dir.join("etcd.log"))
}

fn spawn_apiserver(
    bins: &Binaries,
    dir: &Path,
    spawn: &ApiserverSpawn,
) -> anyhow::Result<ChildProcess> {
    let ApiserverSpawn {
        pki,
        tokens,
        etcd_port,
        api_port,
    } = spawn;
    let mut cmd = Command::new(bins.path("kube-apiserver"));
    cmd.args([
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={api_port}"),
        "--advertise-address=127.0.0.1".to_owned(),
        "--endpoint-reconciler-type=none".to_owned(),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        format!("--cert-dir={}", dir.join("pki").display()),
        format!("--token-auth-file={}", tokens.display()),
        format!("--client-ca-file={}", pki.ca_cert.display()),
        "--authorization-mode=RBAC".to_owned(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!("--service-account-key-file={}", pki.sa_pub.display()),
        format!(
            "--service-account-signing-key-file={}",
            pki.sa_key.display()
        ),
        "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".to_owned(),
        "--profiling=false".to_owned(),
        "--v=1".to_owned(),
    ]);
    ChildProcess::spawn("kube-apiserver", cmd, &dir.join("kube-apiserver.log"))
}
