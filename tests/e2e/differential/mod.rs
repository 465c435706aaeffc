//! Differential test: placer's safety filters against stock kube-scheduler's, on random cases.
//!
//! A seeded generator (xorshift64*, no crates) builds each case: 3–5 nodes with random cpu,
//! memory, `pods` and `example.com/gpu` capacity, labels from a small set, taints
//! (`NoSchedule`, `PreferNoSchedule`, `NoExecute`) from a small set, sometimes
//! `spec.unschedulable`, sometimes a pod already bound there; and one pod with random requests
//! (sometimes an init container, sometimes an extended resource), `nodeSelector`, required node
//! affinity (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`), tolerations, and sometimes a
//! `hostPort`, with a node already holding a pod on that port (same or other protocol and host
//! IP); sometimes pod-level `spec.resources` requests over the containers'; sometimes a container
//! restart rule with action `RestartAllContainers`, which needs nodes declaring
//! `RestartAllContainersOnContainerExits` in `status.declaredFeatures` (some do). Most cases also
//! get storage ([`storage`]): claims bound to local, zoned or CSI volumes, unbound `Immediate`
//! claims, unbound `WaitForFirstConsumer` claims with free static local volumes or a
//! provisioning class, a `ReadWriteOncePod` claim in use, CSINodes with per-driver limits and
//! zoned nodes; every copy has its own volumes, claims and CSINodes, and the classes are shared.
//! Most cases also get devices ([`devices`]): ResourceSlices of 0–3 devices per node, some held
//! by allocated claims, and a pod that asks for devices through a ResourceClaim (one, two on one
//! NUMA node, a CEL-selected class, `All`, `firstAvailable`, a request selector) or through an
//! extended resource a DeviceClass serves.
//! placer in standalone mode and stock kube-scheduler each get a copy of the pod.
//! kube-scheduler runs its default profile with only the plugins placer lacks disabled by name
//! ([`PLACER_LACKS`], empty today); placer runs the rest in the same order ([`comparable_plugins`]: `NodeName`,
//! `NodeUnschedulable`, `TaintToleration`, `NodeAffinity`, `NodePorts`, `NodeResourcesFit`,
//! `VolumeRestrictions`, `NodeVolumeLimits`, `VolumeBinding`, `VolumeZone`, `PodTopologySpread`, `InterPodAffinity`, `DynamicResources`, the PostFilter `DefaultPreemption`,
//! the scores and `NodeDeclaredFeatures`, plus queue sort and gates). Bound pods and the case's pod get random priorities (no
//! class, or the test's classes of value 10 and 1000), so some cases preempt: the pod's first
//! `FailedScheduling` then says where it will go and how many pods it evicts, and it is bound
//! once they are gone. The test asserts that for every case both agree on bound vs unschedulable
//! vs provisioning (a claim annotated with one of the copy's nodes to be provisioned there: no
//! provisioner runs, so such a pod waits in PreBind), bound or provisioning at once vs after a
//! failure, and on the first `FailedScheduling` message, byte for
//! byte except for the node name in "found a potential placement for pod on node ...": among
//! equally good candidates kube-scheduler's pick is arbitrary (a Go map's order, and "now" as
//! the start time of kubelet-less pods), placer's the first by name.
//!
//! Isolation. Each scheduler's copy of the pod gets its own copy of the case's nodes (and of the
//! pods already bound there), so the first binding never changes what the second copy sees. Pods
//! reach their nodes only through a `nodeSelector` on a per-copy label ([`CASE_LABEL`]), which
//! both schedulers evaluate the same way: every other node of the cluster fails it (or an earlier
//! filter) and counts in the message's "0/N nodes" histogram like any other node. The generator
//! sometimes pins the pod to one of the copy's nodes by name, DaemonSet-style (`matchFields`
//! `metadata.name In [...]` in every required term): both schedulers' NodeAffinity PreFilter then
//! evaluates that node only and reports every other node as "node(s) didn't satisfy plugin(s)
//! [NodeAffinity]".
//!
//! The control plane is the test's own, with kube-controller-manager's PV binder: it completes
//! the bindings PreBind starts, and the pre-bound claims are bound by it before any pod comes.
//!
//! Stable "N". The message counts every node of the cluster, so both copies are created at
//! the same moment after a barrier proving both schedulers see every node and bound pod of the
//! attempt (a probe pod per scheduler bound to a node created last).
//!
//! The chosen node. kube-scheduler runs at `--v=10`, where `prioritizeNodes` logs each node's
//! total score; where both placed their copy at once (bound, or a claim annotated to be
//! provisioned), placer's node (by index in the copy) must be among the nodes kube-scheduler
//! scored highest, and where that top is unique both chose the same node
//! ([`outcome::chosen_node_disagreement`]).
//!
//! No forgiveness. A case can still race something (a scheduler's informer of another kind a
//! moment behind, the PV binder), so a disagreeing case is run once more from scratch (both
//! sides, fresh nodes): if it disagrees again the test fails; if not, it is printed as a flake
//! with both runs' outcomes, and more than [`outcome::MAX_FLAKES`] flakes fail the run.
//!
//! CI runs seed [`DEFAULT_SEED`] with [`DEFAULT_CASES`] cases; under CI (`CI` set) fewer cases
//! are refused ([`case_count`]). More seeds and cases:
//!
//! ```text
//! PLACER_DIFF_SEED=42 PLACER_DIFF_CASES=40 cargo test --test e2e differential -- --nocapture
//! for s in $(seq 1 20); do PLACER_DIFF_SEED=$s cargo test --test e2e differential || break; done
//! ```
//!
//! Case `i` of seed `s` depends only on `(s, i)`, so a failing case reproduces with the same seed
//! and at least `i + 1` cases. On a disagreement the test prints the case (nodes, bound pods,
//! pod) and both outcomes.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::compare::{KubeSchedulerYaml, PLACER_LACKS, comparable_plugins, placer_policy};
use crate::harness::controller_manager::ControllerManager;
use crate::harness::logs::{field, lines_with};
use crate::harness::{Placer, RUN_LABEL, Scheduler, TestEnv};

mod devices;
mod generator;
mod outcome;
mod relations;
mod storage;

use devices::DeviceClasses;
use generator::Case;
pub(crate) use generator::Rng;
use outcome::{CaseRun, Outcome};
use storage::{CLAIM_COPY_LABEL, SELECTED_NODE, StorageClasses, claims_bound};

/// Seed of the CI run (`PLACER_DIFF_SEED` overrides it; decimal or `0x` hex). Its first
/// [`DEFAULT_CASES`] cases include a preemption past a bound pod's own anti-affinity (case 17),
/// a pod that finds no victims and a full CSI driver (0), a volume zone (12), a generic
/// ephemeral volume (10), unbound immediate claims (6, 14, 22) and five pods bound at once whose
/// node is compared, besides plain misfits.
const DEFAULT_SEED: u64 = 6;
/// Cases of the CI run (`PLACER_DIFF_CASES` overrides it): 24, so that the rotation of storage
/// kinds comes round three times.
const DEFAULT_CASES: usize = 24;
/// Node label confining each copy of a case's pod to that copy's nodes.
const CASE_LABEL: &str = "e2e.placer.io/diff-case";
/// Pod label naming the attempt, to list and delete an attempt's pods.
const ATTEMPT_LABEL: &str = "e2e.placer.io/diff-attempt";
/// Pod label telling the generated pods from the pods bound beforehand.
const ROLE_LABEL: &str = "e2e.placer.io/diff-role";
/// The image of every pod; nothing runs it.
const POD_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The host port generated pods ask for.
const HOST_PORT: u16 = 18080;
/// How long a preemptor may take to be placed once its victims are chosen.
const PREEMPTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long both schedulers may take to report on every pod of an attempt.
const OUTCOME_TIMEOUT: Duration = Duration::from_mins(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placer_filters_agree_with_kube_scheduler() -> anyhow::Result<()> {
    let seed = env_number("PLACER_DIFF_SEED")?.unwrap_or(DEFAULT_SEED);
    let count = case_count("PLACER_DIFF_CASES", DEFAULT_CASES)?;
    // A control plane of its own: kube-controller-manager's PV binder completes the bindings
    // VolumeBinding's PreBind starts, and it must not bind other tests' claims.
    let env = TestEnv::with_own_control_plane("differential").await?;
    let _kcm = ControllerManager::start_pv_binder(&env).await?;
    let storage_classes = StorageClasses::create(&env).await?;
    let device_classes = DeviceClasses::create(&env).await?;
    let names = Names {
        placer: env.name("placer"),
        kube: env.scheduler_name(),
    };
    let classes = Classes {
        low: env.create_priority_class("low", 10).await?,
        high: env.create_priority_class("high", 1000).await?,
    };
    let _placer = Placer::start_with(
        &env,
        &placer_policy(&names.placer, &comparable_plugins()),
        "placer",
        "standalone",
        &[],
    )
    .await?;
    let yaml = KubeSchedulerYaml::new()
        .default_profile(&names.kube, &PLACER_LACKS)
        .render(&env);
    // At --v=10 kube-scheduler logs each node's total score: the chosen node is compared.
    let kube = Scheduler::start_with_yaml_verbosity(&env, &yaml, 10).await?;

    eprintln!("differential: seed {seed:#x}, {count} cases");
    let cases: Vec<Case> = (0..count).map(|i| Case::generate(seed, i)).collect();
    let all: Vec<usize> = (0..count).collect();
    let run = |todo: Vec<usize>, attempt: usize| {
        let (env, names, classes) = (&env, &names, &classes);
        let (classes_both, cases, log) =
            ((&storage_classes, &device_classes), &cases, kube.log_path());
        async move {
            run_attempt(
                env,
                names,
                classes,
                classes_both,
                log,
                cases,
                &todo,
                attempt,
            )
            .await
        }
    };
    let first = run(all.clone(), 1).await?;
    let mut disagreeing = Vec::new();
    for (&i, outcome) in all.iter().zip(&first) {
        match outcome.disagreement() {
            None => eprintln!("case {i}: both {}", outcome.placer),
            Some(why) => {
                eprintln!("case {i} DISAGREES ({why}), running it again from scratch");
                disagreeing.push(i);
            }
        }
    }
    // Both sides again, on fresh nodes: a difference in semantics repeats, a race does not.
    let (mut persistent, mut flakes) = (Vec::new(), Vec::new());
    if !disagreeing.is_empty() {
        let again = run(disagreeing.clone(), 2).await?;
        for (&i, second) in disagreeing.iter().zip(&again) {
            let describe = cases[i].describe();
            match second.disagreement() {
                Some(why) => {
                    eprintln!(
                        "case {i} DISAGREES again ({why}):\n  first run:  {}\n  second run: {second}\n{describe}",
                        first[i]
                    );
                    persistent.push(i);
                }
                None => {
                    eprintln!(
                        "case {i} FLAKE: disagreed, then agreed on a fresh run\n  first run:  {}\n  second run: {second}\n{describe}",
                        first[i]
                    );
                    flakes.push(i);
                }
            }
        }
    }
    outcome::verdict(seed, first.len(), &persistent, &flakes)
}

/// `name` as a count of cases, `default` if unset; never 0, and under CI (`CI` set and not
/// empty) never below `default`: CI always runs at least its fixed cases.
pub(crate) fn case_count(name: &str, default: usize) -> anyhow::Result<usize> {
    let count = env_number(name)?.map_or(default, |n| n as usize);
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty());
    checked_count(name, count, default, ci)
}

/// `count` if it is allowed: not 0, and under CI not below `minimum`.
fn checked_count(name: &str, count: usize, minimum: usize, ci: bool) -> anyhow::Result<usize> {
    if count == 0 || (ci && count < minimum) {
        bail!(
            "{name}={count}: {} cases at least",
            if ci { minimum } else { 1 }
        );
    }
    Ok(count)
}

#[test]
fn ci_cannot_run_fewer_cases_than_its_minimum() {
    assert_eq!(checked_count("N", 24, 24, true).ok(), Some(24));
    assert_eq!(checked_count("N", 40, 24, true).ok(), Some(40));
    assert!(checked_count("N", 6, 24, true).is_err());
    assert_eq!(
        checked_count("N", 6, 24, false).ok(),
        Some(6),
        "fewer outside CI, to reproduce"
    );
    assert!(checked_count("N", 0, 24, false).is_err(), "never none");
}

/// The test's PriorityClasses.
struct Classes {
    /// Value 10.
    low: String,
    /// Value 1000.
    high: String,
}

impl Classes {
    fn name(&self, class: Class) -> Option<&str> {
        match class {
            Class::None => None,
            Class::Low => Some(&self.low),
            Class::High => Some(&self.high),
        }
    }
}

/// A pod's priority: no class (0), or one of [`Classes`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Class {
    #[default]
    None,
    Low,
    High,
}

/// The two schedulers' names: placer's profile and kube-scheduler's.
struct Names {
    placer: String,
    kube: String,
}

/// Runs cases `todo` once on fresh nodes; returns both schedulers' handling of each, in order
/// (kube-scheduler's scores read from its log at `kube_log`).
#[allow(clippy::too_many_arguments)]
async fn run_attempt(
    env: &TestEnv,
    names: &Names,
    classes: &Classes,
    (storage_classes, device_classes): (&StorageClasses, &DeviceClasses),
    kube_log: &std::path::Path,
    cases: &[Case],
    todo: &[usize],
    attempt: usize,
) -> anyhow::Result<Vec<CaseRun>> {
    let attempt_value = format!("a{attempt}");
    let copies: Vec<(usize, Side)> = todo
        .iter()
        .flat_map(|&i| {
            [("p", &names.placer), ("k", &names.kube)].map(|(letter, scheduler)| {
                (i, {
                    let tag = format!("c{i}{letter}-{attempt_value}");
                    Side {
                        node_stem: env.name(&tag),
                        tag,
                        scheduler: scheduler.clone(),
                        attempt: attempt_value.clone(),
                    }
                })
            })
        })
        .collect();

    // Volumes, claims and CSINodes, then nodes, then the pods bound to them, then the barrier
    // (which also gives both schedulers' storage informers a second).
    let mut volumes = Vec::new();
    let mut claims = Vec::new();
    let mut csi_nodes = Vec::new();
    for (i, side) in &copies {
        let storage = &cases[*i].storage;
        volumes.extend(storage.volume_objects(env, side, storage_classes)?);
        claims.extend(storage.claim_objects(env, side, storage_classes)?);
        csi_nodes.extend(storage.csi_nodes(side)?);
    }
    create_all(Api::all(env.client().clone()), volumes).await?;
    create_all(
        Api::<PersistentVolumeClaim>::namespaced(env.client().clone(), env.namespace()),
        claims,
    )
    .await?;
    create_all(Api::all(env.client().clone()), csi_nodes).await?;
    claims_bound(env, &attempt_value).await?;
    // Devices: slices and claims, then the taken devices' allocations.
    let mut slices = Vec::new();
    let mut device_claims = Vec::new();
    for (i, side) in &copies {
        slices.extend(cases[*i].devices.slices(side)?);
        device_claims.extend(cases[*i].devices.claims(side, device_classes)?);
    }
    create_all(Api::all(env.client().clone()), slices).await?;
    create_all(
        Api::namespaced(env.client().clone(), env.namespace()),
        device_claims,
    )
    .await?;
    for (i, side) in &copies {
        cases[*i].devices.allocate_taken(env, side).await?;
    }
    let nodes: Vec<Node> = copies
        .iter()
        .flat_map(|(i, side)| cases[*i].nodes(env, side))
        .collect();
    create_all(Api::<Node>::all(env.client().clone()), nodes).await?;
    let bound: Vec<Pod> = copies
        .iter()
        .flat_map(|(i, side)| cases[*i].occupants(side, classes))
        .collect();
    create_all(env.pods(), bound).await?;
    barrier(env, names, &attempt_value).await?;

    // Both copies of each case at the same moment.
    let pods = env.pods();
    futures::stream::iter(copies.chunks(2).map(|pair| {
        let (i, placer_copy, kube_copy) = (pair[0].0, &pair[0].1, &pair[1].1);
        let (a, b) = (
            cases[i].pod(placer_copy, classes),
            cases[i].pod(kube_copy, classes),
        );
        let pods = pods.clone();
        async move {
            let pp = PostParams::default();
            let (ra, rb) = tokio::join!(pods.create(&pp, &a), pods.create(&pp, &b));
            ra.with_context(|| format!("create placer's copy of case {i}"))?;
            rb.with_context(|| format!("create kube-scheduler's copy of case {i}"))?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<_>>()
    .await?;

    let tags: Vec<String> = copies.iter().map(|(_, c)| c.tag.clone()).collect();
    let observed = wait_outcomes(env, &attempt_value, &tags).await?;
    let mut out = Vec::new();
    for pair in copies.chunks(2) {
        let i = pair[0].0;
        let [placer, kube] = [&pair[0].1, &pair[1].1].map(|side| {
            let seen = &observed[&side.tag];
            let placed = seen.node.as_ref().or(seen.selected.as_ref());
            match placed.map(|node| node_index(node, &side.node_stem)) {
                Some(None) => Err(anyhow::anyhow!(
                    "case {i}: pod {} bound to or provisioned for {placed:?}, not one of its \
                     own nodes",
                    side.tag
                )),
                index => Ok((
                    seen.outcome()
                        .without_copy_names(&side.node_stem, &side.tag),
                    index.flatten(),
                )),
            }
        });
        let ((placer, placer_node), (kube_outcome, kube_node)) = (placer?, kube?);
        let kube_side = &pair[1].1;
        out.push(CaseRun {
            placer,
            kube: kube_outcome,
            placer_node,
            kube_node,
            kube_totals: logged_totals(
                kube_log,
                &format!("{}/{}", env.namespace(), kube_side.tag),
                &kube_side.node_stem,
            )?,
        });
    }
    // The attempt's generated pods are done with; pending ones would only keep both schedulers
    // retrying on every cluster event.
    pods.delete_collection(
        &DeleteParams::default().grace_period(0),
        &ListParams::default().labels(&format!(
            "{ATTEMPT_LABEL}={attempt_value},{ROLE_LABEL}=case"
        )),
    )
    .await
    .context("delete the attempt's pods")?;
    Ok(out)
}

/// The index `i` of a copy's node named `<stem>-<i>`; `None` for any other node.
fn node_index(node: &str, stem: &str) -> Option<usize> {
    node.strip_prefix(stem)?.strip_prefix('-')?.parse().ok()
}

/// kube-scheduler's total score per node index for `pod` (`ns/name`), from the lines
/// `prioritizeNodes` logs at `--v=10` (`"Calculated node's final score for pod"`); the last
/// cycle's, if it scored the pod more than once.
fn logged_totals(
    log: &std::path::Path,
    pod: &str,
    stem: &str,
) -> anyhow::Result<BTreeMap<usize, i64>> {
    let quoted = format!("pod=\"{pod}\"");
    let mut totals = BTreeMap::new();
    for line in lines_with(log, &["\"Calculated node's final score for pod\"", &quoted])? {
        if let (Some(i), Some(score)) = (
            field(&line, "node").and_then(|n| node_index(n, stem)),
            field(&line, "score"),
        ) {
            totals.insert(i, score.parse()?);
        }
    }
    Ok(totals)
}

/// One scheduler's copy of a case: the name stem of its nodes and pods, the value of its
/// [`CASE_LABEL`], and the scheduler its pod names.
struct Side {
    tag: String,
    /// The copy's node names are `<node_stem>-<i>`.
    node_stem: String,
    scheduler: String,
    attempt: String,
}

/// Creates the objects, 16 at a time.
async fn create_all<K>(api: Api<K>, objects: Vec<K>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    futures::stream::iter(objects)
        .map(|o| {
            let api = api.clone();
            async move {
                let name = o.meta().name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &o)
                    .await
                    .with_context(|| format!("create {name}"))
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Proves both schedulers see every node and pod created so far: a node created last, and one
/// probe pod per scheduler that can only go there, created after every bound pod. kube-scheduler
/// gets nodes and pods each from one informer, in order; placer watches unscheduled pods apart
/// from its cache, so a short pause follows.
async fn barrier(env: &TestEnv, names: &Names, attempt: &str) -> anyhow::Result<()> {
    let label = format!("sentinel-{attempt}");
    env.create_nodes([env
        .node(&format!("sentinel-{attempt}"))
        .label(CASE_LABEL, &label)])
        .await?;
    for (side, scheduler) in [("p", &names.placer), ("k", &names.kube)] {
        let probe = crate::harness::PodBuilder::new(&format!("probe-{attempt}-{side}"))
            .scheduler(scheduler)
            .node_selector(CASE_LABEL, &label);
        env.create_pod(&probe).await?;
    }
    for side in ["p", "k"] {
        env.wait_pod_bound(&format!("probe-{attempt}-{side}"))
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

/// A pod's binding, the node a claim of its copy was annotated to be provisioned on, and its
/// `FailedScheduling` messages, oldest first.
#[derive(Debug, Default)]
struct Observed {
    node: Option<String>,
    selected: Option<String>,
    failures: Vec<String>,
}

impl Observed {
    fn done(&self) -> bool {
        self.node.is_some() || self.selected.is_some() || !self.failures.is_empty()
    }

    /// Reported a placement found by preemption and neither bound nor provisioned yet.
    fn awaits_victims(&self) -> bool {
        self.node.is_none()
            && self.selected.is_none()
            && (self.failures.first()).is_some_and(|m| m.contains("found a potential placement"))
    }

    fn outcome(&self) -> Outcome {
        match (&self.node, &self.selected, self.failures.first()) {
            (Some(_), _, None) => Outcome::Bound,
            (Some(_), _, Some(m)) => Outcome::BoundAfterFailure(m.clone()),
            (None, Some(_), m) => Outcome::Provisioning(m.cloned()),
            (None, None, Some(m)) => Outcome::Unschedulable(m.clone()),
            (None, None, None) => Outcome::Undecided,
        }
    }
}

/// Waits until every pod in `tags` is bound or has a `FailedScheduling` event, then a second
/// more (a late binding after a failure shows), and returns what was seen. A pod still
/// undecided after [`OUTCOME_TIMEOUT`] is left so ([`Outcome::Undecided`]): a disagreement
/// like any other, run again from scratch, not the end of the whole run.
async fn wait_outcomes(
    env: &TestEnv,
    attempt: &str,
    tags: &[String],
) -> anyhow::Result<HashMap<String, Observed>> {
    let decided = env
        .poll(
            "both schedulers to decide on every pod",
            OUTCOME_TIMEOUT,
            || async {
                let seen = observe(env, attempt).await?;
                let waiting: Vec<&String> = tags
                    .iter()
                    .filter(|t| !seen.get(*t).is_some_and(Observed::done))
                    .collect();
                Ok(if waiting.is_empty() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(format!("no outcome yet for {waiting:?}"))
                })
            },
        )
        .await;
    if let Err(e) = decided {
        eprintln!("{e:#}; the undecided pods count as disagreeing");
    }
    // A preemptor waits for its victims to go and then for its retry (kube-scheduler's backoff
    // is a second and more): give it until PREEMPTION_TIMEOUT to be placed, so both sides'
    // outcomes are final ones, not how far each got within a second.
    let placed = env
        .poll("preemptors to be placed", PREEMPTION_TIMEOUT, || async {
            let seen = observe(env, attempt).await?;
            let waiting: Vec<&String> = (seen.iter())
                .filter(|(_, o)| o.awaits_victims())
                .map(|(t, _)| t)
                .collect();
            Ok(if waiting.is_empty() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("{waiting:?} not placed yet"))
            })
        })
        .await;
    if let Err(e) = placed {
        eprintln!("{e:#}; they count as unschedulable");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    observe(env, attempt).await
}

/// Bindings and `FailedScheduling` messages of the attempt's generated pods.
async fn observe(env: &TestEnv, attempt: &str) -> anyhow::Result<HashMap<String, Observed>> {
    let pods = env
        .pods()
        .list(
            &ListParams::default().labels(&format!("{ATTEMPT_LABEL}={attempt},{ROLE_LABEL}=case")),
        )
        .await?;
    let mut seen: HashMap<String, Observed> = pods
        .items
        .into_iter()
        .filter_map(|p| {
            let name = p.metadata.name?;
            let node = p.spec.and_then(|s| s.node_name);
            Some((
                name,
                Observed {
                    node,
                    ..Observed::default()
                },
            ))
        })
        .collect();
    let claims = Api::<PersistentVolumeClaim>::namespaced(env.client().clone(), env.namespace())
        .list(&ListParams::default().labels(&format!("{ATTEMPT_LABEL}={attempt}")))
        .await?;
    for c in claims.items {
        let copy = c
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CLAIM_COPY_LABEL));
        let node = c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTED_NODE));
        if let (Some(copy), Some(node)) = (copy, node)
            && let Some(o) = seen.get_mut(copy)
        {
            o.selected = Some(node.clone());
        }
    }
    let events: Api<Event> = Api::namespaced(env.client().clone(), env.namespace());
    let mut list = events
        .list(&ListParams::default().fields("reason=FailedScheduling"))
        .await?
        .items;
    // events.k8s.io events (both schedulers write those) carry a microsecond eventTime.
    list.sort_by_key(|e| {
        e.event_time
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    for e in list {
        if let (Some(name), Some(message)) = (e.involved_object.name, e.message)
            && let Some(o) = seen.get_mut(&name)
        {
            o.failures.push(message);
        }
    }
    Ok(seen)
}

/// `name` as a number (decimal, or hex with `0x`), if set.
pub(crate) fn env_number(name: &str) -> anyhow::Result<Option<u64>> {
    let Ok(value) = std::env::var(name) else {
        return Ok(None);
    };
    let v = value.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed
        .map(Some)
        .with_context(|| format!("{name}={value:?} is not a number"))
}
