//! A plain install of the chart, run for real: what `helm install` with no values gives is closed.
//!
//! There is no kubelet here, so the chart's pods cannot run as pods. The test does what they
//! would do instead: it applies the chart's Secrets and policy ConfigMap to the API server, runs
//! placer with the rendered Deployment's arguments (mount paths mapped to files written from the
//! Secrets as the API server returns them) under a ServiceAccount holding exactly the chart's
//! ClusterRole rules, delegating reads as it does in a pod, and runs stock kube-scheduler with
//! the chart's KubeSchedulerConfiguration (its client certificate from the chart's Secret). Then:
//!
//! - the chart's kube-scheduler schedules through placer with that certificate;
//! - a pod's ServiceAccount token without RBAC cannot `/bind` a pending pod of another namespace
//!   (and the pod stays unbound), nor read `/metrics`; the health paths answer it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::chart::{helm_dir, render, render_with};
use crate::harness::{Caller, Placer, Scheduler, TestEnv};

/// The release name; placer's Service is then `placer.<namespace>.svc`.
const RELEASE: &str = "placer";
/// The chart's default CapabilityFilter rule (files/policy-extender.yaml).
const HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";
const HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";

/// The rendered document of `kind` named `name`.
fn doc<'a>(docs: &'a [Value], kind: &str, name: &str) -> anyhow::Result<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .with_context(|| format!("no {kind} {name} rendered"))
}

/// The rendered placer container's arguments.
fn placer_args(docs: &[Value]) -> anyhow::Result<Vec<String>> {
    let deployment = doc(docs, "Deployment", RELEASE)?;
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .context("placer's container has no args")?;
    Ok(args
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect())
}

/// With no values at all, the chart renders a closed install: HTTPS with a generated CA and
/// kube-scheduler's client certificate, the verbs limited to that certificate's name, and a
/// NetworkPolicy that lets nobody in (no peer is named).
#[tokio::test]
async fn no_values_render_a_closed_install() -> anyhow::Result<()> {
    let dir = helm_dir()?;
    let docs = render(&dir.join("helm"), RELEASE, "placer-system", &[])?;
    let serving = doc(&docs, "Secret", "placer-tls")?;
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        ensure!(
            serving["data"][key].as_str().is_some_and(|v| !v.is_empty()),
            "placer-tls has no {key}"
        );
    }
    let client = doc(&docs, "Secret", "placer-scheduler-client")?;
    ensure!(
        client["data"]["ca.crt"] == serving["data"]["ca.crt"],
        "the client certificate's CA is not the serving Secret's"
    );
    let args = placer_args(&docs)?;
    for want in [
        "--tls-cert-file=/etc/placer-tls/tls.crt",
        "--client-ca-file=/etc/placer-client-ca/ca.crt",
        "--verbs-allowed-names=placer-kube-scheduler",
    ] {
        ensure!(args.iter().any(|a| a == want), "no {want} in {args:?}");
    }
    let policy = doc(&docs, "NetworkPolicy", RELEASE)?;
    assert_eq!(policy["spec"]["ingress"], json!([]), "{policy}");
    Ok(())
}

/// The generated certificates are kept across upgrades (the chart looks its Secrets up) and
/// renewed with `tls.generated.rotate=true`; NOTES.txt warns when TLS, client certificates or the
/// NetworkPolicy are turned off, and only then.
#[tokio::test]
async fn generated_certificates_survive_upgrades_and_notes_warn_when_opened() -> anyhow::Result<()>
{
    let env = TestEnv::new("chart-upgrade").await?;
    let helm = helm_dir()?.join("helm");
    let kubeconfig = env.cluster().kubeconfig().as_os_str().to_owned();
    let server: Vec<&std::ffi::OsStr> = vec![
        "--dry-run=server".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ];
    let first = render(&helm, RELEASE, env.namespace(), &[])?;
    let secrets: Api<Secret> = Api::namespaced(env.client().clone(), env.namespace());
    for name in ["placer-tls", "placer-scheduler-client"] {
        apply(&secrets, doc(&first, "Secret", name)?).await?;
    }
    let upgrade = render_with(&helm, RELEASE, env.namespace(), &[], &server)?;
    for name in ["placer-tls", "placer-scheduler-client"] {
        assert_eq!(
            doc(&upgrade, "Secret", name)?["data"],
            doc(&first, "Secret", name)?["data"],
            "{name} changed on an upgrade"
        );
    }
    let rotate = ["tls.generated.rotate=true".to_owned()];
    let rotated = render_with(&helm, RELEASE, env.namespace(), &rotate, &server)?;
    let ca =
        |docs: &[Value]| doc(docs, "Secret", "placer-tls").map(|d| d["data"]["ca.crt"].clone());
    ensure!(ca(&rotated)? != ca(&first)?, "rotate=true kept the old CA");
    let annotation = |docs: &[Value]| {
        doc(docs, "Deployment", RELEASE)
            .map(|d| d["spec"]["template"]["metadata"]["annotations"]["checksum/placer-ca"].clone())
    };
    ensure!(
        annotation(&rotated)? != annotation(&upgrade)?,
        "a rotation does not roll placer"
    );

    // NOTES.txt, as `helm install` prints it (a client-side dry run still asks the cluster's
    // version and for objects it would take over, hence the kubeconfig and a namespace of its own).
    let namespace = env.name("notes");
    let notes = |sets: &[&str]| -> anyhow::Result<String> {
        let mut cmd = std::process::Command::new(&helm);
        cmd.args(["install", "--dry-run=client", RELEASE])
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/placer"))
            .args(["--namespace", &namespace, "--kubeconfig"])
            .arg(&kubeconfig);
        for set in sets {
            cmd.args(["--set", set]);
        }
        let out = cmd.output().context("run helm install --dry-run")?;
        ensure!(
            out.status.success(),
            "helm install --dry-run: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout)?;
        Ok(text
            .split_once("NOTES:")
            .map(|(_, notes)| notes.to_owned())
            .unwrap_or_default())
    };
    let closed = notes(&[])?;
    ensure!(
        closed.contains("What this install gives you"),
        "no NOTES: {closed}"
    );
    ensure!(
        !closed.contains("WARNING"),
        "a plain install warns: {closed}"
    );
    for (set, says) in [
        ("tls.enabled=false", "tls.enabled=false"),
        ("tls.clientCA.enabled=false", "tls.clientCA.enabled=false"),
        ("networkPolicy.enabled=false", "networkPolicy.enabled=false"),
    ] {
        let text = notes(&[set])?;
        ensure!(
            text.contains("WARNING: this install is not closed by default") && text.contains(says),
            "--set {set}: no warning naming it: {text}"
        );
    }
    Ok(())
}

/// Server-side applies `object` (a rendered document) in `namespace`.
async fn apply<K>(api: &Api<K>, object: &Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply("placer-e2e").force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("apply {} {name}", object["kind"]))?;
    Ok(())
}

/// Writes the Secret `name`, read back from the API server, into `dir` as a volume mounts it.
async fn mount_secret(secrets: &Api<Secret>, name: &str, dir: &Path) -> anyhow::Result<()> {
    let secret = secrets
        .get(name)
        .await
        .with_context(|| format!("get {name}"))?;
    std::fs::create_dir_all(dir)?;
    for (key, value) in secret.data.unwrap_or_default() {
        std::fs::write(dir.join(&key), &value.0)?;
    }
    Ok(())
}

/// Rewrites the chart's mount paths in `text` to the test's directories.
fn remount(text: &str, mounts: &BTreeMap<&str, PathBuf>) -> String {
    mounts.iter().fold(text.to_owned(), |text, (from, to)| {
        text.replace(from, &format!("{}/", to.display()))
    })
}

/// The chart's kube-scheduler schedules through the chart's placer with its client certificate;
/// a token without RBAC can neither bind another namespace's pending pod nor read `/metrics`.
#[tokio::test]
async fn a_plain_install_schedules_through_placer_and_refuses_strangers() -> anyhow::Result<()> {
    let env = TestEnv::new("chart-install").await?;
    let nodes = env
        .create_nodes([env.node("hw").label(HW_LABEL, "true"), env.node("plain")])
        .await?;
    let scheduler_name = env.scheduler_name();
    let dir = helm_dir()?;
    let docs = render(
        &dir.join("helm"),
        RELEASE,
        env.namespace(),
        &[
            "scheduler.enabled=true".to_owned(),
            format!("scheduler.schedulerName={scheduler_name}"),
        ],
    )?;

    // What the chart would create, for real.
    let secrets: Api<Secret> = Api::namespaced(env.client().clone(), env.namespace());
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client().clone(), env.namespace());
    for name in ["placer-tls", "placer-scheduler-client"] {
        apply(&secrets, doc(&docs, "Secret", name)?).await?;
    }
    let policy_map = doc(&docs, "ConfigMap", "placer-policy")?;
    apply(&configmaps, policy_map).await?;
    let scheduler_map = doc(&docs, "ConfigMap", "placer-kube-scheduler-config")?;
    apply(&configmaps, scheduler_map).await?;
    let rules = doc(&docs, "ClusterRole", RELEASE)?["rules"].clone();
    let (placer_kubeconfig, _) = env.restricted_identity("placer", rules).await?;

    // The volumes, as the kubelet would mount them.
    let volumes = env.dir().join("chart-volumes");
    let mut placer_mounts = BTreeMap::new();
    placer_mounts.insert("/etc/placer-tls/", volumes.join("placer-tls"));
    placer_mounts.insert("/etc/placer-client-ca/", volumes.join("placer-client-ca"));
    mount_secret(&secrets, "placer-tls", &placer_mounts["/etc/placer-tls/"]).await?;
    mount_secret(
        &secrets,
        "placer-tls",
        &placer_mounts["/etc/placer-client-ca/"],
    )
    .await?;
    let mut scheduler_mounts = BTreeMap::new();
    scheduler_mounts.insert("/etc/placer-tls/", volumes.join("scheduler-client"));
    mount_secret(
        &secrets,
        "placer-scheduler-client",
        &scheduler_mounts["/etc/placer-tls/"],
    )
    .await?;
    let policy = configmaps
        .get("placer-policy")
        .await?
        .data
        .and_then(|d| d.get("policy.yaml").cloned())
        .context("the policy ConfigMap has no policy.yaml")?;
    ensure!(
        policy.contains(&format!("schedulerNames: [{scheduler_name}]")),
        "the chart's policy does not name its kube-scheduler: {policy}"
    );

    // placer with the Deployment's arguments; the harness sets --mode, --policy, --listen and
    // --kubeconfig, and in a pod delegation would use the in-cluster identity.
    let mut args: Vec<String> = placer_args(&docs)?
        .iter()
        .filter(|a| {
            !(*a == "serve"
                || a.starts_with("--mode=")
                || a.starts_with("--policy=")
                || a.starts_with("--listen="))
        })
        .map(|a| remount(a, &placer_mounts))
        .collect();
    for flag in ["--authentication-kubeconfig", "--authorization-kubeconfig"] {
        args.push(format!("{flag}={}", placer_kubeconfig.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let placer = Placer::start_as(
        &env,
        &policy,
        "placer",
        "extender",
        &args,
        &placer_kubeconfig,
    )
    .await?;

    // The chart's kube-scheduler: its configuration, with the Service's URL on 127.0.0.1 (the
    // certificate is still checked against the Service's name, its tlsConfig.serverName) and the
    // test's kubeconfig instead of the in-cluster one.
    let text = scheduler_map["data"]["config.yaml"]
        .as_str()
        .context("the scheduler ConfigMap has no config.yaml")?;
    let mut config: Value = serde_yaml_ng::from_str(&remount(text, &scheduler_mounts))?;
    config["leaderElection"] = json!({ "leaderElect": false });
    config["clientConnection"] = json!({ "kubeconfig": env.cluster().kubeconfig() });
    let extender = &mut config["extenders"][0];
    let server_name = extender["tlsConfig"]["serverName"]
        .as_str()
        .context("the extender's tlsConfig has no serverName")?
        .to_owned();
    extender["urlPrefix"] = json!(placer.url());
    ensure!(
        extender["tlsConfig"]["certFile"].is_string(),
        "the chart's kube-scheduler presents no client certificate: {extender}"
    );
    let _scheduler = Scheduler::start_with_yaml(&env, &serde_yaml_ng::to_string(&config)?).await?;

    for i in 0..2 {
        env.create_pod(
            &env.pod(&format!("secure-{i}"))
                .annotation(HW_ANNOTATION, "true"),
        )
        .await?;
    }
    for i in 0..2 {
        let name = format!("secure-{i}");
        assert_eq!(
            env.wait_pod_bound(&name).await?,
            nodes[0],
            "{name}: placer's filter"
        );
    }

    // A stranger: a ServiceAccount token without RBAC, trusting placer's CA (as a pod could
    // read it from a Secret it is allowed to), and a pending pod of another namespace.
    let (_, token) = env.restricted_identity("stranger", json!([])).await?;
    let other = env.name("other");
    env.create_namespace(&other).await?;
    let pods: Api<Pod> = Api::namespaced(env.client().clone(), &other);
    let victim = env.pod("victim").scheduler("nobody-schedules-this").build();
    let victim = pods
        .create(&kube::api::PostParams::default(), &victim)
        .await
        .context("create the victim pod")?;
    let uid = victim.metadata.uid.clone().unwrap_or_default();
    let ca = placer_mounts["/etc/placer-tls/"].join("ca.crt");
    let stranger = Caller::anonymous(Some(&ca))
        .with_server_name(&server_name)
        .with_token(&token);
    let bind =
        json!({ "PodName": "victim", "PodNamespace": other, "PodUID": uid, "Node": nodes[1] });
    let (code, body) = stranger
        .request(&placer.url(), "POST", "/bind", &bind.to_string())
        .await?;
    assert_eq!(
        code, 403,
        "/bind without kube-scheduler's certificate: {body}"
    );
    let (code, body) = stranger
        .request(&placer.url(), "GET", "/metrics", "")
        .await?;
    assert_eq!(code, 403, "/metrics for a token without RBAC: {body}");
    let (code, body) = stranger
        .request(&placer.url(), "GET", "/healthz", "")
        .await?;
    assert_eq!(code, 200, "/healthz: {body}");
    // Had a Binding gone out, the pod would show it by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = pods.get("victim").await?;
    assert_eq!(
        victim.spec.and_then(|s| s.node_name),
        None,
        "the stranger's /bind bound the pod"
    );
    Ok(())
}
