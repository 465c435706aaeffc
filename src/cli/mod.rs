//! The command line (SPEC §2): `serve`, `score`, `check-policy`, `--version`.

mod check_policy;
mod score;
mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::modes::Mode;
use crate::ops::telemetry::LogFormat;

pub use check_policy::check_policy;
pub use score::score;
pub use serve::serve;

/// placer: a Kubernetes scheduler extender and standalone scheduler.
#[derive(Debug, Parser)]
#[command(name = "placer", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (and, in standalone mode, the scheduler).
    Serve(ServeArgs),
    /// Explain offline how each node of a cluster file filters and scores for a pod.
    Score(ScoreArgs),
    /// Validate a policy file and print it with defaults filled in.
    CheckPolicy {
        /// The policy file.
        policy: PathBuf,
    },
}

/// Options of `placer serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Policy file (placer/v1alpha1 Policy).
    #[arg(long, env = "PLACER_POLICY", default_value = "policy.yaml")]
    pub policy: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "PLACER_LISTEN", default_value = "0.0.0.0:8888")]
    pub listen: SocketAddr,
    /// What to run.
    #[arg(long, value_enum, default_value = "extender")]
    pub mode: Mode,
    /// Kubeconfig to use (default: in-cluster, then KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Load nodes and pods once from this YAML/JSON file instead of an API server.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub snapshot: Option<PathBuf>,
    /// Mount the verbs under this prefix (kube-scheduler's urlPrefix path).
    #[arg(long, default_value = "")]
    pub path_prefix: String,
    /// Largest accepted request body in bytes (413 above).
    #[arg(long, default_value_t = 64 << 20)]
    pub max_body_bytes: usize,
    /// Server-side deadline per request in milliseconds; keep it below
    /// kube-scheduler's httpTimeout (default 5 s).
    #[arg(long, default_value_t = 4500)]
    pub request_timeout_ms: u64,
    /// Elect a leader through a Lease before scheduling (standalone mode).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (default: $POD_NAMESPACE, else "default").
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_elect_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "placer")]
    pub leader_elect_lease: String,
    /// Serve HTTPS with this certificate chain (PEM); reloaded when it changes.
    #[arg(long, requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key for --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Require client certificates signed by this CA (mutual TLS).
    #[arg(long, requires = "tls_cert_file")]
    pub client_ca_file: Option<PathBuf>,
    /// Do not watch the policy file for changes.
    #[arg(long)]
    pub no_policy_reload: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Do not prompt kube-scheduler to retry pods placer rejected from a view
    /// older than kube-scheduler's (prompts patch an annotation on the pod and
    /// need `pods` `patch`; see docs/freshness.md).
    #[arg(long)]
    pub no_retry_prompts: bool,
    /// Test only: apply each node and pod watch event this long after it
    /// arrived, so kube-scheduler always sees those changes first.
    #[arg(long, hide = true, default_value_t = 0)]
    pub debug_watch_event_delay_ms: u64,
}

/// Options of `placer score`.
#[derive(Debug, clap::Args)]
pub struct ScoreArgs {
    /// Policy file.
    #[arg(long, default_value = "policy.yaml")]
    pub policy: PathBuf,
    /// Nodes and pods (YAML/JSON, multi-document or v1.List).
    #[arg(long)]
    pub cluster: PathBuf,
    /// The pod to place (YAML/JSON).
    #[arg(long)]
    pub pod: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// Output of `placer score`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned text table.
    Table,
    /// The `/explain` JSON.
    Json,
}
