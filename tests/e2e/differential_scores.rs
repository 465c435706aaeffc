//! Score differential: the per-plugin scores and totals `/explain/pods` shows for
//! kube-scheduler's in-tree plugins against the ones stock kube-scheduler logs at `--v=10` in
//! `prioritizeNodes` (`pkg/scheduler/schedule_one.go`):
//!
//! ```text
//! "Plugin scored node for pod" pod="ns/name" plugin="TaintToleration" node="n1" score=300
//! "Calculated node's final score for pod" pod="ns/name" node="n1" score=467
//! ```
//!
//! (`score` there is the normalized score times the plugin's weight: `/explain`'s `weighted`).
//! Every score kube-scheduler logs is compared, VolumeBinding's (storage capacity scoring)
//! included: placer runs every scoring plugin of the default profile.
//! kube-scheduler runs its default profile with only the plugins placer lacks disabled by name
//! ([`PLACER_LACKS`]) and schedules each random case's pod; placer runs in extender mode with
//! `--explain-kube-scheduler-config` pointing at the same configuration, so its in-tree side is
//! exactly that profile. After the pod is bound, `/explain/pods` evaluates it with itself taken
//! out, i.e. on the cluster kube-scheduler scored, and every (node, plugin) score and every node's
//! total must be equal, as must the set of nodes scored.
//!
//! Each case has 3–4 nodes of its own (a per-case label the pod selects) with random capacity,
//! `PreferNoSchedule` taints, labels and images (`status.images`, some under two names), 0–3 pods
//! already bound there with random requests and labels (some with pod-level `spec.resources`),
//! and a pod with random requests, sometimes pod-level requests, one or two init containers
//! whose images some nodes hold, preferred node affinity, tolerations and preferred pod
//! (anti-)affinity to the bound pods. So NodeResourcesBalancedAllocation and ImageLocality are
//! compared with the rest. Nodes mostly have a `topology.kubernetes.io/zone`; some bound pods
//! have preferred pod (anti-)affinity of their own towards the pod (InterPodAffinity from the
//! existing pods' side); and in rotation the pod has no spreading, a soft topology spread
//! constraint, or the system default constraints (it is owned by the case's ReplicaSet, whose
//! selector some bound pods match), so PodTopologySpread scores too. A case where one node fits is skipped by kube-scheduler's
//! scoring and only checked for that.
//!
//! CI runs seed [`DEFAULT_SEED`] with [`DEFAULT_CASES`] cases (not fewer under CI, see
//! [`case_count`]); a run that compared no case fails. More:
//!
//! ```text
//! PLACER_DIFF_SCORE_SEED=7 PLACER_DIFF_SCORE_CASES=20 cargo test --test e2e differential_scores -- --nocapture
//! for s in 1 2 3 4 5; do PLACER_DIFF_SCORE_SEED=$s cargo test --test e2e differential_scores || break; done
//! ```

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use anyhow::bail;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};

use crate::differential::{Rng, case_count, env_number};
use crate::harness::compare::{KubeSchedulerYaml, PLACER_LACKS};
use crate::harness::logs::{field, lines_with};
use crate::harness::{Placer, Scheduler, TestEnv, capability_policy};

/// Seed of the CI run (`PLACER_DIFF_SCORE_SEED` overrides it).
const DEFAULT_SEED: u64 = 11;
/// Cases of the CI run (`PLACER_DIFF_SCORE_CASES` overrides it).
const DEFAULT_CASES: usize = 6;
/// Node label confining each case's pod to the case's nodes.
const CASE_LABEL: &str = "e2e.placer.io/score-case";
const TAINTS: [&str; 3] = ["e2e.placer.io/a", "e2e.placer.io/b", "e2e.placer.io/c"];
const DISK: &str = "e2e.placer.io/disk";
const APP: &str = "e2e.placer.io/app";
/// Images some case nodes hold, with their sizes (one size per image, as a registry has).
const IMAGES: [(&str, i64); 4] = [
    ("e2e.placer.io/img-a", 90 << 20),
    ("e2e.placer.io/img-b", 300 << 20),
    ("e2e.placer.io/img-c", 800 << 20),
    ("e2e.placer.io/img-d", 1500 << 20),
];
/// Seeds of the draws of node images and bound pods' pod-level resources ...
const NODE_EXTRAS: u64 = 0x9e37_79b9_7f4a_7c15;
/// ... and of the case pod's images and pod-level resources ...
const POD_EXTRAS: u64 = 0xbf58_476d_1ce4_e5b9;
/// ... and of zones, spreading and the bound pods' own affinity.
const RELATION_EXTRAS: u64 = 0x94d0_49bb_1331_11eb;
/// The zone key of kube-scheduler's default spreading (`topology.kubernetes.io/zone`).
const ZONE: &str = "topology.kubernetes.io/zone";
/// Label of the pods the case's ReplicaSet selects.
const OWNED: &str = "e2e.placer.io/owned-by";

/// (node, plugin) → weighted score, and node → total.
type Scores = (BTreeMap<(String, String), i64>, BTreeMap<String, i64>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_scores_agree_with_kube_scheduler() -> anyhow::Result<()> {
    let seed = env_number("PLACER_DIFF_SCORE_SEED")?.unwrap_or(DEFAULT_SEED);
    let count = case_count("PLACER_DIFF_SCORE_CASES", DEFAULT_CASES)?;
    // ImageLocality divides by every node of the cluster: a control plane of its own keeps
    // other tests' nodes from changing that count between kube-scheduler's scoring and
    // placer's explanation.
    let env = TestEnv::with_own_control_plane("diff-scores").await?;
    let kube_name = env.scheduler_name();
    for case in 0..count {
        create_case_cluster(&env, seed, case).await?;
    }
    let yaml = KubeSchedulerYaml::new()
        .default_profile(&kube_name, &PLACER_LACKS)
        .render(&env);
    let config = env.dir().join("in-tree.yaml");
    std::fs::write(&config, &yaml)?;
    let config_arg = config.display().to_string();
    let placer = Placer::start_with(
        &env,
        &capability_policy(&env).to_yaml(),
        "placer",
        "extender",
        &[
            "--explain-pods=true",
            "--explain-kube-scheduler-config",
            &config_arg,
        ],
    )
    .await?;
    let kube = Scheduler::start_with_yaml_verbosity(&env, &yaml, 10).await?;
    eprintln!("score differential: seed {seed:#x}, {count} cases");
    let mut disagreements = Vec::new();
    let (mut compared, mut single, mut unschedulable) = (0, 0, 0);
    for case in 0..count {
        let pod = create_case_pod(&env, seed, case).await?;
        let Some(bound) = bound_or_unschedulable(&env, &pod).await? else {
            // Every node too full: kube-scheduler scored nothing, and there is no node to
            // compare. The generator's capacities allow it now and then.
            unschedulable += 1;
            continue;
        };
        let explained = explained_bound(&env, &placer, &pod, &bound).await?;
        let logged = logged_scores(kube.log_path(), &format!("{}/{pod}", env.namespace()))?;
        let shown = explained_scores(&explained);
        if logged.1.is_empty() {
            single += 1;
            if explained["feasible"] != 1 {
                disagreements.push(format!(
                    "case {case}: kube-scheduler scored nothing (one node fits), /explain has {} feasible",
                    explained["feasible"]
                ));
            }
            continue;
        }
        compared += 1;
        if logged == shown {
            let plugins: std::collections::BTreeSet<&str> =
                logged.0.keys().map(|(_, p)| p.as_str()).collect();
            eprintln!(
                "case {case}: {} scores and {} totals agree ({plugins:?})",
                logged.0.len(),
                logged.1.len()
            );
        } else {
            disagreements.push(format!(
                "case {case} DISAGREES\n  kube-scheduler: {logged:?}\n  /explain:       {shown:?}\n{}",
                case_pods(&env, case).await?
            ));
        }
    }
    eprintln!(
        "score differential: seed {seed:#x}: {compared} cases compared, {single} with one feasible node, {unschedulable} unschedulable, {} disagreements",
        disagreements.len()
    );
    if !disagreements.is_empty() {
        bail!("{}", disagreements.join("\n"));
    }
    if compared == 0 {
        bail!("seed {seed:#x}: no case had two feasible nodes, no score was compared");
    }
    Ok(())
}

/// The case's pods as stored (spec resources, images and the status kube-scheduler and placer
/// read), for a disagreement's report.
async fn case_pods(env: &TestEnv, case: usize) -> anyhow::Result<String> {
    let prefix = format!("c{case}-");
    let mut out = String::new();
    for p in env.pods().list(&Default::default()).await?.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        if !name.starts_with(&prefix) {
            continue;
        }
        let v = serde_json::to_value(&p)?;
        let containers = |key: &str| -> Vec<Value> {
            v["spec"][key]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| json!([c["image"], c["resources"]]))
                .collect()
        };
        let statuses: Vec<Value> = ["initContainerStatuses", "containerStatuses"]
            .iter()
            .flat_map(|k| v["status"][k].as_array().cloned().unwrap_or_default())
            .map(|s| json!([s["name"], s["allocatedResources"], s["resources"]]))
            .collect();
        out.push_str(&format!(
            "  pod {name} on {}: init {:?} containers {:?} pod-level {} status {} {} {:?}\n",
            v["spec"]["nodeName"],
            containers("initContainers"),
            containers("containers"),
            v["spec"]["resources"],
            v["status"]["allocatedResources"],
            v["status"]["resources"],
            statuses,
        ));
    }
    Ok(out)
}

/// The node `pod` was bound to, or `None` if kube-scheduler reported it unschedulable.
async fn bound_or_unschedulable(env: &TestEnv, pod: &str) -> anyhow::Result<Option<String>> {
    env.poll(
        &format!("{pod} bound or unschedulable"),
        crate::harness::SCHEDULING_TIMEOUT,
        || async {
            let p = env.pods().get(pod).await?;
            let spec = p.spec.unwrap_or_default();
            let unschedulable = (p.status.and_then(|s| s.conditions).into_iter().flatten())
                .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"));
            Ok(match (spec.node_name, unschedulable) {
                (Some(node), _) => ControlFlow::Break(Some(node)),
                (None, true) => ControlFlow::Break(None),
                (None, false) => ControlFlow::Continue("pending".into()),
            })
        },
    )
    .await
}

/// The explanation of `pod` once placer has seen it bound to `bound`.
async fn explained_bound(
    env: &TestEnv,
    placer: &Placer,
    pod: &str,
    bound: &str,
) -> anyhow::Result<Value> {
    let path = format!("/explain/pods/{}/{pod}", env.namespace());
    env.poll(
        &format!("placer to see {pod} bound"),
        crate::harness::SCHEDULING_TIMEOUT,
        || async {
            let e = placer.get_json(&path).await?;
            Ok(if e["boundNode"] == json!(bound) {
                ControlFlow::Break(e)
            } else {
                ControlFlow::Continue(format!("boundNode {}", e["boundNode"]))
            })
        },
    )
    .await
}

/// The scores kube-scheduler logged for `pod` (`ns/name`).
fn logged_scores(log: &std::path::Path, pod: &str) -> anyhow::Result<Scores> {
    let quoted = format!("pod=\"{pod}\"");
    let mut plugins = BTreeMap::new();
    for line in lines_with(log, &["\"Plugin scored node for pod\"", &quoted])? {
        if let (Some(plugin), Some(node), Some(score)) = (
            field(&line, "plugin"),
            field(&line, "node"),
            field(&line, "score"),
        ) {
            plugins.insert((node.to_string(), plugin.to_string()), score.parse()?);
        }
    }
    let mut totals = BTreeMap::new();
    for line in lines_with(log, &["\"Calculated node's final score for pod\"", &quoted])? {
        if let (Some(node), Some(score)) = (field(&line, "node"), field(&line, "score")) {
            totals.insert(node.to_string(), score.parse()?);
        }
    }
    Ok((plugins, totals))
}

/// The same from `/explain/pods`: the in-tree side of every feasible node.
fn explained_scores(e: &Value) -> Scores {
    let mut plugins = BTreeMap::new();
    let mut totals = BTreeMap::new();
    for n in e["nodes"].as_array().into_iter().flatten() {
        if n["feasible"] != true {
            continue;
        }
        let node = n["node"].as_str().unwrap_or_default().to_string();
        let side = &n["kubeScheduler"];
        for s in side["scores"].as_array().into_iter().flatten() {
            let plugin = s["plugin"].as_str().unwrap_or_default().to_string();
            plugins.insert((node.clone(), plugin), s["weighted"].as_i64().unwrap_or(-1));
        }
        totals.insert(node, side["total"].as_i64().unwrap_or(-1));
    }
    (plugins, totals)
}

/// Creates case `case`'s nodes and the pods already bound there.
async fn create_case_cluster(env: &TestEnv, seed: u64, case: usize) -> anyhow::Result<()> {
    let mut rng = Rng::new(seed, case);
    let nodes = 3 + rng.below(2);
    for n in 0..nodes {
        let mut node = env
            .node(&format!("c{case}-n{n}"))
            .label(CASE_LABEL, &case.to_string())
            .label(DISK, rng.pick(&["ssd", "hdd"]))
            .cpu(rng.pick(&["4", "8", "16"]))
            .memory(rng.pick(&["8Gi", "16Gi", "32Gi"]));
        for taint in TAINTS {
            if rng.chance(30) {
                node = node.taint(taint, "true", "PreferNoSchedule");
            }
        }
        // Images and pod-level resources from a stream of their own, so that the draws above
        // (replayed by `create_case_pod`) stay as they were.
        let mut extra = Rng::new(seed ^ NODE_EXTRAS, case * 8 + n);
        for (image, size) in IMAGES {
            if extra.chance(50) {
                let tagged = format!("{image}:v1");
                let latest = format!("{image}:latest");
                let names: &[&str] = if extra.chance(50) {
                    &[&tagged, &latest]
                } else {
                    &[&tagged]
                };
                node = node.image(names, size);
            }
        }
        let mut related = Rng::new(seed ^ RELATION_EXTRAS, case * 8 + n);
        if related.chance(85) {
            node = node.label(ZONE, related.pick(&["z1", "z2"]));
        }
        let name = env.create_nodes([node]).await?.remove(0);
        for p in 0..rng.below(4) {
            let (cpu, memory) = (
                rng.pick(&["250m", "500m", "1", "2"]),
                rng.pick(&["256Mi", "1Gi", "2Gi"]),
            );
            let pod = env
                .pod(&format!("c{case}-n{n}-p{p}"))
                .bound_to(&name)
                .label(APP, rng.pick(&["web", "db"]))
                .request("cpu", cpu)
                .request("memory", memory);
            let spec = match extra.chance(30) {
                // Pod-level requests above the container's: what the node counts.
                true => json!({ "resources": { "requests": {
                    "cpu": format!("{}m", 2000 + extra.below(3) * 1000),
                    "memory": "3Gi",
                } } }),
                false => json!({}),
            };
            let (pod, spec) = bound_pod_relations(&mut related, case, pod, spec);
            env.create_pod_with_spec(&pod, spec).await?;
        }
    }
    // The ReplicaSet that owns the case's pod where it is spread by the system defaults,
    // created before both schedulers start so that both see it.
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": { "name": format!("c{case}-rs") },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { OWNED: format!("c{case}") } },
            "template": {
                "metadata": { "labels": { OWNED: format!("c{case}") } },
                "spec": { "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10" }] },
            },
        },
    }))?;
    Api::<ReplicaSet>::namespaced(env.client().clone(), env.namespace())
        .create(&Default::default(), &rs)
        .await?;
    Ok(())
}

/// A bound pod's relations (from `related`): sometimes the label of the case's ReplicaSet
/// (counted by the system default spreading), sometimes preferred pod (anti-)affinity of its
/// own towards `web` pods, which InterPodAffinity scores from the existing pods' side.
fn bound_pod_relations(
    related: &mut Rng,
    case: usize,
    mut pod: crate::harness::PodBuilder,
    mut spec: Value,
) -> (crate::harness::PodBuilder, Value) {
    if related.chance(40) {
        pod = pod.label(OWNED, &format!("c{case}"));
    }
    if related.chance(30) {
        let kind = related.pick(&["podAffinity", "podAntiAffinity"]);
        spec["affinity"] = json!({ kind: { "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 1 + related.below(100),
            "podAffinityTerm": {
                "labelSelector": { "matchLabels": { APP: "web" } },
                "topologyKey": related.pick(&["kubernetes.io/hostname", ZONE]),
            },
        }] } });
    }
    (pod, spec)
}

/// Creates case `case`'s pod (drawn after its cluster from the same generator); returns its name.
async fn create_case_pod(env: &TestEnv, seed: u64, case: usize) -> anyhow::Result<String> {
    let mut rng = Rng::new(seed, case);
    // Replay the cluster's draws so the pod depends only on (seed, case).
    let nodes = 3 + rng.below(2);
    for _ in 0..nodes {
        let _ = (rng.below(2), rng.below(3), rng.below(3));
        for _ in TAINTS {
            let _ = rng.chance(30);
        }
        for _ in 0..rng.below(4) {
            let _ = (rng.below(2), rng.below(4), rng.below(3));
        }
    }
    let name = format!("c{case}-pod");
    let pod = env
        .pod(&name)
        .node_selector(CASE_LABEL, &case.to_string())
        .label(APP, "web")
        .request("cpu", rng.pick(&["100m", "500m", "1"]))
        .request("memory", rng.pick(&["128Mi", "512Mi", "1Gi"]));
    let mut spec = serde_json::Map::new();
    let mut extra = Rng::new(seed ^ POD_EXTRAS, case);
    // Images ImageLocality scores, as init containers without requests (which also puts
    // their 100m/200Mi scoring defaults against the main container's).
    let init: Vec<Value> = (0..1 + extra.below(2))
        .map(|i| {
            let (image, _) = extra.pick(&IMAGES);
            let tag = if extra.chance(50) { ":v1" } else { "" };
            json!({ "name": format!("img{i}"), "image": format!("{image}{tag}") })
        })
        .collect();
    spec.insert("initContainers".into(), json!(init));
    if extra.chance(30) {
        // Pod-level requests: memory always (above the container's 1Gi at most), cpu sometimes.
        let mut requests = json!({ "memory": "1536Mi" });
        if extra.chance(50) {
            requests["cpu"] = json!("1500m");
        }
        spec.insert("resources".into(), json!({ "requests": requests }));
    }
    let tolerations: Vec<Value> = TAINTS
        .iter()
        .filter(|_| rng.chance(30))
        .map(|t| json!({ "key": t, "operator": "Exists", "effect": "PreferNoSchedule" }))
        .collect();
    spec.insert("tolerations".into(), json!(tolerations));
    let mut affinity = serde_json::Map::new();
    if rng.chance(60) {
        let terms: Vec<Value> = (0..1 + rng.below(2))
            .map(|_| {
                json!({ "weight": 1 + rng.below(100), "preference": { "matchExpressions": [{
                    "key": DISK, "operator": rng.pick(&["In", "NotIn"]), "values": [rng.pick(&["ssd", "hdd"])],
                }] } })
            })
            .collect();
        affinity.insert(
            "nodeAffinity".into(),
            json!({ "preferredDuringSchedulingIgnoredDuringExecution": terms }),
        );
    }
    if rng.chance(50) {
        let kind = rng.pick(&["podAffinity", "podAntiAffinity"]);
        affinity.insert(
            kind.into(),
            json!({ "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 1 + rng.below(100),
                "podAffinityTerm": {
                    "labelSelector": { "matchLabels": { APP: rng.pick(&["web", "db"]) } },
                    "topologyKey": "kubernetes.io/hostname",
                },
            }] }),
        );
    }
    if !affinity.is_empty() {
        spec.insert("affinity".into(), Value::Object(affinity));
    }
    // Spreading, in rotation: none, a soft constraint of the pod's own, or the system
    // defaults (the pod is owned by the case's ReplicaSet and has no constraint).
    let mut related = Rng::new(seed ^ RELATION_EXTRAS, case);
    let pod = pod.label(OWNED, &format!("c{case}"));
    let mut object = serde_json::to_value(pod.build())?;
    match (case + seed as usize) % 3 {
        0 => {}
        1 => {
            spec.insert(
                "topologySpreadConstraints".into(),
                json!([{
                    "maxSkew": 1 + related.below(3),
                    "topologyKey": related.pick(&["kubernetes.io/hostname", ZONE]),
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": { "matchLabels": { APP: related.pick(&["web", "db"]) } },
                }]),
            );
        }
        _ => {
            let rs = Api::<ReplicaSet>::namespaced(env.client().clone(), env.namespace())
                .get(&format!("c{case}-rs"))
                .await?;
            object["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": rs.metadata.name, "uid": rs.metadata.uid, "controller": true,
            }]);
        }
    }
    for (key, value) in spec {
        object["spec"][key] = value;
    }
    let object: Pod = serde_json::from_value(object)?;
    env.pods().create(&Default::default(), &object).await?;
    Ok(name)
}
