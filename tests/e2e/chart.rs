//! The Helm chart (`charts/placer`) as the API server sees it: rendered by helm for each mode with
//! every optional part on, every object passes server-side apply in dry-run mode. (That its
//! alerts and dashboard read only metrics placer exports is a unit test of `src/metrics.rs`.)
//!
//! The optional objects' kinds are not served by a bare API server, so their CRDs are installed
//! first, from the pinned modules `tests/cluster/build-helm.sh` copies them from
//! (prometheus-operator's ServiceMonitor and PrometheusRule, cert-manager's Certificate): the dry
//! run then checks those objects against the real schemas. `PLACER_E2E_HELM_DIR` names the
//! directory of `helm` and `crds/` (default: run the script, which reuses its cache).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Deserialize as _;
use serde_json::Value;

use crate::harness::TestEnv;
use crate::harness::manifests::{ManifestDoc, ManifestSet, dry_run_apply};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory with `helm` and `crds/`.
pub(super) fn helm_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PLACER_E2E_HELM_DIR") {
        return Ok(dir.into());
    }
    let out = Command::new("bash")
        .arg(repo().join("tests/cluster/build-helm.sh"))
        .output()
        .context("run tests/cluster/build-helm.sh")?;
    ensure!(
        out.status.success(),
        "build-helm.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    Ok(text.lines().last().unwrap_or_default().trim().into())
}

/// Every optional part on: TLS from cert-manager with client certificates, the second
/// kube-scheduler, the NetworkPolicy, RBAC for `--explain-pods` and for delegated
/// authentication, and all of monitoring.
const EVERYTHING: &[&str] = &[
    "tls.enabled=true",
    "tls.certManager.enabled=true",
    "tls.certManager.issuerRef.name=placer-ca",
    "tls.clientCA.enabled=true",
    "scheduler.enabled=true",
    "networkPolicy.enabled=true",
    "networkPolicy.schedulerPeers[0].ipBlock.cidr=10.0.0.0/24",
    "rbac.explainPods=true",
    "rbac.authDelegation=true",
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.dashboard.enabled=true",
];

/// `helm template` of the chart as release `release` in `namespace` with `sets`; the documents.
pub(super) fn render(
    helm: &Path,
    release: &str,
    namespace: &str,
    sets: &[String],
) -> anyhow::Result<Vec<Value>> {
    render_with(helm, release, namespace, sets, &[])
}

/// [`render`] with more `helm template` arguments, e.g. `--dry-run=server` and `--kubeconfig`
/// so that the chart's `lookup` sees a cluster.
pub(super) fn render_with(
    helm: &Path,
    release: &str,
    namespace: &str,
    sets: &[String],
    extra: &[&std::ffi::OsStr],
) -> anyhow::Result<Vec<Value>> {
    let mut cmd = Command::new(helm);
    cmd.args(["template", release])
        .arg(repo().join("charts/placer"))
        .args(["--namespace", namespace])
        .args(extra);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().context("run helm template")?;
    ensure!(
        out.status.success(),
        "helm template {release}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = Value::deserialize(doc)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// Installs (server-side apply, for real) the CRDs in `dir` and waits until they are served.
async fn install_crds(client: &kube::Client, dir: &Path) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in ["servicemonitors", "prometheusrules", "certificates"] {
        let path = dir.join(format!("{file}.yaml"));
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let crd: CustomResourceDefinition =
            serde_yaml_ng::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply("placer-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("install CRD {name}"))?;
        let established = kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .with_context(|| format!("CRD {name} not established in 30 s"))??;
    }
    Ok(())
}

/// For each mode, the chart with every optional part on passes the API server's dry run.
#[tokio::test]
async fn chart_passes_server_side_dry_run_in_every_mode() -> anyhow::Result<()> {
    let env = TestEnv::new("chart").await?;
    let dir = helm_dir()?;
    install_crds(env.client(), &dir.join("crds")).await?;
    // Discovery is cached by the API server's aggregator for a moment after a CRD appears.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for mode in ["extender", "standalone", "both"] {
        let mut sets = vec![format!("mode={mode}")];
        sets.extend(EVERYTHING.iter().map(|s| (*s).to_owned()));
        let release = format!("placer-{mode}");
        let docs = render(&dir.join("helm"), &release, env.namespace(), &sets)?;
        let kinds: BTreeSet<String> = docs
            .iter()
            .filter_map(|d| d["kind"].as_str().map(str::to_owned))
            .collect();
        for kind in [
            "Certificate",
            "NetworkPolicy",
            "ServiceMonitor",
            "PrometheusRule",
            "PodDisruptionBudget",
        ] {
            ensure!(
                kinds.contains(kind),
                "{mode}: no {kind} rendered: {kinds:?}"
            );
        }
        let set = ManifestSet {
            docs: docs
                .into_iter()
                .enumerate()
                .map(|(index, object)| ManifestDoc {
                    file: PathBuf::from(format!("helm template ({mode})")),
                    index,
                    object,
                    default_namespace: env.namespace().to_owned(),
                })
                .collect(),
            ..ManifestSet::default()
        };
        let failures = dry_run_apply(env.client(), &set).await?;
        eprintln!(
            "chart, mode {mode}: {} objects ({})",
            set.docs.len(),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
        assert!(
            failures.is_empty(),
            "{mode}: rejected by the API server:\n{}",
            failures.join("\n")
        );
    }
    Ok(())
}

/// The leader-election flags each mode and `leaderElection.enabled` render: placer elects by
/// default, so `enabled: false` must say `--leader-elect=false`, and extender mode, which does
/// not schedule, passes none (nor gets a Lease Role).
#[test]
fn leader_election_flags_follow_the_values() -> anyhow::Result<()> {
    let helm = helm_dir()?.join("helm");
    for (mode, enabled, flag) in [
        ("standalone", true, Some("--leader-elect")),
        ("standalone", false, Some("--leader-elect=false")),
        ("both", true, Some("--leader-elect")),
        ("both", false, Some("--leader-elect=false")),
        ("extender", true, None),
        ("extender", false, None),
    ] {
        let sets = [
            format!("mode={mode}"),
            format!("leaderElection.enabled={enabled}"),
        ];
        let docs = render(&helm, "placer", "placer-system", &sets)?;
        let args: Vec<&str> = docs
            .iter()
            .filter(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "placer")
            .filter_map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].as_array())
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        ensure!(!args.is_empty(), "{mode}: no placer Deployment rendered");
        let election: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| *a == "--leader-elect" || a.starts_with("--leader-elect="))
            .collect();
        assert_eq!(
            election,
            flag.into_iter().collect::<Vec<_>>(),
            "mode {mode}, enabled {enabled}: {args:?}"
        );
        let lease_role = docs.iter().any(|d| {
            d["kind"] == "Role"
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-leader-election"))
        });
        assert_eq!(
            lease_role,
            flag == Some("--leader-elect"),
            "mode {mode}, enabled {enabled}: a Lease Role only when electing"
        );
    }
    Ok(())
}
