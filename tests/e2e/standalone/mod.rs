//! placer as the only scheduler of the test's pods (`serve --mode standalone`), running the
//! standalone profile shipped in `policy.yaml` under the test's scheduler name.
//!
//! Each test asserts where pods were bound, or why not, in the words kube-scheduler would use:
//! the `Scheduled` event's note, the `FailedScheduling` event's FitError text (see
//! [`check_fit_error`] for how other tests' nodes in the shared cluster enter it) and the pod's
//! `PodScheduled` condition. Further: a bind that the API server refuses (placer runs with an
//! identity that may not create `pods/binding`) is rolled back and retried with backoff; two
//! replicas with `--leader-elect` hand over on a crash and on SIGTERM without binding a pod twice.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::harness::logs::{field, lines_with};
use crate::harness::{
    HW_REASON, NO_VICTIMS, NOT_HELPFUL, Placer, PodBuilder, REPORTING_CONTROLLER,
    SCHEDULING_TIMEOUT, TestEnv, ZONE_LABEL, ZONE_LAYOUT, check_fit_error,
    shipped_leader_election_rules, shipped_standalone_rules,
};

mod added_affinity;
mod bind_failure;
mod dra;
mod dra_binding;
mod dra_capacity;
mod dra_extended;
mod dra_timeout;
mod event_series;
mod hints;
mod leader;
mod plugins;
mod preemption;
mod volume_compare;
mod volume_race;
mod volumes;

/// Pod annotation of the shipped standalone profile's CapabilityFilter rule (`policy.yaml`).
const SHIPPED_HW_ANNOTATION: &str = "myorg.io/require-hw-encrypt";
/// Node label of that rule.
const SHIPPED_HW_LABEL: &str = "node.kubernetes.io/hw-encrypt";
/// The label kube-scheduler's hostname topology and placer's node builders use.
const HOSTNAME: &str = "kubernetes.io/hostname";
/// kube-scheduler's reasons, as placer must word them.
const INSUFFICIENT_CPU: &str = "Insufficient cpu";
const UNTOLERATED_TAINT: &str = "node(s) had untolerated taint(s)";
const SELECTOR_MISMATCH: &str = "node(s) didn't match Pod's node affinity/selector";
const PORTS_TAKEN: &str = "node(s) didn't have free ports for the requested pod ports";
const SPREAD_VIOLATED: &str = "node(s) didn't match pod topology spread constraints";
const ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// How long a pod that must not be bound is watched after it was reported unschedulable.
const STAYS_PENDING: Duration = Duration::from_secs(2);
/// kube-scheduler's (and placer's) leader-election lease duration.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often a candidate looks at the Lease: the 2 s retry period plus up to 0.4 s of jitter.
const RETRY_PERIOD: Duration = Duration::from_millis(2400);

/// A replica's identity in the Lease and in its events, as its latest start logged it (no
/// `POD_NAME` here, so it is `<hostname>_<unique id>`, new at every start).
fn identity(placer: &Placer) -> String {
    let lines =
        lines_with(placer.log_path(), &["standalone scheduling enabled"]).unwrap_or_default();
    let id = lines
        .last()
        .and_then(|l| field(l, "identity"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        id.contains('_'),
        "no identity logged by {}",
        placer.log_path().display()
    );
    id
}

/// The pod has exactly one `Scheduled` event, reported by `placer` (instance: the replica's identity),
/// with the note "Successfully assigned <ns>/<pod> to <node>", never repeated.
async fn assert_scheduled_event(
    env: &TestEnv,
    placer: &Placer,
    pod: &str,
    node: &str,
) -> anyhow::Result<()> {
    env.wait_pod_event(pod, "Scheduled").await?;
    let events = env.pod_events(pod, "Scheduled").await?;
    assert_eq!(events.len(), 1, "{pod}: Scheduled events {events:#?}");
    let e = &events[0];
    let expected = format!("Successfully assigned {}/{pod} to {node}", env.namespace());
    assert_eq!(e.message.as_deref(), Some(expected.as_str()));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.action.as_deref(), Some("Binding"));
    assert_eq!(e.reporting_component.as_deref(), Some(REPORTING_CONTROLLER));
    assert_eq!(
        e.reporting_instance.as_deref(),
        Some(identity(placer).as_str())
    );
    assert!(
        e.series.is_none() && e.count.unwrap_or(1) <= 1,
        "{pod}: Scheduled event repeated: {e:#?}"
    );
    Ok(())
}

/// The pod stays unbound with a `FailedScheduling` event (from `placer`) and a
/// `PodScheduled=False` condition (reason `Unschedulable`) whose texts are kube-scheduler's
/// FitError for the test's nodes failing with `own` (see [`check_fit_error`]). Returns the
/// event's message.
async fn assert_unschedulable(
    env: &TestEnv,
    pod: &str,
    own: &[(usize, &str)],
    preemption: &[(usize, &str)],
) -> anyhow::Result<String> {
    let event = env.wait_pod_event(pod, "FailedScheduling").await?;
    let message = event.message.clone().unwrap_or_default();
    eprintln!("{pod}: FailedScheduling: {message}");
    // The shipped profile runs DefaultPreemption, so the message always has its part.
    let total = check_fit_error(&message, own, Some(preemption))?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.action.as_deref(), Some("Scheduling"));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some(REPORTING_CONTROLLER)
    );
    let condition = env.wait_pod_unschedulable(pod).await?;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    let condition_message = condition.message.unwrap_or_default();
    // The event keeps the note of the first attempt (events.k8s.io series keep their note); the
    // condition shows the latest attempt, which differs only if other tests added nodes since.
    if check_fit_error(&condition_message, own, Some(preemption))? == total {
        assert_eq!(condition_message, message, "{pod}: condition vs event");
    }
    env.assert_stays_unbound(pod, STAYS_PENDING).await?;
    Ok(message)
}

/// A pod for the test's scheduler pinned to `node` by its hostname label.
fn pinned(env: &TestEnv, name: &str, node: &str) -> PodBuilder {
    env.pod(name).node_selector(HOSTNAME, node)
}

/// The one container of every test pod, with `ports`.
fn container_with_ports(ports: Value) -> Value {
    json!([{ "name": "main", "image": "registry.k8s.io/pause:3.10", "ports": ports }])
}

// ---------------------------------------------------------------------------------------------
// The business scenarios, with every safety plugin of the shipped profile active.
// ---------------------------------------------------------------------------------------------

// ZONE_LAYOUT's five priority-1000 pods also make zone b's node the most loaded one for
// NodeResourcesFit, which ZoneSpread's weight 2 outweighs.
