//! Queue tests on paused time: order, backoff, the unschedulable pool,
//! gates, pods in flight and relists.

use super::*;
use crate::cache::events::{ActionType, Change, ClusterEvent, EventResource, Observed};
use crate::framework::{Plugin, QueueSortPlugin};

/// Queueing hints that say no event helps.
fn never(_: &PodInfo, _: &[&'static str], _: &Observed) -> bool {
    false
}

/// Queueing hints that say every event may help.
fn always(_: &PodInfo, _: &[&'static str], _: &Observed) -> bool {
    true
}

/// Queueing hints of a plugin "Fit" whose rejections only a change of the
/// pod's own labels can undo.
fn own_labels_help(_: &PodInfo, rejectors: &[&'static str], event: &Observed) -> bool {
    rejectors == ["Fit"]
        && event.event.resource == EventResource::TargetPod
        && event.event.actions.intersects(ActionType::UPDATE_POD_LABEL)
}

/// A node-added event.
fn node_added() -> Observed {
    Observed {
        event: ClusterEvent::new(EventResource::Node, ActionType::ADD),
        change: Change::Nothing,
    }
}

/// Requeues as unschedulable (rejected by "Fit"), judging events by `never`.
fn unschedulable(q: &SchedulingQueue, info: QueuedPodInfo) {
    q.requeue(info, Retry::AfterEvent(vec!["Fit"]), &never);
}

/// Requeues after an error (never popped before its backoff ends).
fn errored(q: &SchedulingQueue, info: QueuedPodInfo) {
    q.requeue(info, Retry::Error, &never);
}

/// Priority first, then earlier timestamp (PrioritySort's order).
struct ByPriority;
impl Plugin for ByPriority {
    fn name(&self) -> &'static str {
        "ByPriority"
    }
}
impl QueueSortPlugin for ByPriority {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        (a.pod.priority, std::cmp::Reverse(a.timestamp))
            > (b.pod.priority, std::cmp::Reverse(b.timestamp))
    }
}

fn queue() -> SchedulingQueue {
    let gate: PreEnqueue = Arc::new(|p: &PodInfo| {
        if p.labels.contains_key("gated") {
            Status::unresolvable("waiting for scheduling gates")
        } else {
            Status::success()
        }
    });
    SchedulingQueue::new(
        QueueSort::from_sort(Arc::new(ByPriority)),
        gate,
        QueueTimings::default(),
    )
}

fn pod(name: &str, priority: i32) -> PodInfo {
    PodInfo {
        name: name.into(),
        namespace: "ns".into(),
        priority,
        ..Default::default()
    }
}

fn names(q: &SchedulingQueue) -> Vec<String> {
    std::iter::from_fn(|| q.try_pop())
        .map(|i| i.pod.name.clone())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn active_order_is_priority_then_arrival() {
    let q = queue();
    q.add_or_update(pod("low", 0), &always);
    tokio::time::advance(Duration::from_millis(1)).await;
    q.add_or_update(pod("high", 10), &always);
    tokio::time::advance(Duration::from_millis(1)).await;
    q.add_or_update(pod("low2", 0), &always);
    q.add_or_update(pod("low", 0), &always); // an update keeps its place and timestamp
    assert_eq!(names(&q), ["high", "low", "low2"]);
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_to_ten_seconds() {
    let q = queue();
    let secs: Vec<u64> = (1..=6).map(|a| q.backoff_for(a).as_secs()).collect();
    assert_eq!(secs, [1, 2, 4, 8, 10, 10]);
    q.add_or_update(pod("p", 0), &always);
    let info = q.try_pop().unwrap();
    errored(&q, info);
    assert_eq!(q.lengths().backoff, 1);
    assert!(q.try_pop().is_none(), "still backing off");
    tokio::time::advance(Duration::from_millis(1001)).await;
    let info = q.try_pop().expect("backoff over");
    assert_eq!(info.attempts, 1);
    errored(&q, info);
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert!(q.try_pop().is_none(), "second backoff is 2 s");
    tokio::time::advance(Duration::from_millis(600)).await;
    assert_eq!(q.try_pop().unwrap().attempts, 2);
}

#[tokio::test(start_paused = true)]
async fn unschedulable_pods_wait_for_an_event_or_five_minutes() {
    let q = queue();
    q.add_or_update(pod("a", 0), &always);
    q.add_or_update(pod("b", 0), &always);
    let a = q.try_pop().unwrap();
    let b = q.try_pop().unwrap();
    unschedulable(&q, a);
    unschedulable(&q, b);
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(q.lengths().unschedulable, 2);
    assert!(q.try_pop().is_none(), "no event yet");
    q.move_all();
    assert_eq!(
        names(&q).len(),
        2,
        "backoff already over: straight to active"
    );

    q.add_or_update(pod("c", 0), &always);
    let c = q.try_pop().unwrap();
    unschedulable(&q, c);
    q.flush_unschedulable();
    assert_eq!(q.lengths().unschedulable, 1, "not five minutes yet");
    tokio::time::advance(Duration::from_secs(301)).await;
    q.flush_unschedulable();
    assert_eq!(names(&q), ["c"]);
}

#[tokio::test(start_paused = true)]
async fn an_event_during_backoff_waits_for_the_backoff_unless_nothing_is_active() {
    let q = queue();
    q.add_or_update(pod("a", 0), &always);
    let a = q.try_pop().unwrap();
    unschedulable(&q, a);
    q.move_all();
    assert_eq!(q.lengths().backoff, 1);
    q.add_or_update(pod("b", 0), &always);
    // b is active: a waits out its backoff behind it...
    assert_eq!(q.try_pop().unwrap().pod.name, "b");
    // ...and with nothing active it is popped early (SchedulerPopFromBackoffQ).
    assert_eq!(names(&q), ["a"]);
}

#[tokio::test(start_paused = true)]
async fn a_pod_backing_off_after_an_error_is_never_popped_early() {
    let q = queue();
    q.add_or_update(pod("e", 0), &always);
    let e = q.try_pop().unwrap();
    errored(&q, e);
    assert!(q.try_pop().is_none());
    tokio::time::advance(Duration::from_millis(1001)).await;
    assert_eq!(names(&q), ["e"]);
}

#[tokio::test(start_paused = true)]
async fn an_event_moves_only_the_pods_whose_rejectors_hints_say_it_may_help() {
    let q = queue();
    for name in ["fit", "taint", "anything"] {
        q.add_or_update(pod(name, 0), &always);
    }
    let popped: Vec<QueuedPodInfo> = std::iter::from_fn(|| q.try_pop()).collect();
    for info in popped {
        let rejectors = match info.pod.name.as_str() {
            "fit" => vec!["Fit"],
            "taint" => vec!["Taint"],
            _ => Vec::new(),
        };
        q.requeue(info, Retry::AfterEvent(rejectors), &never);
    }
    tokio::time::advance(Duration::from_secs(30)).await;
    // Only Fit's hint says a new node helps; a pod no plugin was recorded
    // for moves on any event.
    let fit_only = |_: &PodInfo, rejectors: &[&'static str], _: &Observed| {
        rejectors.is_empty() || rejectors.contains(&"Fit")
    };
    q.on_events(vec![node_added()], &fit_only);
    assert_eq!(q.lengths().unschedulable, 1);
    let mut moved = names(&q);
    moved.sort();
    assert_eq!(moved, ["anything", "fit"]);
    q.on_events(vec![Observed::wildcard()], &|p, r, ev| {
        ev.event == ClusterEvent::WILDCARD || fit_only(p, r, ev)
    });
    assert_eq!(names(&q), ["taint"], "a wildcard event moves every pod");
}

#[tokio::test(start_paused = true)]
async fn an_event_seen_while_a_pod_was_in_flight_sends_it_to_backoff_if_it_may_help() {
    let q = queue();
    let always = |_: &PodInfo, _: &[&'static str], _: &Observed| true;
    q.add_or_update(pod("helped", 0), &always);
    let helped = q.try_pop().unwrap();
    q.on_events(vec![node_added()], &always);
    q.requeue(helped, Retry::AfterEvent(vec!["Fit"]), &always);
    assert_eq!(
        q.lengths().backoff,
        1,
        "the node added during its attempt may fit it"
    );

    q.add_or_update(pod("not-helped", 0), &always);
    let _ = q.try_pop().unwrap(); // helped, popped early: nothing is active
    let not_helped = q.try_pop().unwrap();
    q.on_events(vec![node_added()], &always);
    q.requeue(not_helped, Retry::AfterEvent(vec!["Taint"]), &never);
    assert_eq!(
        q.lengths().unschedulable,
        1,
        "its hints say the event cannot help"
    );
}

#[tokio::test(start_paused = true)]
async fn gated_pods_wait_outside_until_ungated_and_deletes_leave() {
    let q = queue();
    let mut gated = pod("g", 0);
    std::sync::Arc::make_mut(&mut gated.labels).insert("gated".into(), "yes".into());
    q.add_or_update(gated.clone(), &always);
    assert_eq!(q.lengths().gated, 1);
    assert!(q.try_pop().is_none());
    std::sync::Arc::make_mut(&mut gated.labels).clear();
    q.add_or_update(gated, &always);
    assert_eq!(names(&q), ["g"]);

    q.add_or_update(pod("d", 0), &always);
    q.delete("ns", "d");
    assert!(q.try_pop().is_none());
    assert_eq!(q.lengths(), QueueLengths::default());
}

#[tokio::test(start_paused = true)]
async fn requeue_to_backoff_wakes_a_waiting_pop() {
    let q = Arc::new(queue());
    q.add_or_update(pod("a", 0), &always);
    let a = q.try_pop().unwrap();
    let q2 = q.clone();
    // The loop waits in `pop` on an empty queue while `a` is being bound.
    let waiter = tokio::spawn(async move { q2.pop().await.pod.name.clone() });
    tokio::task::yield_now().await;
    errored(&q, a);
    let popped = tokio::time::timeout(Duration::from_secs(5), waiter).await;
    assert_eq!(popped.expect("pod retried after its backoff").unwrap(), "a");
}

#[tokio::test(start_paused = true)]
async fn unchanged_updates_keep_the_backoff_changed_ones_end_it() {
    let q = queue();
    q.add_or_update(pod("a", 0), &always);
    let a = q.try_pop().unwrap();
    errored(&q, a);
    // e.g. the PodScheduled condition placer wrote: nothing scheduling reads.
    q.add_or_update(pod("a", 0), &always);
    assert_eq!(q.lengths().backoff, 1);
    assert!(q.try_pop().is_none(), "still backing off");
    let mut changed = pod("a", 0);
    std::sync::Arc::make_mut(&mut changed.labels).insert("app".into(), "x".into());
    q.add_or_update(changed, &always);
    assert_eq!(names(&q), ["a"]);

    let b = pod("b", 0);
    q.add_or_update(b.clone(), &always);
    let b_info = q.try_pop().unwrap();
    unschedulable(&q, b_info);
    q.add_or_update(b, &always);
    assert_eq!(
        q.lengths().unschedulable,
        1,
        "unchanged: still unschedulable"
    );
}

#[tokio::test(start_paused = true)]
async fn pods_in_flight_are_not_queued_twice_nor_requeued_once_deleted() {
    let q = queue();
    q.add_or_update(pod("a", 0), &always);
    let a = q.try_pop().unwrap();
    let mut changed = pod("a", 0);
    std::sync::Arc::make_mut(&mut changed.labels).insert("app".into(), "x".into());
    q.add_or_update(changed, &always);
    assert_eq!(q.lengths(), QueueLengths::default(), "a is in flight");
    assert!(q.try_pop().is_none());
    // Unschedulable, but the pod changed meanwhile in a way its rejector's
    // hints say may help: backoff, with the update.
    q.requeue(a, Retry::AfterEvent(vec!["Fit"]), &own_labels_help);
    assert_eq!(q.lengths().backoff, 1);
    tokio::time::advance(Duration::from_millis(1001)).await;
    let a = q.try_pop().unwrap();
    assert_eq!(a.pod.labels.get("app").map(String::as_str), Some("x"));

    q.delete("ns", "a");
    errored(&q, a);
    assert_eq!(
        q.lengths(),
        QueueLengths::default(),
        "deleted while in flight"
    );

    q.add_or_update(pod("b", 0), &always);
    let b = q.try_pop().unwrap();
    q.done(&b.pod);
    q.add_or_update(pod("b", 0), &always);
    assert_eq!(names(&q), ["b"], "a new version after done is queued again");
}

#[tokio::test(start_paused = true)]
async fn pop_waits_for_backoff_and_new_pods() {
    let q = Arc::new(queue());
    q.add_or_update(pod("a", 0), &always);
    let a = q.pop().await;
    errored(&q, a);
    let started = Instant::now();
    let again = q.pop().await;
    assert_eq!(again.pod.name, "a");
    assert!(started.elapsed() >= Duration::from_secs(1));
    let q2 = q.clone();
    let waiter = tokio::spawn(async move { q2.pop().await.pod.name.clone() });
    tokio::task::yield_now().await;
    q.add_or_update(pod("late", 0), &always);
    assert_eq!(waiter.await.unwrap(), "late");
}

#[tokio::test(start_paused = true)]
async fn a_relist_drops_pods_it_no_longer_lists() {
    let q = queue();
    q.add_or_update(pod("flying-gone", 10), &always);
    for name in ["kept", "gone", "nominated-gone"] {
        q.add_or_update(pod(name, 0), &always);
    }
    q.nominator().nominate(&pod("nominated-gone", 0), "n1");
    // The highest-priority pod is in flight when the relist arrives.
    let popped = q.try_pop().expect("a pod");
    assert_eq!(popped.pod.name, "flying-gone");
    let present: HashSet<String> = ["ns/kept".to_string()].into();
    assert_eq!(q.retain_only(&present), 3);
    assert!(q.nominator().node_of(&pod("nominated-gone", 0)).is_none());
    // The dropped pod in flight is not requeued when its attempt fails.
    errored(&q, popped);
    tokio::time::advance(Duration::from_secs(20)).await;
    assert_eq!(names(&q), ["kept"]);
}

#[tokio::test(start_paused = true)]
async fn an_update_of_a_waiting_pod_retries_it_only_when_its_rejectors_hints_say_it_may_help() {
    let q = queue();
    q.add_or_update(pod("a", 0), &always);
    let a = q.try_pop().unwrap();
    unschedulable(&q, a);
    tokio::time::advance(Duration::from_secs(2)).await;

    let mut annotated = pod("a", 0);
    annotated.annotations.insert("note".into(), "x".into());
    q.add_or_update(annotated, &own_labels_help);
    assert_eq!(
        q.lengths().unschedulable,
        1,
        "an annotation cannot undo Fit's rejection"
    );
    let mut relabelled = pod("a", 0);
    relabelled.annotations.insert("note".into(), "x".into());
    std::sync::Arc::make_mut(&mut relabelled.labels).insert("app".into(), "x".into());
    q.add_or_update(relabelled, &own_labels_help);
    let a = q.try_pop().expect("retried at once: its backoff is over");
    assert_eq!(a.pod.labels.get("app").map(String::as_str), Some("x"));
    assert_eq!(
        a.pod.annotations.get("note").map(String::as_str),
        Some("x"),
        "the update that did not help was kept"
    );

    // The same while in flight: a change that cannot help leaves it
    // unschedulable.
    let mut annotated_again = (*a.pod).clone();
    annotated_again
        .annotations
        .insert("note".into(), "y".into());
    q.add_or_update(annotated_again, &own_labels_help);
    q.requeue(a, Retry::AfterEvent(vec!["Fit"]), &own_labels_help);
    assert_eq!(q.lengths().unschedulable, 1);
}

/// A pod DynamicResources' PreEnqueue gates (its claim does not exist yet) is
/// asked again when an event its gating plugin's hints accept arrives, and
/// queued once admitted; other events leave it gated (kube-scheduler moves
/// gated pods on their PreEnqueue plugins' events).
#[tokio::test(start_paused = true)]
async fn a_gated_pod_is_asked_again_on_its_gates_events() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let claim_exists = Arc::new(AtomicBool::new(false));
    let exists = claim_exists.clone();
    let gate: PreEnqueue = Arc::new(move |_: &PodInfo| {
        if exists.load(Ordering::SeqCst) {
            Status::success()
        } else {
            Status::unresolvable("ResourceClaim not created yet").with_plugin("Claims")
        }
    });
    let q = SchedulingQueue::new(
        QueueSort::from_sort(Arc::new(ByPriority)),
        gate,
        QueueTimings::default(),
    );
    q.add_or_update(pod("p", 0), &always);
    assert_eq!(q.lengths().gated, 1);
    let claim_added = |_: &PodInfo, rejectors: &[&'static str], e: &Observed| {
        rejectors == ["Claims"] && e.event.resource == EventResource::Kind("resourceclaim")
    };
    claim_exists.store(true, Ordering::SeqCst);
    q.on_events(vec![node_added()], &claim_added);
    assert_eq!(q.lengths().gated, 1, "not an event of the gate's plugin");
    let event = Observed {
        event: ClusterEvent::new(EventResource::Kind("resourceclaim"), ActionType::ADD),
        change: Change::object::<()>("ns/c", None, None),
    };
    q.on_events(vec![event], &claim_added);
    assert_eq!(names(&q), ["p"]);
}
