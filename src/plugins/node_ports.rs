//! NodePorts: a pod that binds host ports only goes where those ports are
//! free (design §5.2). kube-scheduler's plugin of the same name
//! (`pkg/scheduler/framework/plugins/nodeports/node_ports.go`) with its
//! conflict rules (`HostPortInfo.CheckConflict` in the framework types):
//!
//! - ports conflict only with the same protocol and port number;
//! - a wanted `0.0.0.0` (or empty) host IP conflicts with that protocol and
//!   port bound on any IP;
//! - a wanted specific IP conflicts with the same IP or with `0.0.0.0`.
//!
//! A conflict is `Unschedulable` (evicting the pod holding the port could
//! help) with [`ERR_REASON`]. Pods without host ports skip the filter.
//! The ports in use come from the cache's per-node usage, kept up to date on
//! every pod event, so a check costs one or two hash lookups per wanted port.
//!
//! Queueing hints: an assigned pod deleted that held a port the pod wants
//! (AssignedPod Delete; port specs are immutable, so updates are not
//! registered), and any node added (Node Add).

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use crate::cache::ClusterState;
use crate::framework::queueing::{ActionType, Change, EventResource, QueueingHint};
use crate::framework::{
    CycleState, EnqueueExtensions, EventHint, FilterPlugin, PreFilterPlugin, Status, queue_if,
};
use crate::objects::pod::HostPort;
use crate::objects::{NodeInfo, PodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "NodePorts";

/// kube-scheduler's `nodeports.ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The host IP that means "every address".
const BIND_ALL: &str = "0.0.0.0";

/// NodePorts takes no arguments (any key is an error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodePortsArgs {}

impl crate::framework::CacheNeeds for NodePortsArgs {}

/// The plugin.
pub struct NodePorts;

impl NodePorts {
    /// Builds the plugin.
    pub fn new(_: &NodePortsArgs) -> Self {
        NodePorts
    }
}

/// One wanted host port, normalized, with the `0.0.0.0` key it also clashes with.
struct WantedPort {
    port: HostPort,
    bind_all: Option<HostPort>,
}

/// The pod's host ports (written in PreFilter).
struct WantedPorts(Vec<WantedPort>);

impl WantedPort {
    fn new(p: &HostPort) -> Self {
        let ip = if p.ip.is_empty() { BIND_ALL } else { &p.ip };
        let protocol = if p.protocol.is_empty() {
            "TCP"
        } else {
            &p.protocol
        };
        let port = HostPort {
            ip: ip.to_string(),
            protocol: protocol.to_string(),
            port: p.port,
        };
        let bind_all = (ip != BIND_ALL).then(|| HostPort {
            ip: BIND_ALL.to_string(),
            ..port.clone()
        });
        WantedPort { port, bind_all }
    }

    /// kube-scheduler's `HostPortInfo.CheckConflict` against a node's ports in use.
    fn conflicts<V>(&self, in_use: &HashMap<HostPort, V>) -> bool {
        match &self.bind_all {
            // 0.0.0.0 clashes with the same protocol and port on any IP.
            None => in_use
                .keys()
                .any(|k| k.port == self.port.port && k.protocol == self.port.protocol),
            // A specific IP clashes with itself and with 0.0.0.0.
            Some(bind_all) => in_use.contains_key(&self.port) || in_use.contains_key(bind_all),
        }
    }
}

crate::plugin!(NodePorts, NAME, [pre_filter, filter, enqueue_extensions]);

impl EnqueueExtensions for NodePorts {
    fn events_to_register(&self) -> Vec<EventHint> {
        vec![
            EventHint::when(
                EventResource::AssignedPod,
                ActionType::DELETE,
                deleted_pod_may_help,
            ),
            EventHint::always(EventResource::Node, ActionType::ADD),
        ]
    }
}

/// The deleted pod was placed (bound or nominated) and held a host port
/// `pod` wants, by the filter's own conflict rule. Allocates only when the
/// deleted pod bound host ports.
fn deleted_pod_may_help(pod: &PodInfo, change: &Change) -> QueueingHint {
    let Some((Some(deleted), _)) = change.pods() else {
        return QueueingHint::Queue;
    };
    let placed = deleted.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || deleted.preemption.nominated_node.is_some();
    if !placed || deleted.spec.host_ports.is_empty() {
        return QueueingHint::Skip;
    }
    let freed: HashMap<HostPort, ()> = deleted
        .spec
        .host_ports
        .iter()
        .map(|p| (p.clone(), ()))
        .collect();
    queue_if(
        pod.spec
            .host_ports
            .iter()
            .filter(|p| p.port > 0)
            .any(|p| WantedPort::new(p).conflicts(&freed)),
    )
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &ClusterState) -> Status {
        let wanted: Vec<WantedPort> = pod
            .spec
            .host_ports
            .iter()
            .filter(|p| p.port > 0)
            .map(WantedPort::new)
            .collect();
        if wanted.is_empty() {
            return Status::skip("pod requests no host ports");
        }
        state.write(WantedPorts(wanted));
        Status::success()
    }
}

impl FilterPlugin for NodePorts {
    fn filter(
        &self,
        state: &CycleState,
        _: &PodInfo,
        node: &NodeInfo,
        cluster: &ClusterState,
    ) -> Status {
        let WantedPorts(wanted) = match state.from_pre_filter::<WantedPorts>() {
            Ok(s) => s,
            Err(missing) => return missing,
        };
        let Some(usage) = cluster.usage_of(node) else {
            return Status::success();
        };
        if wanted.iter().any(|w| w.conflicts(&usage.host_ports)) {
            Status::unschedulable(ERR_REASON)
        } else {
            Status::success()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::test_support::{PodBuilder, hint, node_added, pod_event};

    fn hp(ip: &str, protocol: &str, port: i32) -> HostPort {
        HostPort {
            ip: ip.into(),
            protocol: protocol.into(),
            port,
        }
    }

    fn pod(name: &str, node: Option<&str>, ports: Vec<HostPort>) -> PodInfo {
        PodBuilder::new(name).on(node).host_ports(ports).build()
    }

    /// Node `n1` with one pod binding `used`.
    fn cluster(used: Vec<HostPort>) -> (ClusterState, NodeInfo) {
        let node = NodeInfo::new("n1", Vec::<(String, String)>::new());
        let mut c = ClusterState::default();
        c.apply_node(node.clone());
        c.apply_pod(pod("holder", Some("n1"), used));
        (c, node)
    }

    fn run(used: Vec<HostPort>, wanted: Vec<HostPort>) -> Status {
        let (c, node) = cluster(used);
        let p = pod("new", None, wanted);
        let plugin = NodePorts;
        let mut state = CycleState::new();
        let pre = plugin.pre_filter(&mut state, &p, &c);
        if pre.code() == Code::Skip {
            return pre;
        }
        plugin.filter(&state, &p, &node, &c)
    }

    fn conflict(used: HostPort, wanted: HostPort) -> bool {
        let s = run(vec![used], vec![wanted]);
        match s.code() {
            Code::Success => false,
            Code::Unschedulable => {
                assert_eq!(s.message(), ERR_REASON);
                true
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn bind_all_conflicts_with_every_ip() {
        assert!(conflict(
            hp("0.0.0.0", "TCP", 80),
            hp("10.0.0.1", "TCP", 80)
        ));
        assert!(conflict(
            hp("10.0.0.1", "TCP", 80),
            hp("0.0.0.0", "TCP", 80)
        ));
        assert!(conflict(hp("0.0.0.0", "TCP", 80), hp("0.0.0.0", "TCP", 80)));
    }

    #[test]
    fn specific_ips_conflict_only_with_themselves() {
        assert!(conflict(
            hp("10.0.0.1", "TCP", 80),
            hp("10.0.0.1", "TCP", 80)
        ));
        assert!(!conflict(
            hp("10.0.0.1", "TCP", 80),
            hp("10.0.0.2", "TCP", 80)
        ));
    }

    #[test]
    fn protocol_and_port_must_both_match() {
        assert!(!conflict(
            hp("0.0.0.0", "UDP", 53),
            hp("0.0.0.0", "TCP", 53)
        ));
        assert!(!conflict(
            hp("10.0.0.1", "UDP", 53),
            hp("0.0.0.0", "TCP", 53)
        ));
        assert!(!conflict(
            hp("0.0.0.0", "TCP", 80),
            hp("10.0.0.1", "SCTP", 80)
        ));
        assert!(!conflict(
            hp("0.0.0.0", "TCP", 80),
            hp("0.0.0.0", "TCP", 81)
        ));
        assert!(conflict(
            hp("0.0.0.0", "UDP", 53),
            hp("10.0.0.1", "UDP", 53)
        ));
    }

    #[test]
    fn empty_ip_and_protocol_mean_bind_all_and_tcp() {
        assert!(conflict(hp("0.0.0.0", "TCP", 80), hp("", "", 80)));
        assert!(conflict(hp("10.0.0.1", "TCP", 80), hp("", "TCP", 80)));
        assert!(!conflict(hp("0.0.0.0", "UDP", 80), hp("", "", 80)));
    }

    #[test]
    fn one_conflict_among_many_ports_rejects_once() {
        let s = run(
            vec![hp("0.0.0.0", "TCP", 443)],
            vec![hp("0.0.0.0", "TCP", 80), hp("0.0.0.0", "TCP", 443)],
        );
        assert_eq!(s.code(), Code::Unschedulable);
        assert_eq!(s.reasons(), [ERR_REASON]);
    }

    #[test]
    fn pods_without_host_ports_skip_and_free_nodes_pass() {
        let s = run(vec![hp("0.0.0.0", "TCP", 80)], vec![]);
        assert_eq!(s.code(), Code::Skip);
        let s = run(
            vec![hp("0.0.0.0", "TCP", 80)],
            vec![hp("0.0.0.0", "TCP", 0)],
        );
        assert_eq!(s.code(), Code::Skip, "port 0 is not a host port");
        // A node no pod runs on has every port free.
        let p = pod("new", None, vec![hp("0.0.0.0", "TCP", 80)]);
        let mut state = CycleState::new();
        let c = ClusterState::default();
        assert!(NodePorts.pre_filter(&mut state, &p, &c).is_success());
        let other = NodeInfo::new("n2", Vec::<(String, String)>::new());
        assert_eq!(NodePorts.filter(&state, &p, &other, &c), Status::success());
    }

    #[test]
    fn freed_ports_are_free_again() {
        let (mut c, node) = cluster(vec![hp("0.0.0.0", "TCP", 80)]);
        let p = pod("new", None, vec![hp("10.0.0.1", "TCP", 80)]);
        let mut state = CycleState::new();
        NodePorts.pre_filter(&mut state, &p, &c);
        assert_eq!(
            NodePorts.filter(&state, &p, &node, &c).code(),
            Code::Unschedulable
        );
        c.delete_pod("ns", "holder");
        assert_eq!(NodePorts.filter(&state, &p, &node, &c), Status::success());
    }

    /// Cases of kube-scheduler's `Test_isSchedulableAfterAssignedPodDeleted`
    /// (`node_ports_test.go`).
    #[test]
    fn hints_queue_the_pod_when_a_pod_holding_its_port_goes() {
        let wanting = pod("p", None, vec![hp("0.0.0.0", "TCP", 8080)]);
        let deleted = |p: PodInfo| {
            hint(
                &NodePorts,
                &wanting,
                pod_event(EventResource::AssignedPod, Some(p), None),
            )
        };
        assert_eq!(
            deleted(pod("q", None, vec![hp("0.0.0.0", "TCP", 8080)])),
            QueueingHint::Skip,
            "unscheduled"
        );
        assert_eq!(deleted(pod("q", Some("n"), vec![])), QueueingHint::Skip);
        assert_eq!(
            deleted(pod("q", Some("n"), vec![hp("0.0.0.0", "TCP", 8081)])),
            QueueingHint::Skip,
            "unrelated port"
        );
        assert_eq!(
            deleted(pod("q", Some("n"), vec![hp("0.0.0.0", "TCP", 8080)])),
            QueueingHint::Queue
        );
        assert_eq!(
            deleted(pod("q", Some("n"), vec![hp("10.0.0.1", "TCP", 8080)])),
            QueueingHint::Queue,
            "a specific IP also blocked the pod's bind-all port"
        );
        let node = NodeInfo::new("n2", Vec::<(String, String)>::new());
        assert_eq!(
            hint(&NodePorts, &wanting, node_added(node)),
            QueueingHint::Queue
        );
    }

    #[test]
    fn args_take_no_keys() {
        assert_eq!(
            serde_yaml_ng::from_str::<NodePortsArgs>("{}").unwrap(),
            NodePortsArgs {}
        );
        assert!(serde_yaml_ng::from_str::<NodePortsArgs>("ports: [80]").is_err());
    }
}
