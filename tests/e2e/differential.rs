//! Differential test: placer's safety filters against stock kube-scheduler's, on random cases.
//!
//! A seeded generator (xorshift64*, no crates) builds each case: 3–5 nodes with random cpu,
//! memory, `pods` and `example.com/gpu` capacity, labels from a small set, taints
//! (`NoSchedule`, `PreferNoSchedule`, `NoExecute`) from a small set, sometimes
//! `spec.unschedulable`, sometimes a pod already bound there; and one pod with random requests
//! (sometimes an init container, sometimes an extended resource), `nodeSelector`, required node
//! affinity (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`), tolerations, and sometimes a
//! `hostPort`, with a node already holding a pod on that port (same or other protocol and host
//! IP). placer in standalone mode and stock kube-scheduler each get a copy of the pod. Both run
//! the same plugins in the same order, kube-scheduler's default order
//! ([`safety_filter_plugins`]: `NodeName`, `NodeUnschedulable`, `TaintToleration`,
//! `NodeAffinity`, `NodePorts`, `NodeResourcesFit`, plus queue sort and gates, and the
//! PostFilter `DefaultPreemption`). Bound pods and the case's pod get random priorities (no
//! class, or the test's classes of value 10 and 1000), so some cases preempt: the pod's first
//! `FailedScheduling` then says where it will go and how many pods it evicts, and it is bound
//! once they are gone. The test asserts that for every case both agree on bound vs unschedulable
//! (and bound at once vs after a failure) and on the first `FailedScheduling` message, byte for
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
//! Stable "N". The message counts every node of the shared cluster, so both copies are created at
//! the same moment after a barrier proving both schedulers see every node and bound pod of the
//! attempt (a probe pod per scheduler bound to a node created last). Tests running concurrently
//! may still add or change nodes between the two schedulers' attempts; rather than comparing
//! with a tolerance on N, a disagreeing case is run again on fresh nodes (up to
//! [`MAX_ATTEMPTS`] in all) and only a disagreement that repeats fails the test. A real
//! difference in plugin semantics repeats by construction; one that goes away is printed as
//! transient.
//!
//! CI runs seed [`DEFAULT_SEED`] with [`DEFAULT_CASES`] cases. More seeds and cases:
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
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::compare::{KubeSchedulerYaml, placer_policy, safety_filter_plugins};
use crate::harness::{Placer, RUN_LABEL, Scheduler, TestEnv};

/// Seed of the CI run (`PLACER_DIFF_SEED` overrides it; decimal or `0x` hex). Its first
/// [`DEFAULT_CASES`] cases include a preemption (case 2) and a pod that finds no victims (case 3)
/// besides plain fits and misfits.
const DEFAULT_SEED: u64 = 6;
/// Cases of the CI run (`PLACER_DIFF_CASES` overrides it).
const DEFAULT_CASES: usize = 12;
/// Runs of one case before a disagreement counts (see the module docs).
const MAX_ATTEMPTS: usize = 3;
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
/// How long both schedulers may take to report on every pod of an attempt.
const OUTCOME_TIMEOUT: Duration = Duration::from_mins(1);

const DISK: &str = "e2e.placer.io/disk";
const TIER: &str = "e2e.placer.io/tier";
const RANK: &str = "e2e.placer.io/rank";
const GPU_LABEL: &str = "e2e.placer.io/gpu";
const GPU: &str = "example.com/gpu";
const DEDICATED: &str = "e2e.placer.io/dedicated";
const SPOT: &str = "e2e.placer.io/spot";
const MAINTENANCE: &str = "e2e.placer.io/maintenance";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placer_filters_agree_with_kube_scheduler() -> anyhow::Result<()> {
    let seed = env_number("PLACER_DIFF_SEED")?.unwrap_or(DEFAULT_SEED);
    let count = env_number("PLACER_DIFF_CASES")?.map_or(DEFAULT_CASES, |n| n as usize);
    let env = TestEnv::new("differential").await?;
    let names = Names {
        placer: env.name("placer"),
        kube: env.scheduler_name(),
    };
    let classes = Classes {
        low: env.create_priority_class("low", 10).await?,
        high: env.create_priority_class("high", 1000).await?,
    };
    let plugins = safety_filter_plugins();
    let _placer = Placer::start_with(
        &env,
        &placer_policy(&names.placer, &plugins),
        "placer",
        "standalone",
        &[],
    )
    .await?;
    let yaml = KubeSchedulerYaml::new()
        .profile(&names.kube, &plugins)
        .render(&env);
    let _kube = Scheduler::start_with_yaml(&env, &yaml).await?;

    eprintln!("differential: seed {seed:#x}, {count} cases");
    let cases: Vec<Case> = (0..count).map(|i| Case::generate(seed, i)).collect();
    let mut todo: Vec<usize> = (0..count).collect();
    let mut transient = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let outcomes = run_attempt(&env, &names, &classes, &cases, &todo, attempt).await?;
        let mut disagreeing = Vec::new();
        for (&i, (placer, kube)) in todo.iter().zip(&outcomes) {
            if placer == kube {
                eprintln!("case {i} (attempt {attempt}): both {placer}");
                if attempt > 1 {
                    transient.push(i);
                }
            } else {
                eprintln!(
                    "case {i} (attempt {attempt}) DISAGREES:\n  placer:         {placer}\n  \
                     kube-scheduler: {kube}\n{}",
                    cases[i].describe()
                );
                disagreeing.push(i);
            }
        }
        todo = disagreeing;
        if todo.is_empty() {
            break;
        }
    }
    if !transient.is_empty() {
        eprintln!(
            "cases {transient:?} disagreed at first and agreed when run again on fresh nodes \
             (the shared cluster changed between the two schedulers' attempts)"
        );
    }
    if !todo.is_empty() {
        bail!(
            "seed {seed:#x}: cases {todo:?} disagree in all {MAX_ATTEMPTS} attempts (details above)"
        );
    }
    Ok(())
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

/// What a scheduler did with a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Bound, with no `FailedScheduling` before.
    Bound,
    /// Not bound; the first `FailedScheduling` message.
    Unschedulable(String),
    /// Reported unschedulable first, bound later (a stale view of the cluster).
    BoundAfterFailure(String),
}

impl Outcome {
    /// The outcome with the copy's node names (`<stem>-<i>`) in its message replaced by
    /// `<node>`, so both copies' messages compare (see the module docs).
    fn without_node_names(self, stem: &str) -> Self {
        let clean = |m: String| -> String {
            let mut out = String::new();
            let mut rest = m.as_str();
            while let Some(at) = rest.find(stem) {
                out.push_str(&rest[..at]);
                out.push_str("<node>");
                rest = rest[at + stem.len()..]
                    .strip_prefix('-')
                    .map_or(&rest[at + stem.len()..], |r| {
                        r.trim_start_matches(|c: char| c.is_ascii_digit())
                    });
            }
            out.push_str(rest);
            out
        };
        match self {
            Outcome::Bound => Outcome::Bound,
            Outcome::Unschedulable(m) => Outcome::Unschedulable(clean(m)),
            Outcome::BoundAfterFailure(m) => Outcome::BoundAfterFailure(clean(m)),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Bound => f.write_str("bound"),
            Outcome::Unschedulable(m) => write!(f, "unschedulable: {m:?}"),
            Outcome::BoundAfterFailure(m) => write!(f, "bound after failing with {m:?}"),
        }
    }
}

/// Runs cases `todo` once on fresh nodes; returns (placer, kube-scheduler) outcomes in order.
async fn run_attempt(
    env: &TestEnv,
    names: &Names,
    classes: &Classes,
    cases: &[Case],
    todo: &[usize],
    attempt: usize,
) -> anyhow::Result<Vec<(Outcome, Outcome)>> {
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

    // Nodes, then the pods bound to them, then the barrier.
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
            match &seen.node {
                Some(node) if !node.starts_with(&format!("{}-", side.node_stem)) => {
                    Err(anyhow::anyhow!(
                        "case {i}: pod {} bound to {node}, not one of its own nodes",
                        side.tag
                    ))
                }
                _ => Ok(seen.outcome().without_node_names(&side.node_stem)),
            }
        });
        out.push((placer?, kube?));
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

/// A pod's binding and `FailedScheduling` messages, oldest first.
#[derive(Debug, Default)]
struct Observed {
    node: Option<String>,
    failures: Vec<String>,
}

impl Observed {
    fn done(&self) -> bool {
        self.node.is_some() || !self.failures.is_empty()
    }

    fn outcome(&self) -> Outcome {
        match (&self.node, self.failures.first()) {
            (Some(_), None) => Outcome::Bound,
            (Some(_), Some(m)) => Outcome::BoundAfterFailure(m.clone()),
            (None, m) => Outcome::Unschedulable(m.cloned().unwrap_or_default()),
        }
    }
}

/// Waits until every pod in `tags` is bound or has a `FailedScheduling` event, then a second
/// more (a late binding after a failure shows), and returns what was seen.
async fn wait_outcomes(
    env: &TestEnv,
    attempt: &str,
    tags: &[String],
) -> anyhow::Result<HashMap<String, Observed>> {
    env.poll(
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
    .await?;
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
                    failures: Vec::new(),
                },
            ))
        })
        .collect();
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

/// xorshift64*: small, fast, good enough to pick test inputs; seeded through splitmix64.
/// Shared with the score differential (`differential_scores`).
pub(crate) struct Rng(u64);

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// The generator of case `index` of `seed`.
    pub(crate) fn new(seed: u64, index: usize) -> Self {
        Self(splitmix64(seed ^ splitmix64(index as u64)).max(1))
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub(crate) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

/// A `hostPort` of [`HOST_PORT`]: protocol and host IP (`None`: all addresses).
#[derive(Clone, Debug)]
struct HostPort {
    protocol: &'static str,
    host_ip: Option<&'static str>,
}

/// A container's requests and host port.
#[derive(Clone, Debug, Default)]
struct Load {
    cpu_m: u32,
    memory_mi: u32,
    gpus: u32,
    port: Option<HostPort>,
    class: Class,
}

#[derive(Clone, Debug)]
struct NodeSpec {
    cpu_m: u32,
    memory_mi: u32,
    pods: u32,
    gpus: u32,
    labels: Vec<(&'static str, String)>,
    taints: Vec<(&'static str, &'static str, &'static str)>,
    unschedulable: bool,
    /// Pods already bound to the node.
    occupants: Vec<Load>,
}

#[derive(Clone, Debug)]
struct PodSpec {
    load: Load,
    /// Pinned to the copy's node with this index by `matchFields` (drawn last, in `generate`).
    pinned: Option<usize>,
    init_cpu_m: Option<u32>,
    node_selector: Vec<(&'static str, String)>,
    /// Required node affinity: terms (ORed) of match expressions (ANDed).
    terms: Vec<Vec<Value>>,
    tolerations: Vec<Value>,
}

/// One generated case: nodes and the pod to schedule on them.
#[derive(Clone, Debug)]
struct Case {
    index: usize,
    nodes: Vec<NodeSpec>,
    pod: PodSpec,
}

const DISKS: &[&str] = &["ssd", "hdd"];
const TIERS: &[&str] = &["gold", "silver", "bronze"];
const RANKS: &[&str] = &["1", "2", "3", "4", "5"];

fn tolerations() -> Vec<Value> {
    vec![
        json!({ "key": DEDICATED, "operator": "Equal", "value": "gpu", "effect": "NoSchedule" }),
        json!({ "key": DEDICATED, "operator": "Exists" }),
        json!({ "key": DEDICATED, "operator": "Equal", "value": "infra" }),
        json!({ "key": MAINTENANCE, "operator": "Exists", "effect": "NoExecute" }),
        json!({ "key": SPOT, "operator": "Equal", "value": "true", "effect": "PreferNoSchedule" }),
        json!({ "key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule" }),
        json!({ "operator": "Exists" }),
    ]
}

impl Case {
    fn generate(seed: u64, index: usize) -> Self {
        let mut rng = Rng::new(seed, index);
        let node_count = 3 + rng.below(3);
        let mut nodes: Vec<NodeSpec> = (0..node_count).map(|_| Self::node(&mut rng)).collect();
        let pod = Self::pod_spec(&mut rng);
        if pod.load.port.is_some() {
            // One node (sometimes two) already has a pod on the port.
            for _ in 0..1 + usize::from(rng.chance(30)) {
                let port = HostPort {
                    protocol: if rng.chance(70) { "TCP" } else { "UDP" },
                    host_ip: rng.pick(&[None, Some("127.0.0.1"), Some("10.1.2.3")]),
                };
                let i = rng.below(nodes.len());
                nodes[i].occupants.push(Load {
                    port: Some(port),
                    ..Load::default()
                });
            }
        }
        // Priorities last, so a seed's nodes and pod are what they were before priorities came.
        let mut pod = pod;
        for n in &mut nodes {
            for o in &mut n.occupants {
                o.class = rng.pick(&[
                    Class::None,
                    Class::None,
                    Class::Low,
                    Class::Low,
                    Class::High,
                ]);
            }
        }
        pod.load.class = rng.pick(&[Class::None, Class::Low, Class::High, Class::High]);
        pod.pinned = rng.chance(20).then(|| rng.below(nodes.len()));
        Self { index, nodes, pod }
    }

    fn node(rng: &mut Rng) -> NodeSpec {
        let cpu_m = rng.pick(&[1000, 2000, 4000]);
        let memory_mi = rng.pick(&[1024, 2048, 4096]);
        let gpus = if rng.chance(30) { rng.pick(&[1, 2]) } else { 0 };
        let mut labels = Vec::new();
        if rng.chance(70) {
            labels.push((DISK, rng.pick(DISKS).to_owned()));
        }
        if rng.chance(60) {
            labels.push((TIER, rng.pick(TIERS).to_owned()));
        }
        if rng.chance(60) {
            labels.push((RANK, rng.pick(RANKS).to_owned()));
        }
        if rng.chance(if gpus > 0 { 85 } else { 10 }) {
            labels.push((GPU_LABEL, "true".to_owned()));
        }
        let mut taints = Vec::new();
        if rng.chance(25) {
            taints.push((DEDICATED, rng.pick(&["gpu", "infra"]), "NoSchedule"));
        }
        if rng.chance(20) {
            taints.push((SPOT, "true", "PreferNoSchedule"));
        }
        if rng.chance(15) {
            taints.push((MAINTENANCE, "soon", "NoExecute"));
        }
        let mut occupants = Vec::new();
        if rng.chance(35) {
            occupants.push(Load {
                cpu_m: rng.pick(&[250, 500, 1000]).min(cpu_m),
                memory_mi: rng.pick(&[256, 512, 1024]),
                ..Load::default()
            });
        }
        NodeSpec {
            cpu_m,
            memory_mi,
            pods: if rng.chance(20) {
                rng.pick(&[1, 2])
            } else {
                110
            },
            gpus,
            labels,
            taints,
            unschedulable: rng.chance(15),
            occupants,
        }
    }

    fn pod_spec(rng: &mut Rng) -> PodSpec {
        let load = Load {
            cpu_m: rng.pick(&[0, 100, 500, 1000, 1500, 2500, 3500]),
            memory_mi: rng.pick(&[0, 128, 512, 1536, 3072]),
            gpus: if rng.chance(20) { rng.pick(&[1, 2]) } else { 0 },
            port: rng.chance(35).then(|| HostPort {
                protocol: if rng.chance(80) { "TCP" } else { "UDP" },
                host_ip: rng.pick(&[None, None, Some("127.0.0.1")]),
            }),
            // Drawn last, in `generate`.
            class: Class::None,
        };
        let init_cpu_m = rng.chance(15).then(|| rng.pick(&[1500, 3000, 5000]));
        let mut node_selector = Vec::new();
        if rng.chance(30) {
            node_selector.push(if rng.chance(50) {
                (DISK, rng.pick(DISKS).to_owned())
            } else {
                (TIER, rng.pick(TIERS).to_owned())
            });
        }
        let terms = if rng.chance(45) {
            (0..1 + rng.below(2))
                .map(|_| (0..1 + rng.below(2)).map(|_| expression(rng)).collect())
                .collect()
        } else {
            Vec::new()
        };
        let all = tolerations();
        let tolerations = if rng.chance(50) {
            (0..1 + rng.below(2)).map(|_| rng.pick(&all)).collect()
        } else {
            Vec::new()
        };
        PodSpec {
            load,
            pinned: None,
            init_cpu_m,
            node_selector,
            terms,
            tolerations,
        }
    }

    /// The copy's nodes: `<run>-<tag>-<i>`, labelled with the run and the copy.
    fn nodes(&self, env: &TestEnv, side: &Side) -> Vec<Node> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = format!("{}-{i}", side.node_stem);
                let mut labels: BTreeMap<&str, String> = n.labels.iter().cloned().collect();
                labels.insert("kubernetes.io/hostname", name.clone());
                labels.insert(RUN_LABEL, env.run_id().to_owned());
                labels.insert(CASE_LABEL, side.tag.clone());
                let mut resources = json!({
                    "cpu": format!("{}m", n.cpu_m),
                    "memory": format!("{}Mi", n.memory_mi),
                    "pods": n.pods.to_string(),
                });
                if n.gpus > 0 {
                    resources[GPU] = json!(n.gpus.to_string());
                }
                let taints: Vec<Value> = n
                    .taints
                    .iter()
                    .map(|(k, v, e)| json!({ "key": k, "value": v, "effect": e }))
                    .collect();
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": labels },
                    "spec": { "taints": taints, "unschedulable": n.unschedulable },
                    "status": {
                        "capacity": resources,
                        "allocatable": resources,
                        "conditions": [{
                            "type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "placer e2e fake node",
                            "lastHeartbeatTime": now, "lastTransitionTime": now,
                        }],
                    },
                }))
                .expect("node JSON matches the Node schema")
            })
            .collect()
    }

    /// The pods already bound to the copy's nodes.
    fn occupants(&self, side: &Side, classes: &Classes) -> Vec<Pod> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| {
                n.occupants.iter().enumerate().map(move |(j, load)| {
                    let node = format!("{}-{i}", side.node_stem);
                    let mut spec = json!({
                        "nodeName": node,
                        "containers": [container(load)],
                        "terminationGracePeriodSeconds": 0,
                    });
                    if let Some(class) = classes.name(load.class) {
                        spec["priorityClassName"] = json!(class);
                    }
                    pod_object(&format!("{}-o{i}-{j}", side.tag), side, "bound", spec)
                })
            })
            .collect()
    }

    /// The copy's pod, named after the copy's tag.
    fn pod(&self, side: &Side, classes: &Classes) -> Pod {
        let mut selector: BTreeMap<&str, String> = self.pod.node_selector.iter().cloned().collect();
        selector.insert(CASE_LABEL, side.tag.clone());
        let mut spec = json!({
            "schedulerName": side.scheduler,
            "nodeSelector": selector,
            "tolerations": self.pod.tolerations,
            "containers": [container(&self.pod.load)],
            "terminationGracePeriodSeconds": 0,
        });
        let pin = self.pod.pinned.map(|i| {
            json!([{ "key": "metadata.name", "operator": "In",
                     "values": [format!("{}-{i}", side.node_stem)] }])
        });
        let mut terms: Vec<Value> = self
            .pod
            .terms
            .iter()
            .map(|exprs| json!({ "matchExpressions": exprs }))
            .collect();
        if let Some(pin) = &pin {
            if terms.is_empty() {
                terms.push(json!({}));
            }
            for t in &mut terms {
                t["matchFields"] = pin.clone();
            }
        }
        if !terms.is_empty() {
            spec["affinity"] = json!({ "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": terms },
            } });
        }
        if let Some(class) = classes.name(self.pod.load.class) {
            spec["priorityClassName"] = json!(class);
        }
        if let Some(cpu) = self.pod.init_cpu_m {
            spec["initContainers"] = json!([{
                "name": "init", "image": POD_IMAGE,
                "resources": { "requests": { "cpu": format!("{cpu}m") } },
            }]);
        }
        pod_object(&side.tag, side, "case", spec)
    }

    /// The case as the nodes, bound pods and pod (spec only) that both schedulers saw.
    fn describe(&self) -> String {
        let side = Side {
            tag: format!("c{}", self.index),
            node_stem: "<node>".into(),
            scheduler: "<scheduler>".into(),
            attempt: "-".into(),
        };
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let _ = writeln!(
                out,
                "  node {i}: cpu {}m, memory {}Mi, pods {}, {GPU} {}, labels {:?}, taints {:?}, \
                 unschedulable {}, bound pods {:?}",
                n.cpu_m,
                n.memory_mi,
                n.pods,
                n.gpus,
                n.labels,
                n.taints,
                n.unschedulable,
                n.occupants,
            );
        }
        let classes = Classes {
            low: "low (10)".into(),
            high: "high (1000)".into(),
        };
        let _ = writeln!(
            out,
            "  bound pods' classes (by node): {:?}",
            self.nodes
                .iter()
                .map(|n| n.occupants.iter().map(|o| o.class).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
        let pod = serde_json::to_value(self.pod(&side, &classes)).unwrap_or_default();
        let _ = write!(out, "  pod spec: {}", pod["spec"]);
        out
    }
}

/// A random required node-affinity match expression.
fn expression(rng: &mut Rng) -> Value {
    let (key, values): (&str, &[&str]) = match rng.below(3) {
        0 => (DISK, DISKS),
        1 => (TIER, TIERS),
        _ => (RANK, RANKS),
    };
    let some_values = |rng: &mut Rng| -> Vec<&str> {
        let mut v: Vec<&str> = (0..1 + rng.below(2)).map(|_| rng.pick(values)).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    match rng.below(7) {
        0 | 1 => json!({ "key": key, "operator": "In", "values": some_values(rng) }),
        2 => json!({ "key": key, "operator": "NotIn", "values": some_values(rng) }),
        3 => json!({ "key": rng.pick(&[DISK, TIER, RANK, GPU_LABEL]), "operator": "Exists" }),
        4 => {
            json!({ "key": rng.pick(&[DISK, TIER, RANK, GPU_LABEL]), "operator": "DoesNotExist" })
        }
        5 => json!({ "key": RANK, "operator": "Gt", "values": [rng.pick(&["1", "2", "3", "4"])] }),
        _ => json!({ "key": RANK, "operator": "Lt", "values": [rng.pick(&["2", "3", "4", "5"])] }),
    }
}

/// The one container of a generated pod: requests (an extended resource also as limit, as the
/// API requires) and the host port.
fn container(load: &Load) -> Value {
    let mut requests = serde_json::Map::new();
    if load.cpu_m > 0 {
        requests.insert("cpu".into(), json!(format!("{}m", load.cpu_m)));
    }
    if load.memory_mi > 0 {
        requests.insert("memory".into(), json!(format!("{}Mi", load.memory_mi)));
    }
    let mut resources = json!({ "requests": requests });
    if load.gpus > 0 {
        resources["requests"][GPU] = json!(load.gpus.to_string());
        resources["limits"] = json!({ GPU: load.gpus.to_string() });
    }
    let mut c = json!({ "name": "main", "image": POD_IMAGE, "resources": resources });
    if let Some(port) = &load.port {
        let mut p =
            json!({ "containerPort": 8080, "hostPort": HOST_PORT, "protocol": port.protocol });
        if let Some(ip) = port.host_ip {
            p["hostIP"] = json!(ip);
        }
        c["ports"] = json!([p]);
    }
    c
}

fn pod_object(name: &str, side: &Side, role: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { ATTEMPT_LABEL: side.attempt, ROLE_LABEL: role } },
        "spec": spec,
    }))
    .expect("pod JSON matches the Pod schema")
}
