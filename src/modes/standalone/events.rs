//! Publishing `events.k8s.io/v1` events with kube-scheduler's series: an event isomorphic to
//! one published in the last six minutes (same type, action, reason, reporter, regarding and
//! related object) patches that event's `series` instead of creating another.
//!
//! kube-rs's `Recorder` does the same but forgets expired events with a pass over every cached
//! event on each publish: one `Scheduled` event per pod makes that quadratic in a burst (4 % of
//! standalone placer's CPU at 5,000 pods, growing with the burst). Here expiries wait in a queue
//! in publishing order, so each publish looks only at the events that expired.

use std::collections::{HashMap, VecDeque};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client};

/// How long an event stays a series' first (client-go's and kube-rs's).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two events isomorphic; the reporter is the recorder's own.
#[derive(Clone, PartialEq, Eq, Hash)]
struct EventKey {
    warning: bool,
    action: String,
    reason: String,
    regarding: ObjectKey,
    related: Option<ObjectKey>,
}

/// The object fields that identify it (kube-rs's `Reference` hashes these).
#[derive(Clone, PartialEq, Eq, Hash)]
struct ObjectKey {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
}

impl From<&ObjectReference> for ObjectKey {
    fn from(r: &ObjectReference) -> Self {
        ObjectKey {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
            uid: r.uid.clone(),
        }
    }
}

/// The events published in the last [`SERIES_TTL`], by key, with their expiries in order.
#[derive(Default)]
struct SeriesCache {
    events: HashMap<EventKey, K8sEvent>,
    /// `(last observed, key)` for every publish, oldest first; a key republished since has a
    /// later entry, so an entry whose event was observed again is skipped when it expires.
    expiries: VecDeque<(Timestamp, EventKey)>,
}

/// When `event` was last seen: its series' last observation, else its time.
fn last_observed(event: &K8sEvent) -> Option<Timestamp> {
    match (&event.series, &event.event_time) {
        (Some(series), _) => Some(series.last_observed_time.0),
        (None, Some(time)) => Some(time.0),
        (None, None) => None,
    }
}

impl SeriesCache {
    /// Forgets the events last observed [`SERIES_TTL`] or longer before `now`; returns how many
    /// queued expiries it looked at.
    fn expire(&mut self, now: Timestamp) -> usize {
        let mut looked = 0;
        while let Some((observed, _)) = self.expiries.front() {
            if *observed + SERIES_TTL > now {
                break;
            }
            looked += 1;
            let Some((observed, key)) = self.expiries.pop_front() else {
                break;
            };
            let current = self.events.get(&key).and_then(last_observed);
            if current.is_some_and(|last| last <= observed) {
                self.events.remove(&key);
            }
        }
        looked
    }

    /// The event to send for `key` at `now`: the cached one with its series counted on, or none.
    fn repeat(&self, key: &EventKey, now: Timestamp) -> Option<K8sEvent> {
        let cached = self.events.get(key)?;
        let count = cached.series.as_ref().map_or(2, |s| s.count + 1);
        let mut event = cached.clone();
        event.series = Some(EventSeries {
            count,
            last_observed_time: MicroTime(now),
        });
        Some(event)
    }

    fn remember(&mut self, key: EventKey, event: K8sEvent, now: Timestamp) {
        self.expiries.push_back((now, key.clone()));
        self.events.insert(key, event);
    }
}

/// Publishes events as `controller` from `instance`.
pub struct EventRecorder {
    client: Client,
    controller: String,
    instance: String,
    cache: parking_lot::Mutex<SeriesCache>,
}

impl EventRecorder {
    /// Events from `instance` of `controller` (kube-scheduler reports under the profile name).
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        EventRecorder {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
            cache: parking_lot::Mutex::default(),
        }
    }

    /// Creates `ev` about `regarding`, or patches the series of the isomorphic event published
    /// in the last six minutes.
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = EventKey {
            warning: matches!(ev.type_, EventType::Warning),
            action: ev.action.clone(),
            reason: ev.reason.clone(),
            regarding: regarding.into(),
            related: ev.secondary.as_ref().map(ObjectKey::from),
        };
        let repeat = {
            let mut cache = self.cache.lock();
            cache.expire(now);
            cache.repeat(&key, now)
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let event = match repeat {
            Some(event) => {
                let name = event.metadata.name.clone().unwrap_or_default();
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&event))
                    .await?;
                event
            }
            None => {
                let event = self.new_event(ev, regarding, now);
                api.create(&PostParams::default(), &event).await?;
                event
            }
        };
        self.cache.lock().remember(key, event, now);
        Ok(())
    }

    /// The event as kube-rs's `Recorder` writes it: named after the object and the time.
    fn new_event(&self, ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: ev.note.clone(),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..Default::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(match ev.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            related: ev.secondary.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    fn key(pod_name: &str) -> EventKey {
        EventKey {
            warning: true,
            action: "Scheduling".into(),
            reason: "FailedScheduling".into(),
            regarding: (&pod(pod_name)).into(),
            related: None,
        }
    }

    fn event_at(time: Timestamp) -> K8sEvent {
        K8sEvent {
            event_time: Some(MicroTime(time)),
            metadata: ObjectMeta {
                name: Some("first".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn at(minutes: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_mins(minutes)
    }

    /// Publishes for `key` at `now` as [`EventRecorder::publish`] does, without the API.
    fn publish(cache: &mut SeriesCache, key: EventKey, now: Timestamp) -> K8sEvent {
        cache.expire(now);
        let event = cache.repeat(&key, now).unwrap_or_else(|| event_at(now));
        cache.remember(key, event.clone(), now);
        event
    }

    #[test]
    fn a_repeat_within_six_minutes_counts_on_the_first_events_series() {
        let mut cache = SeriesCache::default();
        assert!(publish(&mut cache, key("a"), at(0)).series.is_none());
        let second = publish(&mut cache, key("a"), at(5));
        let third = publish(&mut cache, key("a"), at(10));
        assert_eq!(second.series.as_ref().map(|s| s.count), Some(2));
        assert_eq!(third.series.as_ref().map(|s| s.count), Some(3));
        assert_eq!(third.metadata.name.as_deref(), Some("first"));
        assert_eq!(
            third.series.map(|s| s.last_observed_time.0),
            Some(at(10)),
            "the series was last observed now"
        );
    }

    #[test]
    fn an_event_not_seen_for_six_minutes_starts_over() {
        let mut cache = SeriesCache::default();
        publish(&mut cache, key("a"), at(0));
        publish(&mut cache, key("b"), at(3));
        assert!(publish(&mut cache, key("a"), at(6)).series.is_none());
        let b = publish(&mut cache, key("b"), at(8));
        assert_eq!(b.series.map(|s| s.count), Some(2), "b was seen 5 min ago");
    }

    #[test]
    fn other_objects_or_reasons_are_other_events() {
        let mut cache = SeriesCache::default();
        publish(&mut cache, key("a"), at(0));
        assert!(publish(&mut cache, key("b"), at(1)).series.is_none());
        let scheduled = EventKey {
            warning: false,
            reason: "Scheduled".into(),
            action: "Binding".into(),
            ..key("a")
        };
        assert!(publish(&mut cache, scheduled, at(1)).series.is_none());
        let related = EventKey {
            related: Some((&pod("b")).into()),
            ..key("a")
        };
        assert!(publish(&mut cache, related, at(1)).series.is_none());
    }

    #[test]
    fn publishing_looks_only_at_expired_events() {
        let mut cache = SeriesCache::default();
        for i in 0..1000 {
            publish(&mut cache, key(&format!("p{i}")), at(0));
        }
        assert_eq!(cache.expire(at(1)), 0, "nothing expired, nothing looked at");
        publish(&mut cache, key("late"), at(3));
        assert_eq!(cache.expire(at(6)), 1000);
        assert_eq!(cache.events.len(), 1, "only the late event is left");
    }
}
