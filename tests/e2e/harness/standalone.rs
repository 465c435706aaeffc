//! placer as the only scheduler of a test's pods (`serve --mode standalone`).
//!
//! - the policy: the shipped `placer` profile of `policy.yaml`, renamed to the test's scheduler
//!   name ([`standalone_policy`]), so every test runs exactly what ships;
//! - outcomes as kube-scheduler reports them: `Scheduled` / `FailedScheduling` events (written by
//!   placer's `EventRecorder` through `events.k8s.io/v1`, `reportingController: placer`, read here
//!   through `core/v1`, see `wait`) and FailedScheduling texts in kube-scheduler's FitError format
//!   ([`fit_error`], [`check_fit_error`]);
//! - the leader-election Lease;
//! - a restricted identity for placer: a ServiceAccount token whose RBAC rules the test chooses
//!   (and may change while placer runs), starting from the shipped `placer-standalone` ClusterRole.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimStatus};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::control_plane::kubeconfig_yaml;
use super::env::TestEnv;
use super::fixtures::PodBuilder;
use super::placer::Placer;
use super::wait::SCHEDULING_TIMEOUT;

/// The `schedulerName` of the standalone profile in the shipped `policy.yaml`.
pub const SHIPPED_PROFILE: &str = "placer";

/// The `reportingController` (core/v1: `reportingComponent`) of placer's events.
pub const REPORTING_CONTROLLER: &str = "placer";

/// Reasons with which nodes of *other* tests fail a pod confined to its own test's nodes (by the
/// `nodeSelector` on [`super::RUN_LABEL`]): the first failing filter in the profile's order
/// (NodeUnschedulable, TaintToleration, NodeAffinity).
pub const FOREIGN_NODE_REASONS: [&str; 3] = [
    "node(s) were unschedulable",
    "node(s) had untolerated taint(s)",
    "node(s) didn't match Pod's node affinity/selector",
];

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The shipped `policy.yaml` with its standalone profile ([`SHIPPED_PROFILE`], plugins and args
/// unchanged) renamed to `scheduler_name`.
fn shipped_policy_renamed(scheduler_name: &str) -> anyhow::Result<Value> {
    let path = repo_file("policy.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let mut shipped: Value = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("parse {} as YAML", path.display()))?;
    let profile = shipped["profiles"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .find(|p| p["schedulerName"] == SHIPPED_PROFILE)
        .with_context(|| format!("{} has no profile {SHIPPED_PROFILE:?}", path.display()))?;
    profile["schedulerName"] = json!(scheduler_name);
    Ok(shipped)
}

/// A policy whose only profile is the shipped standalone profile ([`SHIPPED_PROFILE`] in
/// `policy.yaml`, plugins and args unchanged) renamed to `scheduler_name`.
pub fn standalone_policy(scheduler_name: &str) -> anyhow::Result<String> {
    let shipped = shipped_policy_renamed(scheduler_name)?;
    let profile = shipped["profiles"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["schedulerName"] == scheduler_name)
        .cloned()
        .context("the renamed profile")?;
    let policy = json!({
        "apiVersion": shipped["apiVersion"],
        "kind": shipped["kind"],
        "profiles": [profile],
    });
    Ok(serde_yaml_ng::to_string(&policy)?)
}

/// The whole shipped policy for `--mode both`: the standalone profile renamed to
/// `scheduler_name` schedules the test's pods, and the extender's default profile answers the
/// verbs for pods of any other scheduler.
pub fn both_policy(scheduler_name: &str) -> anyhow::Result<String> {
    Ok(serde_yaml_ng::to_string(&shipped_policy_renamed(
        scheduler_name,
    )?)?)
}

/// The rules of the `kind` (`ClusterRole` or `Role`) named `name` in the shipped
/// `manifests/standalone/rbac.yaml`.
fn shipped_rules(kind: &str, name: &str) -> anyhow::Result<Value> {
    shipped_rules_in("manifests/standalone/rbac.yaml", kind, name)
}

/// The rules of `kind` `name` in the manifest file `file` (relative to the repository).
pub fn shipped_rules_in(file: &str, kind: &str, name: &str) -> anyhow::Result<Value> {
    let path = repo_file(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let doc: Value = serde::Deserialize::deserialize(doc)?;
        if doc["kind"] == kind && doc["metadata"]["name"] == name {
            return Ok(doc["rules"].clone());
        }
    }
    bail!("{} has no {kind} {name}", path.display())
}

/// The rules of the shipped `placer-standalone` ClusterRole: what the scheduler needs.
pub fn shipped_standalone_rules() -> anyhow::Result<Value> {
    shipped_rules("ClusterRole", "placer-standalone")
}

/// The rules of the shipped `placer-standalone-leader-election` Role: what `--leader-elect`
/// needs on the Lease.
pub fn shipped_leader_election_rules() -> anyhow::Result<Value> {
    shipped_rules("Role", "placer-standalone-leader-election")
}

/// kube-scheduler's FitError text: `0/<total> nodes are available: ` then `"<count> <reason>"`
/// for each reason, sorted as strings, joined by `", "`, and a final `.`.
pub fn fit_error(total: usize, reasons: &[(usize, &str)]) -> String {
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for (count, reason) in reasons {
        *histogram.entry(reason).or_default() += count;
    }
    let mut parts: Vec<String> = histogram
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    parts.sort();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

/// Checks that `message` is exactly [`fit_error`] for this test's nodes failing with `own`
/// (count, reason) pairs, plus every other node of the shared cluster failing with one of the
/// [`FOREIGN_NODE_REASONS`]. How many foreign nodes there are, and which of those reasons they
/// give, depends on the tests running alongside, so the total and the foreign counts are read from
/// `message`; everything else must match literally. With only this test's nodes in the cluster the
/// check is `message == fit_error(own total, own)`. Returns the total.
///
/// With `preemption`, the message must go on with DefaultPreemption's part, `" preemption: "`
/// and a second FitError in which this test's nodes give the `preemption` (count, reason) pairs
/// ([`NO_VICTIMS`] for a node that failed with code `Unschedulable` but holds no pod of lower
/// priority, [`NOT_HELPFUL`] for one that failed `UnschedulableAndUnresolvable`) and every other
/// node is [`NOT_HELPFUL`]. Without it, the message must have no such part.
pub fn check_fit_error(
    message: &str,
    own: &[(usize, &str)],
    preemption: Option<&[(usize, &str)]>,
) -> anyhow::Result<usize> {
    let split = message.split_once(" preemption: ");
    let (fit, expected) = match (split, preemption) {
        (None, None) => return check_histogram(message, own, &FOREIGN_NODE_REASONS),
        (Some((fit, part)), Some(expected)) => (fit, (part, expected)),
        (None, Some(_)) => bail!("no preemption part in {message:?}"),
        (Some(_), None) => bail!("unexpected preemption part in {message:?}"),
    };
    let total = check_histogram(fit, own, &FOREIGN_NODE_REASONS)?;
    let (part, own_preemption) = expected;
    let preemption_total = check_histogram(part, own_preemption, &[NOT_HELPFUL])
        .with_context(|| format!("the preemption part of {message:?}"))?;
    ensure!(
        preemption_total == total,
        "preemption counts {preemption_total} nodes, the FitError {total}: {message:?}"
    );
    Ok(total)
}

/// DefaultPreemption's reason for a node that could fit only by evicting, with no pod of lower
/// priority on it.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// DefaultPreemption's reason for a node eviction cannot help.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// [`check_fit_error`] for one "0/N nodes are available: ..." text whose other nodes give one of
/// `foreign_reasons`.
fn check_histogram(
    message: &str,
    own: &[(usize, &str)],
    foreign_reasons: &[&str],
) -> anyhow::Result<usize> {
    let parse = || -> Option<(usize, BTreeMap<String, usize>)> {
        let rest = message.strip_prefix("0/")?;
        let (total, rest) = rest.split_once(" nodes are available: ")?;
        let body = rest.strip_suffix('.')?;
        let mut histogram = BTreeMap::new();
        for part in body.split(", ") {
            let (count, reason) = part.split_once(' ')?;
            *histogram.entry(reason.to_owned()).or_default() += count.parse::<usize>().ok()?;
        }
        Some((total.parse().ok()?, histogram))
    };
    let Some((total, mut seen)) = parse() else {
        bail!("not a FitError message: {message:?}");
    };
    for (count, reason) in own {
        let entry = seen.entry((*reason).to_owned()).or_default();
        ensure!(
            *entry >= *count,
            "expected at least {count} x {reason:?} in {message:?}"
        );
        *entry -= count;
    }
    let foreign: Vec<(usize, &str)> = seen
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| (*n, r.as_str()))
        .collect();
    for (count, reason) in &foreign {
        ensure!(
            foreign_reasons.contains(reason),
            "{count} node(s) failed with {reason:?}, which neither this test's nodes nor other \
             tests' nodes should give, in {message:?}"
        );
    }
    let own_total: usize = own.iter().map(|(n, _)| n).sum();
    let foreign_total: usize = foreign.iter().map(|(n, _)| n).sum();
    ensure!(
        own_total + foreign_total == total,
        "counts add up to {} but the message says 0/{total}: {message:?}",
        own_total + foreign_total
    );
    let all: Vec<(usize, &str)> = own.iter().copied().chain(foreign).collect();
    let expected = fit_error(total, &all);
    ensure!(
        message == expected,
        "FailedScheduling text\n  got:      {message:?}\n  expected: {expected:?}"
    );
    Ok(total)
}

impl TestEnv {
    /// Starts placer replica `name` in standalone mode, with [`standalone_policy`] for this test's
    /// scheduler name, the admin identity and `extra_args`.
    pub async fn start_standalone(
        &self,
        name: &str,
        extra_args: &[&str],
    ) -> anyhow::Result<Placer> {
        self.start_standalone_as(name, extra_args, self.cluster().kubeconfig())
            .await
    }

    /// Like [`TestEnv::start_standalone`] with the identity of `kubeconfig`.
    pub async fn start_standalone_as(
        &self,
        name: &str,
        extra_args: &[&str],
        kubeconfig: &Path,
    ) -> anyhow::Result<Placer> {
        let policy = standalone_policy(&self.scheduler_name())?;
        Placer::start_as(self, &policy, name, "standalone", extra_args, kubeconfig).await
    }

    /// Starts placer replica `name` in standalone mode, with [`standalone_policy`] for this test's
    /// scheduler name, the admin identity and no flag of the test's or the harness's about leader
    /// election: placer's defaults (see [`Placer::start_electing_by_default`]).
    pub async fn start_standalone_electing_by_default(&self, name: &str) -> anyhow::Result<Placer> {
        let policy = standalone_policy(&self.scheduler_name())?;
        Placer::start_electing_by_default(self, &policy, name, "standalone").await
    }

    /// Creates `pod` with `spec` (a JSON object: tolerations, affinity, containers' ports, ...)
    /// merged into its spec; a `containers` entry replaces the builder's container list.
    pub async fn create_pod_with_spec(&self, pod: &PodBuilder, spec: Value) -> anyhow::Result<Pod> {
        let mut object = serde_json::to_value(pod.build())?;
        let Value::Object(extra) = spec else {
            bail!("spec must be a JSON object, got {spec}");
        };
        for (key, value) in extra {
            object["spec"][key] = value;
        }
        let object: Pod = serde_json::from_value(object)?;
        self.pods()
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("create pod {}/{}", self.namespace(), pod.name()))
    }

    /// The pod's events with `reason` (core/v1 view of the events.k8s.io events), oldest first.
    pub async fn pod_events(&self, pod: &str, reason: &str) -> anyhow::Result<Vec<Event>> {
        let events: Api<Event> = Api::namespaced(self.client().clone(), self.namespace());
        let params = ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={pod},reason={reason}"
        ));
        let mut list = events.list(&params).await?.items;
        list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        Ok(list)
    }

    /// Waits for the pod's first event with `reason`.
    pub async fn wait_pod_event(&self, pod: &str, reason: &str) -> anyhow::Result<Event> {
        self.wait_pod_event_where(pod, reason, "", |_| true).await
    }

    /// Waits for the pod's first FailedScheduling event about the cluster as the test built it.
    ///
    /// A scheduler watches pods and claims on separate streams, so it can meet a pod before the
    /// claim the test created just before it; it then reports `persistentvolumeclaim "x" not
    /// found` once and retries when the claim arrives. Which of the two streams wins is a race
    /// (CI lost it once), so a comparison of texts waits past that transient message.
    pub async fn wait_scheduling_failure(&self, pod: &str) -> anyhow::Result<Event> {
        self.wait_pod_event_where(
            pod,
            "FailedScheduling",
            " not about a missing object",
            |e| {
                !e.message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("\" not found")
            },
        )
        .await
    }

    /// Waits for the pod's first event with `reason` that `wanted` accepts (`what` says which,
    /// for the timeout's message).
    async fn wait_pod_event_where(
        &self,
        pod: &str,
        reason: &str,
        what: &str,
        wanted: impl Fn(&Event) -> bool,
    ) -> anyhow::Result<Event> {
        let wanted = &wanted;
        self.poll(
            &format!("a {reason} event{what} of pod {pod}"),
            SCHEDULING_TIMEOUT,
            || async move {
                let events = self.pod_events(pod, reason).await?;
                let seen = events.len();
                Ok(match events.into_iter().find(wanted) {
                    Some(e) => ControlFlow::Break(e),
                    None => ControlFlow::Continue(format!("{seen} such event(s), none wanted yet")),
                })
            },
        )
        .await
    }

    /// Waits until the pod's `PodScheduled` condition is `False` with a message starting with
    /// `prefix`; returns the message.
    pub async fn wait_unschedulable_message(
        &self,
        pod: &str,
        prefix: &str,
    ) -> anyhow::Result<String> {
        self.poll(
            &format!("pod {pod} PodScheduled=False with a message starting {prefix:?}"),
            SCHEDULING_TIMEOUT,
            || async {
                let c = self.pod_scheduled_condition(pod).await?;
                Ok(match c {
                    Some(c)
                        if c.status == "False"
                            && c.message.as_deref().is_some_and(|m| m.starts_with(prefix)) =>
                    {
                        ControlFlow::Break(c.message.unwrap_or_default())
                    }
                    other => ControlFlow::Continue(format!("{other:?}")),
                })
            },
        )
        .await
    }

    /// Edits the status of ResourceClaim `name` in the test's namespace, as a DRA driver (or a
    /// scheduler before) writes it; `what` names the write in errors.
    pub async fn edit_claim_status(
        &self,
        name: &str,
        what: &str,
        edit: impl FnOnce(&mut ResourceClaimStatus) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let api = Api::<ResourceClaim>::namespaced(self.client().clone(), self.namespace());
        let mut claim = api
            .get(name)
            .await
            .with_context(|| format!("{what}: get {name}"))?;
        edit(
            claim
                .status
                .get_or_insert_with(ResourceClaimStatus::default),
        )?;
        api.replace_status(name, &PostParams::default(), &claim)
            .await
            .with_context(|| what.to_owned())?;
        Ok(())
    }

    /// The `holderIdentity` of Lease `name` in the test's namespace (`None`: absent or released).
    pub async fn lease_holder(&self, name: &str) -> anyhow::Result<Option<String>> {
        self.lease_holder_in(self.namespace(), name).await
    }

    /// Like [`TestEnv::lease_holder`] for the Lease `name` in `namespace`.
    pub async fn lease_holder_in(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Option<String>> {
        let leases: Api<Lease> = Api::namespaced(self.client().clone(), namespace);
        Ok(leases
            .get_opt(name)
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()))
    }

    /// A restricted identity for placer: ServiceAccount `name` in the test's namespace, bound to a
    /// new ClusterRole `<run id>-<name>` with `rules`, and a kubeconfig (written to the test dir)
    /// with a token for it. Returns the kubeconfig's path.
    pub async fn restricted_kubeconfig(&self, name: &str, rules: Value) -> anyhow::Result<PathBuf> {
        Ok(self.restricted_identity(name, rules).await?.0)
    }

    /// Like [`TestEnv::restricted_kubeconfig`]; also returns the token (created through the
    /// TokenRequest API, valid for an hour).
    pub async fn restricted_identity(
        &self,
        name: &str,
        rules: Value,
    ) -> anyhow::Result<(PathBuf, String)> {
        let role = self.name(name);
        let sa: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
        Api::<ServiceAccount>::namespaced(self.client().clone(), self.namespace())
            .create(&PostParams::default(), &sa)
            .await
            .with_context(|| format!("create service account {name}"))?;
        let cluster_role: ClusterRole =
            serde_json::from_value(json!({ "metadata": { "name": role }, "rules": rules }))?;
        Api::<ClusterRole>::all(self.client().clone())
            .create(&PostParams::default(), &cluster_role)
            .await
            .with_context(|| format!("create cluster role {role}"))?;
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": { "name": role },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": [{ "kind": "ServiceAccount", "name": name, "namespace": self.namespace() }],
        }))?;
        Api::<ClusterRoleBinding>::all(self.client().clone())
            .create(&PostParams::default(), &binding)
            .await
            .with_context(|| format!("create cluster role binding {role}"))?;
        let request: TokenRequest =
            serde_json::from_value(json!({ "spec": { "expirationSeconds": 3600 } }))?;
        let token: TokenRequest =
            Api::<ServiceAccount>::namespaced(self.client().clone(), self.namespace())
                .create_subresource("token", name, &PostParams::default(), &request)
                .await
                .with_context(|| format!("request a token for service account {name}"))?;
        let token = token
            .status
            .and_then(|s| s.token)
            .context("token request without a token in its status")?;
        let path = self.dir().join(format!("{name}.kubeconfig"));
        let kubeconfig = kubeconfig_yaml(
            self.cluster().server(),
            &self.cluster().dir().join("pki/ca.crt"),
            name,
            &token,
        );
        std::fs::write(&path, kubeconfig)?;
        Ok((path, token))
    }

    /// Replaces the rules of the ClusterRole made by [`TestEnv::restricted_kubeconfig`] for
    /// `name` (the API server's authorizer picks the change up at once).
    pub async fn set_restricted_rules(&self, name: &str, rules: Value) -> anyhow::Result<()> {
        let role = self.name(name);
        Api::<ClusterRole>::all(self.client().clone())
            .patch(
                &role,
                &PatchParams::default(),
                &Patch::Merge(json!({ "rules": rules })),
            )
            .await
            .with_context(|| format!("update cluster role {role}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_error_sorts_count_reason_strings() {
        assert_eq!(
            fit_error(3, &[(3, "Insufficient cpu")]),
            "0/3 nodes are available: 3 Insufficient cpu."
        );
        assert_eq!(
            fit_error(
                14,
                &[
                    (2, "Insufficient cpu"),
                    (12, "node(s) didn't match Pod's node affinity/selector")
                ]
            ),
            "0/14 nodes are available: 12 node(s) didn't match Pod's node affinity/selector, \
             2 Insufficient cpu."
        );
    }

    #[test]
    fn check_fit_error_accepts_foreign_nodes_only_with_their_reasons() {
        let own = [(2, "Insufficient cpu")];
        assert_eq!(
            check_fit_error("0/2 nodes are available: 2 Insufficient cpu.", &own, None).unwrap(),
            2
        );
        let with_foreign = "0/5 nodes are available: 1 node(s) had untolerated taint(s), \
                            2 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.";
        assert_eq!(check_fit_error(with_foreign, &own, None).unwrap(), 5);
        assert!(
            check_fit_error("0/3 nodes are available: 3 Insufficient cpu.", &own, None).is_err()
        );
        assert!(
            check_fit_error("0/2 nodes are available: 2 Insufficient cpu", &own, None).is_err()
        );
        assert!(
            check_fit_error(
                "0/3 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.",
                &own,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn check_fit_error_checks_the_preemption_part() {
        let own = [
            (2, "Insufficient cpu"),
            (1, "node(s) had untolerated taint(s)"),
        ];
        let fit = "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
                   1 node(s) had untolerated taint(s), 2 Insufficient cpu.";
        let good = format!(
            "{fit} preemption: 0/4 nodes are available: 2 No preemption victims found for \
             incoming pod, 2 Preemption is not helpful for scheduling."
        );
        let preemption = [(2, NO_VICTIMS), (1, NOT_HELPFUL)];
        assert_eq!(check_fit_error(&good, &own, Some(&preemption)).unwrap(), 4);
        assert!(check_fit_error(&good, &own, None).is_err());
        assert!(check_fit_error(fit, &own, Some(&preemption)).is_err());
        let wrong_code = format!(
            "{fit} preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        );
        assert!(check_fit_error(&wrong_code, &own, Some(&preemption)).is_err());
        let wrong_total = format!(
            "{fit} preemption: 0/5 nodes are available: 2 No preemption victims found for \
             incoming pod, 3 Preemption is not helpful for scheduling."
        );
        assert!(check_fit_error(&wrong_total, &own, Some(&preemption)).is_err());
    }
}
