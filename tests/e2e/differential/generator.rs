//! The seeded case generator: nodes (capacity, labels, taints, bound pods) and the pod under
//! test (requests, selectors, affinity, tolerations, host ports, claims), as API objects per side;
//! the storage is `storage`'s, the devices `devices`'.

use super::devices::{Devices, FPGA};
use super::relations::{self, Relations};
use super::storage::{self, Storage};
use super::*;

const DISK: &str = "e2e.placer.io/disk";
const TIER: &str = "e2e.placer.io/tier";
const RANK: &str = "e2e.placer.io/rank";
const GPU_LABEL: &str = "e2e.placer.io/gpu";
const GPU: &str = "example.com/gpu";
const DEDICATED: &str = "e2e.placer.io/dedicated";
const SPOT: &str = "e2e.placer.io/spot";
const MAINTENANCE: &str = "e2e.placer.io/maintenance";
/// The node feature a `RestartAllContainers` restart rule needs.
const RESTART_ALL_FEATURE: &str = "RestartAllContainersOnContainerExits";

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
    /// Claims of the case's storage the pod mounts (bound pods holding volumes).
    claims: Vec<usize>,
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
    /// Declares `RestartAllContainersOnContainerExits` (drawn last, in `generate`).
    declares_restart_all: bool,
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
    /// Pod-level requests: the containers' plus this much cpu (milli) and memory (Mi), drawn
    /// last, in `generate`.
    pod_level: Option<(u32, u32)>,
    /// A container restart rule needing `RestartAllContainersOnContainerExits` (drawn last).
    restart_all: bool,
}

/// One generated case: nodes and the pod to schedule on them.
#[derive(Clone, Debug)]
pub(super) struct Case {
    index: usize,
    nodes: Vec<NodeSpec>,
    pod: PodSpec,
    pub(super) storage: Storage,
    pub(super) devices: Devices,
    relations: Relations,
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
    pub(super) fn generate(seed: u64, index: usize) -> Self {
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
        // Pod-level resources and declared features last, so earlier draws stay as they were.
        pod.pod_level = rng
            .chance(25)
            .then(|| (rng.pick(&[0, 500, 2000]), rng.pick(&[0, 256, 2048])));
        pod.restart_all = rng.chance(25);
        for n in &mut nodes {
            n.declares_restart_all = rng.chance(50);
        }
        // Storage from a stream of its own, so the draws above stay as they were.
        let storage = Storage::generate(seed, index, nodes.len());
        for (n, zone) in nodes.iter_mut().zip(&storage.zones) {
            if let Some(zone) = zone {
                n.labels.push((storage::ZONE, (*zone).to_owned()));
                n.labels.push((storage::REGION, "r1".to_owned()));
            }
        }
        // Devices from a stream of their own too.
        let devices = Devices::generate(seed, index, nodes.len());
        if storage.focused || devices.focused {
            for n in &mut nodes {
                n.unschedulable = false;
                n.taints
                    .retain(|&(_, _, effect)| effect == "PreferNoSchedule");
            }
            pod.node_selector.clear();
            pod.terms.clear();
            pod.pinned = None;
        }
        if devices.focused {
            // A small pod without ports or features: most nodes then reach DynamicResources.
            pod.load = Load {
                cpu_m: 100,
                memory_mi: 64,
                class: pod.load.class,
                ..Load::default()
            };
            pod.restart_all = false;
            pod.pod_level = None;
            pod.init_cpu_m = None;
        }
        // Relations from a stream of their own too.
        let relations = Relations::generate(seed, index, nodes.len());
        for (n, zone) in nodes.iter_mut().zip(&relations.zones) {
            if let Some(zone) = zone {
                n.labels.push((relations::ZONE, (*zone).to_owned()));
            }
        }
        for (i, claims) in &storage.holders {
            nodes[*i].occupants.push(Load {
                claims: claims.clone(),
                ..Load::default()
            });
        }
        Self {
            index,
            nodes,
            pod,
            storage,
            devices,
            relations,
        }
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
            declares_restart_all: false,
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
            // The pod's claims are the storage's (`Storage::pod_claims`).
            claims: Vec::new(),
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
            pod_level: None,
            restart_all: false,
        }
    }

    /// The copy's nodes: `<run>-<tag>-<i>`, labelled with the run and the copy.
    pub(super) fn nodes(&self, env: &TestEnv, side: &Side) -> Vec<Node> {
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
                if let Some(fpgas) = self.devices.plugin_fpgas(i) {
                    resources[FPGA] = json!(fpgas.to_string());
                }
                let taints: Vec<Value> = n
                    .taints
                    .iter()
                    .map(|(k, v, e)| json!({ "key": k, "value": v, "effect": e }))
                    .collect();
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let declared: &[&str] = if n.declares_restart_all {
                    &[RESTART_ALL_FEATURE]
                } else {
                    &[]
                };
                serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": labels },
                    "spec": { "taints": taints, "unschedulable": n.unschedulable },
                    "status": {
                        "capacity": resources,
                        "allocatable": resources,
                        "declaredFeatures": declared,
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
    pub(super) fn occupants(&self, side: &Side, classes: &Classes) -> Vec<Pod> {
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
                    if !load.claims.is_empty() {
                        spec["volumes"] = Storage::volumes(side, &load.claims);
                    }
                    pod_object(&format!("{}-o{i}-{j}", side.tag), side, "bound", spec)
                })
            })
            .chain(self.relations.peers(side))
            .collect()
    }

    /// The copy's pod, named after the copy's tag.
    pub(super) fn pod(&self, side: &Side, classes: &Classes) -> Pod {
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
        if let Some((cpu, memory)) = self.pod.pod_level {
            // At least what the containers request, as validation requires.
            let load = &self.pod.load;
            let cpu_m = load.cpu_m.max(self.pod.init_cpu_m.unwrap_or(0)) + cpu;
            spec["resources"] = json!({ "requests": {
                "cpu": format!("{cpu_m}m"),
                "memory": format!("{}Mi", load.memory_mi + memory + 64),
            } });
        }
        if !self.storage.is_empty() {
            spec["volumes"] = Storage::volumes(side, self.storage.pod_claims());
        }
        if self.storage.ephemeral {
            let scratch = json!({ "name": "scratch", "ephemeral": { "volumeClaimTemplate": {
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "1Gi" } },
                },
            } } });
            match spec["volumes"].as_array_mut() {
                Some(volumes) => volumes.push(scratch),
                None => spec["volumes"] = json!([scratch]),
            }
        }
        self.devices.ask(side, &mut spec);
        if self.pod.restart_all {
            spec["containers"][0]["restartPolicy"] = json!("Never");
            spec["containers"][0]["restartPolicyRules"] = json!([{
                "action": "RestartAllContainers",
                "exitCodes": { "operator": "In", "values": [42] },
            }]);
        }
        self.relations.apply(side, &mut spec);
        let mut pod = pod_object(&side.tag, side, "case", spec);
        (pod.metadata.labels.get_or_insert_default()).extend(self.relations.pod_labels(side));
        pod
    }

    /// The case as the nodes, bound pods and pod (spec only) that both schedulers saw.
    pub(super) fn describe(&self) -> String {
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
                 unschedulable {}, bound pods {:?}, declares {RESTART_ALL_FEATURE} {}",
                n.cpu_m,
                n.memory_mi,
                n.pods,
                n.gpus,
                n.labels,
                n.taints,
                n.unschedulable,
                n.occupants,
                n.declares_restart_all,
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
        let _ = writeln!(out, "  storage: {}", self.storage.describe());
        let _ = writeln!(out, "  devices: {}", self.devices.describe());
        let _ = writeln!(out, "  relations: {}", self.relations.describe());
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

pub(super) fn pod_object(name: &str, side: &Side, role: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { ATTEMPT_LABEL: side.attempt, ROLE_LABEL: role } },
        "spec": spec,
    }))
    .expect("pod JSON matches the Pod schema")
}
