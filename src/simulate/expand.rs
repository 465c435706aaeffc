//! Controllers expanded into the pods their controllers would create, named
//! and labelled as they would be, with the owner reference that ties each
//! pod to its controller (PodTopologySpread's default constraints read the
//! owner's selector through it):
//!
//! - Deployment: a ReplicaSet `<deployment>-<pod-template-hash>` (its
//!   selector gains the hash, as the Deployment controller adds it) and its
//!   pods `<replicaset>-<5 characters>`;
//! - ReplicaSet: `<replicaset>-<5 characters>`;
//! - StatefulSet: `<statefulset>-<ordinal>` with `statefulset.kubernetes.io/pod-name`,
//!   `apps.kubernetes.io/pod-index` and `controller-revision-hash`;
//! - Job: `min(parallelism, completions)` pods `<job>-<5 characters>`
//!   (Indexed: `<job>-<index>-<5 characters>`) with the job-name and
//!   controller-uid labels.
//!
//! The random parts (name suffixes, UIDs) come from the run's seed, so a
//! run names its pods the same way every time. A pod's `priorityClassName`
//! becomes its `spec.priority` from the workload's PriorityClasses, as the
//! API server's Priority admission does.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::cache::read_pod;
use crate::objects::PodInfo;
use crate::objects::workload::{ReplicaSetSelector, StatefulSetSelector};

/// Most pods one controller may expand into: a typo of `replicas: 1000000`
/// must not take the machine's memory.
pub const MAX_REPLICAS: i32 = 1_000_000;

/// The pods of a workload and the controller selectors the cluster gains.
#[derive(Debug, Default, Clone)]
pub struct Expanded {
    /// Every pod, in workload order.
    pub pods: Vec<PodInfo>,
    /// ReplicaSets (from Deployments and ReplicaSets).
    pub replica_sets: Vec<ReplicaSetSelector>,
    /// StatefulSets.
    pub stateful_sets: Vec<StatefulSetSelector>,
}

/// Turns workload objects into pods.
pub struct Expander {
    random: SplitMix,
    /// The profile a pod that names no scheduler is given.
    default_scheduler: String,
    classes: HashMap<String, i32>,
    default_priority: i32,
    names: HashSet<String>,
    out: Expanded,
}

/// The characters Kubernetes draws random name parts from (no vowels, no
/// look-alikes: `k8s.io/apimachinery/pkg/util/rand`).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// SplitMix64: a small, fast, seedable generator (the tie-break's too).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn suffix(&mut self) -> String {
        (0..5)
            .map(|_| ALPHANUMS[(self.next() % ALPHANUMS.len() as u64) as usize] as char)
            .collect()
    }

    fn uid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }
}

/// Kubernetes' `SafeEncodeString` of the template's FNV-32a hash: what the
/// Deployment controller puts in `pod-template-hash`.
fn template_hash(template: &PodTemplateSpec) -> String {
    let text = serde_json::to_vec(template).unwrap_or_default();
    let hash = text.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    hash.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn namespace_of(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_else(|| "default".into())
}

fn replicas(value: Option<i32>, default: i32) -> Result<i32, String> {
    match value.unwrap_or(default) {
        n if n < 0 => Err(format!("replicas must not be negative, got {n}")),
        n if n > MAX_REPLICAS => Err(format!("more than {MAX_REPLICAS} pods from one object")),
        n => Ok(n),
    }
}

impl Expander {
    /// An expander drawing names and UIDs from `seed`; pods without a
    /// `schedulerName` are given `default_scheduler`.
    pub fn new(seed: u64, default_scheduler: &str) -> Self {
        Expander {
            random: SplitMix(seed ^ 0x5eed),
            default_scheduler: default_scheduler.into(),
            classes: HashMap::new(),
            default_priority: 0,
            names: HashSet::new(),
            out: Expanded::default(),
        }
    }

    /// Everything expanded so far.
    pub fn take(&mut self) -> Expanded {
        std::mem::take(&mut self.out)
    }

    /// Records a PriorityClass for the pods that name it.
    pub fn add_priority_class(&mut self, class: &PriorityClass) {
        let name = class.metadata.name.clone().unwrap_or_default();
        if class.global_default == Some(true) {
            self.default_priority = class.value.unwrap_or(0);
        }
        self.classes.insert(name, class.value.unwrap_or(0));
    }

    /// Adds a bare pod (bound ones too: they hold room from the start).
    pub fn pod(&mut self, mut pod: Pod) -> Result<(), String> {
        let meta = &mut pod.metadata;
        if meta.name.as_deref().is_none_or(str::is_empty) {
            let prefix = meta.generate_name.clone().unwrap_or_default();
            meta.name = Some(format!("{prefix}{}", self.random.suffix()));
        }
        self.admit(pod)
    }

    /// Adds a Deployment's ReplicaSet and its pods.
    pub fn deployment(&mut self, d: &Deployment) -> Result<(), String> {
        let spec = d.spec.clone();
        let hash = template_hash(&spec.template);
        let name = d.metadata.name.clone().unwrap_or_default();
        let mut selector = spec.selector;
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert("pod-template-hash".into(), hash.clone());
        let mut template = spec.template;
        labels_of(&mut template).insert("pod-template-hash".into(), hash.clone());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{hash}")),
                namespace: d.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            spec: k8s_openapi::api::apps::v1::ReplicaSetSpec {
                replicas: spec.replicas,
                selector,
                template: Some(template),
                min_ready_seconds: None,
            },
            status: None,
        };
        self.replica_set(&rs)
    }

    /// Adds a ReplicaSet's pods.
    pub fn replica_set(&mut self, rs: &ReplicaSet) -> Result<(), String> {
        let spec = rs.spec.clone();
        let count = replicas(spec.replicas, 1)?;
        let name = rs.metadata.name.clone().unwrap_or_default();
        let uid = self.random.uid();
        let own = owner("apps/v1", "ReplicaSet", &name, &uid);
        self.out
            .replica_sets
            .push(ReplicaSetSelector::from(&with_namespace(rs)));
        let template = spec.template.unwrap_or_default();
        for _ in 0..count {
            let pod_name = format!("{name}-{}", self.random.suffix());
            self.create_from_template(
                &rs.metadata,
                &template,
                pod_name,
                own.clone(),
                BTreeMap::new(),
            )?;
        }
        Ok(())
    }

    /// Adds a StatefulSet's pods, ordinals from `spec.ordinals.start`.
    pub fn stateful_set(&mut self, ss: &StatefulSet) -> Result<(), String> {
        let spec = ss.spec.clone();
        let count = replicas(spec.replicas, 1)?;
        let start = spec.ordinals.and_then(|o| o.start).unwrap_or(0);
        let name = ss.metadata.name.clone().unwrap_or_default();
        let uid = self.random.uid();
        let own = owner("apps/v1", "StatefulSet", &name, &uid);
        self.out
            .stateful_sets
            .push(StatefulSetSelector::from(&with_namespace(ss)));
        let revision = format!("{name}-{}", template_hash(&spec.template));
        for ordinal in start..start.saturating_add(count) {
            let pod_name = format!("{name}-{ordinal}");
            let labels = BTreeMap::from([
                (
                    "apps.kubernetes.io/pod-index".to_string(),
                    ordinal.to_string(),
                ),
                ("controller-revision-hash".into(), revision.clone()),
                (
                    "statefulset.kubernetes.io/pod-name".into(),
                    pod_name.clone(),
                ),
            ]);
            self.create_from_template(&ss.metadata, &spec.template, pod_name, own.clone(), labels)?;
        }
        Ok(())
    }

    /// Adds the pods a Job starts at once: `min(parallelism, completions)`.
    pub fn job(&mut self, job: &Job) -> Result<(), String> {
        let spec = job.spec.clone().unwrap_or_default();
        let parallelism = replicas(spec.parallelism, 1)?;
        let count = spec
            .completions
            .map_or(parallelism, |c| c.clamp(0, parallelism));
        let name = job.metadata.name.clone().unwrap_or_default();
        let uid = self.random.uid();
        let own = owner("batch/v1", "Job", &name, &uid);
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        for index in 0..count {
            let mut labels = BTreeMap::from([
                (
                    "batch.kubernetes.io/controller-uid".to_string(),
                    uid.clone(),
                ),
                ("batch.kubernetes.io/job-name".into(), name.clone()),
                ("controller-uid".into(), uid.clone()),
                ("job-name".into(), name.clone()),
            ]);
            let pod_name = if indexed {
                labels.insert(
                    "batch.kubernetes.io/job-completion-index".into(),
                    index.to_string(),
                );
                format!("{name}-{index}-{}", self.random.suffix())
            } else {
                format!("{name}-{}", self.random.suffix())
            };
            self.create_from_template(
                &job.metadata,
                &spec.template,
                pod_name,
                own.clone(),
                labels,
            )?;
        }
        Ok(())
    }

    fn create_from_template(
        &mut self,
        controller: &ObjectMeta,
        template: &PodTemplateSpec,
        name: String,
        owner: OwnerReference,
        extra_labels: BTreeMap<String, String>,
    ) -> Result<(), String> {
        let mut metadata = template.metadata.clone().unwrap_or_default();
        metadata.name = Some(name);
        metadata.namespace = Some(namespace_of(controller));
        metadata.owner_references = Some(vec![owner]);
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .extend(extra_labels);
        self.admit(Pod {
            metadata,
            spec: template.spec.clone(),
            status: None,
        })
    }

    /// Fills what the API server fills (namespace, UID, scheduler name,
    /// priority) and keeps the pod, refusing a second pod of one name.
    fn admit(&mut self, mut pod: Pod) -> Result<(), String> {
        let meta = &mut pod.metadata;
        let namespace = namespace_of(meta);
        meta.namespace = Some(namespace.clone());
        if meta.uid.as_deref().is_none_or(str::is_empty) {
            meta.uid = Some(self.random.uid());
        }
        let key = format!("{namespace}/{}", meta.name.as_deref().unwrap_or(""));
        if !self.names.insert(key.clone()) {
            return Err(format!("a second pod named {key:?}"));
        }
        let spec = pod.spec.get_or_insert_with(Default::default);
        if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
            spec.scheduler_name = Some(self.default_scheduler.clone());
        }
        if spec.priority.is_none() {
            spec.priority = Some(match spec.priority_class_name.as_deref() {
                Some(class) => *self.classes.get(class).ok_or_else(|| {
                    format!("spec.priorityClassName: no PriorityClass {class:?} in the workload")
                })?,
                None => self.default_priority,
            });
        }
        default_requests(spec);
        self.out.pods.push(read_pod(&pod));
        Ok(())
    }
}

/// A container's limits stand for its missing requests, as the API
/// server's defaulting writes them.
fn default_requests(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let Some(resources) = c.resources.as_mut() else {
            continue;
        };
        let Some(limits) = resources.limits.clone() else {
            continue;
        };
        let requests = resources.requests.get_or_insert_with(BTreeMap::new);
        for (name, quantity) in limits {
            requests.entry(name).or_insert(quantity);
        }
    }
}

/// The object with its namespace defaulted, as the selector stores key it.
fn with_namespace<T: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone>(object: &T) -> T {
    let mut object = object.clone();
    let namespace = namespace_of(object.metadata());
    object.metadata_mut().namespace = Some(namespace);
    object
}

fn labels_of(template: &mut PodTemplateSpec) -> &mut BTreeMap<String, String> {
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new)
}

#[cfg(test)]
mod tests;
