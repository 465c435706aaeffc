//! NodeName: a pod whose `spec.nodeName` is set only fits that node
//! (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/nodename/node_name.go`: PreFilter narrows
//! the nodes to `spec.nodeName` (the others are reported as "node(s) didn't
//! satisfy plugin(s) [NodeName]"), Filter checks the name (`Fits`).
//! Queueing hints: only a node added can help (Node Add, no hint).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, EventResource};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, Status,
};
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NodeName";

/// Filter reason (kube-scheduler `ErrReason`).
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// NodeName takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeNameArgs {}

impl crate::framework::CacheNeeds for NodeNameArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct NodeName;

impl NodeName {
    /// Builds the plugin.
    pub fn new(_: &NodeNameArgs) -> Self {
        NodeName
    }
}

crate::plugin!(NodeName, NAME, [pre_filter, filter, enqueue_extensions]);

impl EnqueueExtensions for NodeName {
    /// The named node appearing; every add is retried, as kube-scheduler
    /// does (a name cannot change).
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![EventHint::always(EventResource::Node, ActionType::ADD)]
    }
}

impl PreFilterPlugin for NodeName {
    fn pre_filter(&self, _: &mut CycleState, _: &PodInfo, _: &ClusterState) -> Status {
        Status::success()
    }

    /// A pod with `spec.nodeName` is only evaluated on that node.
    fn pre_filter_nodes(&self, pod: &PodInfo) -> Option<HashSet<String>> {
        pod.node_name
            .as_ref()
            .filter(|n| !n.is_empty())
            .map(|n| HashSet::from([n.clone()]))
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo, _: &ClusterState) -> Status {
        match pod.node_name.as_deref() {
            Some(wanted) if !wanted.is_empty() && wanted != node.name => {
                Status::unresolvable(ERR_REASON)
            }
            _ => Status::success(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Code, QueueingHint};
    use crate::plugins::test_support::{hint, node_added, node_updated};

    fn filter(node_name: Option<&str>, node: &str) -> Status {
        let pod = PodInfo {
            node_name: node_name.map(str::to_string),
            ..Default::default()
        };
        let node = NodeInfo::new(node, Vec::<(String, String)>::new());
        NodeName.filter(&CycleState::new(), &pod, &node, &ClusterState::default())
    }

    #[test]
    fn only_the_named_node_fits() {
        assert!(filter(Some("a"), "a").is_success());
        let s = filter(Some("a"), "b");
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "node(s) didn't match the requested node name");
        assert!(
            filter(Some("a"), "A").is_rejection(),
            "names are case-sensitive"
        );
    }

    #[test]
    fn no_node_name_fits_everywhere() {
        assert!(filter(None, "a").is_success());
        assert!(filter(Some(""), "a").is_success());
    }

    #[test]
    fn only_a_node_added_queues_the_pod() {
        let pod = PodInfo {
            node_name: Some("a".into()),
            ..Default::default()
        };
        let a = NodeInfo::new("a", [("k", "v")]);
        assert_eq!(
            hint(&NodeName, &pod, node_added(a.clone())),
            QueueingHint::Queue
        );
        let relabelled = NodeInfo::new("a", [("k", "w")]);
        assert_eq!(
            hint(&NodeName, &pod, node_updated(a, relabelled)),
            QueueingHint::Skip
        );
    }

    #[test]
    fn args_are_strict_and_empty() {
        assert!(serde_yaml_ng::from_str::<NodeNameArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<NodeNameArgs>("{nodeName: a}").is_err());
    }
}
