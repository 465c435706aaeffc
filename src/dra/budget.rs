//! Bounds on the allocator's backtracking search, so that one pod's claims
//! cannot hold the scheduling loop: the args' `filterTimeout` (a clock, as
//! kube-scheduler's Filter applies it) and a step budget of placer's own
//! (a count, which bounds CPU even with the timeout off).
//!
//! A *step* is one call of the search's recursion (Go's `allocateOne`) or
//! one candidate device it looks at; every step costs a bounded amount of
//! work (a CEL evaluation at most, itself bounded by its cost limit), so a
//! number of steps is an amount of CPU. Counting is a local increment; only
//! every [`CHECK_EVERY`] steps does the search read the clock and add its
//! steps to the attempt's count, so the bounds cost nothing measurable on
//! ordinary claims, which take a few dozen steps per node.
//!
//! [`SearchLimits`] belongs to one scheduling attempt (PreFilter builds it,
//! every Filter call of the attempt shares it, from any thread): the
//! deadline and the step budget are the attempt's, so they also bound the
//! attempt as a whole, not only each node (see the plugin's module doc).
//! The first search that gives up records why, and every search of the
//! attempt after it stops at its next check ([`GaveUp::Stopped`]), as
//! kube-scheduler cancels the other nodes' Filter calls once one fails.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many steps a search takes between two looks at the clock and the
/// attempt's shared count: a clock read costs about as much as a few dozen
/// steps, so one per 256 is noise, and a step takes well under a
/// microsecond, so a deadline is noticed within a fraction of a millisecond.
pub const CHECK_EVERY: u32 = 256;

/// placer's step budget for one scheduling attempt's device searches, over
/// all its nodes: in CPU, about the default 10 s `filterTimeout` (a release
/// build took 1.2 s for 5 million steps of an exploding claim on a busy
/// 2-core machine, 0.23 µs a step), so with the timeout on, the timeout
/// usually speaks first. An ordinary claim takes a few dozen steps per
/// node, so even 12,500 nodes stay far below it.
pub const STEP_BUDGET: u64 = 50_000_000;

/// Why a search stopped before it found an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveUp {
    /// The attempt's `filterTimeout` passed while this search ran.
    TimedOut,
    /// This search used up the attempt's step budget of this many steps.
    OutOfSteps(u64),
    /// Another search of the attempt gave up first: this one stops too.
    Stopped,
}

impl std::fmt::Display for GaveUp {
    /// kube-scheduler's texts for a timeout and for a search stopped by
    /// another node's failure; placer's own for the step budget. Filter
    /// puts `node <name>: ` before the first two, as kube-scheduler does.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GaveUp::TimedOut => f.write_str("timed out trying to allocate devices"),
            GaveUp::OutOfSteps(budget) => write!(
                f,
                "gave up trying to allocate devices: the search exceeded {budget} steps"
            ),
            GaveUp::Stopped => f.write_str(
                "asked by caller to stop allocating devices: some other Filter operation failed",
            ),
        }
    }
}

/// The bounds of one scheduling attempt's searches (see the module doc).
#[derive(Debug)]
pub struct SearchLimits {
    /// `filterTimeout` from the attempt's start; `None`: no timeout.
    deadline: Option<Instant>,
    /// The attempt's step budget.
    budget: u64,
    /// Steps the attempt's searches have reported so far.
    used: AtomicU64,
    /// Why the first search that gave up did.
    gave_up: OnceLock<GaveUp>,
}

impl SearchLimits {
    /// Limits for an attempt starting now: `timeout` (`None` or zero: none)
    /// and `budget` steps.
    pub fn new(timeout: Option<Duration>, budget: u64) -> Self {
        SearchLimits {
            deadline: timeout
                .filter(|t| !t.is_zero())
                .and_then(|t| Instant::now().checked_add(t)),
            budget,
            used: AtomicU64::new(0),
            gave_up: OnceLock::new(),
        }
    }

    /// No timeout and no step budget (tests, and tools that search once).
    pub fn unlimited() -> Self {
        SearchLimits::new(None, u64::MAX)
    }

    /// Why a search of the attempt gave up, if one did.
    pub fn gave_up(&self) -> Option<GaveUp> {
        self.gave_up.get().copied()
    }

    /// A meter for one search; `Err` when the attempt is already over (a
    /// search gave up, or the deadline or the budget is past).
    pub(super) fn meter(&self) -> Result<Meter<'_>, GaveUp> {
        let mut meter = Meter {
            limits: self,
            pending: 0,
        };
        meter.check()?;
        Ok(meter)
    }

    /// Records `why` unless another search gave up first; returns what
    /// this search reports: `why`, or [`GaveUp::Stopped`] if it came second.
    fn give_up(&self, why: GaveUp) -> GaveUp {
        if self.gave_up.set(why).is_ok() {
            why
        } else {
            GaveUp::Stopped
        }
    }
}

/// Counts one search's steps against its attempt's [`SearchLimits`].
pub(super) struct Meter<'l> {
    limits: &'l SearchLimits,
    /// Steps taken since the last check.
    pending: u32,
}

impl Meter<'_> {
    /// One step; every [`CHECK_EVERY`] steps, the bounds are checked.
    #[inline]
    pub fn step(&mut self) -> Result<(), GaveUp> {
        self.pending += 1;
        if self.pending < CHECK_EVERY {
            return Ok(());
        }
        self.check()
    }

    /// Reports the pending steps and checks every bound.
    #[cold]
    fn check(&mut self) -> Result<(), GaveUp> {
        let limits = self.limits;
        let pending = u64::from(std::mem::take(&mut self.pending));
        let used = limits.used.fetch_add(pending, Ordering::Relaxed) + pending;
        if limits.gave_up.get().is_some() {
            return Err(GaveUp::Stopped);
        }
        if used > limits.budget {
            return Err(limits.give_up(GaveUp::OutOfSteps(limits.budget)));
        }
        if limits.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(limits.give_up(GaveUp::TimedOut));
        }
        Ok(())
    }
}

impl Drop for Meter<'_> {
    /// A short search never reaches a check: its steps still count.
    fn drop(&mut self) {
        let pending = u64::from(self.pending);
        self.limits.used.fetch_add(pending, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_runs_out_at_a_check_and_stops_every_later_search() {
        let limits = SearchLimits::new(None, 1000);
        let mut meter = limits.meter().unwrap();
        let mut taken = 0u64;
        let why = loop {
            taken += 1;
            if let Err(why) = meter.step() {
                break why;
            }
        };
        assert_eq!(why, GaveUp::OutOfSteps(1000));
        // Noticed at the first check past the budget, not later.
        assert_eq!(taken, 1024);
        assert_eq!(limits.gave_up(), Some(GaveUp::OutOfSteps(1000)));
        assert_eq!(limits.meter().err(), Some(GaveUp::Stopped));
    }

    #[test]
    fn short_searches_add_up_when_they_end() {
        let limits = SearchLimits::new(None, 300);
        for _ in 0..3 {
            let mut meter = limits.meter().unwrap();
            for _ in 0..100 {
                meter.step().unwrap();
            }
        }
        // 300 steps reported: the budget is not exceeded yet.
        let mut meter = limits.meter().unwrap();
        meter.step().unwrap();
        drop(meter);
        assert_eq!(limits.meter().err(), Some(GaveUp::OutOfSteps(300)));
    }

    #[test]
    fn a_passed_deadline_times_the_search_out() {
        let limits = SearchLimits::new(Some(Duration::from_nanos(1)), u64::MAX);
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(limits.meter().err(), Some(GaveUp::TimedOut));
        assert_eq!(limits.meter().err(), Some(GaveUp::Stopped));
    }

    #[test]
    fn zero_means_no_timeout() {
        let limits = SearchLimits::new(Some(Duration::ZERO), u64::MAX);
        let mut meter = limits.meter().unwrap();
        for _ in 0..10 * CHECK_EVERY {
            meter.step().unwrap();
        }
        assert_eq!(limits.gave_up(), None);
    }
}
