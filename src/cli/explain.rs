//! `placer explain`: why a pod is pending, or where it would go.
//!
//! - `placer explain NAMESPACE/NAME --server URL`: asks a running placer
//!   (`GET /explain/pods/...`), over HTTPS with `--ca-file`, sending the
//!   kubeconfig's credentials (bearer token, or client certificate), so the
//!   user's own RBAC decides what placer shows them (design §3.4), or
//!   `--client-cert-file`/`--client-key-file`;
//! - `placer explain NAMESPACE/NAME [--kubeconfig PATH] [--context NAME]`
//!   (or `NAME -n NAMESPACE`): lists the cluster once from the API server
//!   into a fresh cache and explains from it, with the policy from
//!   `--policy`, else `./policy.yaml`, else the ConfigMap the charts and
//!   manifests install (`--policy-configmap`, `placer-system/placer-policy`);
//!   as `kubectl placer explain ...` (the binary installed as
//!   `kubectl-placer`) this is kubectl's habit: the kubeconfig's current
//!   context and namespace;
//! - `placer explain --cluster FILE --pod FILE`: offline, as `placer score`.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use arc_swap::ArcSwap;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde::de::DeserializeOwned;

use super::{OutputFormat, ScoreArgs};
use crate::cache::{Cache, ClusterState, Stored, read_pod};
use crate::explain::{Diagnoses, Explainer, InTree, PendingPods, http, names};
use crate::objects::csi::{AttachmentInfo, CsiDriverInfo, CsiNodeInfo, StorageCapacityInfo};
use crate::objects::namespace::NamespaceInfo;
use crate::objects::volume::{ClaimInfo, StorageClassInfo, VolumeInfo};
use crate::objects::workload::{
    ReplicaSetSelector, ReplicationControllerSelector, ServiceSelector, StatefulSetSelector,
};
use crate::objects::{DisruptionBudget, NodeInfo, PodInfo};
use crate::policy::{self, CompiledPolicy};
use crate::state::Mode;

/// Options of `placer explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The live pod, as NAMESPACE/NAME, or NAME with --namespace (default:
    /// the kubeconfig context's namespace).
    #[arg(required_unless_present = "cluster", conflicts_with = "cluster")]
    pub target: Option<String>,
    /// The pod's namespace when the target is a bare NAME (kubectl's -n).
    #[arg(short = 'n', long, conflicts_with = "cluster")]
    pub namespace: Option<String>,
    /// The kubeconfig context to use (default: its current context), for
    /// the one-shot cache or, with --server, for the credentials sent.
    #[arg(long, conflicts_with = "cluster")]
    pub context: Option<String>,
    /// A running placer (https://host:port, or http://...); the
    /// kubeconfig's credentials go with the request (to HTTPS or loopback
    /// servers only).
    #[arg(long, conflicts_with = "cluster")]
    pub server: Option<String>,
    /// CA that signed the placer's certificate (--server https://...).
    #[arg(long, requires = "server")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate to present to placer instead of the kubeconfig's (PEM).
    #[arg(long, requires_all = ["server", "client_key_file"])]
    pub client_cert_file: Option<PathBuf>,
    /// Key of --client-cert-file (PEM).
    #[arg(long, requires = "client_cert_file")]
    pub client_key_file: Option<PathBuf>,
    /// Kubeconfig for the one-shot cache, or, with --server, whose user's
    /// token or certificate is sent to placer (default: KUBECONFIG, then
    /// ~/.kube/config, then in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Offline: nodes and pods (YAML/JSON), as `placer score`.
    #[arg(long, requires = "pod")]
    pub cluster: Option<PathBuf>,
    /// Offline: the pod to place (YAML/JSON).
    #[arg(long, requires = "cluster")]
    pub pod: Option<PathBuf>,
    /// Policy file (one-shot and offline; default: ./policy.yaml, and for the
    /// one-shot cache, when there is none, --policy-configmap).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// One-shot cache without a policy file: the ConfigMap (NAMESPACE/NAME,
    /// key policy.yaml) the running placer reads its policy from.
    #[arg(long, default_value = "placer-system/placer-policy")]
    pub policy_configmap: String,
    /// How placer runs, for the one-shot cache: extender (kube-scheduler's
    /// plugins, then placer's) or standalone (placer's profiles schedule).
    #[arg(long, value_enum, default_value = "extender")]
    pub mode: Mode,
    /// kube-scheduler's configuration, for the one-shot cache.
    #[arg(long, value_name = "FILE")]
    pub kube_scheduler_config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// Runs `placer explain`.
pub fn explain(args: ExplainArgs) -> anyhow::Result<()> {
    if let (Some(cluster), Some(pod)) = (&args.cluster, &args.pod) {
        return super::score(&ScoreArgs {
            policy: args.policy.clone().unwrap_or_else(default_policy),
            cluster: cluster.clone(),
            pod: pod.clone(),
            format: args.format,
        });
    }
    let Some(target) = &args.target else {
        bail!("give NAMESPACE/NAME, or --cluster FILE --pod FILE");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let out = runtime.block_on(async {
        match &args.server {
            Some(server) => {
                let fallback = args.namespace.as_deref().unwrap_or("default");
                let (namespace, name) = split_target(target, fallback)?;
                from_server(&args, server, namespace, name).await
            }
            None => {
                let client =
                    api_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
                let fallback = args
                    .namespace
                    .clone()
                    .unwrap_or_else(|| client.default_namespace().to_owned());
                let (namespace, name) = split_target(target, &fallback)?;
                one_shot(&args, client, namespace, name).await
            }
        }
    })?;
    print!("{out}");
    if !out.ends_with('\n') {
        println!();
    }
    Ok(())
}

/// The policy file used when none is named.
fn default_policy() -> PathBuf {
    PathBuf::from("policy.yaml")
}

/// `NAMESPACE/NAME`, or `NAME` in `namespace`, both checked as the API
/// server checks them.
fn split_target<'a>(target: &'a str, namespace: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    let (namespace, name) = target.split_once('/').unwrap_or((namespace, target));
    names::validate_namespace(namespace).map_err(anyhow::Error::msg)?;
    names::validate_pod_name(name).map_err(anyhow::Error::msg)?;
    Ok((namespace, name))
}

/// Asks a running placer.
async fn from_server(
    args: &ExplainArgs,
    server: &str,
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let url: axum::http::Uri = server
        .parse()
        .with_context(|| format!("--server {server:?}: not a URL"))?;
    let mut config = kube::Config::new(url.clone());
    if let Some(ca) = &args.ca_file {
        let certs = CertificateDer::pem_file_iter(ca)
            .and_then(|i| i.collect::<Result<Vec<_>, _>>())
            .map_err(|e| anyhow::anyhow!("--ca-file {}: {e}", ca.display()))?;
        config.root_cert = Some(certs.into_iter().map(|c| c.to_vec()).collect());
    }
    if credentials_may_go_to(&url) {
        config.auth_info = credentials(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    } else {
        eprintln!(
            "warning: {server} is plain HTTP and not on this host: the kubeconfig's credentials are not sent"
        );
    }
    if let (Some(cert), Some(key)) = (&args.client_cert_file, &args.client_key_file) {
        config.auth_info.client_certificate = Some(cert.display().to_string());
        config.auth_info.client_key = Some(key.display().to_string());
        config.auth_info.client_certificate_data = None;
        config.auth_info.client_key_data = None;
    }
    let presents_certificate = config.auth_info.client_certificate.is_some()
        || config.auth_info.client_certificate_data.is_some();
    let client = Client::try_from(config).context("building the HTTP client")?;
    let format = match args.format {
        OutputFormat::Table => "table",
        OutputFormat::Json => "json",
    };
    let request =
        axum::http::Request::get(format!("/explain/pods/{namespace}/{name}?format={format}"))
            .body(kube::client::Body::empty())
            .context("building the request")?;
    let response = client.send(request).await.with_context(|| {
        let hint = if presents_certificate {
            " (if placer refused the client certificate: its --client-ca-file must trust the CA that signed it; a kubeconfig with a token needs none)"
        } else {
            ""
        };
        format!("asking {server}{hint}")
    })?;
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .with_context(|| format!("reading the answer of {server}"))?
        .to_bytes();
    let body = String::from_utf8_lossy(&bytes).into_owned();
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["Error"].as_str().map(str::to_string))
            .unwrap_or(body);
        bail!("{server} answered {status}: {message}");
    }
    Ok(body)
}

/// Whether credentials may be sent to `url`: over HTTPS, or to this host
/// (`kubectl port-forward`), never in the clear across a network.
fn credentials_may_go_to(url: &axum::http::Uri) -> bool {
    if url.scheme_str() == Some("https") {
        return true;
    }
    match url.host() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// The credentials of the kubeconfig's user in `context` (else the current
/// one): token, token file, client certificate, exec or auth-provider
/// plugins, nothing else of it: not its server, CA, basic auth or
/// impersonation. No kubeconfig at all is no credentials, unless
/// `--kubeconfig` or `--context` named one.
async fn credentials(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::config::AuthInfo> {
    let config = match super::kube_config(kubeconfig, context).await {
        Ok(config) => config,
        Err(_) if kubeconfig.is_none() && context.is_none() => {
            return Ok(kube::config::AuthInfo::default());
        }
        Err(e) => return Err(e),
    };
    let user = config.auth_info;
    Ok(kube::config::AuthInfo {
        token: user.token,
        token_file: user.token_file,
        client_certificate: user.client_certificate,
        client_certificate_data: user.client_certificate_data,
        client_key: user.client_key,
        client_key_data: user.client_key_data,
        auth_provider: user.auth_provider,
        exec: user.exec,
        ..Default::default()
    })
}

/// The API client of `--kubeconfig` (else in-cluster, `KUBECONFIG`,
/// `~/.kube/config`, as kubectl looks), with `context` or the current one.
async fn api_client(kubeconfig: Option<&Path>, context: Option<&str>) -> anyhow::Result<Client> {
    Client::try_from(super::kube_config(kubeconfig, context).await?)
        .context("building the API client")
}

/// The policy of a one-shot explanation: `--policy`, else `./policy.yaml`,
/// else the ConfigMap the running placer reads (`--policy-configmap`).
async fn one_shot_policy(args: &ExplainArgs, client: &Client) -> anyhow::Result<policy::Policy> {
    let file = args.policy.clone().unwrap_or_else(default_policy);
    if args.policy.is_some() || file.exists() {
        return Ok(policy::load(&file)?);
    }
    let source = &args.policy_configmap;
    let Some((namespace, name)) = source.split_once('/') else {
        bail!("--policy-configmap {source:?}: expected NAMESPACE/NAME");
    };
    let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .with_context(|| {
            format!("no ./policy.yaml and no --policy; reading the policy from ConfigMap {source}")
        })?;
    let Some(text) = map.data.and_then(|mut d| d.remove("policy.yaml")) else {
        bail!("ConfigMap {source} has no key policy.yaml");
    };
    Ok(policy::parse(
        &text,
        &format!("ConfigMap {source} policy.yaml"),
    )?)
}

/// Lists the cluster once into a fresh cache and explains from it.
async fn one_shot(
    args: &ExplainArgs,
    client: Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let compiled = CompiledPolicy::new(one_shot_policy(args, &client).await?);
    let mut state = ClusterState::with_dimensions(&compiled.count_dimensions());
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing nodes")?;
    state.replace_nodes(nodes.items.iter().map(NodeInfo::from).collect());
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing pods")?;
    let (assigned, pending): (Vec<PodInfo>, Vec<PodInfo>) = pods
        .items
        .iter()
        .map(read_pod)
        .partition(|p| p.node_name.is_some());
    state.replace_pods(assigned);
    keyed::<PodDisruptionBudget, DisruptionBudget>(&client, &mut state, "poddisruptionbudgets")
        .await;
    keyed::<PersistentVolumeClaim, ClaimInfo>(&client, &mut state, "persistentvolumeclaims").await;
    keyed::<PersistentVolume, VolumeInfo>(&client, &mut state, "persistentvolumes").await;
    keyed::<StorageClass, StorageClassInfo>(&client, &mut state, "storageclasses").await;
    keyed::<CSINode, CsiNodeInfo>(&client, &mut state, "csinodes").await;
    keyed::<CSIDriver, CsiDriverInfo>(&client, &mut state, "csidrivers").await;
    keyed::<VolumeAttachment, AttachmentInfo>(&client, &mut state, "volumeattachments").await;
    keyed::<CSIStorageCapacity, StorageCapacityInfo>(&client, &mut state, "csistoragecapacities")
        .await;
    keyed::<Namespace, NamespaceInfo>(&client, &mut state, "namespaces").await;
    keyed::<Service, ServiceSelector>(&client, &mut state, "services").await;
    keyed::<ReplicationController, ReplicationControllerSelector>(
        &client,
        &mut state,
        "replicationcontrollers",
    )
    .await;
    keyed::<ReplicaSet, ReplicaSetSelector>(&client, &mut state, "replicasets").await;
    keyed::<StatefulSet, StatefulSetSelector>(&client, &mut state, "statefulsets").await;
    let in_tree = if args.mode.serves_verbs() {
        Some(Arc::new(match &args.kube_scheduler_config {
            Some(path) => InTree::from_file(path)?,
            None => InTree::defaults()?,
        }))
    } else {
        None
    };
    let explainer = Explainer {
        policy: Arc::new(ArcSwap::from_pointee(compiled)),
        cache: Arc::new(Cache::from_state(state)),
        mode: args.mode,
        pending: Arc::new(PendingPods::from_pods(pending)),
        in_tree,
        diagnoses: Arc::new(Diagnoses::new(0)),
        replica: Default::default(),
    };
    let Some(pod) = explainer.find(namespace, name) else {
        bail!("pod {namespace}/{name} not found");
    };
    let answer = explainer.explain(pod).map_err(anyhow::Error::msg)?;
    Ok(match args.format {
        OutputFormat::Table => http::text(&answer),
        OutputFormat::Json => serde_json::to_string_pretty(&http::json(&answer))
            .context("encoding the explanation")?,
    })
}

/// Lists one kind into its store; a kind that cannot be listed (RBAC, an
/// API the cluster does not serve) is reported and left empty, as a watch
/// that has not synced would leave it.
async fn keyed<K, R>(client: &Client, state: &mut ClusterState, plural: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    R: Stored + for<'a> From<&'a K>,
{
    match Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => state
            .objects_mut::<R>()
            .replace(list.items.iter().map(R::from).collect()),
        Err(e) => eprintln!("warning: listing {plural}: {e}; explaining without them"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_over_https_or_to_this_host_only() {
        for (url, ok) in [
            ("https://placer.placer-system.svc:8443", true),
            ("http://localhost:8888", true),
            ("http://127.0.0.1:8888", true),
            ("http://[::1]:8888", true),
            ("http://placer.placer-system.svc:8888", false),
            ("http://10.0.0.7:8888", false),
        ] {
            let uri: axum::http::Uri = url.parse().unwrap();
            assert_eq!(credentials_may_go_to(&uri), ok, "{url}");
        }
    }

    #[tokio::test]
    async fn only_the_users_credentials_are_taken_from_the_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]
users: [{name: u, user: {token: abc, as: someone-else}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
",
        )
        .unwrap();
        let user = credentials(Some(&path), None).await.unwrap();
        assert!(user.token.is_some());
        assert_eq!(user.impersonate, None);
        let e = credentials(Some(&dir.path().join("missing")), None)
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("reading kubeconfig"), "{e:#}");
    }

    #[test]
    fn targets_are_namespace_slash_name_checked_by_part() {
        assert_eq!(
            split_target("default/web-0", "x").unwrap(),
            ("default", "web-0")
        );
        assert_eq!(split_target("web-0", "shop").unwrap(), ("shop", "web-0"));
        let e = split_target("Default/web", "x").unwrap_err().to_string();
        assert!(e.starts_with("namespace \"Default\""), "{e}");
        let e = split_target("default/a/b", "x").unwrap_err().to_string();
        assert!(e.starts_with("name \"a/b\""), "{e}");
        let e = split_target("web-0", "Bad_NS").unwrap_err().to_string();
        assert!(e.starts_with("namespace \"Bad_NS\""), "{e}");
    }

    #[test]
    fn as_a_kubectl_plugin_usage_says_kubectl_placer() {
        use clap::CommandFactory as _;
        let help = super::super::Cli::command()
            .name(super::super::KUBECTL_PLUGIN)
            .bin_name("kubectl placer")
            .render_usage()
            .to_string();
        assert!(help.contains("kubectl placer"), "{help}");
    }
}
