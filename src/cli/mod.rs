//! The command line (design §2): `serve`, `explain`, `score`, `simulate`, `check-policy`, `--version`.

mod check_policy;
mod explain;
mod score;
mod serve;
mod simulate;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::framework::parse_go_duration;
use crate::ops::telemetry::LogFormat;
use crate::state::Mode;

pub use check_policy::check_policy;
pub use explain::{ExplainArgs, explain};
pub use score::score;
pub use serve::serve;
pub use simulate::{SimulateArgs, simulate, simulate_to_string};

/// The error and its causes joined with ": ", as anyhow's `{:#}` prints
/// them, minus any cause whose text already ends the message: many error
/// types (kube's kubeconfig errors, for one) print their source in their own
/// text and also return it from `source()`, which showed an OS error twice.
pub fn error_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.ends_with(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

/// The API server's configuration from `kubeconfig` (else in-cluster,
/// `KUBECONFIG`, `~/.kube/config`, as kubectl looks), with `context` or the
/// kubeconfig's current one.
async fn kube_config(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    use anyhow::Context as _;
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))
        }
        (None, Some(context)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("using context {context:?} of the kubeconfig")),
        (None, None) => kube::Config::infer()
            .await
            .context("finding cluster credentials (in-cluster, KUBECONFIG, ~/.kube/config)"),
    }
}

/// `--version`: the crate's version and the commit it was built from
/// (`build.rs`; "unknown" without one).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("PLACER_GIT_COMMIT"),
    ")"
);

/// The name the binary has when kubectl runs it as a plugin: installed (or
/// symlinked) as `kubectl-placer` on the PATH, `kubectl placer explain
/// ns/pod` runs `kubectl-placer explain ns/pod`, as krew plugins are run.
pub const KUBECTL_PLUGIN: &str = "kubectl-placer";

/// Parses the command line; as a kubectl plugin (the binary's name is
/// [`KUBECTL_PLUGIN`]), usage and errors say `kubectl placer`. Exits with
/// clap's message and status 2 on a usage error.
pub fn parse() -> Cli {
    let invoked_as = std::env::args_os().next().unwrap_or_default();
    let plugin = std::path::Path::new(&invoked_as)
        .file_stem()
        .is_some_and(|name| name == KUBECTL_PLUGIN);
    if !plugin {
        return Cli::parse();
    }
    use clap::{CommandFactory as _, FromArgMatches as _};
    let mut matches = Cli::command()
        .name(KUBECTL_PLUGIN)
        .bin_name("kubectl placer")
        .get_matches();
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.exit())
}

/// placer: a Kubernetes scheduler extender and standalone scheduler.
#[derive(Debug, Parser)]
#[command(name = "placer", version = VERSION, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once at start-up: the size of `ServeArgs` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (and, in standalone mode, the scheduler).
    Serve(ServeArgs),
    /// Why a live pod is pending, or where it would go: from a running placer
    /// (--server), a one-shot cache of the API server, or files (--cluster --pod).
    Explain(ExplainArgs),
    /// Explain offline how each node of a cluster file filters and scores for
    /// a pod (the same as `explain --cluster FILE --pod FILE`).
    Score(ScoreArgs),
    /// Replay a workload on a cluster file through standalone mode's
    /// scheduler, offline: where each pod goes, or why it stays pending.
    Simulate(SimulateArgs),
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
    /// Mount the verbs under this prefix (kube-scheduler's urlPrefix path):
    /// "/" then letters, digits and -._~ in segments separated by single
    /// "/"; a trailing "/" is dropped.
    #[arg(long, default_value = "", value_parser = parse_path_prefix)]
    pub path_prefix: String,
    /// Largest accepted request body in bytes (413 above).
    #[arg(long, default_value_t = 64 << 20)]
    pub max_body_bytes: usize,
    /// Server-side deadline per request in milliseconds; keep it below
    /// kube-scheduler's httpTimeout (default 5 s).
    #[arg(long, default_value_t = 4500)]
    pub request_timeout_ms: u64,
    /// Seconds from accepting a connection (TLS handshake included), or from
    /// the first byte after an idle spell, to a complete request head;
    /// slower clients are disconnected.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_read_timeout_seconds: u64,
    /// Seconds an idle keep-alive connection stays open; keep it above
    /// kube-scheduler's idle-connection timeout (Go's default: 90 s).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub idle_timeout_seconds: u64,
    /// Connections open at once; more get 503 (HTTP) or are closed (HTTPS).
    /// Lowered at start-up if the open-file limit is smaller.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Threads serving HTTP, each with the connections it accepted. One
    /// serves kube-scheduler, which calls an extender one request at a
    /// time, with the least CPU; more let slow requests on one connection
    /// (`/explain`, large bodies) not delay another's.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub http_threads: u64,
    /// Seconds shutdown waits for open requests (and, in standalone mode,
    /// binds) before closing the remaining connections.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_drain_seconds: u64,
    /// Seconds between SIGTERM and the drain: /readyz answers 503 at once
    /// while requests are still answered, so the Service's endpoints (and
    /// every node's kube-proxy) drop this replica before it stops accepting
    /// (kube-apiserver's --shutdown-delay-duration). In standalone mode the
    /// Lease is released at the start of it. SIGINT skips it.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_delay_seconds: u64,
    /// Seconds between two trims of the heap, which give the pages malloc
    /// freed back to the system (glibc builds; 0 turns it off). See
    /// the README, "Memory".
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub memory_trim_interval_seconds: u64,
    /// Elect a leader through a Lease before scheduling (standalone and both
    /// modes; ignored in extender mode). On by default, as kube-scheduler's:
    /// `--leader-elect=false` lets every replica schedule, for one replica
    /// only.
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        value_parser = parse_go_bool
    )]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (default: $POD_NAMESPACE, else "default").
    #[arg(
        long,
        visible_alias = "leader-elect-resource-namespace",
        env = "POD_NAMESPACE",
        default_value = "default"
    )]
    pub leader_elect_namespace: String,
    /// Name of the leader-election Lease (kube-scheduler's flag; `--leader-elect-lease` is its
    /// old name here).
    #[arg(long, alias = "leader-elect-lease", default_value = "placer")]
    pub leader_elect_resource_name: String,
    /// How long followers wait after the last observed renewal before taking
    /// the Lease (a Go duration, as kube-scheduler's flag: 15s, 1m30s, 500ms).
    #[arg(long, default_value = "15s", value_parser = parse_go_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops scheduling;
    /// shorter than the lease duration.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often candidates try to take the Lease and the leader renews it.
    #[arg(long, default_value = "2s", value_parser = parse_go_duration)]
    pub leader_elect_retry_period: Duration,
    /// Standalone: the first backoff of a pod that failed, in seconds; it
    /// doubles per attempt up to --pod-max-backoff-seconds
    /// (KubeSchedulerConfiguration's podInitialBackoffSeconds).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub pod_initial_backoff_seconds: u64,
    /// Standalone: the longest backoff, in seconds, at least
    /// --pod-initial-backoff-seconds (podMaxBackoffSeconds).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub pod_max_backoff_seconds: u64,
    /// Standalone: how long an unschedulable pod waits for an event that may
    /// help before it is tried again anyway (a Go duration, as
    /// kube-scheduler's flag).
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub pod_max_in_unschedulable_pods_duration: Duration,
    /// Serve HTTPS with this certificate chain (PEM); reloaded when it changes.
    #[arg(long, requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key for --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Verify client certificates against this CA (mutual TLS): the verbs
    /// then need one (kube-scheduler's tlsConfig.certFile), and a
    /// certificate's CN and O stand for a user and groups on the other paths.
    /// Clients without one still connect (probes, Prometheus).
    #[arg(long, requires = "tls_cert_file")]
    pub client_ca_file: Option<PathBuf>,
    /// CommonNames of client certificates allowed to call the verbs
    /// (comma-separated); empty: any certificate from --client-ca-file.
    #[arg(long, value_delimiter = ',', requires = "client_ca_file")]
    pub verbs_allowed_names: Vec<String>,
    /// Let `/bind` bind pods of any scheduler (but placer's own) when the
    /// policy lists no extender.schedulerNames (the policy's
    /// extender.bindAnyScheduler: true says the same). Without either,
    /// `/bind` refuses every pod: name kube-scheduler's profiles instead.
    #[arg(long)]
    pub bind_any_scheduler: bool,
    /// Kubeconfig with the right to create tokenreviews.authentication.k8s.io:
    /// bearer tokens on the paths other than the verbs are checked through
    /// it. Default: in-cluster, when placer runs in a pod; else no token
    /// authentication (as kube-scheduler).
    #[arg(long, value_name = "FILE")]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig with the right to create
    /// subjectaccessreviews.authorization.k8s.io: access to the paths other
    /// than the verbs is authorized through it. Default: in-cluster.
    #[arg(long, value_name = "FILE")]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// Paths served without authentication or authorization (comma-separated;
    /// a trailing * matches a prefix), as kube-scheduler's flag.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        value_parser = parse_always_allow_path
    )]
    pub authorization_always_allow_paths: Vec<String>,
    /// How long TokenReview answers are kept (a Go duration, e.g. 10s, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// How long "allowed" SubjectAccessReview answers are kept.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long "denied" SubjectAccessReview answers are kept.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
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
    /// Watch unscheduled pods so `GET /explain/pods/{namespace}/{name}` can
    /// explain pending pods; in extender mode also watch the kinds the
    /// in-tree plugins read (claims, volumes, storage classes, namespaces,
    /// services and owners, budgets), as standalone mode does. Default: on
    /// in standalone and both modes (those kinds are watched anyway), off in
    /// extender mode, where it was measured to add about 30 MiB per 2,000
    /// pending pods and 30 MiB more per 2,000 each of services, replica sets
    /// and claims (README, "Why is my pod pending?"). Off: only bound pods
    /// can be explained.
    #[arg(long, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub explain_pods: Option<bool>,
    /// kube-scheduler's configuration, for explaining pods of extender
    /// deployments with its profile and extender weight (default: its
    /// default profile and weight 1).
    #[arg(long, value_name = "FILE")]
    pub explain_kube_scheduler_config: Option<PathBuf>,
    /// Pending pods whose last diagnosis is kept in memory.
    #[arg(long, default_value_t = crate::explain::diagnoses::DEFAULT_CAP)]
    pub explain_diagnoses_cap: usize,
    /// Standalone mode: after every attempt write kube-scheduler-simulator's
    /// result annotations (filter-result, score-result, finalscore-result,
    /// selected-node) on the pod (needs `pods` `patch`).
    #[arg(long)]
    pub simulator_annotations: bool,
    /// Test only: apply each node and pod watch event this long after it
    /// arrived, so kube-scheduler always sees those changes first.
    #[arg(long, hide = true, default_value_t = 0)]
    pub debug_watch_event_delay_ms: u64,
}

/// Validates `--path-prefix`: it becomes part of route paths, where `{x}` or
/// `*x` would declare captures and a malformed path makes the router panic.
/// Returns the prefix without a trailing `/` ("" for none).
fn parse_path_prefix(value: &str) -> Result<String, String> {
    let prefix = value.strip_suffix('/').unwrap_or(value);
    if prefix.is_empty() {
        return Ok(String::new());
    }
    if !prefix.starts_with('/') {
        return Err(format!(
            "{value:?} must start with \"/\" (for example /scheduler)"
        ));
    }
    if value.contains("//") {
        return Err(format!("{value:?} contains an empty segment (\"//\")"));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~/".contains(*c)))
    {
        return Err(format!(
            "{value:?} contains {c:?}; only letters, digits, \"-._~\" and \"/\" are allowed"
        ));
    }
    Ok(prefix.to_string())
}

/// A boolean flag's value as kube-scheduler's flags (Go's
/// `strconv.ParseBool`) read it.
fn parse_go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{value:?} is not a boolean (true or false)")),
    }
}

/// One `--authorization-always-allow-paths` entry: `*` only at the end.
fn parse_always_allow_path(value: &str) -> Result<String, String> {
    crate::ops::access::AlwaysAllow::new(&[value])?;
    Ok(value.to_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_prefixes_are_validated_and_normalised() {
        for (given, expected) in [
            ("", ""),
            ("/", ""),
            ("/scheduler", "/scheduler"),
            ("/scheduler/", "/scheduler"),
            ("/a-b/c_d.e~f/9", "/a-b/c_d.e~f/9"),
        ] {
            assert_eq!(parse_path_prefix(given).as_deref(), Ok(expected), "{given}");
        }
        for bad in [
            "x", "/*rest", "/{x}", "/a//b", "//", "/a b", "/ü", "/a?b", "/a%20",
        ] {
            assert!(parse_path_prefix(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        let ms = Duration::from_millis;
        for (given, expected) in [
            ("15s", ms(15_000)),
            ("1m30s", ms(90_000)),
            ("500ms", ms(500)),
            ("1.5s", ms(1500)),
            ("1h", ms(3_600_000)),
            ("0s", ms(0)),
        ] {
            assert_eq!(parse_go_duration(given), Ok(expected), "{given}");
        }
        for bad in ["", "15", "s", "15x", "-1s", "1.2.3s", "15 s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn leader_election_takes_kube_schedulers_flag_names() {
        let cli = Cli::try_parse_from([
            "placer",
            "serve",
            "--leader-elect",
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline=20s",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-name=sched",
            "--leader-elect-resource-namespace=kube-system",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(30));
        assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(20));
        assert_eq!(args.leader_elect_retry_period, Duration::from_millis(500));
        assert_eq!(args.leader_elect_resource_name, "sched");
        assert_eq!(args.leader_elect_namespace, "kube-system");
        let old = Cli::try_parse_from(["placer", "serve", "--leader-elect-lease=old"]).unwrap();
        let Command::Serve(args) = old.command else {
            panic!("not serve")
        };
        assert_eq!(
            args.leader_elect_resource_name, "old",
            "the old name still works"
        );
    }

    /// `serve`'s arguments parsed from `args`, or clap's error.
    fn serve_args(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let argv = ["placer", "serve"].iter().chain(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Serve(args) => Ok(args),
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn leader_election_is_on_unless_turned_off_as_kube_scheduler_s_flag() {
        let elect = |args: &[&str]| serve_args(args).map(|a| a.leader_elect);
        assert_eq!(elect(&[]).ok(), Some(true), "on by default");
        assert_eq!(elect(&["--leader-elect"]).ok(), Some(true));
        for off in ["false", "False", "FALSE", "f", "F", "0"] {
            let arg = format!("--leader-elect={off}");
            assert_eq!(elect(&[&arg]).ok(), Some(false), "{arg}");
        }
        for on in ["true", "True", "TRUE", "t", "T", "1"] {
            let arg = format!("--leader-elect={on}");
            assert_eq!(elect(&[&arg]).ok(), Some(true), "{arg}");
        }
        let err = elect(&["--leader-elect=no"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--leader-elect"), "{err}");
        // As with pflag, a value needs "=": a separate word is not the flag's.
        assert!(elect(&["--leader-elect", "false"]).is_err());
    }

    #[test]
    fn a_bad_path_prefix_is_a_usage_error_naming_the_flag() {
        let err = Cli::try_parse_from(["placer", "serve", "--path-prefix", "/{x}"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--path-prefix"), "{err}");
    }

    #[test]
    fn durations_are_read_as_go_writes_them() {
        for (given, secs, millis) in [
            ("10s", 10, 0),
            ("2m", 120, 0),
            ("1m30s", 90, 0),
            ("1h", 3600, 0),
            ("500ms", 0, 500),
            ("0", 0, 0),
            ("0s", 0, 0),
            ("1.5s", 1, 500),
        ] {
            let expected = Duration::from_secs(secs) + Duration::from_millis(millis);
            assert_eq!(parse_go_duration(given), Ok(expected), "{given}");
        }
        for bad in ["", "10", "s", "10x", "-1s", "10 s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn access_flags_parse_as_kube_scheduler_s() {
        let Command::Serve(args) = Cli::try_parse_from(["placer", "serve"]).unwrap().command else {
            panic!("not serve");
        };
        assert_eq!(
            args.authorization_always_allow_paths,
            ["/healthz", "/readyz", "/livez"]
        );
        assert_eq!(
            args.authentication_token_webhook_cache_ttl,
            Duration::from_secs(10)
        );
        let err = Cli::try_parse_from([
            "placer",
            "serve",
            "--authorization-always-allow-paths=/healthz,/a*b",
        ])
        .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("only a trailing *"), "{err}");
        let err = Cli::try_parse_from(["placer", "serve", "--verbs-allowed-names=kube-scheduler"])
            .unwrap_err();
        assert!(err.to_string().contains("--client-ca-file"), "{err}");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("failed to read {0:?}: {1}")]
    struct Repeats(&'static str, #[source] std::io::Error);

    #[test]
    fn a_cause_the_message_already_shows_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(Repeats("/nope", io)).context("reading kubeconfig /nope");
        assert_eq!(
            error_message(&e),
            "reading kubeconfig /nope: failed to read \"/nope\": entity not found"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_message(&plain), "outer: inner");
    }
}
