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
    /// When the rest ends (wall clock: other workers read it).
    pub until: SystemTime,
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
                let until_wall = SystemTime::now() + self.cooldown;
                s.phase = Phase::Resting {
                    until: Instant::now() + self.cooldown,
                    until_wall,
                };
                s.rests += 1;
                Some(RestEvent {
                    server: self.server.clone(),
                    failures: s.failures,
                    cooldown: self.cooldown,
                    until: until_wall,
                    reason,
                })
            }
        }
    }

    /// Another worker rested this server until `until_wall` (see [`crate::shared_limits`]): rest
    /// too, unless a trial of this worker's is out (its answer decides) or a longer rest holds.
    pub fn rest_from_peer(&self, until_wall: SystemTime, failures: u32, reason: &str) {
        let mut s = self.lock();
        let left = until_wall
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        let until = Instant::now() + left;
        match s.phase {
            Phase::Trial { in_flight: true } => return,
            Phase::Resting { until: mine, .. } if mine >= until => return,
            _ => {}
        }
        s.phase = Phase::Resting { until, until_wall };
        s.failures = s.failures.max(failures);
        s.last_reason = reason.to_string();
    }

    /// Another worker's trial was answered: the server is closed again.
    pub fn close_from_peer(&self) {
        let mut s = self.lock();
        if s.phase != (Phase::Trial { in_flight: true }) {
            s.phase = Phase::Closed;
            s.failures = 0;
            s.last_reason.clear();
        }
    }

    /// Gives back a trial ticket because another worker sends the trial, and says so.
    pub fn trial_elsewhere(&self, ticket: Ticket, tool: &str) -> CallError {
        self.record(ticket, Verdict::Abandoned);
        let s = self.lock();
        self.refusal(
            &s,
            tool,
            "another worker has let one call through to try it again, and no other is sent until that call is answered",
        )
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

    #[test]
    fn a_peer_s_rest_and_recovery_reach_this_breaker() {
        let b = breaker(60_000);
        b.rest_from_peer(SystemTime::now() + Duration::from_secs(30), 3, "timeout");
        let e = b.admit("t").unwrap_err();
        assert!(e.message.contains("resting after 3 calls"), "{}", e.message);
        assert!(e.message.contains("(the last: timeout)"), "{}", e.message);
        // A shorter rest heard later does not cut this one short.
        b.rest_from_peer(SystemTime::now(), 3, "timeout");
        assert!(b.admit("t").is_err());
        b.close_from_peer();
        assert!(!b.is_resting());
        assert!(!b.admit("t").unwrap().trial);
    }

    #[test]
    fn a_trial_out_here_is_not_overruled_by_a_peer() {
        let b = breaker(0);
        b.rest_from_peer(SystemTime::now(), 3, "x");
        let trial = b.admit("t").unwrap();
        assert!(trial.trial);
        b.rest_from_peer(SystemTime::now() + Duration::from_secs(30), 3, "x");
        b.close_from_peer();
        assert!(b.is_resting(), "the trial's own answer decides");
        b.record(trial, Verdict::Answered);
        assert!(!b.is_resting());
    }

    #[test]
    fn a_trial_sent_elsewhere_is_given_back_and_said() {
        let b = breaker(0);
        b.rest_from_peer(SystemTime::now(), 3, "x");
        let trial = b.admit("t").unwrap();
        let e = b.trial_elsewhere(trial, "t");
        assert_eq!(e.code, ErrorCode::ServerResting);
        assert!(e.message.contains("another worker"), "{}", e.message);
        assert!(
            b.admit("t").unwrap().trial,
            "the next caller may try to claim it"
        );
    }
}
