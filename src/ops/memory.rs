//! Handing freed heap back to the operating system.
//!
//! glibc's malloc returns memory to the kernel only from the top of an arena;
//! a page freed below a live allocation stays resident until malloc reuses
//! it. placer's heap churns by design: lists decoded a page at a time at
//! start-up and on every relist, watch events decoded and dropped, request
//! bodies of thousands of node names. Left alone, the process keeps much of
//! that churn's high-water mark resident, and its RSS says little about what
//! it holds. `malloc_trim(0)` gives every whole free page of every arena back
//! (with `madvise`), much as Go's scavenger does for kube-scheduler, so
//! [`trim_periodically`] calls it every `--memory-trim-interval-seconds` on a
//! blocking thread: it holds each arena's lock while it walks that arena.
//!
//! The other allocators the binary can be built with (the `mimalloc` and
//! `tikv-jemallocator` features) return memory by themselves; with them, and
//! off glibc, there is nothing to trim.

use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;
use tracing::debug;

pub use allocator::{TRIMS, trim};

#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(any(feature = "mimalloc", feature = "tikv-jemallocator"))
))]
mod allocator {
    /// True when [`trim`] can release anything: glibc's malloc is the allocator.
    pub const TRIMS: bool = true;

    /// Gives the heap's free pages back to the kernel; true when some were.
    pub fn trim() -> bool {
        // SAFETY: malloc_trim only walks glibc's own arenas, under their locks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
}

#[cfg(not(all(
    target_os = "linux",
    target_env = "gnu",
    not(any(feature = "mimalloc", feature = "tikv-jemallocator"))
)))]
mod allocator {
    /// False: the allocator is not glibc's, and returns memory by itself.
    pub const TRIMS: bool = false;

    /// Nothing to do for this allocator.
    pub fn trim() -> bool {
        false
    }
}

/// Trims the heap every `interval` for as long as the process runs; returns
/// at once when `interval` is zero or the allocator is not glibc's.
pub async fn trim_periodically(interval: Duration) {
    if interval.is_zero() || !TRIMS {
        return;
    }
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let started = Instant::now();
        let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
        debug!(released, took = ?started.elapsed(), "trimmed the heap");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of this process (`/proc/self/statm`, second field).
    fn resident_pages() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn freed_pages_below_a_live_allocation_are_given_back() {
        if !TRIMS {
            return;
        }
        // 48 MiB in small blocks, then one block above them that stays: once
        // the small ones are freed, their pages lie below a live allocation,
        // where free() alone does not return them.
        let blocks: Vec<Box<[u8; 4096]>> = (0..12_288).map(|_| Box::new([1_u8; 4096])).collect();
        let pin = Box::new([2_u8; 4096]);
        drop(blocks);
        let page = 4096;
        let before = resident_pages();
        assert!(trim(), "nothing was released");
        let after = resident_pages();
        let released_mib = before.saturating_sub(after) * page / (1024 * 1024);
        assert!(
            released_mib >= 24,
            "released {released_mib} MiB ({before} -> {after} pages)"
        );
        assert_eq!(pin[0], 2);
    }

    #[tokio::test]
    async fn a_zero_interval_turns_trimming_off() {
        tokio::time::timeout(Duration::from_secs(5), trim_periodically(Duration::ZERO))
            .await
            .expect("returns at once");
    }
}
