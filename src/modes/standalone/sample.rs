//! `percentageOfNodesToScore`: how many feasible nodes an attempt looks for
//! before it stops filtering and scores what it found, and where the next
//! attempt starts looking (kube-scheduler's `numFeasibleNodesToFind` and
//! `nextStartNodeIndex`, design §8).
//!
//! placer evaluates every node unless the policy sets the field: its cycle
//! is cheap enough at 5,000 nodes, and looking at every node gives the best
//! placement. With the field set, the semantics are kube-scheduler's: below
//! 100 nodes every node; 0 means the adaptive share `50 - nodes/125`, at
//! least 5%; never fewer than 100 nodes. Nodes are tried in name order from
//! a start that moves on by the number of nodes each attempt processed, so
//! successive pods look at different parts of the cluster.

use std::sync::atomic::{AtomicUsize, Ordering};

/// kube-scheduler's `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_PERCENTAGE: usize = 5;

/// How many feasible nodes to find among `all` with `percentage` in force
/// (`None`: every node).
pub fn feasible_nodes_to_find(percentage: Option<u8>, all: usize) -> usize {
    let Some(percentage) = percentage else {
        return all;
    };
    if all < MIN_FEASIBLE_NODES || percentage >= 100 {
        return all;
    }
    let mut percentage = usize::from(percentage);
    if percentage == 0 {
        percentage = 50usize
            .saturating_sub(all / 125)
            .max(MIN_FEASIBLE_PERCENTAGE);
    }
    (all * percentage / 100).max(MIN_FEASIBLE_NODES)
}

/// Where the next attempt starts looking (one per scheduler, shared by its
/// profiles, as kube-scheduler's `nextStartNodeIndex`).
#[derive(Debug, Default)]
pub struct NodeSearch {
    next_start: AtomicUsize,
}

/// What one attempt searches: how many feasible nodes it wants, from where.
#[derive(Debug, Clone, Copy)]
pub struct Search<'a> {
    /// `percentageOfNodesToScore` in force (`None`: every node).
    pub percentage: Option<u8>,
    /// The rotating start; `None` starts at the first node by name.
    pub start: Option<&'a NodeSearch>,
}

impl Search<'_> {
    /// Every node, from the first.
    pub const ALL: Search<'static> = Search {
        percentage: None,
        start: None,
    };

    /// The index of the node to start from among `all`.
    pub fn start(&self, all: usize) -> usize {
        match self.start {
            Some(s) if all > 0 => s.next_start.load(Ordering::Relaxed) % all,
            _ => 0,
        }
    }

    /// Moves the start on by the nodes an attempt processed.
    pub fn advance(&self, processed: usize, all: usize) {
        if let Some(s) = self.start
            && all > 0
        {
            let next = (s.next_start.load(Ordering::Relaxed) + processed) % all;
            s.next_start.store(next, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_schedulers_numbers() {
        assert_eq!(
            feasible_nodes_to_find(None, 5_000),
            5_000,
            "placer's default"
        );
        assert_eq!(
            feasible_nodes_to_find(Some(10), 99),
            99,
            "small clusters: all"
        );
        assert_eq!(feasible_nodes_to_find(Some(100), 5_000), 5_000);
        assert_eq!(feasible_nodes_to_find(Some(10), 5_000), 500);
        assert_eq!(feasible_nodes_to_find(Some(1), 5_000), 100, "at least 100");
        // Adaptive: 50 - 5000/125 = 10%; 50 - 1000/125 = 42%; floor 5%.
        assert_eq!(feasible_nodes_to_find(Some(0), 5_000), 500);
        assert_eq!(feasible_nodes_to_find(Some(0), 1_000), 420);
        assert_eq!(feasible_nodes_to_find(Some(0), 10_000), 500);
        assert_eq!(feasible_nodes_to_find(Some(0), 200), 100);
    }

    #[test]
    fn the_start_moves_by_what_was_processed() {
        let s = NodeSearch::default();
        let search = Search {
            percentage: Some(0),
            start: Some(&s),
        };
        assert_eq!(search.start(10), 0);
        search.advance(7, 10);
        assert_eq!(search.start(10), 7);
        search.advance(7, 10);
        assert_eq!(search.start(10), 4, "wraps around");
        assert_eq!(Search::ALL.start(10), 0);
    }
}
