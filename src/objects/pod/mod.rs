//! The view of a pod that plugins read.
//!
//! Both the HTTP verbs (a Pod in kube-scheduler's JSON) and the watch cache
//! (k8s-openapi `Pod`s) produce a [`PodInfo`], so a plugin is written once.
//! Only the fields placer's plugins use are kept; everything else in the JSON
//! is skipped while decoding, which is both faster and more forgiving of
//! fields newer than this build.
//!
//! | file | what |
//! | --- | --- |
//! | `mod.rs` | the view and what both decoders share (host ports, resize condition) |
//! | `requests.rs` | the effective requests (`PodRequests`, pod-level and resize status) |
//! | `convert.rs` | from a k8s-openapi `Pod` (the watch cache) |
//! | `wire.rs` | straight from kube-scheduler's JSON (the HTTP verbs) |

mod convert;
mod extended;
mod requests;
#[cfg(test)]
mod tests;
mod volumes;
mod wire;

pub use extended::{ContainerExtendedRequests, DEVICE_CLASS_PREFIX, ExtendedRequest};
pub use volumes::InlineDisk;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Affinity, Toleration, TopologySpreadConstraint};

use crate::objects::features::FeatureSet;
use crate::objects::resources::Resources;
use requests::PodResources;

/// The fields of a pod that scheduling decisions depend on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty when the JSON had none).
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels` (shared: the cache points pods with equal labels
    /// at one map).
    pub labels: Arc<BTreeMap<String, String>>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.priority`; a missing priority counts as 0, as kube-scheduler does.
    pub priority: i32,
    /// `spec.schedulerName` (empty when absent; the API server defaults it).
    pub scheduler_name: String,
    /// `spec.nodeName`, set once the pod is bound (or assumed).
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `metadata.deletionTimestamp` is set: the pod is terminating.
    pub deleting: bool,
    /// The owner reference with `controller: true` (its ReplicaSet, ...).
    pub controller: Option<ControllerRef>,
    /// The placement requirements in the spec (shared: cheap to clone).
    pub spec: Arc<PodSpecInfo>,
    /// What preemption reads (standalone mode).
    pub preemption: PreemptionInfo,
}

/// A pod's controlling owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerRef {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// `kind`, e.g. `ReplicaSet`.
    pub kind: String,
    /// `name`.
    pub name: String,
}

impl ControllerRef {
    /// The first owner reference marked `controller: true`, given as
    /// `(controller, [apiVersion, kind, name])`.
    fn first_of<'a>(
        owners: impl IntoIterator<Item = (Option<bool>, [&'a String; 3])>,
    ) -> Option<Self> {
        owners
            .into_iter()
            .find(|(controller, _)| *controller == Some(true))
            .map(|(_, [api_version, kind, name])| ControllerRef {
                api_version: api_version.clone(),
                kind: kind.clone(),
                name: name.clone(),
            })
    }
}

/// The fields DefaultPreemption reads, from the spec and the status.
///
/// Equality looks at the spec part only: a pod whose status alone changed
/// (placer just wrote its `nominatedNodeName`) is not a changed pod for the
/// scheduling queue, as kube-scheduler ignores status-only updates.
#[derive(Debug, Clone, Default)]
pub struct PreemptionInfo {
    /// `spec.preemptionPolicy: Never`: the pod waits rather than evicting others.
    pub never: bool,
    /// `status.nominatedNodeName`.
    pub nominated_node: Option<String>,
    /// `status.startTime` in seconds since the epoch; `None` until a kubelet starts the pod.
    pub start_time: Option<i64>,
    /// Carries a `DisruptionTarget` condition with reason
    /// `PreemptionByScheduler`: a scheduler chose it as a victim.
    pub preempted: bool,
}

impl PartialEq for PreemptionInfo {
    fn eq(&self, other: &Self) -> bool {
        self.never == other.never
    }
}

/// `preemptionPolicy` value that keeps a pod from preempting.
const PREEMPT_NEVER: &str = "Never";

/// What a pod's spec asks of its node, reduced to what the filters read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSpecInfo {
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.affinity`.
    pub affinity: Option<Affinity>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// The effective request of the spec (containers, init containers,
    /// sidecars, pod-level `spec.resources`, overhead): what an incoming pod
    /// asks of a node.
    pub requests: Resources,
    /// What the pod holds once on a node: [`Self::requests`] raised to the
    /// in-place-resize status (`status.allocatedResources`, container
    /// `status.resources`), as kube-scheduler counts a node's pods. The only
    /// field here that reads the status: a resize changes what a node has free.
    pub counted: Resources,
    /// [`Self::counted`] with a missing cpu/memory request counted at
    /// kube-scheduler's scoring defaults (100m, 200Mi per container; with
    /// pod-level requests only for what neither level names): summed per node
    /// for scoring.
    pub non_zero_requests: Resources,
    /// The request NodeResourcesFit scores the pod itself with: every
    /// container's missing cpu/memory at the defaults, and
    /// (as kube-scheduler v1.37 builds that scorer) neither pod-level
    /// requests nor the resize status.
    pub scoring_requests: Resources,
    /// Host ports the pod's containers (and init containers) bind.
    pub host_ports: Vec<HostPort>,
    /// `spec.topologySpreadConstraints`.
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Names of `spec.schedulingGates`; a gated pod is not scheduled.
    pub scheduling_gates: Vec<String>,
    /// Claims the pod's volumes need, in volume order.
    pub pvc_claims: Vec<VolumeClaim>,
    /// The images of the init containers, the containers and the image
    /// volumes, normalized as ImageLocality compares them (a name used
    /// twice is listed twice, as kube-scheduler counts it).
    pub images: Vec<String>,
    /// The node features the pod needs (NodeDeclaredFeatures' inference).
    pub required_features: FeatureSet,
    /// Disks named in-line in the pod's volumes, in volume order.
    pub inline_disks: Vec<InlineDisk>,
    /// `spec.resourceClaims` (Dynamic Resource Allocation), in spec order,
    /// each with its claim's name as far as the pod knows it.
    pub resource_claims: Vec<PodResourceClaim>,
    /// The drivers of the pod's in-line CSI volumes (VolumeBinding's
    /// queueing hint for CSIDriver updates reads them).
    pub inline_csi_drivers: Vec<String>,
    /// The containers' requests of extended resources a DeviceClass may
    /// back (DynamicResources' device requests for them).
    pub extended_requests: Vec<ContainerExtendedRequests>,
}

/// Hashes what tells specs apart and is cheap to hash; affinity, spread
/// constraints, claims, in-line disks and extended requests count by
/// presence or number only. Every part hashed is one that equality
/// compares, so equal specs hash alike: the cache finds a pod's equal spec
/// by this hash and confirms it with `==`.
impl Hash for PodSpecInfo {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.node_selector.hash(state);
        self.affinity.is_some().hash(state);
        for t in &self.tolerations {
            (&t.key, &t.operator, &t.value, &t.effect).hash(state);
        }
        self.requests.hash(state);
        self.counted.hash(state);
        self.host_ports.hash(state);
        self.topology_spread_constraints.len().hash(state);
        self.scheduling_gates.hash(state);
        self.pvc_claims.hash(state);
        self.images.hash(state);
        self.required_features.hash(state);
        self.inline_disks.len().hash(state);
        self.resource_claims.len().hash(state);
        self.inline_csi_drivers.hash(state);
        self.extended_requests.len().hash(state);
    }
}

/// One of a pod's `spec.resourceClaims` with its ResourceClaim's name
/// resolved as kube-scheduler's `resourceclaim.Name` resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResourceClaim {
    /// The entry's `name` in the pod.
    pub name: String,
    /// Which ResourceClaim it stands for.
    pub claim: ClaimRef,
}

/// The ResourceClaim behind a pod's claim entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRef {
    /// `resourceClaimName`: an existing claim, shared or not.
    Named(String),
    /// `resourceClaimTemplateName` whose claim the resourceclaim controller
    /// created and named in `status.resourceClaimStatuses`; the claim must
    /// be owned by the pod.
    Generated(String),
    /// A template whose status entry says no claim was needed.
    NotNeeded,
    /// A template whose claim is not created yet (no status entry).
    Pending,
    /// Neither field is set.
    Unsupported,
}

impl PodResourceClaim {
    /// Resolves `name`'s claim from the entry's fields and the pod's
    /// `status.resourceClaimStatuses` (`(name, resourceClaimName)` pairs).
    pub fn resolve<'a>(
        name: &str,
        claim_name: Option<&str>,
        template_name: Option<&str>,
        mut statuses: impl Iterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Self {
        let claim = match (claim_name, template_name) {
            (Some(c), _) => ClaimRef::Named(c.to_owned()),
            (None, Some(_)) => match statuses.find(|(n, _)| *n == name) {
                Some((_, Some(c))) => ClaimRef::Generated(c.to_owned()),
                Some((_, None)) => ClaimRef::NotNeeded,
                None => ClaimRef::Pending,
            },
            (None, None) => ClaimRef::Unsupported,
        };
        PodResourceClaim {
            name: name.to_owned(),
            claim,
        }
    }
}

/// A PersistentVolumeClaim one of the pod's volumes needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct VolumeClaim {
    /// A `persistentVolumeClaim` volume's `claimName`, or the `<pod>-<volume>`
    /// claim of a generic ephemeral volume.
    pub name: String,
    /// A generic ephemeral volume's claim (created for, and owned by, the pod).
    pub ephemeral: bool,
}

impl VolumeClaim {
    /// The claim of a `persistentVolumeClaim` volume.
    pub fn named(name: &str) -> Self {
        VolumeClaim {
            name: name.to_string(),
            ephemeral: false,
        }
    }

    fn ephemeral(pod: &str, volume: &str) -> Self {
        VolumeClaim {
            name: format!("{pod}-{volume}"),
            ephemeral: true,
        }
    }
}

/// One host port a container binds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// `hostIP` ("" = all addresses, as "0.0.0.0").
    pub ip: String,
    /// `TCP`, `UDP` or `SCTP` (default `TCP`).
    pub protocol: String,
    /// `hostPort`.
    pub port: i32,
}

/// A container as far as its name and ports go (shared by both decoders).
struct ContainerView {
    name: String,
    ports: Vec<HostPort>,
}

fn host_port(host_port: Option<i32>, protocol: Option<&str>, ip: Option<&str>) -> Option<HostPort> {
    let port = host_port.filter(|p| *p > 0)?;
    Some(HostPort {
        ip: ip
            .filter(|i| !i.is_empty())
            .unwrap_or("0.0.0.0")
            .to_string(),
        protocol: protocol
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP")
            .to_string(),
        port,
    })
}

/// `IsPodResizeInfeasible`: the first `PodResizePending` condition's reason
/// is `Infeasible`. Conditions come as `(type, reason)`.
fn resize_infeasible<'a>(conditions: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> bool {
    conditions
        .into_iter()
        .find(|(kind, _)| *kind == "PodResizePending")
        .is_some_and(|(_, reason)| reason == Some("Infeasible"))
}

/// Effective requests and host ports.
fn requests_and_ports(
    containers: &[ContainerView],
    init: &[ContainerView],
    resources: &PodResources,
) -> Requests {
    let ports = init
        .iter()
        .chain(containers)
        .flat_map(|c| c.ports.iter().cloned())
        .collect();
    Requests {
        requests: resources.requests(),
        host_ports: ports,
        extended: extended::extended_requests(containers, init, resources),
    }
}

/// The request-related parts of a pod, computed once.
#[derive(Default)]
struct Requests {
    requests: requests::Requests,
    host_ports: Vec<HostPort>,
    extended: Vec<ContainerExtendedRequests>,
}

impl PodInfo {
    /// `namespace/name`, as used in events and logs.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Succeeded and Failed pods hold no resources and are not counted.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Being deleted after a scheduler preempted it (kube-scheduler's
    /// `PodTerminatingByPreemption`).
    pub fn terminating_by_preemption(&self) -> bool {
        self.deleting && self.preemption.preempted
    }
}
