//! kube-scheduler's FitError text: "0/N nodes are available: 2 reason-a,
//! 1 reason-b." Standalone mode writes it into `FailedScheduling` events and
//! DefaultPreemption into its own "preemption: ..." message.

use std::collections::BTreeMap;

use crate::framework::Status;

/// The reasons of failed nodes, counted.
#[derive(Debug, Default)]
pub struct ReasonHistogram {
    counts: BTreeMap<String, usize>,
}

impl ReasonHistogram {
    /// Counts every reason of `status` once.
    pub fn add(&mut self, status: &Status) {
        self.add_n(status, 1);
    }

    /// Counts every reason of `status` `n` times (one status standing for `n` nodes).
    pub fn add_n(&mut self, status: &Status, n: usize) {
        if n == 0 {
            return;
        }
        for r in status.reasons() {
            *self.counts.entry(r.to_string()).or_default() += n;
        }
    }

    /// "0/`total` nodes are available: ..." with the reasons sorted as
    /// strings, count first (kube-scheduler sorts the formatted entries).
    pub fn message(&self, total: usize) -> String {
        let mut parts: Vec<String> = self
            .counts
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        parts.sort();
        format!("0/{total} nodes are available: {}.", parts.join(", "))
    }
}

/// The FitError message for `total` nodes of which each of `statuses` failed.
pub fn fit_error_message<'a>(
    total: usize,
    statuses: impl IntoIterator<Item = &'a Status>,
) -> String {
    let mut h = ReasonHistogram::default();
    for s in statuses {
        h.add(s);
    }
    h.message(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sorts_reasons() {
        let statuses = vec![
            Status::unschedulable("Insufficient cpu"),
            Status::unresolvable("node(s) had untolerated taint {a: b}"),
            Status::unschedulable("Insufficient cpu").with_reason("Insufficient memory"),
        ];
        assert_eq!(
            fit_error_message(4, &statuses),
            "0/4 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
        );
    }

    #[test]
    fn one_status_can_stand_for_many_nodes() {
        let mut h = ReasonHistogram::default();
        h.add_n(
            &Status::unresolvable("Preemption is not helpful for scheduling"),
            3,
        );
        h.add(&Status::unschedulable("Insufficient cpu"));
        h.add_n(&Status::unschedulable("never counted"), 0);
        assert_eq!(
            h.message(4),
            "0/4 nodes are available: 1 Insufficient cpu, 3 Preemption is not helpful for scheduling."
        );
    }
}
