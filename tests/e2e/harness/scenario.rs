//! Building blocks shared by the extender scenarios: placer plus a kube-scheduler that calls it,
//! and zone layouts with pre-placed pods.

use super::env::TestEnv;
use super::placer::Placer;
use super::policy::Policy;
use super::scheduler::{ExtenderConfig, Scheduler, SchedulerConfig, ScorePlugins};

/// The label `ZoneSpread` reads by default.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// placer and the kube-scheduler that uses it as an extender (filter + prioritize,
/// `nodeCacheCapable: true`, not ignorable). Dropping the rig stops both.
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
        let placer = Placer::start(env, &policy.to_yaml()).await?;
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
