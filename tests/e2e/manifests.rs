//! The deployment manifests are accepted by a real API server.

use std::path::Path;

use crate::harness::{TestEnv, manifests};

/// Every document under `manifests/` passes server-side apply in dry-run mode.
#[tokio::test]
async fn manifests_pass_server_side_dry_run() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let set = manifests::load(&root)?;
    let env = TestEnv::new("manifests").await?;

    let failures = manifests::dry_run_apply(env.client(), &set).await?;

    eprintln!(
        "manifests: {} objects, {} kustomizations, skipped (generator inputs/patches): {:?}",
        set.docs.len(),
        set.kustomizations.len(),
        set.skipped
    );
    assert!(
        failures.is_empty(),
        "rejected by the API server:\n{}",
        failures.join("\n")
    );
    Ok(())
}

/// The mutual-TLS Component (`manifests/mtls/`, the README's "Security" setup), used as the
/// README says (with `manifests` and `manifests/scheduler` as resources), renders with kubectl's
/// kustomize to objects the API server accepts, with placer serving HTTPS to HTTPS probes and
/// kube-scheduler presenting its certificate.
#[tokio::test]
async fn the_mtls_component_renders_and_passes_server_side_dry_run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::os::unix::fs::symlink(env!("CARGO_MANIFEST_DIR"), dir.path().join("repo"))?;
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources: [repo/manifests, repo/manifests/scheduler]\ncomponents: [repo/manifests/mtls]\n",
    )?;
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .map_err(|e| anyhow::anyhow!("running kubectl (the machine image ships it): {e}"))?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = String::from_utf8(out.stdout)?;
    let set = manifests::from_rendered(&rendered, &dir.path().join("kustomization.yaml"))?;
    let find = |kind: &str, name: &str| {
        set.docs
            .iter()
            .find(|d| d.object["kind"] == kind && d.object["metadata"]["name"] == name)
            .map(|d| d.object.clone())
            .ok_or_else(|| anyhow::anyhow!("no {kind} {name} rendered"))
    };
    let placer = find("Deployment", "placer")?;
    let container = &placer["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .collect();
    for flag in [
        "--tls-cert-file",
        "--client-ca-file",
        "--verbs-allowed-names",
    ] {
        assert!(args.contains(&flag), "{flag} missing: {args:?}");
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    let config = find("ConfigMap", "placer-kube-scheduler-config")?;
    let config = config["data"]["config.yaml"].as_str().unwrap_or_default();
    for needle in [
        "urlPrefix: https://",
        "enableHTTPS: true",
        "certFile: /etc/placer-tls/client.crt",
    ] {
        assert!(config.contains(needle), "{needle} missing:\n{config}");
    }

    let env = TestEnv::new("manifests-mtls").await?;
    let failures = manifests::dry_run_apply(env.client(), &set).await?;
    assert!(
        failures.is_empty(),
        "rejected by the API server:\n{}",
        failures.join("\n")
    );
    Ok(())
}
