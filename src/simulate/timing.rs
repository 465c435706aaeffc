//! A timed workload: when each pod is created and how long it runs once
//! bound, from two annotations on the pod (on a controller, on its
//! template), as Go durations from the start of the run:
//!
//! - `simulate.placer.io/arrive-at`: created then (default: at the start);
//! - `simulate.placer.io/runs-for`: deleted that long after it was bound
//!   (default: it runs to the end of the run).
//!
//! A pod never placed stays pending to the end; one evicted does not come back.

use std::collections::BTreeMap;
use std::time::Duration;

use super::engine::Arrival;
use crate::framework::parse_go_duration;
use crate::objects::PodInfo;

/// When the pod is created.
pub const ARRIVE_AT: &str = "simulate.placer.io/arrive-at";
/// How long it runs once bound.
pub const RUNS_FOR: &str = "simulate.placer.io/runs-for";

/// The annotation of `annotations` that is not a duration, and why.
pub fn check(annotations: Option<&BTreeMap<String, String>>) -> Result<(), (&'static str, String)> {
    for key in [ARRIVE_AT, RUNS_FOR] {
        if let Some(value) = annotations.and_then(|a| a.get(key)) {
            parse_go_duration(value).map_err(|e| (key, e))?;
        }
    }
    Ok(())
}

/// The pod's arrival as its annotations say.
pub fn arrival(pod: PodInfo) -> Result<Arrival, String> {
    let read = |key: &str| {
        pod.annotations
            .get(key)
            .map(|v| parse_go_duration(v).map_err(|e| format!("pod {}: {key}: {e}", pod.key())))
            .transpose()
    };
    let at = read(ARRIVE_AT)?.unwrap_or(Duration::ZERO);
    let runs_for = read(RUNS_FOR)?;
    Ok(Arrival { at, runs_for, pod })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_give_the_arrival_and_the_run_time() {
        let mut pod = PodInfo::default();
        pod.annotations.insert(ARRIVE_AT.into(), "1h30m".into());
        pod.annotations.insert(RUNS_FOR.into(), "12537496s".into());
        let a = arrival(pod.clone()).unwrap();
        assert_eq!(a.at, Duration::from_secs(5400));
        assert_eq!(a.runs_for, Some(Duration::from_secs(12_537_496)));
        pod.annotations.insert(RUNS_FOR.into(), "soon".into());
        assert!(check(Some(&pod.annotations)).unwrap_err().0 == RUNS_FOR);
    }
}
