//! placer's plugins, one file each, and the registry that builds them from
//! the policy.
//!
//! To add a plugin: write `plugins/<name>.rs` with its args type, its struct
//! and the framework traits it implements, then add one variant to
//! [`PluginArgs`] and one arm to each `match` below.

pub mod capability_filter;
pub mod default_preemption;
pub mod fields;
pub mod helper;
pub mod inter_pod_affinity;
mod label_selector;
pub mod net_qos;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_spec;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod scheduling_gates;
pub mod taint_toleration;
pub mod volume_binding;
pub mod zone_spread;

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::framework::{Plugin, QueueSort};

pub use capability_filter::{CapabilityFilter, CapabilityFilterArgs};
pub use default_preemption::{DefaultPreemption, DefaultPreemptionArgs};
pub use inter_pod_affinity::{InterPodAffinity, InterPodAffinityArgs};
pub use net_qos::{NetQos, NetQosArgs};
pub use node_affinity::{NodeAffinity, NodeAffinityArgs};
pub use node_name::{NodeName, NodeNameArgs};
pub use node_ports::{NodePorts, NodePortsArgs};
pub use node_resources_fit::{NodeResourcesFit, NodeResourcesFitArgs};
pub use node_unschedulable::{NodeUnschedulable, NodeUnschedulableArgs};
pub use pod_topology_spread::{PodTopologySpread, PodTopologySpreadArgs};
pub use priority_sort::{PrioritySort, PrioritySortArgs};
pub use scheduling_gates::{SchedulingGates, SchedulingGatesArgs};
pub use taint_toleration::{TaintToleration, TaintTolerationArgs};
pub use volume_binding::{VolumeBinding, VolumeBindingArgs};
pub use zone_spread::{ZoneSpread, ZoneSpreadArgs};

/// Every plugin name the policy accepts.
pub const PLUGIN_NAMES: &[&str] = &[
    capability_filter::NAME,
    zone_spread::NAME,
    net_qos::NAME,
    priority_sort::NAME,
    scheduling_gates::NAME,
    node_unschedulable::NAME,
    node_name::NAME,
    taint_toleration::NAME,
    node_affinity::NAME,
    node_resources_fit::NAME,
    node_ports::NAME,
    volume_binding::NAME,
    pod_topology_spread::NAME,
    inter_pod_affinity::NAME,
    default_preemption::NAME,
];

/// The typed arguments of one enabled plugin; the variant says which plugin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PluginArgs {
    /// CapabilityFilter.
    CapabilityFilter(CapabilityFilterArgs),
    /// ZoneSpread.
    ZoneSpread(ZoneSpreadArgs),
    /// NetQoS.
    NetQos(NetQosArgs),
    /// PrioritySort (queue sort, standalone mode).
    PrioritySort(PrioritySortArgs),
    /// SchedulingGates (pre-enqueue, standalone mode).
    SchedulingGates(SchedulingGatesArgs),
    /// NodeUnschedulable.
    NodeUnschedulable(NodeUnschedulableArgs),
    /// NodeName.
    NodeName(NodeNameArgs),
    /// TaintToleration.
    TaintToleration(TaintTolerationArgs),
    /// NodeAffinity.
    NodeAffinity(NodeAffinityArgs),
    /// NodeResourcesFit.
    NodeResourcesFit(NodeResourcesFitArgs),
    /// NodePorts.
    NodePorts(NodePortsArgs),
    /// VolumeBinding (bound claims; unbound WaitForFirstConsumer claims are refused).
    VolumeBinding(VolumeBindingArgs),
    /// PodTopologySpread.
    PodTopologySpread(PodTopologySpreadArgs),
    /// InterPodAffinity.
    InterPodAffinity(InterPodAffinityArgs),
    /// DefaultPreemption (PostFilter, standalone mode).
    DefaultPreemption(DefaultPreemptionArgs),
}

impl PluginArgs {
    /// Decodes the `args` of plugin `name` (strictly: unknown keys are errors).
    /// `None` when `name` is not a known plugin.
    pub fn deserialize_for<'de, D: Deserializer<'de>>(
        name: &str,
        d: D,
    ) -> Option<Result<Self, D::Error>> {
        Some(match name {
            capability_filter::NAME => {
                CapabilityFilterArgs::deserialize(d).map(PluginArgs::CapabilityFilter)
            }
            zone_spread::NAME => ZoneSpreadArgs::deserialize(d).map(PluginArgs::ZoneSpread),
            net_qos::NAME => NetQosArgs::deserialize(d).map(PluginArgs::NetQos),
            priority_sort::NAME => PrioritySortArgs::deserialize(d).map(PluginArgs::PrioritySort),
            scheduling_gates::NAME => {
                SchedulingGatesArgs::deserialize(d).map(PluginArgs::SchedulingGates)
            }
            node_unschedulable::NAME => {
                NodeUnschedulableArgs::deserialize(d).map(PluginArgs::NodeUnschedulable)
            }
            node_name::NAME => NodeNameArgs::deserialize(d).map(PluginArgs::NodeName),
            taint_toleration::NAME => {
                TaintTolerationArgs::deserialize(d).map(PluginArgs::TaintToleration)
            }
            node_affinity::NAME => NodeAffinityArgs::deserialize(d).map(PluginArgs::NodeAffinity),
            node_resources_fit::NAME => {
                NodeResourcesFitArgs::deserialize(d).map(PluginArgs::NodeResourcesFit)
            }
            node_ports::NAME => NodePortsArgs::deserialize(d).map(PluginArgs::NodePorts),
            volume_binding::NAME => {
                VolumeBindingArgs::deserialize(d).map(PluginArgs::VolumeBinding)
            }
            pod_topology_spread::NAME => {
                PodTopologySpreadArgs::deserialize(d).map(PluginArgs::PodTopologySpread)
            }
            inter_pod_affinity::NAME => {
                InterPodAffinityArgs::deserialize(d).map(PluginArgs::InterPodAffinity)
            }
            default_preemption::NAME => {
                DefaultPreemptionArgs::deserialize(d).map(PluginArgs::DefaultPreemption)
            }
            _ => return None,
        })
    }

    /// The arguments plugin `name` gets when the policy gives none.
    pub fn default_for(name: &str) -> Option<Self> {
        Some(match name {
            capability_filter::NAME => PluginArgs::CapabilityFilter(Default::default()),
            zone_spread::NAME => PluginArgs::ZoneSpread(Default::default()),
            net_qos::NAME => PluginArgs::NetQos(Default::default()),
            priority_sort::NAME => PluginArgs::PrioritySort(Default::default()),
            scheduling_gates::NAME => PluginArgs::SchedulingGates(Default::default()),
            node_unschedulable::NAME => PluginArgs::NodeUnschedulable(Default::default()),
            node_name::NAME => PluginArgs::NodeName(Default::default()),
            taint_toleration::NAME => PluginArgs::TaintToleration(Default::default()),
            node_affinity::NAME => PluginArgs::NodeAffinity(Default::default()),
            node_resources_fit::NAME => PluginArgs::NodeResourcesFit(Default::default()),
            node_ports::NAME => PluginArgs::NodePorts(Default::default()),
            volume_binding::NAME => PluginArgs::VolumeBinding(Default::default()),
            pod_topology_spread::NAME => PluginArgs::PodTopologySpread(Default::default()),
            inter_pod_affinity::NAME => PluginArgs::InterPodAffinity(Default::default()),
            default_preemption::NAME => PluginArgs::DefaultPreemption(Default::default()),
            _ => return None,
        })
    }

    /// The plugin's name.
    pub fn plugin_name(&self) -> &'static str {
        match self {
            PluginArgs::CapabilityFilter(_) => capability_filter::NAME,
            PluginArgs::ZoneSpread(_) => zone_spread::NAME,
            PluginArgs::NetQos(_) => net_qos::NAME,
            PluginArgs::PrioritySort(_) => priority_sort::NAME,
            PluginArgs::SchedulingGates(_) => scheduling_gates::NAME,
            PluginArgs::NodeUnschedulable(_) => node_unschedulable::NAME,
            PluginArgs::NodeName(_) => node_name::NAME,
            PluginArgs::TaintToleration(_) => taint_toleration::NAME,
            PluginArgs::NodeAffinity(_) => node_affinity::NAME,
            PluginArgs::NodeResourcesFit(_) => node_resources_fit::NAME,
            PluginArgs::NodePorts(_) => node_ports::NAME,
            PluginArgs::VolumeBinding(_) => volume_binding::NAME,
            PluginArgs::PodTopologySpread(_) => pod_topology_spread::NAME,
            PluginArgs::InterPodAffinity(_) => inter_pod_affinity::NAME,
            PluginArgs::DefaultPreemption(_) => default_preemption::NAME,
        }
    }

    /// Builds the plugin.
    pub fn build(&self) -> Arc<dyn Plugin> {
        match self {
            PluginArgs::CapabilityFilter(a) => Arc::new(CapabilityFilter::new(a)),
            PluginArgs::ZoneSpread(a) => Arc::new(ZoneSpread::new(a)),
            PluginArgs::NetQos(a) => Arc::new(NetQos::new(a)),
            PluginArgs::PrioritySort(a) => Arc::new(PrioritySort::new(a)),
            PluginArgs::SchedulingGates(a) => Arc::new(SchedulingGates::new(a)),
            PluginArgs::NodeUnschedulable(a) => Arc::new(NodeUnschedulable::new(a)),
            PluginArgs::NodeName(a) => Arc::new(NodeName::new(a)),
            PluginArgs::TaintToleration(a) => Arc::new(TaintToleration::new(a)),
            PluginArgs::NodeAffinity(a) => Arc::new(NodeAffinity::new(a)),
            PluginArgs::NodeResourcesFit(a) => Arc::new(NodeResourcesFit::new(a)),
            PluginArgs::NodePorts(a) => Arc::new(NodePorts::new(a)),
            PluginArgs::VolumeBinding(a) => Arc::new(VolumeBinding::new(a)),
            PluginArgs::PodTopologySpread(a) => Arc::new(PodTopologySpread::new(a)),
            PluginArgs::InterPodAffinity(a) => Arc::new(InterPodAffinity::new(a)),
            PluginArgs::DefaultPreemption(a) => Arc::new(DefaultPreemption::new(a)),
        }
    }
}

/// The queue order when no profile enables a QueueSort plugin: PrioritySort,
/// as in kube-scheduler's default profile.
pub fn default_queue_sort() -> QueueSort {
    QueueSort::from_sort(Arc::new(PrioritySort))
}
