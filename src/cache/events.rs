//! Cluster events for standalone mode's queue (design §8, "Queueing
//! hints"): what changed, classified as kube-scheduler classifies it
//! (`framework/events.go`), with the old and new record so that a plugin's
//! queueing hint can tell whether the change may help a pod it rejected.
//!
//! The watch loops and the scheduler's own assume/forget report events while
//! they hold the write lock. A write that changes nothing placer keeps (a
//! node heartbeat, a pod status update no plugin reads) is no event at all.
//! Nothing is recorded until the queue [`enable`](EventFeed::enable)s the
//! feed, so extender mode pays one atomic load per write. The feed is
//! bounded: past [`MAX_PENDING_EVENTS`] it collapses into one wildcard
//! event, which moves every waiting pod (a relist does the same).

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::ops::BitOr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::objects::{NodeInfo, PodInfo};

/// Events kept before the feed collapses to one wildcard event.
pub const MAX_PENDING_EVENTS: usize = 8192;

/// What happened to an object, as a set of kube-scheduler's `ActionType`s.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ActionType(u32);

impl ActionType {
    /// Nothing (never reported).
    pub const NONE: ActionType = ActionType(0);
    /// Created (or, for a pod, assigned to a node).
    pub const ADD: ActionType = ActionType(1);
    /// Deleted (for a pod: also forgotten after a failed binding).
    pub const DELETE: ActionType = ActionType(1 << 1);
    /// A node's `status.allocatable` changed.
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    /// A node's labels changed.
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    /// A node's taints changed, or it was uncordoned.
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    /// A node's condition statuses changed.
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    /// A node's annotations changed.
    pub const UPDATE_NODE_ANNOTATION: ActionType = ActionType(1 << 6);
    /// A node's declared features changed.
    pub const UPDATE_NODE_DECLARED_FEATURE: ActionType = ActionType(1 << 7);
    /// A pod's labels changed.
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 8);
    /// A pod's requests went down (or one went away).
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 9);
    /// A pod's requests went up (or one was added).
    pub const UPDATE_POD_SCALE_UP: ActionType = ActionType(1 << 10);
    /// A pod gained tolerations.
    pub const UPDATE_POD_TOLERATION: ActionType = ActionType(1 << 11);
    /// A pod's last scheduling gate went away.
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 12);
    /// Any other update of the object.
    pub const UPDATE_OTHER: ActionType = ActionType(1 << 13);
    /// Any update.
    pub const UPDATE: ActionType = ActionType(((1 << 14) - 1) & !0b11);
    /// Anything.
    pub const ALL: ActionType = ActionType((1 << 14) - 1);

    /// True when `self` and `other` share an action.
    pub fn intersects(self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }

    /// True when nothing is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for ActionType {
    type Output = ActionType;
    fn bitor(self, rhs: ActionType) -> ActionType {
        ActionType(self.0 | rhs.0)
    }
}

impl fmt::Debug for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 14] = [
            "Add",
            "Delete",
            "UpdateNodeAllocatable",
            "UpdateNodeLabel",
            "UpdateNodeTaint",
            "UpdateNodeCondition",
            "UpdateNodeAnnotation",
            "UpdateNodeDeclaredFeature",
            "UpdatePodLabel",
            "UpdatePodScaleDown",
            "UpdatePodScaleUp",
            "UpdatePodToleration",
            "UpdatePodSchedulingGatesEliminated",
            "Update",
        ];
        let set: Vec<&str> = (0..14)
            .filter(|bit| self.0 & (1 << bit) != 0)
            .map(|bit| NAMES[bit])
            .collect();
        write!(f, "{}", set.join("|"))
    }
}

/// Which objects an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// A node.
    Node,
    /// Any pod (registered side only: matches the three below).
    Pod,
    /// A pod bound (or assumed) to a node.
    AssignedPod,
    /// Another pending pod.
    UnscheduledPod,
    /// The waiting pod itself, updated (the queue asks its rejectors'
    /// hints about it before retrying it, as kube-scheduler does).
    TargetPod,
    /// A kind kept by key, named as its watch names it
    /// (`persistentvolumeclaim`, `storageclass`, ...).
    Kind(&'static str),
    /// Anything (a relist, a policy reload, an overflow of the feed).
    WildCard,
}

impl EventResource {
    /// True when an event about `happened` concerns a registration for `self`.
    pub fn covers(self, happened: EventResource) -> bool {
        match (self, happened) {
            (EventResource::WildCard, _) | (_, EventResource::WildCard) => true,
            (
                EventResource::Pod,
                EventResource::AssignedPod
                | EventResource::UnscheduledPod
                | EventResource::TargetPod,
            ) => true,
            (a, b) => a == b,
        }
    }
}

/// One kind of change: kube-scheduler's `ClusterEvent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    /// What it is about.
    pub resource: EventResource,
    /// What happened (an event) or what may matter (a registration).
    pub actions: ActionType,
}

impl ClusterEvent {
    /// The event that matches every registration.
    pub const WILDCARD: ClusterEvent = ClusterEvent {
        resource: EventResource::WildCard,
        actions: ActionType::ALL,
    };

    /// An event of `resource` with `actions`.
    pub const fn new(resource: EventResource, actions: ActionType) -> Self {
        ClusterEvent { resource, actions }
    }

    /// True when this registration is interested in `happened`.
    pub fn matches(&self, happened: &ClusterEvent) -> bool {
        self.resource.covers(happened.resource)
            && (happened.resource == EventResource::WildCard
                || self.actions.intersects(happened.actions))
    }
}

/// The objects an event is about, before and after.
#[derive(Debug, Clone)]
pub enum Change {
    /// A node; `None` before an add or after a delete.
    Node {
        /// Before.
        old: Option<Arc<NodeInfo>>,
        /// After.
        new: Option<Arc<NodeInfo>>,
    },
    /// A pod; `None` before an add or after a delete.
    Pod {
        /// Before.
        old: Option<Arc<PodInfo>>,
        /// After.
        new: Option<Arc<PodInfo>>,
    },
    /// An object of a kind kept by key: its `namespace/name` (or `name`),
    /// and its record (the kind's type in the cluster state) before and
    /// after, `None` before an add or after a delete, for the hints that
    /// compare the two as kube-scheduler's do.
    Object {
        /// The key.
        key: String,
        /// Before.
        old: Option<Arc<dyn Any + Send + Sync>>,
        /// After.
        new: Option<Arc<dyn Any + Send + Sync>>,
    },
    /// No object (wildcard events).
    Nothing,
}

impl Change {
    /// The node before and after, when the change is about a node. A hint
    /// that gets anything else answers `Queue`, as kube-scheduler's do on
    /// an object of the wrong type.
    pub fn nodes(&self) -> Option<(Option<&NodeInfo>, Option<&NodeInfo>)> {
        match self {
            Change::Node { old, new } => Some((old.as_deref(), new.as_deref())),
            _ => None,
        }
    }

    /// The key of the object, when the change is about a kind kept by key.
    pub fn object_key(&self) -> Option<&str> {
        match self {
            Change::Object { key, .. } => Some(key),
            _ => None,
        }
    }

    /// A change of the kind-kept object `key` from `old` to `new`.
    pub fn object<T: Any + Send + Sync>(key: &str, old: Option<T>, new: Option<T>) -> Self {
        let share = |o: T| Arc::new(o) as Arc<dyn Any + Send + Sync>;
        Change::Object {
            key: key.to_owned(),
            old: old.map(share),
            new: new.map(share),
        }
    }

    /// The record before and after, when the change is about a kind kept by
    /// key whose records are `T`s. A hint that gets `None` answers `Queue`,
    /// as kube-scheduler's do on an object of the wrong type.
    pub fn objects<T: Any>(&self) -> Option<(Option<&T>, Option<&T>)> {
        let Change::Object { old, new, .. } = self else {
            return None;
        };
        Some((downcast(old.as_ref())?, downcast(new.as_ref())?))
    }

    /// The pod before and after, when the change is about a pod.
    pub fn pods(&self) -> Option<(Option<&PodInfo>, Option<&PodInfo>)> {
        match self {
            Change::Pod { old, new } => Some((old.as_deref(), new.as_deref())),
            _ => None,
        }
    }
}

/// `Some(None)` for no record, `Some(Some(t))` for a `T`, `None` for a
/// record of another type.
fn downcast<T: Any>(record: Option<&Arc<dyn Any + Send + Sync>>) -> Option<Option<&T>> {
    match record.map(|r| &**r) {
        None => Some(None),
        Some(any) => any.downcast_ref::<T>().map(Some),
    }
}

/// The kinds the volume plugins register events for, named as their watches
/// report them ([`EventResource::Kind`]).
pub mod kinds {
    /// PersistentVolumeClaims.
    pub const PERSISTENT_VOLUME_CLAIM: &str = "persistentvolumeclaim";
    /// PersistentVolumes.
    pub const PERSISTENT_VOLUME: &str = "persistentvolume";
    /// StorageClasses.
    pub const STORAGE_CLASS: &str = "storageclass";
    /// CSINodes.
    pub const CSI_NODE: &str = "csinode";
    /// CSIDrivers.
    pub const CSI_DRIVER: &str = "csidriver";
    /// VolumeAttachments.
    pub const VOLUME_ATTACHMENT: &str = "volumeattachment";
    /// CSIStorageCapacities.
    pub const CSI_STORAGE_CAPACITY: &str = "csistoragecapacity";
    /// ResourceClaims (Dynamic Resource Allocation).
    pub const RESOURCE_CLAIM: &str = "resourceclaim";
    /// ResourceSlices.
    pub const RESOURCE_SLICE: &str = "resourceslice";
    /// DeviceClasses.
    pub const DEVICE_CLASS: &str = "deviceclass";
    /// DeviceTaintRules: the name of their watch; their changes are
    /// reported as ResourceSlice updates, as kube-scheduler's are.
    pub const DEVICE_TAINT_RULE: &str = "devicetaintrule";
}

/// One event with the objects it is about.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The event.
    pub event: ClusterEvent,
    /// The objects.
    pub change: Change,
}

impl Observed {
    /// The wildcard event: every waiting pod is worth another try.
    pub fn wildcard() -> Self {
        Observed {
            event: ClusterEvent::WILDCARD,
            change: Change::Nothing,
        }
    }
}

/// The event of a waiting pod updated from `old` to `new` (kube-scheduler's
/// `PodSchedulingPropertiesChange` with `isTargetPod`), or none when
/// nothing placer keeps changed.
pub fn target_pod_update(old: Arc<PodInfo>, new: Arc<PodInfo>) -> Option<Observed> {
    let actions = pod_update(&old, &new);
    (!actions.is_empty()).then(|| Observed {
        event: ClusterEvent::new(EventResource::TargetPod, actions),
        change: Change::Pod {
            old: Some(old),
            new: Some(new),
        },
    })
}

/// What a node update changed, as kube-scheduler's
/// `NodeSchedulingPropertiesChange` sees it on the fields placer keeps; an
/// empty set (a heartbeat) is no event.
pub fn node_update(old: &NodeInfo, new: &NodeInfo) -> ActionType {
    let mut actions = ActionType::NONE;
    if old.unschedulable && !new.unschedulable || old.taints != new.taints {
        actions = actions | ActionType::UPDATE_NODE_TAINT;
    }
    if old.allocatable != new.allocatable {
        actions = actions | ActionType::UPDATE_NODE_ALLOCATABLE;
    }
    if old.labels != new.labels {
        actions = actions | ActionType::UPDATE_NODE_LABEL;
    }
    // kube-scheduler compares the lists as the node gives them.
    if old.declared_features != new.declared_features {
        actions = actions | ActionType::UPDATE_NODE_DECLARED_FEATURE;
    }
    // The images a node holds are no scheduling property in kube-scheduler
    // (they only move ImageLocality's scores): a change of them alone is no
    // event, or every image pull would retry parked pods.
    let beyond_images = || {
        let mut same_images = old.clone();
        same_images.images = new.images.clone();
        same_images != *new
    };
    if actions.is_empty() && old != new && beyond_images() {
        // A field no specific action names (e.g. cordoning, which only ever
        // makes pods fit fewer nodes).
        actions = ActionType::UPDATE_OTHER;
    }
    actions
}

/// What a pod update changed, as kube-scheduler's
/// `PodSchedulingPropertiesChange` sees it: labels, requests going down or
/// up, tolerations added, the last scheduling gate removed; any other change
/// of what placer keeps is a plain update, and none is no event.
pub fn pod_update(old: &PodInfo, new: &PodInfo) -> ActionType {
    let mut actions = ActionType::NONE;
    if old.labels != new.labels {
        actions = actions | ActionType::UPDATE_POD_LABEL;
    }
    let (before, after) = (&old.spec.counted, &new.spec.counted);
    let pairs = [
        (before.milli_cpu, after.milli_cpu),
        (before.memory, after.memory),
        (before.ephemeral_storage, after.ephemeral_storage),
    ];
    let down = pairs.iter().any(|(b, a)| a < b)
        || before
            .scalar
            .iter()
            .any(|(k, b)| after.scalar.get(k).is_none_or(|a| a < b));
    let up = pairs.iter().any(|(b, a)| a > b)
        || after
            .scalar
            .iter()
            .any(|(k, a)| before.scalar.get(k).is_none_or(|b| a > b));
    if down {
        actions = actions | ActionType::UPDATE_POD_SCALE_DOWN;
    }
    if up {
        actions = actions | ActionType::UPDATE_POD_SCALE_UP;
    }
    if old.spec.tolerations.len() != new.spec.tolerations.len() {
        actions = actions | ActionType::UPDATE_POD_TOLERATION;
    }
    if !old.spec.scheduling_gates.is_empty() && new.spec.scheduling_gates.is_empty() {
        actions = actions | ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED;
    }
    if actions.is_empty() && old != new {
        actions = ActionType::UPDATE_OTHER;
    }
    actions
}

/// Events waiting for the queue.
#[derive(Debug, Default)]
pub struct EventFeed {
    enabled: AtomicBool,
    pending: Mutex<VecDeque<Observed>>,
    notify: Notify,
}

impl EventFeed {
    /// Starts recording (the queue exists from now on).
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    /// Whether anyone reads the feed: callers skip building events otherwise.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Records one event (when enabled).
    pub fn push(&self, observed: Observed) {
        if !self.is_enabled() {
            return;
        }
        let mut pending = self.pending.lock();
        if pending.len() >= MAX_PENDING_EVENTS {
            pending.clear();
            pending.push_back(Observed::wildcard());
        } else if pending
            .front()
            .is_none_or(|o| o.event != ClusterEvent::WILDCARD)
        {
            pending.push_back(observed);
        }
        drop(pending);
        self.notify.notify_one();
    }

    /// Takes every pending event, oldest first.
    pub fn take(&self) -> Vec<Observed> {
        self.pending.lock().drain(..).collect()
    }

    /// Waits until an event is pending (at once if one is).
    pub async fn changed(&self) {
        if !self.pending.lock().is_empty() {
            return;
        }
        self.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)]) -> NodeInfo {
        NodeInfo::new("n", labels.iter().copied())
    }

    #[test]
    fn a_heartbeat_is_no_event_and_node_fields_map_to_kube_schedulers_actions() {
        let a = node(&[("zone", "a")]);
        assert!(node_update(&a, &a.clone()).is_empty());
        let relabelled = node(&[("zone", "b")]);
        assert_eq!(node_update(&a, &relabelled), ActionType::UPDATE_NODE_LABEL);
        let mut cordoned = a.clone();
        cordoned.unschedulable = true;
        assert_eq!(node_update(&a, &cordoned), ActionType::UPDATE_OTHER);
        assert_eq!(
            node_update(&cordoned, &a),
            ActionType::UPDATE_NODE_TAINT,
            "uncordoning is a taint update, as kube-scheduler reports it"
        );
    }

    /// An in-place resize changes what a placed pod holds through its
    /// status alone: kube-scheduler's `extractPodScaleDown` reads the
    /// requests with the status, and so does the event here.
    #[test]
    fn a_resize_in_the_status_is_a_scale_down_or_up() {
        let pod = |actuated: &str| -> PodInfo {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "n"},
                "spec": {"nodeName": "a", "containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                    "ready": true, "restartCount": 0, "allocatedResources": {"cpu": actuated},
                    "resources": {"requests": {"cpu": actuated}}}]}
            }))
            .unwrap()
        };
        // Actuated above the spec (a resize down not applied yet), then applied.
        assert_eq!(
            pod_update(&pod("2"), &pod("1")),
            ActionType::UPDATE_POD_SCALE_DOWN
        );
        assert_eq!(
            pod_update(&pod("1"), &pod("3")),
            ActionType::UPDATE_POD_SCALE_UP
        );
    }

    #[test]
    fn declared_features_are_their_own_event_and_images_are_none() {
        let a = node(&[]);
        let mut declared = a.clone();
        declared.declared_features = vec!["VolumeBindMountOptions".to_string()].into();
        assert_eq!(
            node_update(&a, &declared),
            ActionType::UPDATE_NODE_DECLARED_FEATURE
        );
        let mut pulled = a.clone();
        let names = vec!["app:v1".to_string()];
        pulled.images = crate::objects::images::NodeImages::from_entries([(names.as_slice(), 1)]);
        assert!(
            node_update(&a, &pulled).is_empty(),
            "an image pull is no event"
        );
        let mut both = pulled.clone();
        both.unschedulable = true;
        assert_eq!(node_update(&a, &both), ActionType::UPDATE_OTHER);
    }

    #[test]
    fn registrations_match_events_by_resource_and_action() {
        let registered = ClusterEvent::new(
            EventResource::Pod,
            ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN,
        );
        let deleted = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        let relabelled =
            ClusterEvent::new(EventResource::AssignedPod, ActionType::UPDATE_POD_LABEL);
        let node_added = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        assert!(registered.matches(&deleted));
        assert!(!registered.matches(&relabelled));
        assert!(!registered.matches(&node_added));
        assert!(registered.matches(&ClusterEvent::WILDCARD));
        let update = ClusterEvent::new(EventResource::Node, ActionType::UPDATE);
        assert!(update.matches(&ClusterEvent::new(
            EventResource::Node,
            ActionType::UPDATE_NODE_TAINT
        )));
        assert!(!update.matches(&node_added));
        let own_labels = ClusterEvent::new(EventResource::TargetPod, ActionType::UPDATE_POD_LABEL);
        let any_pod = ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_LABEL);
        let assigned = ClusterEvent::new(EventResource::AssignedPod, ActionType::UPDATE_POD_LABEL);
        assert!(any_pod.matches(&own_labels), "Pod covers the pod itself");
        assert!(!assigned.matches(&own_labels));
        assert!(!own_labels.matches(&relabelled));
    }

    #[test]
    fn the_feed_records_only_when_enabled_and_collapses_when_full() {
        let feed = EventFeed::default();
        let ev = || Observed {
            event: ClusterEvent::new(EventResource::Node, ActionType::ADD),
            change: Change::Nothing,
        };
        feed.push(ev());
        assert!(feed.take().is_empty(), "nobody reads it yet");
        feed.enable();
        for _ in 0..MAX_PENDING_EVENTS + 5 {
            feed.push(ev());
        }
        let taken = feed.take();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].event, ClusterEvent::WILDCARD);
        feed.push(ev());
        assert_eq!(feed.take().len(), 1);
    }
}
