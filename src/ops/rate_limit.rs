//! Rate-limited logging for events any client can trigger at will (failed
//! TLS handshakes, accept errors): one line per interval, with the number of
//! events that were not logged since the previous line. Metrics still count
//! every event.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Admits at most one log line per interval.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    /// A limiter allowing one line per `interval`.
    pub fn new(interval: Duration) -> Self {
        LogLimiter {
            interval,
            state: Mutex::new(State::default()),
        }
    }

    /// `Some(events suppressed since the previous line)` when a line may be
    /// written at `now`; `None` (and the event is counted as suppressed)
    /// otherwise.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock();
        match state.last {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                state.suppressed += 1;
                None
            }
            _ => {
                state.last = Some(now);
                Some(std::mem::take(&mut state.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_suppressed_count() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limiter.admit(t0), Some(0));
        assert_eq!(limiter.admit(t0 + Duration::from_secs(1)), None);
        assert_eq!(limiter.admit(t0 + Duration::from_secs(9)), None);
        assert_eq!(limiter.admit(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(limiter.admit(t0 + Duration::from_secs(11)), None);
        assert_eq!(limiter.admit(t0 + Duration::from_secs(30)), Some(1));
    }
}
