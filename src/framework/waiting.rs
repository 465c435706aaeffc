//! Pods a Permit plugin told to wait, as kube-scheduler's `waitingPodsMap`.
//!
//! A pod waits until every plugin that said `Wait` allowed it, until one of
//! them (or anyone holding the map) rejects it, or until the first plugin's
//! timeout runs out, which rejects it in that plugin's name. Allowing and
//! rejecting never block: the binding cycle that waits is woken.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::framework::Status;

/// Longest a Permit plugin may make a pod wait (kube-scheduler's `maxTimeout`).
pub const MAX_PERMIT_WAIT: Duration = Duration::from_mins(15);

/// The pods waiting at Permit, by UID. Shared by the scheduling loop, the
/// binding cycles and every Permit plugin call.
#[derive(Default)]
pub struct WaitingPods {
    pods: Mutex<HashMap<String, Arc<WaitingPod>>>,
}

impl WaitingPods {
    /// The waiting pod with this UID.
    pub fn get(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.pods.lock().get(uid).cloned()
    }

    /// The waiting pods, in no particular order.
    pub fn all(&self) -> Vec<Arc<WaitingPod>> {
        self.pods.lock().values().cloned().collect()
    }

    /// How many pods wait.
    pub fn len(&self) -> usize {
        self.pods.lock().len()
    }

    /// True when no pod waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes the pod `uid` (`key` names it in messages) wait for each of
    /// `plugins`, each at most its duration (capped at [`MAX_PERMIT_WAIT`]).
    pub(crate) fn add(
        &self,
        uid: &str,
        key: String,
        plugins: Vec<(&'static str, Duration)>,
    ) -> Arc<WaitingPod> {
        let now = Instant::now();
        let pending = plugins
            .into_iter()
            .map(|(plugin, wait)| {
                let wait = wait.min(MAX_PERMIT_WAIT);
                Pending {
                    plugin,
                    wait,
                    deadline: now + wait,
                }
            })
            .collect();
        let pod = Arc::new(WaitingPod {
            uid: uid.to_string(),
            key,
            state: Mutex::new(WaitState {
                pending,
                outcome: None,
            }),
            wake: Notify::new(),
        });
        self.pods.lock().insert(uid.to_string(), pod.clone());
        pod
    }

    /// Forgets the pod `uid` once its wait is over.
    pub(crate) fn remove(&self, uid: &str) {
        self.pods.lock().remove(uid);
    }
}

/// A plugin the pod still waits for.
struct Pending {
    plugin: &'static str,
    wait: Duration,
    deadline: Instant,
}

struct WaitState {
    pending: Vec<Pending>,
    /// Set once: allowed by all, or rejected.
    outcome: Option<Result<(), Status>>,
}

/// One pod waiting at Permit.
pub struct WaitingPod {
    uid: String,
    key: String,
    state: Mutex<WaitState>,
    wake: Notify,
}

impl WaitingPod {
    /// The pod's UID.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The pod as `namespace/name`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The plugins that have not allowed the pod yet.
    pub fn pending_plugins(&self) -> Vec<&'static str> {
        self.state.lock().pending.iter().map(|p| p.plugin).collect()
    }

    /// `plugin` allows the pod; once every plugin it waits for has, it is
    /// bound. A plugin it does not wait for changes nothing.
    pub fn allow(&self, plugin: &str) {
        let mut state = self.state.lock();
        state.pending.retain(|p| p.plugin != plugin);
        if state.pending.is_empty() && state.outcome.is_none() {
            state.outcome = Some(Ok(()));
            self.wake.notify_one();
        }
    }

    /// Rejects the pod in `plugin`'s name: it is not bound and waits for a
    /// cluster change. False if its wait was already over.
    pub fn reject(&self, plugin: &'static str, message: impl Into<String>) -> bool {
        let mut state = self.state.lock();
        if state.outcome.is_some() {
            return false;
        }
        state.outcome = Some(Err(
            Status::unschedulable(message.into()).with_plugin(plugin)
        ));
        self.wake.notify_one();
        true
    }

    /// Waits until the pod is allowed or rejected; a plugin that is still
    /// pending when its time runs out rejects it, as kube-scheduler words it.
    pub(crate) async fn wait(&self) -> Result<(), Status> {
        loop {
            let first = {
                let state = self.state.lock();
                if let Some(outcome) = &state.outcome {
                    return outcome.clone();
                }
                state
                    .pending
                    .iter()
                    .min_by_key(|p| p.deadline)
                    .map(|p| (p.plugin, p.wait, p.deadline))
            };
            let Some((plugin, wait, deadline)) = first else {
                // Nothing pending and no outcome: allowed by an empty set.
                return Ok(());
            };
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep_until(deadline) => {
                    self.reject(
                        plugin,
                        format!(
                            "rejected due to timeout after waiting {} at plugin {plugin}",
                            go_duration(wait)
                        ),
                    );
                }
            }
        }
    }
}

/// A Go duration as kube-scheduler's flags and plugin args take them: decimal numbers with a
/// unit each (`h`, `m`, `s`, `ms`, `us`, `ns`), summed: `15s`, `1m30s`, `1.5s`.
pub fn parse_go_duration(value: &str) -> Result<Duration, String> {
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let bad = || format!("{value:?} is not a duration such as 15s, 1m30s or 500ms");
    let mut rest = value;
    let mut seconds = 0.0_f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (_, scale) = UNITS
            .iter()
            .find(|(u, _)| *u == &rest[..unit_len])
            .ok_or_else(bad)?;
        seconds += number * scale;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

/// `d` as Go's `time.Duration.String` writes it ("10s", "1m30s", "1.5s",
/// "250ms"), the form kube-scheduler's messages carry.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let total_secs = nanos / 1_000_000_000;
    let (h, m) = (total_secs / 3600, (total_secs / 60) % 60);
    let secs = decimal(nanos % 60_000_000_000, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

/// `value / scale` with the fraction's trailing zeros dropped.
fn decimal(value: u128, scale: u128) -> String {
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = scale.ilog10() as usize;
    let fraction = format!("{fraction:0digits$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        for (d, go) in [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::from_secs(3600 + 61), "1h1m1s"),
            (Duration::from_nanos(42), "42ns"),
        ] {
            assert_eq!(go_duration(d), go, "{d:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_waits_for_every_plugin_to_allow_it() {
        let pods = WaitingPods::default();
        let pod = pods.add(
            "u1",
            "ns/p".into(),
            vec![
                ("A", Duration::from_secs(10)),
                ("B", Duration::from_secs(10)),
            ],
        );
        assert_eq!(
            pods.get("u1").map(|p| p.key().to_string()),
            Some("ns/p".into())
        );
        let waiter = tokio::spawn({
            let pod = pod.clone();
            async move { pod.wait().await }
        });
        pod.allow("A");
        pod.allow("Unrelated");
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "B has not allowed it yet");
        assert_eq!(pod.pending_plugins(), ["B"]);
        pod.allow("B");
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert!(!pod.reject("A", "too late"), "the wait is over");
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_timeout_rejects_in_its_plugins_name() {
        let pods = WaitingPods::default();
        let pod = pods.add(
            "u1",
            "ns/p".into(),
            vec![
                ("Slow", Duration::from_secs(30)),
                ("Quick", Duration::from_secs(2)),
            ],
        );
        let started = Instant::now();
        let status = pod.wait().await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(status.code(), crate::framework::Code::Unschedulable);
        assert_eq!(status.plugin(), "Quick");
        assert_eq!(
            status.message(),
            "rejected due to timeout after waiting 2s at plugin Quick"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_rejection_wins_over_later_allows_and_waits_are_capped() {
        let pods = WaitingPods::default();
        let pod = pods.add("u1", "ns/p".into(), vec![("A", Duration::from_secs(3600))]);
        assert!(pod.reject("Other", "no room in the gang"));
        pod.allow("A");
        let status = pod.wait().await.unwrap_err();
        assert_eq!(
            (status.plugin(), status.message()),
            ("Other", "no room in the gang".into())
        );
        let capped = pods.add("u2", "ns/q".into(), vec![("A", Duration::from_secs(3600))]);
        let started = Instant::now();
        let status = capped.wait().await.unwrap_err();
        assert_eq!(started.elapsed(), MAX_PERMIT_WAIT);
        assert_eq!(
            status.message(),
            "rejected due to timeout after waiting 15m0s at plugin A"
        );
        pods.remove("u1");
        pods.remove("u2");
        assert!(pods.is_empty());
    }
}
