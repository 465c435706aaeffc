//! Queueing hints: which cluster events may make a pod schedulable again, as
//! kube-scheduler's `EnqueueExtensions` and `QueueingHintFn` (design §8).
//!
//! A plugin that rejects pods registers the events that can undo its
//! rejection, each with an optional hint that looks at the change and the
//! pod and says whether it may help. When an event arrives, a waiting pod
//! moves only if one of the plugins that rejected it registered the event
//! and its hint says `Queue`. A plugin that registers nothing is taken to be
//! interested in every event, as kube-scheduler takes it.

use std::sync::Arc;

pub use crate::cache::events::{ActionType, Change, ClusterEvent, EventResource, Observed};
use crate::framework::Plugin;
use crate::objects::PodInfo;

/// A hint's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// The change may make the pod schedulable: try it again.
    Queue,
    /// The change cannot help this pod.
    Skip,
}

/// Looks at one change for one waiting pod the plugin rejected.
pub type HintFn = Arc<dyn Fn(&PodInfo, &Change) -> QueueingHint + Send + Sync>;

/// One event a plugin registers, with its hint.
#[derive(Clone)]
pub struct EventHint {
    /// The events of interest.
    pub event: ClusterEvent,
    /// `None`: every such event may help.
    pub hint: Option<HintFn>,
}

impl EventHint {
    /// Every `actions` event of `resource` may help.
    pub fn always(resource: EventResource, actions: ActionType) -> Self {
        EventHint {
            event: ClusterEvent::new(resource, actions),
            hint: None,
        }
    }

    /// An `actions` event of `resource` may help when `hint` says so.
    pub fn when(
        resource: EventResource,
        actions: ActionType,
        hint: impl Fn(&PodInfo, &Change) -> QueueingHint + Send + Sync + 'static,
    ) -> Self {
        EventHint {
            event: ClusterEvent::new(resource, actions),
            hint: Some(Arc::new(hint)),
        }
    }

    /// Whether `observed` may make `pod` schedulable, as far as this
    /// registration can tell.
    pub fn may_help(&self, pod: &PodInfo, observed: &Observed) -> bool {
        if !self.event.matches(&observed.event) {
            return false;
        }
        match &self.hint {
            None => true,
            Some(hint) => {
                observed.event == ClusterEvent::WILDCARD
                    || hint(pod, &observed.change) == QueueingHint::Queue
            }
        }
    }
}

/// The events a plugin's rejections wait for (kube-scheduler's
/// `EnqueueExtensions.EventsToRegister`).
pub trait EnqueueExtensions: Plugin {
    /// Every event that may undo one of this plugin's rejections.
    fn events_to_register(&self) -> Vec<EventHint>;
}

/// Shorthand for a hint: `Queue` when `helps`, else `Skip`.
pub fn queue_if(helps: bool) -> QueueingHint {
    if helps {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

/// The registrations of one profile's plugins, built once with the framework.
#[derive(Clone, Default)]
pub(crate) struct Registrations {
    /// Per plugin: its registrations, or `None` for "every event".
    by_plugin: Vec<(&'static str, Option<Vec<EventHint>>)>,
}

impl Registrations {
    /// The registrations of `plugins`.
    pub(crate) fn of<'a>(plugins: impl Iterator<Item = &'a dyn Plugin>) -> Self {
        Registrations {
            by_plugin: plugins
                .map(|p| {
                    let registered = p.as_enqueue_extensions().map(|e| e.events_to_register());
                    (p.name(), registered)
                })
                .collect(),
        }
    }

    /// Whether `observed` may make `pod` schedulable, given the plugins that
    /// rejected it: true when it is a wildcard event, when no plugin was
    /// recorded, when a rejector registers nothing (or is not in the profile
    /// any more), or when one of a rejector's registrations matches and its
    /// hint says `Queue`.
    pub(crate) fn worth_retrying(
        &self,
        pod: &PodInfo,
        rejectors: &[&'static str],
        observed: &Observed,
    ) -> bool {
        if observed.event == ClusterEvent::WILDCARD || rejectors.is_empty() {
            return true;
        }
        rejectors.iter().any(|rejector| {
            match self.by_plugin.iter().find(|(name, _)| name == rejector) {
                None | Some((_, None)) => true,
                Some((_, Some(hints))) => hints.iter().any(|h| h.may_help(pod, observed)),
            }
        })
    }
}

/// A hint for claim events: the changed claim is one of `pod`'s
/// (`persistentVolumeClaim` volumes, and with `ephemeral` also generic
/// ephemeral volumes' claims).
pub fn claim_of_pod(pod: &PodInfo, change: &Change, ephemeral: bool) -> QueueingHint {
    let Some(key) = change.object_key() else {
        return QueueingHint::Queue;
    };
    let Some((namespace, name)) = key.split_once('/') else {
        return QueueingHint::Queue;
    };
    queue_if(
        namespace == pod.namespace
            && pod
                .spec
                .pvc_claims
                .iter()
                .any(|c| c.name == name && (ephemeral || !c.ephemeral)),
    )
}
