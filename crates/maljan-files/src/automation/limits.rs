//! What keeps automation from feeding itself: a rate limit per schedule and per watch, and the
//! memory of which loops were already recorded, so a loop is recorded once however often it is
//! tried. The loop itself is found by the runs' origins (`ServerHandle::context_for`); this
//! module only counts.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use chrono::{DateTime, Duration, Utc};
use maljan_server::ToolError;

/// Runs one schedule or watch may start within [`WINDOW_SECONDS`]; beyond, a firing is refused.
pub(crate) const RUNS_PER_WINDOW: u32 = 60;
pub(crate) const WINDOW_SECONDS: i64 = 60;
/// Loops remembered as recorded; past this many distinct ones, the memory starts again.
const REMEMBERED_LOOPS: usize = 1024;

/// One origin's current window: its start, the runs started in it, and whether its refusal
/// was recorded.
type Window = (DateTime<Utc>, u32, bool);

#[derive(Default)]
pub(crate) struct Limits {
    /// Per origin (`schedule:NAME`, `watch:NAME`).
    windows: Mutex<HashMap<String, Window>>,
    loops: Mutex<HashSet<String>>,
}

impl Limits {
    /// Counts a run of `origin` starting at `now`. Err: the refusal, and whether it is the
    /// first of its window (the one to record).
    pub(crate) fn admit(&self, origin: &str, now: DateTime<Utc>) -> Result<(), (bool, ToolError)> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let (start, runs, recorded) = windows.entry(origin.to_string()).or_insert((now, 0, false));
        if now - *start >= Duration::seconds(WINDOW_SECONDS) || now < *start {
            (*start, *runs, *recorded) = (now, 0, false);
        }
        if *runs < RUNS_PER_WINDOW {
            *runs += 1;
            return Ok(());
        }
        let first = !*recorded;
        *recorded = true;
        Err((
            first,
            ToolError::bad_argument(format!(
                "{origin} was started {RUNS_PER_WINDOW} times within {WINDOW_SECONDS} s: \
                 refused until the minute is over"
            ))
            .with_remediation(
                "a schedule or watch that fires this often is usually feeding itself; \
                 check what its actions start or write",
            ),
        ))
    }

    /// Whether the loop `message` (which names its chain) is seen here for the first time.
    pub(crate) fn first_loop(&self, message: &str) -> bool {
        let mut loops = self.loops.lock().unwrap_or_else(|p| p.into_inner());
        if loops.len() >= REMEMBERED_LOOPS {
            loops.clear();
        }
        loops.insert(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_admits_its_runs_then_refuses_and_records_once() {
        let limits = Limits::default();
        let t0 = DateTime::<Utc>::UNIX_EPOCH;
        for _ in 0..RUNS_PER_WINDOW {
            limits.admit("schedule:a", t0).unwrap();
        }
        let (first, e) = limits.admit("schedule:a", t0).unwrap_err();
        assert!(first && e.message.contains("schedule:a"), "{}", e.message);
        assert!(!limits.admit("schedule:a", t0).unwrap_err().0);
        // Another origin has its own window; the next minute starts again.
        limits.admit("watch:a", t0).unwrap();
        limits
            .admit("schedule:a", t0 + Duration::seconds(WINDOW_SECONDS))
            .unwrap();
    }

    #[test]
    fn a_loop_is_first_once() {
        let limits = Limits::default();
        assert!(limits.first_loop("a loop: schedule:a"));
        assert!(!limits.first_loop("a loop: schedule:a"));
        assert!(limits.first_loop("a loop: schedule:b"));
    }
}
