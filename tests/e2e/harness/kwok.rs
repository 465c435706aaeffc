//! kwok: the kubelets of fake nodes, so a large cluster behaves like a real one without any.
//!
//! kwok (built by `tests/cluster/build-kwok.sh`, or taken from `PLACER_E2E_KWOK_DIR`) manages the
//! nodes annotated [`KWOK_ANNOTATION`]`=fake` with the stages of `tests/cluster/kwok/stages.yaml`:
//! it makes them Ready, renews their Leases and heartbeats, runs their pods (Running and Ready as
//! soon as they are bound) and finishes their deletions. Nodes of other tests carry no annotation
//! and are left alone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::ensure;

use super::control_plane::build_with_script;
use super::env::TestEnv;
use super::probe::{free_port, http_get, wait_ready};
use super::process::ChildProcess;

/// The annotation marking a node as kwok's.
pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// How long kwok may take to serve `/healthz`.
const READY_TIMEOUT: Duration = Duration::from_mins(1);

/// A running kwok; stopped on drop.
pub struct Kwok {
    process: ChildProcess,
}

impl Kwok {
    /// Starts kwok against the shared control plane and waits until it serves `/healthz`.
    pub async fn start(env: &TestEnv) -> anyhow::Result<Self> {
        let dir = match std::env::var_os("PLACER_E2E_KWOK_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => {
                tokio::task::spawn_blocking(|| build_with_script("tests/cluster/build-kwok.sh"))
                    .await??
            }
        };
        let binary = dir.join("kwok");
        ensure!(
            binary.is_file(),
            "kwok binary {} is missing",
            binary.display()
        );
        let stages = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/kwok/stages.yaml");
        let port = free_port();
        let mut cmd = Command::new(binary);
        cmd.args([
            format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
            format!("--config={}", stages.display()),
            format!("--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake"),
            "--node-lease-duration-seconds=40".to_owned(),
            // Room for every pod IP of the largest run (10,000 pods).
            "--cidr=10.128.0.0/12".to_owned(),
            format!("--server-address=127.0.0.1:{port}"),
        ])
        // kwok reads ~/.kwok/kwok.yaml by default; keep it to the repo's file only.
        .env("HOME", env.dir())
        .env_remove("KUBECONFIG");
        let log = env.dir().join("kwok.log");
        env.register_log("kwok", &log);
        let process = ChildProcess::spawn("kwok", cmd, &log)?;
        wait_ready(&process, &[], READY_TIMEOUT, || async {
            Ok(http_get(port, "/healthz").await?.0 == 200)
        })
        .await?;
        Ok(Self { process })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}
