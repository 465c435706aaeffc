//! PrioritySort: the standalone queue pops the highest-priority pod first,
//! and among equal priorities the one queued earliest (design §5.2).
//!
//! Mirrors kube-scheduler v1.37's
//! `pkg/scheduler/framework/plugins/queuesort/priority_sort.go`. A missing
//! `spec.priority` counts as 0 ([`crate::objects::PodInfo::priority`]).

use serde::{Deserialize, Serialize};

use crate::framework::{QueueSortPlugin, QueuedPodInfo};

/// Plugin name in the policy.
pub const NAME: &str = "PrioritySort";

/// PrioritySort takes no arguments (as in kube-scheduler).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritySortArgs {}

impl crate::framework::CacheNeeds for PrioritySortArgs {}

/// The plugin.
#[derive(Debug, Default)]
pub struct PrioritySort;

impl PrioritySort {
    /// Builds the plugin.
    pub fn new(_: &PrioritySortArgs) -> Self {
        PrioritySort
    }
}

crate::plugin!(PrioritySort, NAME, [queue_sort]);

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (p1, p2) = (a.pod.priority, b.pod.priority);
        p1 > p2 || (p1 == p2 && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::PodInfo;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn queued(priority: i32, timestamp: Instant) -> QueuedPodInfo {
        QueuedPodInfo {
            pod: Arc::new(PodInfo {
                priority,
                ..Default::default()
            }),
            timestamp,
            attempts: 0,
        }
    }

    #[test]
    fn higher_priority_first_then_earlier() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let p = PrioritySort;
        assert!(
            p.less(&queued(10, t1), &queued(5, t0)),
            "priority beats age"
        );
        assert!(!p.less(&queued(5, t0), &queued(10, t1)));
        assert!(p.less(&queued(5, t0), &queued(5, t1)), "earlier first");
        assert!(!p.less(&queued(5, t1), &queued(5, t0)));
        assert!(!p.less(&queued(5, t0), &queued(5, t0)), "strict order");
        assert!(
            p.less(&queued(0, t1), &queued(-1, t0)),
            "negative priorities"
        );
    }

    #[test]
    fn missing_priority_counts_as_zero() {
        let pod: PodInfo = serde_json::from_str(r#"{"spec": {}}"#).unwrap();
        assert_eq!(pod.priority, 0);
        let t0 = Instant::now();
        let unset = QueuedPodInfo {
            pod: Arc::new(pod),
            timestamp: t0,
            attempts: 0,
        };
        assert!(PrioritySort.less(&queued(1, t0), &unset));
        assert!(PrioritySort.less(&unset, &queued(-1, t0)));
    }

    #[test]
    fn args_are_strict_and_empty() {
        assert!(serde_yaml_ng::from_str::<PrioritySortArgs>("{}").is_ok());
        assert!(serde_yaml_ng::from_str::<PrioritySortArgs>("{x: 1}").is_err());
    }
}
