//! kube-controller-manager from the same Go module as the other control-plane binaries, running
//! only the controllers a test needs: the PersistentVolume binder, what completes the bindings VolumeBinding's
//! PreBind starts (a static volume's `claimRef`, a claim's selected node), as in a real cluster;
//! the resourceclaim controller, what creates the claims of pods' ResourceClaimTemplates.

use std::process::Command;
use std::time::Duration;

use super::env::TestEnv;
use super::probe::{free_port, https_get_insecure, wait_ready};
use super::process::ChildProcess;

const READY_TIMEOUT: Duration = Duration::from_mins(1);

/// A running kube-controller-manager; stopped when dropped.
pub struct ControllerManager {
    _process: ChildProcess,
}

impl ControllerManager {
    /// Starts it on the test's control plane with the PV binder only (no leader election: the
    /// test owns its control plane) and waits for its `/healthz`.
    pub async fn start_pv_binder(env: &TestEnv) -> anyhow::Result<Self> {
        Self::start(env, "persistentvolume-binder").await
    }

    /// Starts it with the resourceclaim controller only: it creates the ResourceClaims of pods'
    /// claim templates and names them in the pods' `status.resourceClaimStatuses`, as in a real
    /// cluster (Dynamic Resource Allocation).
    pub async fn start_resource_claims(env: &TestEnv) -> anyhow::Result<Self> {
        Self::start(env, "resourceclaim-controller").await
    }

    /// Starts it with `controllers` (kube-controller-manager's `--controllers` list).
    async fn start(env: &TestEnv, controllers: &str) -> anyhow::Result<Self> {
        let log = env.dir().join("kube-controller-manager.log");
        env.register_log("kube-controller-manager", &log);
        let port = free_port();
        let mut cmd = Command::new(env.cluster().binaries().path("kube-controller-manager"));
        cmd.args([
            format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
            format!("--controllers={controllers}"),
            "--leader-elect=false".to_owned(),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", env.dir().join("kcm-pki").display()),
            "--v=2".to_owned(),
        ]);
        let process = ChildProcess::spawn("kube-controller-manager", cmd, &log)?;
        let base = format!("https://127.0.0.1:{port}");
        wait_ready(&process, &[], READY_TIMEOUT, || async {
            Ok(https_get_insecure(&base, "/healthz").await? == "ok")
        })
        .await?;
        Ok(Self { _process: process })
    }
}
