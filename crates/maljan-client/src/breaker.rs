//! The breaker: after `failures_to_open` unanswered calls in a row (timeouts, transport failures,
//! a crashed process — a tool's own returned error is an answer), a server *rests*: calls are
//! refused at once with `server_resting` for `cooldown_seconds`, then exactly one trial call goes
//! through. The trial answered closes the breaker; the trial unanswered starts a new rest; a trial
//! whose caller gave up lets the next caller be the trial.
//!
//! Failures of calls sent before a rest began still count, but do not extend the rest. One breaker
//! per server per [`crate::Runtime`] (Maljan's Python runtime keeps one per job, so every new job
//! sends a dead server three more calls; here the rest holds across jobs).

use std::{
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use maljan_protocol::ErrorCode;

use crate::{config::BreakerConfig, outcome::CallError};

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Closed,
    Resting {
        until: Instant,
        until_wall: SystemTime,
    },
    /// The cooldown is over; `in_flight` says whether the one trial call is out.
    Trial {
        in_flight: bool,
    },
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Unanswered calls in a row.
    failures: u32,
    /// The last unanswered call's reason (for the refusal message).
    last_reason: String,
    /// How many times this server has been rested.
    rests: u32,
}

/// A permission to send one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub trial: bool,
}

/// What happened to a call the breaker let through.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Any answer, including a tool's own error.
    Answered,
    /// Timeout, transport failure, crash, unreachable.
    Unanswered(String),
    /// The caller gave up before an answer (neither counts nor resets).
    Abandoned,
}

/// Emitted when a server starts resting.
#[derive(Debug, Clone, PartialEq)]
pub struct RestEvent {
    pub server: String,
    pub failures: u32,
    pub cooldown: Duration,
    pub reason: String,
}

#[derive(Debug)]
pub struct Breaker {
    server: String,
    failures_to_open: u32,
    cooldown: Duration,
    state: Mutex<State>,
}

impl Breaker {
    pub fn new(server: impl Into<String>, cfg: &BreakerConfig) -> Self {
        Self {
            server: server.into(),
            failures_to_open: cfg.failures_to_open.max(1),
            cooldown: cfg.cooldown(),
            state: Mutex::new(State {
                phase: Phase::Closed,
                failures: 0,
                last_reason: String::new(),
                rests: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A quick look without taking the trial slot: `Err` when a call would be refused right now.
    pub fn precheck(&self, tool: &str) -> Result<(), CallError> {
        self.check(tool, false).map(|_| ())
    }

    /// Lets a call through (possibly as the trial) or refuses it with `server_resting`.
    pub fn admit(&self, tool: &str) -> Result<Ticket, CallError> {
        self.check(tool, true)
    }

    fn check(&self, tool: &str, take: bool) -> Result<Ticket, CallError> {
        let now = Instant::now();
        let mut s = self.lock();
        match s.phase.clone() {
            Phase::Closed => Ok(Ticket { trial: false }),
            Phase::Resting { until, until_wall } if now < until => {
                let left = until - now;
                let when = format!(
                    "it will be tried again in {} s (at {})",
                    left.as_secs_f64().round().max(1.0),
                    crate::time::rfc3339(until_wall)
                );
                Err(self.refusal(&s, tool, &when))
            }
            Phase::Resting { .. } | Phase::Trial { in_flight: false } => {
                if take {
                    s.phase = Phase::Trial { in_flight: true };
                }
                Ok(Ticket { trial: true })
            }
            Phase::Trial { in_flight: true } => Err(self.refusal(
                &s,
                tool,
                "one call has been let through to try it again, and no other is sent until that call is answered",
            )),
        }
    }

    fn refusal(&self, s: &State, tool: &str, when: &str) -> CallError {
        let n = s.failures.max(self.failures_to_open);
        let plural = if n == 1 { "" } else { "s" };
        let mut msg = format!(
            "tool server '{}' is resting after {n} call{plural} in a row it did not answer; {when}",
            self.server
        );
        if !s.last_reason.is_empty() {
            msg.push_str(&format!(" (the last: {})", s.last_reason));
        }
        let _ = tool;
        CallError::new(ErrorCode::ServerResting, msg)
    }

    /// Records what happened to a call the breaker let through. Returns the rest it started, if any.
    pub fn record(&self, ticket: Ticket, verdict: Verdict) -> Option<RestEvent> {
        let mut s = self.lock();
        match verdict {
            Verdict::Answered => {
                if ticket.trial || matches!(s.phase, Phase::Closed) {
                    s.phase = Phase::Closed;
                    s.failures = 0;
                    s.last_reason.clear();
                }
                None
            }
            Verdict::Abandoned => {
                if ticket.trial && s.phase == (Phase::Trial { in_flight: true }) {
                    s.phase = Phase::Trial { in_flight: false };
                }
                None
            }
            Verdict::Unanswered(reason) => {
                s.failures += 1;
                s.last_reason = reason.clone();
                let open = if ticket.trial {
                    true
                } else {
                    matches!(s.phase, Phase::Closed) && s.failures >= self.failures_to_open
                };
                if !open {
                    return None;
                }
                s.phase = Phase::Resting {
                    until: Instant::now() + self.cooldown,
                    until_wall: SystemTime::now() + self.cooldown,
                };
                s.rests += 1;
                Some(RestEvent {
                    server: self.server.clone(),
                    failures: s.failures,
                    cooldown: self.cooldown,
                    reason,
                })
            }
        }
    }

    /// True while resting or waiting for the trial's answer.
    pub fn is_resting(&self) -> bool {
        !matches!(self.lock().phase, Phase::Closed)
    }

    /// Unanswered calls in a row so far.
    pub fn failures(&self) -> u32 {
        self.lock().failures
    }

    /// How many rests this server has had.
    pub fn rests(&self) -> u32 {
        self.lock().rests
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(cooldown_ms: u64) -> Breaker {
        let cfg = BreakerConfig {
            cooldown_seconds: cooldown_ms as f64 / 1000.0,
            ..Default::default()
        };
        Breaker::new("s", &cfg)
    }

    #[test]
    fn three_unanswered_in_a_row_rest_the_server() {
        let b = breaker(60_000);
        for i in 0..3 {
            let t = b.admit("t").unwrap();
            let ev = b.record(t, Verdict::Unanswered("timeout".into()));
            assert_eq!(ev.is_some(), i == 2);
        }
        let e = b.admit("t").unwrap_err();
        assert_eq!(e.code, ErrorCode::ServerResting);
        assert!(
            e.message.contains("resting after 3 calls in a row"),
            "{}",
            e.message
        );
        assert!(e.message.contains("tried again in 60 s"), "{}", e.message);
    }

    #[test]
    fn an_answer_resets_the_count() {
        let b = breaker(60_000);
        for _ in 0..2 {
            let t = b.admit("t").unwrap();
            b.record(t, Verdict::Unanswered("x".into()));
        }
        let t = b.admit("t").unwrap();
        b.record(t, Verdict::Answered);
        assert_eq!(b.failures(), 0);
    }

    #[test]
    fn one_trial_after_the_cooldown() {
        let b = breaker(0);
        for _ in 0..3 {
            let t = b.admit("t").unwrap();
            b.record(t, Verdict::Unanswered("x".into()));
        }
        let trial = b.admit("t").unwrap();
        assert!(trial.trial);
        let e = b.admit("t").unwrap_err();
        assert!(
            e.message.contains("one call has been let through"),
            "{}",
            e.message
        );
        // Abandoned trial: the next caller becomes the trial.
        b.record(trial, Verdict::Abandoned);
        let trial = b.admit("t").unwrap();
        assert!(trial.trial);
        b.record(trial, Verdict::Answered);
        assert!(!b.is_resting());
        assert!(!b.admit("t").unwrap().trial);
    }

    #[test]
    fn a_failed_trial_rests_again() {
        let b = breaker(0);
        for _ in 0..3 {
            let t = b.admit("t").unwrap();
            b.record(t, Verdict::Unanswered("x".into()));
        }
        let trial = b.admit("t").unwrap();
        assert!(b.record(trial, Verdict::Unanswered("x".into())).is_some());
        assert_eq!(b.rests(), 2);
    }

    #[test]
    fn late_failures_do_not_extend_a_rest() {
        let b = breaker(60_000);
        let tickets: Vec<_> = (0..5).map(|_| b.admit("t").unwrap()).collect();
        let rests: Vec<_> = tickets
            .into_iter()
            .map(|t| b.record(t, Verdict::Unanswered("x".into())))
            .collect();
        assert_eq!(rests.iter().filter(|r| r.is_some()).count(), 1);
        assert_eq!(b.failures(), 5);
    }
}
