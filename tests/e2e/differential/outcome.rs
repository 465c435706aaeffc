//! What each scheduler did with a case's copy of the pod, and whether the two agree: the same
//! outcome (bound, unschedulable with the same first message, provisioning, bound after a
//! failure) and, where both placed the pod at once, the same choice of node (see
//! [`chosen_node_disagreement`]). And the verdict over a run: a disagreement that repeats on
//! a fresh run of the case fails, one that does not is a flake, and more than [`MAX_FLAKES`]
//! flakes fail too.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::bail;

/// Flakes (a disagreement gone on the fresh run) tolerated per run: one is printed, two fail.
pub(super) const MAX_FLAKES: usize = 1;

/// What a scheduler did with a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Bound, with no `FailedScheduling` before.
    Bound,
    /// Not bound; the first `FailedScheduling` message.
    Unschedulable(String),
    /// Neither bound nor reported on within the outcome timeout (an event placer could not
    /// record, say): never an agreement.
    Undecided,
    /// Reported unschedulable first, bound later (a stale view of the cluster).
    BoundAfterFailure(String),
    /// Not bound, a claim annotated with one of the copy's nodes to be provisioned there (the
    /// pod waits in PreBind for a provisioner); the first `FailedScheduling` before, if any.
    Provisioning(Option<String>),
}

impl Outcome {
    /// The outcome with the copy's node names (`<stem>-<i>`) in its message replaced by
    /// `<node>`, and names made from the copy's pod name (`"<pod>-<volume>"`, a generic
    /// ephemeral volume's claim) by `"<pod>-`, so both copies' messages compare (see the module
    /// docs).
    pub(super) fn without_copy_names(self, stem: &str, pod: &str) -> Self {
        let clean = |m: String| -> String {
            let m = m.replace(&format!("\"{pod}-"), "\"<pod>-");
            let mut out = String::new();
            let mut rest = m.as_str();
            while let Some(at) = rest.find(stem) {
                out.push_str(&rest[..at]);
                out.push_str("<node>");
                rest = rest[at + stem.len()..]
                    .strip_prefix('-')
                    .map_or(&rest[at + stem.len()..], |r| {
                        r.trim_start_matches(|c: char| c.is_ascii_digit())
                    });
            }
            out.push_str(rest);
            out
        };
        match self {
            Outcome::Bound => Outcome::Bound,
            Outcome::Unschedulable(m) => Outcome::Unschedulable(clean(m)),
            Outcome::Undecided => Outcome::Undecided,
            Outcome::BoundAfterFailure(m) => Outcome::BoundAfterFailure(clean(m)),
            Outcome::Provisioning(m) => Outcome::Provisioning(m.map(clean)),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Bound => f.write_str("bound"),
            Outcome::Unschedulable(m) => write!(f, "unschedulable: {m:?}"),
            Outcome::Undecided => f.write_str("undecided (no binding, no FailedScheduling)"),
            Outcome::BoundAfterFailure(m) => write!(f, "bound after failing with {m:?}"),
            Outcome::Provisioning(None) => f.write_str("provisioning"),
            Outcome::Provisioning(Some(m)) => write!(f, "provisioning after failing with {m:?}"),
        }
    }
}

/// Both schedulers' handling of one case: their outcomes, the index of the node each placed its
/// copy on (bound, or a claim annotated to be provisioned there), and kube-scheduler's total
/// score per node index from its `--v=10` log (empty where it did not score: one feasible node).
#[derive(Clone, Debug)]
pub(super) struct CaseRun {
    pub(super) placer: Outcome,
    pub(super) kube: Outcome,
    pub(super) placer_node: Option<usize>,
    pub(super) kube_node: Option<usize>,
    pub(super) kube_totals: BTreeMap<usize, i64>,
}

impl CaseRun {
    /// What the two disagree on, if anything.
    pub(super) fn disagreement(&self) -> Option<String> {
        if self.placer == Outcome::Undecided || self.kube == Outcome::Undecided {
            return Some("a scheduler did not decide".to_owned());
        }
        if self.placer != self.kube {
            return Some("different outcomes".to_owned());
        }
        // A pod placed at once was placed by one scheduling cycle's scores; after a failure or
        // a preemption the node depends on what changed in between.
        let placed_at_once = matches!(self.placer, Outcome::Bound | Outcome::Provisioning(None));
        match (placed_at_once, self.placer_node, self.kube_node) {
            (true, Some(p), Some(k)) => chosen_node_disagreement(p, k, &self.kube_totals),
            (true, p, k) => Some(format!(
                "placed at once, but the nodes are placer {p:?}, kube-scheduler {k:?}"
            )),
            (false, _, _) => None,
        }
    }
}

impl std::fmt::Display for CaseRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let node = |n: Option<usize>| n.map_or(String::new(), |i| format!(" on node {i}"));
        write!(
            f,
            "placer: {}{}; kube-scheduler: {}{} (its totals by node: {:?})",
            self.placer,
            node(self.placer_node),
            self.kube,
            node(self.kube_node),
            self.kube_totals
        )
    }
}

/// Whether placer's node `placer` is among the nodes kube-scheduler scored highest (`totals`,
/// node index → total), and where that top is unique, whether both chose it. kube-scheduler
/// breaks ties at random, so among equal totals any node is right. No totals means
/// kube-scheduler found one feasible node and did not score: both must have chosen it.
pub(super) fn chosen_node_disagreement(
    placer: usize,
    kube: usize,
    totals: &BTreeMap<usize, i64>,
) -> Option<String> {
    let Some(&best) = totals.values().max() else {
        return (placer != kube).then(|| {
            format!("kube-scheduler found one feasible node ({kube}), placer chose node {placer}")
        });
    };
    let top: BTreeSet<usize> = (totals.iter())
        .filter(|&(_, &t)| t == best)
        .map(|(&i, _)| i)
        .collect();
    if !top.contains(&placer) {
        return Some(format!(
            "placer chose node {placer} (kube-scheduler's total {:?}), not one of kube-scheduler's \
             top-scored nodes {top:?} (total {best})",
            totals.get(&placer)
        ));
    }
    (top.len() == 1 && kube != placer).then(|| {
        format!("node {placer} alone scored highest ({best}), yet kube-scheduler chose node {kube}")
    })
}

/// The run's verdict: every disagreement that repeated on a fresh run fails it, and so do
/// flakes (disagreements that did not repeat) beyond [`MAX_FLAKES`], and so does a run that
/// compared no case.
pub(super) fn verdict(
    seed: u64,
    compared: usize,
    persistent: &[usize],
    flakes: &[usize],
) -> anyhow::Result<()> {
    if compared == 0 {
        bail!("seed {seed:#x}: no case was compared");
    }
    if !persistent.is_empty() {
        bail!("seed {seed:#x}: cases {persistent:?} disagree, also on a fresh run (details above)");
    }
    if flakes.len() > MAX_FLAKES {
        bail!(
            "seed {seed:#x}: cases {flakes:?} disagreed and agreed on a fresh run: more than \
             {MAX_FLAKES} such flake in a run fails it (details above)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(pairs: &[(usize, i64)]) -> BTreeMap<usize, i64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn placer_must_choose_among_the_top_scored_nodes() {
        let t = totals(&[(0, 300), (1, 450), (2, 450)]);
        assert_eq!(
            chosen_node_disagreement(1, 2, &t),
            None,
            "a tie: either is right"
        );
        assert_eq!(chosen_node_disagreement(2, 1, &t), None);
        let lower = chosen_node_disagreement(0, 1, &t).expect("a lower-scored node disagrees");
        assert!(
            lower.contains("not one of kube-scheduler's top-scored nodes {1, 2}"),
            "{lower}"
        );
        assert!(
            chosen_node_disagreement(3, 1, &t).is_some(),
            "an unscored node"
        );
    }

    #[test]
    fn a_unique_top_is_chosen_by_both() {
        let t = totals(&[(0, 300), (1, 450)]);
        assert_eq!(chosen_node_disagreement(1, 1, &t), None);
        assert!(chosen_node_disagreement(0, 1, &t).is_some());
        assert!(chosen_node_disagreement(1, 0, &t).is_some());
    }

    #[test]
    fn without_scores_both_choose_the_one_feasible_node() {
        assert_eq!(chosen_node_disagreement(2, 2, &BTreeMap::new()), None);
        assert!(chosen_node_disagreement(1, 2, &BTreeMap::new()).is_some());
    }

    #[test]
    fn a_case_run_compares_the_node_only_where_both_placed_at_once() {
        let run = |placer: Outcome, kube: Outcome, p: usize, k: usize| CaseRun {
            placer,
            kube,
            placer_node: Some(p),
            kube_node: Some(k),
            kube_totals: totals(&[(0, 10), (1, 20)]),
        };
        assert!(
            run(Outcome::Bound, Outcome::Bound, 0, 1)
                .disagreement()
                .is_some()
        );
        assert!(
            run(Outcome::Bound, Outcome::Bound, 1, 1)
                .disagreement()
                .is_none()
        );
        let after = Outcome::BoundAfterFailure("preempted".into());
        assert!(run(after.clone(), after, 0, 1).disagreement().is_none());
        let other = Outcome::Unschedulable("x".into());
        assert!(run(Outcome::Bound, other, 1, 1).disagreement().is_some());
        let undecided = Outcome::Undecided;
        assert!(
            run(undecided.clone(), undecided, 1, 1)
                .disagreement()
                .is_some()
        );
    }

    #[test]
    fn copy_names_are_left_out_of_messages() {
        let m = "0/9 nodes are available: waiting for ephemeral volume controller to create the \
                 persistentvolumeclaim \"c3k-a1-scratch\". found a potential placement for pod \
                 on node run-c3k-a1-2";
        let got = Outcome::Unschedulable(m.into()).without_copy_names("run-c3k-a1", "c3k-a1");
        let want = "0/9 nodes are available: waiting for ephemeral volume controller to create \
                    the persistentvolumeclaim \"<pod>-scratch\". found a potential placement for \
                    pod on node <node>";
        assert_eq!(got, Outcome::Unschedulable(want.into()));
    }

    #[test]
    fn flakes_fail_only_above_one_and_nothing_compared_fails() {
        assert!(verdict(1, 24, &[], &[]).is_ok());
        assert!(
            verdict(1, 24, &[], &[3]).is_ok(),
            "one flake is printed, not failed"
        );
        assert!(verdict(1, 24, &[], &[3, 7]).is_err(), "two flakes fail");
        assert!(
            verdict(1, 24, &[5], &[]).is_err(),
            "a repeated disagreement fails"
        );
        assert!(
            verdict(1, 0, &[], &[]).is_err(),
            "zero cases compared fails"
        );
    }
}
