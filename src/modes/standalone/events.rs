//! Publishing `events.k8s.io/v1` events with kube-scheduler's series: an event isomorphic to
//! one published in the last six minutes (same type, action, reason, reporter, regarding and
//! related object) patches that event's `series` instead of creating another.
//!
//! kube-rs's `Recorder` does the same but forgets expired events with a pass over every cached
//! event on each publish: one `Scheduled` event per pod makes that quadratic in a burst (4 % of
//! standalone placer's CPU at 5,000 pods, growing with the burst). Here expiries wait in a queue
//! in publishing order, so each publish looks only at the events that expired.
//!
//! A burst keeps one cache entry per pod for six minutes, so an entry holds only what a repeat
//! sends: the first event's name and its series so far. The repeat is a merge patch of `series`
//! alone, as client-go's event broadcaster sends it (`createPatchBytesForSeries`), not the whole
//! event again, which kube-rs keeps and resends (about 2 KB per pod held for six minutes).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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

/// An event published in the last [`SERIES_TTL`]: what a repeat of it needs.
struct Published {
    /// The first event's `metadata.name`, which repeats patch.
    name: String,
    /// How many times it was observed (1: no series yet).
    count: i32,
    /// When it was last observed.
    last_observed: Timestamp,
}

/// A repeat of a published event: the series to patch onto it.
#[derive(Debug)]
struct Repeat {
    /// The first event's name.
    name: String,
    /// Its series, counted on.
    series: EventSeries,
}

/// The merge patch of a repeat: `series` alone.
#[derive(Debug, serde::Serialize)]
struct SeriesPatch<'a> {
    series: &'a EventSeries,
}

/// The events published in the last [`SERIES_TTL`], by key, with their expiries in order. Each
/// key is held once, shared by its entry and its expiries.
#[derive(Default)]
struct SeriesCache {
    events: HashMap<Arc<EventKey>, Published>,
    /// `(last observed, key)` for every publish, oldest first; a key republished since has a
    /// later entry, so an entry whose event was observed again is skipped when it expires.
    expiries: VecDeque<(Timestamp, Arc<EventKey>)>,
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
            let current = self.events.get(&key).map(|p| p.last_observed);
            if current.is_some_and(|last| last <= observed) {
                self.events.remove(&key);
            }
        }
        looked
    }

    /// The series to patch for `key` at `now`, when an isomorphic event was published.
    fn repeat(&self, key: &EventKey, now: Timestamp) -> Option<Repeat> {
        let published = self.events.get(key)?;
        Some(Repeat {
            name: published.name.clone(),
            series: EventSeries {
                count: published.count + 1,
                last_observed_time: MicroTime(now),
            },
        })
    }

    /// Records that the event `name` for `key` was observed for the `count`th time at `now`.
    fn remember(&mut self, key: EventKey, name: String, count: i32, now: Timestamp) {
        let key = match self.events.get_key_value(&key) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(key),
        };
        self.expiries.push_back((now, key.clone()));
        self.events.insert(
            key,
            Published {
                name,
                count,
                last_observed: now,
            },
        );
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
        let (name, count) = match repeat {
            Some(Repeat { name, series }) => {
                let patch = SeriesPatch { series: &series };
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                (name, series.count)
            }
            None => {
                let event = self.new_event(ev, regarding, now);
                api.create(&PostParams::default(), &event).await?;
                (event.metadata.name.unwrap_or_default(), 1)
            }
        };
        self.cache.lock().remember(key, name, count, now);
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
    use std::sync::Mutex;

    use kube::client::Body;

    use super::*;
    use crate::testing::stand_in_api;

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

    fn at(minutes: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_mins(minutes)
    }

    /// Publishes for `key` at `now` as [`EventRecorder::publish`] does, without the API: a new
    /// event is named `first-<minute>`.
    fn publish(cache: &mut SeriesCache, key: EventKey, now: Timestamp) -> Option<Repeat> {
        cache.expire(now);
        let repeat = cache.repeat(&key, now);
        let (name, count) = match &repeat {
            Some(r) => (r.name.clone(), r.series.count),
            None => (format!("first-{}", now.as_second() / 60), 1),
        };
        cache.remember(key, name, count, now);
        repeat
    }

    #[test]
    fn a_repeat_within_six_minutes_counts_on_the_first_events_series() {
        let mut cache = SeriesCache::default();
        assert!(publish(&mut cache, key("a"), at(0)).is_none());
        let second = publish(&mut cache, key("a"), at(5));
        let third = publish(&mut cache, key("a"), at(10));
        assert_eq!(second.as_ref().map(|r| r.series.count), Some(2));
        let third = third.expect("a repeat");
        assert_eq!(third.series.count, 3);
        assert_eq!(third.name, "first-0", "the first event is the one patched");
        assert_eq!(
            third.series.last_observed_time.0,
            at(10),
            "the series was last observed now"
        );
    }

    #[test]
    fn an_event_not_seen_for_six_minutes_starts_over() {
        let mut cache = SeriesCache::default();
        publish(&mut cache, key("a"), at(0));
        publish(&mut cache, key("b"), at(3));
        assert!(publish(&mut cache, key("a"), at(6)).is_none());
        let b = publish(&mut cache, key("b"), at(8));
        assert_eq!(b.map(|r| r.series.count), Some(2), "b was seen 5 min ago");
    }

    #[test]
    fn other_objects_or_reasons_are_other_events() {
        let mut cache = SeriesCache::default();
        publish(&mut cache, key("a"), at(0));
        assert!(publish(&mut cache, key("b"), at(1)).is_none());
        let scheduled = EventKey {
            warning: false,
            reason: "Scheduled".into(),
            action: "Binding".into(),
            ..key("a")
        };
        assert!(publish(&mut cache, scheduled, at(1)).is_none());
        let related = EventKey {
            related: Some((&pod("b")).into()),
            ..key("a")
        };
        assert!(publish(&mut cache, related, at(1)).is_none());
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

    #[test]
    fn a_republished_key_is_held_once() {
        let mut cache = SeriesCache::default();
        for minute in 0..4 {
            publish(&mut cache, key("a"), at(minute));
        }
        assert_eq!(cache.expiries.len(), 4);
        let (shared, _) = cache.events.iter().next().expect("one entry");
        assert_eq!(
            Arc::strong_count(shared),
            5,
            "the entry and its four expiries share one key"
        );
    }

    /// Every request the stand-in API server got: method, path and body.
    type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

    /// An API server that answers every request with `201 {}` and records it.
    fn api_server(seen: Seen) -> Client {
        stand_in_api(move |req: http::Request<Body>| {
            let seen = seen.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = http_body_util::BodyExt::collect(body)
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let json = serde_json::from_slice(&bytes).unwrap_or_default();
                if let Ok(mut seen) = seen.lock() {
                    seen.push((parts.method.to_string(), parts.uri.path().to_owned(), json));
                }
                (201, "{}")
            }
        })
    }

    #[tokio::test]
    async fn a_repeat_patches_only_the_series_of_the_first_event() {
        let seen = Seen::default();
        let recorder = EventRecorder::new(api_server(seen.clone()), "placer", "placer-0");
        let event = Event {
            type_: EventType::Warning,
            reason: "FailedScheduling".into(),
            note: Some("0/3 nodes are available".into()),
            action: "Scheduling".into(),
            secondary: None,
        };
        for _ in 0..3 {
            recorder.publish(&event, &pod("a")).await.unwrap();
        }
        let seen = seen.lock().unwrap().clone();
        let [
            (create, events, first),
            (patch, path, series),
            (_, again, third),
        ] = &seen[..]
        else {
            panic!("three requests expected: {seen:?}");
        };
        assert_eq!(
            (create.as_str(), events.as_str()),
            ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events")
        );
        assert_eq!(first["note"], "0/3 nodes are available");
        let name = first["metadata"]["name"].as_str().unwrap();
        assert_eq!(patch, "PATCH");
        assert_eq!(path, &format!("{events}/{name}"));
        assert_eq!(again, path, "the third publish patches the first event too");
        let fields: Vec<&String> = series.as_object().unwrap().keys().collect();
        assert_eq!(fields, ["series"], "only the series is patched: {series}");
        assert_eq!(series["series"]["count"], 2);
        assert_eq!(third["series"]["count"], 3);
        assert!(series["series"]["lastObservedTime"].is_string());
    }
}
