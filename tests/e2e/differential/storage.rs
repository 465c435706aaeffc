//! The seeded storage of a case: the pod's claims and the volumes behind them, claims held by pods
//! already bound to the case's nodes, free local volumes, CSINodes with a per-driver limit and the
//! nodes' zones. Drawn from a stream of its own (`STREAM`), so a seed's nodes and pod are what
//! they were before storage came.
//!
//! The pod's first claim is of the kind `KINDS[(index + seed) % KINDS.len()]`, so any
//! `KINDS.len()` consecutive cases of a seed (the CI run's included) have one claim of every kind,
//! and a case without claims; a second claim of a random kind is sometimes added. The kinds:
//!
//! - a claim bound to a local volume pinned to one node (VolumeBinding's node affinity);
//! - a claim bound to a volume labelled with a zone (and sometimes a region), host path or CSI
//!   (VolumeZone);
//! - a claim bound to a CSI volume of [`DRIVER`], counted against the CSINodes' limits together
//!   with the CSI claims the bound pods hold (NodeVolumeLimits);
//! - an unbound claim of an `Immediate` class nothing can satisfy ("pod has unbound immediate
//!   PersistentVolumeClaims");
//! - an unbound claim of a `WaitForFirstConsumer` class without provisioner, with 0–4 free static
//!   local volumes of random sizes on random nodes (VolumeBinding's matching, then PreBind and
//!   kube-controller-manager's PV binder);
//! - an unbound claim of a `WaitForFirstConsumer` class provisioned by [`DRIVER`] (no volumes;
//!   sometimes with `allowedTopologies` on one zone): the scheduler annotates the claim with the
//!   chosen node and waits for a provisioner that never comes, so the outcome is that annotation;
//! - a `ReadWriteOncePod` claim, mostly already in use by a pod bound to one of the nodes
//!   (VolumeRestrictions, and preemption of the holder).
//!
//! Some cases without claims (two in five) have a generic ephemeral volume instead; no
//! ephemeral volume controller runs, so its claim never exists and both schedulers must report
//! waiting for it (the message names the claim after the copy's pod, read as `<pod>`).
//!
//! Half the cases with claims are focused on storage ([`Storage::focused`]): without it most
//! nodes fail an earlier filter and the volume filters' reasons seldom show.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use super::*;

/// Salt of the storage draws' stream.
const STREAM: u64 = 0x5707_a6e0_c1a1_3500;
/// Salt of the draw of a generic ephemeral volume.
const EPHEMERAL_STREAM: u64 = 0xe9e3_e2a1_0000_0001;
/// The CSI driver of the CSI volumes, the provisioning classes and the CSINodes' limits.
pub(super) const DRIVER: &str = "csi.placer.test";
pub(super) const ZONE: &str = "topology.kubernetes.io/zone";
pub(super) const REGION: &str = "topology.kubernetes.io/region";
/// Claim label naming the copy (its tag) whose pods use the claim.
pub(super) const CLAIM_COPY_LABEL: &str = "e2e.placer.io/diff-copy";
/// What a scheduler writes on a claim it provisions for a node.
pub(super) const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The kinds of the pod's first claim, in rotation.
const KINDS: [Kind; 8] = [
    Kind::None,
    Kind::BoundLocal,
    Kind::Zoned,
    Kind::Csi,
    Kind::Immediate,
    Kind::WaitLocal,
    Kind::Provisioned,
    Kind::ReadWriteOncePod,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    None,
    BoundLocal,
    Zoned,
    Csi,
    Immediate,
    WaitLocal,
    Provisioned,
    ReadWriteOncePod,
}

/// The StorageClasses every case shares, created once per run.
pub(super) struct StorageClasses {
    immediate: String,
    local: String,
    provisioned: String,
    provisioned_z1: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClassKind {
    /// `Immediate`, no provisioner.
    Immediate,
    /// `WaitForFirstConsumer`, no provisioner: static local volumes.
    Local,
    /// `WaitForFirstConsumer`, provisioned by [`DRIVER`].
    Provisioned,
    /// The same, with `allowedTopologies` zone `z1`.
    ProvisionedZ1,
}

impl StorageClasses {
    pub(super) async fn create(env: &TestEnv) -> anyhow::Result<Self> {
        let classes = Self {
            immediate: env.name("immediate"),
            local: env.name("local"),
            provisioned: env.name("provisioned"),
            provisioned_z1: env.name("provisioned-z1"),
        };
        let z1 = json!([{ "matchLabelExpressions": [{ "key": ZONE, "values": ["z1"] }] }]);
        let objects = [
            (
                &classes.immediate,
                "kubernetes.io/no-provisioner",
                "Immediate",
                Value::Null,
            ),
            (
                &classes.local,
                "kubernetes.io/no-provisioner",
                "WaitForFirstConsumer",
                Value::Null,
            ),
            (
                &classes.provisioned,
                DRIVER,
                "WaitForFirstConsumer",
                Value::Null,
            ),
            (&classes.provisioned_z1, DRIVER, "WaitForFirstConsumer", z1),
        ];
        let objects = objects
            .into_iter()
            .map(|(name, provisioner, mode, topologies)| {
                let mut class = json!({
                    "metadata": { "name": name },
                    "provisioner": provisioner,
                    "volumeBindingMode": mode,
                });
                if !topologies.is_null() {
                    class["allowedTopologies"] = topologies;
                }
                serde_json::from_value::<StorageClass>(class).context("class JSON")
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        create_all(Api::all(env.client().clone()), objects).await?;
        Ok(classes)
    }

    fn name(&self, class: ClassKind) -> &str {
        match class {
            ClassKind::Immediate => &self.immediate,
            ClassKind::Local => &self.local,
            ClassKind::Provisioned => &self.provisioned,
            ClassKind::ProvisionedZ1 => &self.provisioned_z1,
        }
    }
}

/// Where a volume's data lives.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// A local volume pinned to the copy's node with this index.
    Local(usize),
    HostPath,
    Csi,
}

/// A bound claim's volume.
#[derive(Clone, Debug)]
struct Volume {
    source: Source,
    mode: &'static str,
    zone: Option<&'static str>,
    region: Option<&'static str>,
}

/// One claim of the case.
#[derive(Clone, Debug)]
enum Claim {
    /// Bound to a volume of its own (pre-bound: the claim names the volume, the volume the claim).
    Bound(Volume),
    /// Unbound, of a class, asking for this many GiB.
    Unbound(ClassKind, u32),
}

/// A case's storage (see the module docs). Claims are `<tag>-c<k>`.
#[derive(Clone, Debug, Default)]
pub(super) struct Storage {
    claims: Vec<Claim>,
    /// The claims the case's pod mounts.
    pod_claims: Vec<usize>,
    /// Free local volumes of the `WaitForFirstConsumer` class: (node, GiB).
    free: Vec<(usize, u32)>,
    /// Per node: its CSINode's allocatable count for [`DRIVER`] (`None`: no CSINode).
    limits: Vec<Option<u32>>,
    /// The claims each bound pod that holds some mounts: (node, claims).
    pub(super) holders: Vec<(usize, Vec<usize>)>,
    /// Per node: its zone (region `r1` with it).
    pub(super) zones: Vec<Option<&'static str>>,
    /// The case is about storage: the generator drops the pod's node selection and the nodes'
    /// cordons and hard taints, so that nodes reach the volume filters and their reasons show.
    pub(super) focused: bool,
    /// The pod also has a generic ephemeral volume, whose claim nothing creates (no
    /// ephemeral volume controller runs): the volume plugins' PreFilter must say so.
    pub(super) ephemeral: bool,
}

impl Storage {
    pub(super) fn generate(seed: u64, index: usize, nodes: usize) -> Self {
        let claims = Self::claims(seed, index, nodes);
        Self {
            // Only beside no claim (it fails the pod before any claim is looked at), and from
            // a stream of its own, so the claims' draws stay as they were.
            ephemeral: claims.is_empty() && Rng::new(seed ^ EPHEMERAL_STREAM, index).chance(40),
            ..claims
        }
    }

    /// The claims, volumes, CSINodes and zones.
    fn claims(seed: u64, index: usize, nodes: usize) -> Self {
        let mut rng = Rng::new(seed ^ STREAM, index);
        let first = KINDS[(index + (seed % KINDS.len() as u64) as usize) % KINDS.len()];
        let mut s = Self {
            zones: (0..nodes)
                .map(|_| rng.chance(75).then(|| rng.pick(&["z1", "z2"])))
                .collect(),
            limits: (0..nodes)
                .map(|_| rng.chance(50).then(|| rng.pick(&[1, 2])))
                .collect(),
            ..Self::default()
        };
        if first == Kind::None {
            return s;
        }
        s.focused = rng.chance(50);
        s.add(&mut rng, first, nodes);
        if rng.chance(35) {
            let second = rng.pick(&KINDS[1..]);
            s.add(&mut rng, second, nodes);
        }
        // Bound pods holding CSI volumes, counted against the limits.
        for node in 0..nodes {
            if rng.chance(30) {
                let held = (0..1 + rng.below(2))
                    .map(|_| s.claim(Claim::Bound(volume(Source::Csi, "ReadWriteOnce"))))
                    .collect();
                s.holders.push((node, held));
            }
        }
        s
    }

    fn claim(&mut self, claim: Claim) -> usize {
        self.claims.push(claim);
        self.claims.len() - 1
    }

    /// Adds a claim of `kind` to the pod (and what it needs around it).
    fn add(&mut self, rng: &mut Rng, kind: Kind, nodes: usize) {
        let claim = match kind {
            Kind::None => return,
            Kind::BoundLocal => {
                Claim::Bound(volume(Source::Local(rng.below(nodes)), "ReadWriteOnce"))
            }
            Kind::Zoned => Claim::Bound(Volume {
                zone: Some(rng.pick(&["z1", "z2", "z3"])),
                region: rng.chance(25).then(|| rng.pick(&["r1", "r2"])),
                ..volume(rng.pick(&[Source::HostPath, Source::Csi]), "ReadWriteOnce")
            }),
            Kind::Csi => Claim::Bound(volume(Source::Csi, "ReadWriteOnce")),
            Kind::Immediate => Claim::Unbound(ClassKind::Immediate, 1),
            Kind::WaitLocal => {
                for _ in 0..rng.below(5) {
                    self.free.push((rng.below(nodes), rng.pick(&[1, 2, 4])));
                }
                Claim::Unbound(ClassKind::Local, rng.pick(&[1, 2]))
            }
            Kind::Provisioned => Claim::Unbound(
                rng.pick(&[ClassKind::Provisioned, ClassKind::ProvisionedZ1]),
                1,
            ),
            Kind::ReadWriteOncePod => {
                let k = self.claim(Claim::Bound(volume(Source::HostPath, "ReadWriteOncePod")));
                if rng.chance(75) {
                    self.holders.push((rng.below(nodes), vec![k]));
                }
                self.pod_claims.push(k);
                return;
            }
        };
        let k = self.claim(claim);
        self.pod_claims.push(k);
    }

    /// Whether the pod mounts any claim.
    pub(super) fn is_empty(&self) -> bool {
        self.pod_claims.is_empty()
    }

    fn claim_name(side: &Side, k: usize) -> String {
        format!("{}-c{k}", side.tag)
    }

    /// The pod `volumes` mounting claims `ks`.
    pub(super) fn volumes(side: &Side, ks: &[usize]) -> Value {
        ks.iter()
            .map(|&k| {
                json!({ "name": format!("c{k}"),
                        "persistentVolumeClaim": { "claimName": Self::claim_name(side, k) } })
            })
            .collect()
    }

    /// The claims the case's pod mounts.
    pub(super) fn pod_claims(&self) -> &[usize] {
        &self.pod_claims
    }

    /// The copy's volumes (bound claims' and free ones), named `<run>-<tag>-c<k>` and
    /// `<run>-<tag>-f<j>`.
    pub(super) fn volume_objects(
        &self,
        env: &TestEnv,
        side: &Side,
        classes: &StorageClasses,
    ) -> anyhow::Result<Vec<PersistentVolume>> {
        let node = |i: usize| format!("{}-{i}", side.node_stem);
        let mut out = Vec::new();
        for (k, claim) in self.claims.iter().enumerate() {
            let Claim::Bound(v) = claim else { continue };
            let name = env.name(&Self::claim_name(side, k));
            let mut labels = serde_json::Map::new();
            if let Some(zone) = v.zone {
                labels.insert(ZONE.into(), json!(zone));
            }
            if let Some(region) = v.region {
                labels.insert(REGION.into(), json!(region));
            }
            let mut spec = json!({
                "capacity": { "storage": "1Gi" },
                "accessModes": [v.mode],
                "storageClassName": "",
                "claimRef": { "namespace": env.namespace(), "name": Self::claim_name(side, k) },
            });
            source(&mut spec, v.source, &name, &node);
            out.push(json!({ "metadata": { "name": name, "labels": labels }, "spec": spec }));
        }
        for (j, &(i, gib)) in self.free.iter().enumerate() {
            let name = env.name(&format!("{}-f{j}", side.tag));
            let mut spec = json!({
                "capacity": { "storage": format!("{gib}Gi") },
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": classes.name(ClassKind::Local),
            });
            source(&mut spec, Source::Local(i), &name, &node);
            out.push(json!({ "metadata": { "name": name }, "spec": spec }));
        }
        out.into_iter()
            .map(|v| serde_json::from_value(v).context("volume JSON"))
            .collect()
    }

    /// The copy's claims, labelled with the attempt and the copy.
    pub(super) fn claim_objects(
        &self,
        env: &TestEnv,
        side: &Side,
        classes: &StorageClasses,
    ) -> anyhow::Result<Vec<PersistentVolumeClaim>> {
        self.claims
            .iter()
            .enumerate()
            .map(|(k, claim)| {
                let name = Self::claim_name(side, k);
                let spec = match claim {
                    Claim::Bound(v) => json!({
                        "accessModes": [v.mode], "storageClassName": "",
                        "volumeName": env.name(&name),
                        "resources": { "requests": { "storage": "1Gi" } },
                    }),
                    Claim::Unbound(class, gib) => json!({
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": classes.name(*class),
                        "resources": { "requests": { "storage": format!("{gib}Gi") } },
                    }),
                };
                serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": {
                        ATTEMPT_LABEL: side.attempt, CLAIM_COPY_LABEL: side.tag } },
                    "spec": spec,
                }))
                .context("claim JSON")
            })
            .collect()
    }

    /// The CSINodes of the copy's nodes that have a limit.
    pub(super) fn csi_nodes(&self, side: &Side) -> anyhow::Result<Vec<CSINode>> {
        self.limits
            .iter()
            .enumerate()
            .filter_map(|(i, limit)| limit.map(|count| (i, count)))
            .map(|(i, count)| {
                let node = format!("{}-{i}", side.node_stem);
                serde_json::from_value(json!({
                    "metadata": { "name": node },
                    "spec": { "drivers": [{ "name": DRIVER, "nodeID": node,
                                            "allocatable": { "count": count } }] },
                }))
                .context("CSINode JSON")
            })
            .collect()
    }

    /// One line for a disagreement's report.
    pub(super) fn describe(&self) -> String {
        format!(
            "claims {:?}, pod mounts {:?}, held by bound pods (node, claims) {:?}, free local \
             volumes (node, GiB) {:?}, {DRIVER} limits {:?}, zones {:?}, generic ephemeral \
             volume {}",
            self.claims,
            self.pod_claims,
            self.holders,
            self.free,
            self.limits,
            self.zones,
            self.ephemeral
        )
    }
}

/// Waits until kube-controller-manager has completed the binding of every claim of the attempt
/// that names its volume: both schedulers read a claim as bound only once it carries
/// `pv.kubernetes.io/bind-completed`, and a pod created before would race the PV binder.
pub(super) async fn claims_bound(env: &TestEnv, attempt: &str) -> anyhow::Result<()> {
    let claims = Api::<PersistentVolumeClaim>::namespaced(env.client().clone(), env.namespace());
    let params = ListParams::default().labels(&format!("{ATTEMPT_LABEL}={attempt}"));
    env.poll(
        "the PV binder to bind the pre-bound claims",
        OUTCOME_TIMEOUT,
        || async {
            let waiting: Vec<String> = claims
                .list(&params)
                .await?
                .items
                .into_iter()
                .filter(|c| {
                    let named = c.spec.as_ref().is_some_and(|s| s.volume_name.is_some());
                    let done = c
                        .metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key("pv.kubernetes.io/bind-completed"));
                    named && !done
                })
                .filter_map(|c| c.metadata.name)
                .collect();
            Ok(if waiting.is_empty() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(format!("not bound yet: {waiting:?}"))
            })
        },
    )
    .await
}

fn volume(source: Source, mode: &'static str) -> Volume {
    Volume {
        source,
        mode,
        zone: None,
        region: None,
    }
}

/// Sets the volume source of a PV `spec` (a local volume's node affinity with it).
fn source(spec: &mut Value, source: Source, name: &str, node: &dyn Fn(usize) -> String) {
    match source {
        Source::Local(i) => {
            spec["local"] = json!({ "path": "/mnt/placer-e2e" });
            spec["nodeAffinity"] = json!({ "required": { "nodeSelectorTerms": [{
                "matchExpressions": [{ "key": "kubernetes.io/hostname", "operator": "In",
                                       "values": [node(i)] }],
            }] } });
        }
        Source::HostPath => spec["hostPath"] = json!({ "path": "/tmp/placer-e2e" }),
        Source::Csi => spec["csi"] = json!({ "driver": DRIVER, "volumeHandle": name }),
    }
}
