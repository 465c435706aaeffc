//! Building blocks shared by the extender scenarios: placer plus a kube-scheduler that calls it,
//! the node shapes kube-scheduler can send, the hardware-encryption capability policy, and zone
//! layouts with pre-placed pods.

use serde_json::json;

use super::env::TestEnv;
use super::placer::Placer;
use super::policy::Policy;
use super::scheduler::{ExtenderConfig, Scheduler, SchedulerConfig, ScorePlugins};

/// The label `ZoneSpread` reads by default.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// How kube-scheduler sends the candidate nodes to placer's filter and prioritize verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeShape {
    /// `nodeCacheCapable: true`: only `NodeNames`; placer resolves them in its cache.
    Names,
    /// `nodeCacheCapable: false`: full Node objects in `Nodes`, which placer must echo back.
    Full,
}

impl NodeShape {
    /// A short name for test and object names.
    pub fn label(self) -> &'static str {
        match self {
            Self::Names => "names",
            Self::Full => "full",
        }
    }
}

impl ExtenderConfig {
    /// Sets `nodeCacheCapable` to match `shape`.
    #[must_use]
    pub fn node_shape(self, shape: NodeShape) -> Self {
        self.node_cache_capable(shape == NodeShape::Names)
    }
}

/// Declares, for each `name => scenario` pair, a module `name` with two tests, `node_names` and
/// `full_nodes`, that run `scenario(NodeShape::Names)` and `scenario(NodeShape::Full)`. A scenario
/// is an `async fn(NodeShape) -> anyhow::Result<()>`; doc comments go on the module.
macro_rules! per_node_shape {
    ($($(#[$meta:meta])* $name:ident => $scenario:ident;)+) => {$(
        $(#[$meta])*
        mod $name {
            use $crate::harness::NodeShape;

            #[tokio::test]
            async fn node_names() -> anyhow::Result<()> {
                super::$scenario(NodeShape::Names).await
            }

            #[tokio::test]
            async fn full_nodes() -> anyhow::Result<()> {
                super::$scenario(NodeShape::Full).await
            }
        }
    )+};
}
pub(crate) use per_node_shape;

/// Pod annotation of the capability rule in [`capability_policy`].
pub const HW_ANNOTATION: &str = "e2e.placer.io/require-hw-encrypt";
/// Node label of the capability rule in [`capability_policy`].
pub const HW_LABEL: &str = "e2e.placer.io/hw-encrypt";
/// placer's reason for nodes without [`HW_LABEL`].
pub const HW_REASON: &str = "node(s) lack hardware encryption";

/// A policy whose only plugin is `CapabilityFilter`: pods annotated `HW_ANNOTATION=true` only on
/// nodes labelled `HW_LABEL=true`, else [`HW_REASON`].
pub fn capability_policy(env: &TestEnv) -> Policy {
    Policy::new(&env.scheduler_name()).plugin(
        "CapabilityFilter",
        None,
        json!({ "rules": [{
            "podAnnotation": HW_ANNOTATION, "podValue": "true",
            "nodeLabel": HW_LABEL, "nodeValue": "true", "reason": HW_REASON,
        }] }),
    )
}

/// A policy whose only plugin is `ZoneSpread` (weight 2) over [`ZONE_LABEL`], counting pods of
/// the incoming pod's priority; `reverse` prefers the fullest zone instead of the emptiest.
pub fn zone_spread_policy(env: &TestEnv, reverse: bool) -> Policy {
    Policy::new(&env.scheduler_name()).plugin(
        "ZoneSpread",
        Some(2),
        json!({ "zoneLabel": ZONE_LABEL, "countPods": "SamePriority", "reverse": reverse }),
    )
}

/// placer and the kube-scheduler that uses it as an extender (filter + prioritize,
/// `nodeCacheCapable: true`, not ignorable, unless reconfigured). Dropping the rig stops both.
pub struct ExtenderRig {
    /// The kube-scheduler (declared first: stopped before placer on drop).
    pub scheduler: Scheduler,
    /// The placer process.
    pub placer: Placer,
}

impl ExtenderRig {
    /// Starts placer with `policy`, then kube-scheduler with a profile named after the test, the
    /// given own score plugins, and placer as extender configured by `extender` from the default
    /// [`ExtenderConfig`]. Create the nodes (and pre-placed pods) first so both caches start with them.
    pub async fn start(
        env: &TestEnv,
        policy: &Policy,
        score: ScorePlugins,
        extender: impl FnOnce(ExtenderConfig) -> ExtenderConfig,
    ) -> anyhow::Result<Self> {
        Self::start_with_args(env, policy, score, extender, &[]).await
    }

    /// Like [`ExtenderRig::start`], with extra arguments for `placer serve`.
    pub async fn start_with_args(
        env: &TestEnv,
        policy: &Policy,
        score: ScorePlugins,
        extender: impl FnOnce(ExtenderConfig) -> ExtenderConfig,
        placer_args: &[&str],
    ) -> anyhow::Result<Self> {
        let placer =
            Placer::start_with(env, &policy.to_yaml(), "placer", "extender", placer_args).await?;
        let config = SchedulerConfig::new(&env.scheduler_name())
            .score_plugins(score)
            .extender(extender(ExtenderConfig::new(&placer.url())));
        let scheduler = Scheduler::start(env, &config).await?;
        Ok(Self { scheduler, placer })
    }
}

/// One zone of a layout: its name suffix and how many pods are already running there.
#[derive(Clone, Copy, Debug)]
pub struct ZonePods {
    /// Zone suffix: the node is `<run id>-<zone>`, its zone label `<run id>-zone-<zone>`
    /// ([`TestEnv::zone`]), so zones are per test.
    pub zone: &'static str,
    /// Pods of priority 0 (the priority of a pod without a class).
    pub same_priority: usize,
    /// Pods of the test's high priority class.
    pub other_priority: usize,
}

/// Priority-0 pods per zone: a = 3, b = 1, c = 2; zone b also runs five pods of priority 1000,
/// which `countPods: SamePriority` must ignore (counting them would make b the fullest zone).
/// A new priority-0 pod belongs in zone b.
pub const ZONE_LAYOUT: [ZonePods; 3] = [
    ZonePods {
        zone: "a",
        same_priority: 3,
        other_priority: 0,
    },
    ZonePods {
        zone: "b",
        same_priority: 1,
        other_priority: 5,
    },
    ZonePods {
        zone: "c",
        same_priority: 2,
        other_priority: 0,
    },
];

impl TestEnv {
    /// The zone label value for `zone` in this test.
    pub fn zone(&self, zone: &str) -> String {
        self.name(&format!("zone-{zone}"))
    }

    /// Creates one node per zone (named `<run id>-<zone>`, labelled with [`ZONE_LABEL`]) and the
    /// pods of `layout` bound to them; other-priority pods use a `PriorityClass` of value 1000.
    /// Returns the node names in layout order.
    pub async fn create_zone_layout(&self, layout: &[ZonePods]) -> anyhow::Result<Vec<String>> {
        let nodes = self
            .create_nodes(
                layout
                    .iter()
                    .map(|z| self.node(z.zone).label(ZONE_LABEL, &self.zone(z.zone))),
            )
            .await?;
        let high = if layout.iter().any(|z| z.other_priority > 0) {
            Some(self.create_priority_class("high", 1000).await?)
        } else {
            None
        };
        for (z, node) in layout.iter().zip(&nodes) {
            self.create_bound_pods(&format!("same-{}", z.zone), node, z.same_priority, |p| p)
                .await?;
            if let Some(high) = &high {
                self.create_bound_pods(&format!("other-{}", z.zone), node, z.other_priority, |p| {
                    p.priority_class(high)
                })
                .await?;
            }
        }
        Ok(nodes)
    }
}
