//! Prometheus metrics (`placer_` prefix) and the `/metrics` endpoint.
//!
//! Typed families in one struct, registered once; handlers and the runner
//! record into them. Labels are bounded: verbs, outcomes, plugin names,
//! extension points, object kinds, reload results — never pod or node names.
//! Beside them, without the prefix, the `process_*` families every Go
//! component exports ([`process`]).

mod process;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::cache::Cache;
use crate::framework::{ExtensionPoint, Observer};

/// Labels of request metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// filter, prioritize, bind, preempt, explain.
    pub verb: &'static str,
    /// An [`Outcome`]'s label.
    pub outcome: &'static str,
}

/// How a verb call ended: the `outcome` label of request metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 200 with the verb's result.
    Success,
    /// 200 with `Error` set (a domain error kube-scheduler reads from the body).
    Error,
    /// 400.
    BadRequest,
    /// 413.
    TooLarge,
    /// 503: the deadline passed, or the caches have not synced yet.
    Timeout,
    /// 500, a panic included.
    Internal,
    /// 404: the verbs are disabled.
    Disabled,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Error => "error",
            Outcome::BadRequest => "bad_request",
            Outcome::TooLarge => "too_large",
            Outcome::Timeout => "timeout",
            Outcome::Internal => "internal",
            Outcome::Disabled => "disabled",
        }
    }
}

/// Labels naming a verb.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// The verb.
    pub verb: &'static str,
}

/// Labels of plugin timing.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// Plugin name.
    pub plugin: &'static str,
    /// Extension point.
    pub extension_point: &'static str,
}

/// Labels naming a cached object kind.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// node, pod (or another watched kind).
    pub kind: &'static str,
}

/// Labels of results.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// success or failure (reloads, binds); sent, gone, failed, suppressed (retry prompts).
    pub result: &'static str,
}

/// Labels naming why placer closed a connection itself.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloseLabels {
    /// header_timeout, idle_timeout, stalled, shed or drain_deadline.
    pub reason: &'static str,
}

/// Labels of failed TLS handshakes.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandshakeLabels {
    /// rejected (rustls refused the client) or timeout.
    pub reason: &'static str,
}

/// Labels of refused requests.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// The route pattern (`/metrics`, `/explain/pods/{namespace}/{name}`, ...).
    pub route: String,
    /// Why: no_client_certificate, name_not_allowed, no_credentials,
    /// malformed_authorization, invalid_token, forbidden, review_failed.
    pub reason: &'static str,
}

/// Labels of `/bind` calls refused before any Binding was sent.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BindRefusalLabels {
    /// node_unknown, pod_not_found, already_bound, terminating,
    /// uid_mismatch, own_scheduler, other_scheduler or lookup_failed.
    pub reason: &'static str,
}

/// Labels of access reviews sent to the API server.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// token (TokenReview) or subject_access (SubjectAccessReview).
    pub review: &'static str,
    /// authenticated, unauthenticated, allowed, denied or error.
    pub result: &'static str,
}

/// Labels of scheduling attempts.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// An [`Attempt`]'s label.
    pub result: &'static str,
}

/// How a standalone scheduling attempt ended: the `result` label of
/// `placer_schedule_attempts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// A node was found (the bind follows asynchronously).
    Scheduled,
    /// No node fits the pod.
    Unschedulable,
    /// The cycle failed (a plugin error, a missing profile).
    Error,
}

impl Attempt {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Attempt::Scheduled => "scheduled",
            Attempt::Unschedulable => "unschedulable",
            Attempt::Error => "error",
        }
    }
}

/// Labels of queue lengths.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// active, backoff, unschedulable or gated.
    pub queue: &'static str,
}

/// Labels of the build-info metric.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// Crate version.
    pub version: &'static str,
    /// The git commit built (see `build.rs`), "unknown" without one.
    pub revision: &'static str,
}

/// The commit this binary was built from (`build.rs`: the image's
/// `REVISION` build argument, else git), "unknown" without one.
pub const REVISION: &str = env!("PLACER_GIT_COMMIT");

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 50 µs .. ~6.6 s: extender answers must stay far below kube-scheduler's
    // 5 s httpTimeout, and the shipped alert compares the p99 with it, so the
    // buckets reach past it.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
}

fn latency_histogram_long() -> Histogram {
    // 1 ms .. ~9 min: end-to-end includes waiting in the queue.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

fn plugin_histogram() -> Histogram {
    // 1 µs .. ~65 ms.
    Histogram::new(exponential_buckets(0.000_001, 2.0, 17))
}

fn nodes_histogram() -> Histogram {
    // 1 .. 32768 nodes.
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

/// Every metric placer exports.
pub struct Metrics {
    registry: Registry,
    /// `process_*`, named as client_golang names them (no `placer_` prefix).
    process: Registry,
    /// Requests per verb and outcome.
    pub requests: Family<RequestLabels, Counter>,
    /// Request latency per verb and outcome.
    pub request_duration: HistogramFamily<RequestLabels>,
    /// Nodes per request, per verb.
    pub request_nodes: HistogramFamily<VerbLabels>,
    /// Plugin latency per extension point (one observation per pod).
    pub plugin_duration: HistogramFamily<PluginLabels>,
    /// Objects in the cache.
    pub cache_objects: Family<KindLabels, Gauge>,
    /// Policy reloads by result.
    pub policy_reloads: Family<ResultLabels, Counter>,
    /// TLS certificate reloads by result.
    pub tls_reloads: Family<ResultLabels, Counter>,
    /// Handler panics answered with 500.
    pub http_panics: Counter,
    /// Connections open now.
    pub http_connections: Gauge,
    /// Connections placer closed itself (timeouts, shedding, drain), by reason.
    pub http_connections_closed: Family<CloseLabels, Counter>,
    /// TLS handshakes that failed, by reason.
    pub tls_handshake_failures: Family<HandshakeLabels, Counter>,
    /// Requests refused by the access checks, by route and reason.
    pub http_refusals: Family<RefusalLabels, Counter>,
    /// TokenReviews and SubjectAccessReviews sent, by result.
    pub access_reviews: Family<ReviewLabels, Counter>,
    /// Extender: `/bind` calls refused before reaching the API server, by reason.
    pub bind_refusals: Family<BindRefusalLabels, Counter>,
    /// Standalone scheduling attempts by result.
    pub schedule_attempts: Family<AttemptLabels, Counter>,
    /// Standalone: time from a pod's (last) queueing to its successful bind.
    pub scheduling_duration: Histogram,
    /// Standalone: pods waiting, per sub-queue.
    pub pending_pods: Family<QueueLabels, Gauge>,
    /// Bind latency by result (success, failure), both modes.
    pub bind_duration: HistogramFamily<ResultLabels>,
    /// 1 while this replica holds the scheduling Lease (or needs none).
    pub leader: Gauge,
    /// Standalone: preemption attempts (a PostFilter run that nominated a node).
    pub preemption_attempts: Counter,
    /// Standalone: pods evicted per preemption.
    pub preemption_victims: Histogram,
    /// Extender: retry prompts by result (sent, gone, failed, suppressed).
    pub retry_prompts: Family<ResultLabels, Counter>,
    /// Extender: parked pods re-checked after cache changes.
    pub retry_rechecks: Counter,
    /// Extender: parked pods forgotten to stay within the bound.
    pub parked_evicted: Counter,
    /// Extender: pods whose last `/filter` left them no feasible node (kept
    /// current by the parked-pod registry itself).
    pub parked_pods: Gauge,
    /// 1 while the watch of a kind is connected.
    pub watch_connected: Family<KindLabels, Gauge>,
    /// Seconds since the watch of a kind last got an event, a bookmark or a list.
    pub watch_last_seen: Family<KindLabels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every family under the `placer` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("placer");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "HTTP requests to the extender verbs and /explain, by verb and outcome",
            requests.clone(),
        );
        let request_duration: HistogramFamily<RequestLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "request_duration",
            "Server-side time to answer a verb, by verb and outcome",
            Unit::Seconds,
            request_duration.clone(),
        );
        let request_nodes: HistogramFamily<VerbLabels> =
            Family::new_with_constructor(nodes_histogram);
        registry.register(
            "request_nodes",
            "Nodes per request, by verb",
            request_nodes.clone(),
        );
        let plugin_duration: HistogramFamily<PluginLabels> =
            Family::new_with_constructor(plugin_histogram);
        registry.register_with_unit(
            "plugin_duration",
            "Time a plugin spent at an extension point for one pod (all nodes of the request)",
            Unit::Seconds,
            plugin_duration.clone(),
        );
        let cache_objects = Family::<KindLabels, Gauge>::default();
        registry.register(
            "cache_objects",
            "Objects in the cluster cache, by kind",
            cache_objects.clone(),
        );
        let policy_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "policy_reloads",
            "Policy file reloads, by result",
            policy_reloads.clone(),
        );
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "tls_reloads",
            "TLS certificate reloads, by result",
            tls_reloads.clone(),
        );
        let http_panics = Counter::default();
        registry.register(
            "http_panics",
            "Handler panics, each answered with 500 and a JSON Error",
            http_panics.clone(),
        );
        let http_connections = Gauge::default();
        registry.register(
            "http_connections",
            "HTTP connections open now (plain or TLS)",
            http_connections.clone(),
        );
        let http_connections_closed = Family::<CloseLabels, Counter>::default();
        registry.register(
            "http_connections_closed",
            "Connections placer closed on its own, by reason (timeouts, over the connection limit, drain deadline)",
            http_connections_closed.clone(),
        );
        let tls_handshake_failures = Family::<HandshakeLabels, Counter>::default();
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed, by reason (rejected by rustls, timeout)",
            tls_handshake_failures.clone(),
        );
        let http_refusals = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "http_refusals",
            "Requests refused by the access checks (client certificate, delegated authentication and authorization), by route and reason",
            http_refusals.clone(),
        );
        let access_reviews = Family::<ReviewLabels, Counter>::default();
        registry.register(
            "access_reviews",
            "TokenReviews and SubjectAccessReviews sent to the API server (cache misses), by review and result",
            access_reviews.clone(),
        );
        let bind_refusals = Family::<BindRefusalLabels, Counter>::default();
        registry.register(
            "bind_refusals",
            "Extender: /bind calls refused before any Binding was sent, by reason",
            bind_refusals.clone(),
        );
        let schedule_attempts = Family::<AttemptLabels, Counter>::default();
        registry.register(
            "schedule_attempts",
            "Standalone scheduling attempts, by result",
            schedule_attempts.clone(),
        );
        let scheduling_duration = latency_histogram_long();
        registry.register_with_unit(
            "scheduling_duration",
            "Standalone: time from queueing a pod to binding it",
            Unit::Seconds,
            scheduling_duration.clone(),
        );
        let pending_pods = Family::<QueueLabels, Gauge>::default();
        registry.register(
            "pending_pods",
            "Standalone: pods waiting, by sub-queue",
            pending_pods.clone(),
        );
        let bind_duration: HistogramFamily<ResultLabels> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "bind_duration",
            "Time to create a Binding, by result",
            Unit::Seconds,
            bind_duration.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica may schedule (holds the Lease)",
            leader.clone(),
        );
        let preemption_attempts = Counter::default();
        registry.register(
            "preemption_attempts",
            "Standalone: preemptions started (victims chosen and a node nominated)",
            preemption_attempts.clone(),
        );
        let preemption_victims = Histogram::new(exponential_buckets(1.0, 2.0, 8));
        registry.register(
            "preemption_victims",
            "Standalone: pods evicted per preemption",
            preemption_victims.clone(),
        );
        let retry_prompts = Family::<ResultLabels, Counter>::default();
        registry.register(
            "retry_prompts",
            "Extender: annotation patches asking kube-scheduler to retry a pod placer had rejected, by result (sent, gone, failed, suppressed)",
            retry_prompts.clone(),
        );
        let retry_rechecks = Counter::default();
        registry.register(
            "retry_rechecks",
            "Extender: parked pods re-checked after a cache change",
            retry_rechecks.clone(),
        );
        let parked_evicted = Counter::default();
        registry.register(
            "parked_evicted",
            "Extender: parked pods forgotten to stay within the bound",
            parked_evicted.clone(),
        );
        let parked_pods = Gauge::default();
        registry.register(
            "parked_pods",
            "Extender: pods whose last filter call left them no feasible node",
            parked_pods.clone(),
        );
        let watch_connected = Family::<KindLabels, Gauge>::default();
        registry.register(
            "watch_connected",
            "1 while the watch of a kind is connected to the API server",
            watch_connected.clone(),
        );
        let watch_last_seen = Family::<KindLabels, Gauge<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "watch_last_seen_age",
            "Time since the watch of a kind last got an event, a bookmark or a list",
            Unit::Seconds,
            watch_last_seen.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                revision: REVISION,
            })
            .set(1);
        registry.register("build_info", "Build information (always 1)", build_info);
        let mut process = Registry::default();
        process.register_collector(Box::new(process::ProcessCollector));
        Metrics {
            registry,
            process,
            requests,
            request_duration,
            request_nodes,
            plugin_duration,
            cache_objects,
            policy_reloads,
            tls_reloads,
            http_panics,
            http_connections,
            http_connections_closed,
            tls_handshake_failures,
            http_refusals,
            access_reviews,
            bind_refusals,
            schedule_attempts,
            scheduling_duration,
            pending_pods,
            bind_duration,
            leader,
            preemption_attempts,
            preemption_victims,
            retry_prompts,
            retry_rechecks,
            parked_evicted,
            parked_pods,
            watch_connected,
            watch_last_seen,
        }
    }

    /// Records one retry prompt outcome.
    pub fn retry_prompt(&self, result: &'static str) {
        self.retry_prompts
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Records a scheduling attempt.
    pub fn attempt(&self, result: Attempt) {
        self.schedule_attempts
            .get_or_create(&AttemptLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Records a bind.
    pub fn bound(&self, ok: bool, seconds: f64) {
        self.bind_duration
            .get_or_create(&ResultLabels {
                result: if ok { "success" } else { "failure" },
            })
            .observe(seconds);
    }

    /// Records one answered request.
    pub fn observe_request(&self, verb: &'static str, outcome: Outcome, seconds: f64) {
        let labels = RequestLabels {
            verb,
            outcome: outcome.as_str(),
        };
        self.requests.get_or_create(&labels).inc();
        self.request_duration
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// Records the number of nodes in a request.
    pub fn observe_nodes(&self, verb: &'static str, nodes: usize) {
        self.request_nodes
            .get_or_create(&VerbLabels { verb })
            .observe(nodes as f64);
    }

    /// Records a policy reload.
    pub fn policy_reloaded(&self, ok: bool) {
        self.policy_reloads
            .get_or_create(&ResultLabels {
                result: if ok { "success" } else { "failure" },
            })
            .inc();
    }

    /// Records a TLS reload.
    pub fn tls_reloaded(&self, ok: bool) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: if ok { "success" } else { "failure" },
            })
            .inc();
    }

    /// Records a connection placer closed on its own.
    pub fn connection_closed(&self, reason: &'static str) {
        self.http_connections_closed
            .get_or_create(&CloseLabels { reason })
            .inc();
    }

    /// Records a failed TLS handshake.
    pub fn handshake_failed(&self, reason: &'static str) {
        self.tls_handshake_failures
            .get_or_create(&HandshakeLabels { reason })
            .inc();
    }

    /// Records a request the access checks refused.
    pub fn refused(&self, route: &str, reason: &'static str) {
        self.http_refusals
            .get_or_create(&RefusalLabels {
                route: route.to_owned(),
                reason,
            })
            .inc();
    }

    /// Records an access review sent to the API server.
    pub fn access_review(&self, review: &'static str, result: &'static str) {
        self.access_reviews
            .get_or_create(&ReviewLabels { review, result })
            .inc();
    }

    /// Records a `/bind` refused before reaching the API server.
    pub fn bind_refused(&self, reason: &'static str) {
        self.bind_refusals
            .get_or_create(&BindRefusalLabels { reason })
            .inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, &self.process);
        let _ = encode_eof(&mut out);
        out
    }
}

impl Observer for Metrics {
    fn plugin_duration(&self, plugin: &'static str, point: ExtensionPoint, seconds: f64) {
        self.plugin_duration
            .get_or_create(&PluginLabels {
                plugin,
                extension_point: point.as_str(),
            })
            .observe(seconds);
    }
}

/// `GET /metrics`.
pub async fn metrics(
    State(m): State<Arc<Metrics>>,
    State(cache): State<Arc<Cache>>,
) -> impl IntoResponse {
    {
        let cluster = cache.read();
        m.cache_objects
            .get_or_create(&KindLabels { kind: "node" })
            .set(cluster.node_count() as i64);
        m.cache_objects
            .get_or_create(&KindLabels { kind: "pod" })
            .set(cluster.pod_count() as i64);
    }
    for w in cache.watches().all() {
        let kind = KindLabels { kind: w.kind() };
        m.watch_connected
            .get_or_create(&kind)
            .set(i64::from(w.is_connected()));
        m.watch_last_seen
            .get_or_create(&kind)
            .set(w.since_last_seen().as_secs_f64());
    }
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The `placer_*` and `process_*` names `text` mentions.
    fn names_in(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for prefix in ["placer_", "process_"] {
            for (at, _) in text.match_indices(prefix) {
                let before = text[..at].chars().last();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    continue;
                }
                let tail = &text[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_owned());
            }
        }
        names
    }

    /// Every metric the chart's alerts and dashboard read is one placer exports (a histogram's
    /// `_bucket`, `_sum` and `_count`, a counter's `_total` included), so renaming a metric cannot
    /// leave an alert that never fires or a panel that stays empty.
    #[test]
    fn every_metric_the_chart_reads_is_exported() {
        let rules = include_str!("../charts/placer/templates/prometheusrule.yaml");
        let dashboard = include_str!("../charts/placer/dashboards/placer.json");
        let read: BTreeSet<String> = names_in(rules)
            .union(&names_in(dashboard))
            .cloned()
            .collect();
        assert!(read.len() > 15, "{read:?}");

        // Families print only once they have a sample: give every labelled one a child.
        let m = Metrics::new();
        m.observe_request("filter", Outcome::Success, 0.001);
        m.observe_nodes("filter", 3);
        m.bound(true, 0.01);
        m.policy_reloaded(true);
        m.tls_reloaded(true);
        m.connection_closed("idle_timeout");
        m.handshake_failed("timeout");
        m.attempt(Attempt::Scheduled);
        m.retry_prompt("sent");
        m.pending_pods
            .get_or_create(&QueueLabels { queue: "active" })
            .set(1);
        let kind = KindLabels { kind: "node" };
        m.cache_objects.get_or_create(&kind).set(1);
        m.watch_connected.get_or_create(&kind).set(1);
        m.watch_last_seen.get_or_create(&kind).set(1.0);
        m.plugin_duration("ZoneSpread", ExtensionPoint::Score, 0.000_01);
        let text = m.encode();
        let families: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let missing: Vec<&String> = read
            .iter()
            .filter(|name| {
                !families.iter().any(|f| {
                    ["", "_total", "_bucket", "_sum", "_count"]
                        .iter()
                        .any(|suffix| **name == format!("{f}{suffix}"))
                })
            })
            .collect();
        assert!(
            missing.is_empty(),
            "read by the chart but not exported: {missing:?}; exported: {families:?}"
        );
    }
}
