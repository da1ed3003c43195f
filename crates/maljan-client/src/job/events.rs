//! A job's events: the one stream its progress goes through, whoever draws or keeps it.
//!
//! Every part of a job says what happens on its job's [`EventStream`] ([`super::Job::events`]):
//! the client (each acknowledged part of a sample's upload), the triage (servers connected, steps
//! started and finished), the agent (each stage, the model's answers and calls) and the pipeline
//! (the end). Its subscribers are what a front end shows and keeps: the terminal's progress lines
//! (`maljan analyze`), the job's events in the ledger (numbered [`crate::JobEvent`]s, which the
//! console streams to its pages and `maljan serve jobs` to its clients). Nothing else reports a
//! job's progress.
//!
//! Subscribing is one call, before the job starts:
//!
//! ```
//! use maljan_client::job::events::{Event, EventStream};
//! let events = EventStream::new();
//! events.subscribe(|e: &Event| eprintln!("{} {}", e.kind(), e.data()));
//! let mut rx = events.channel(); // or as an async stream of owned events
//! events.emit(Event::Stage { stage: "triage".into() });
//! assert_eq!(rx.try_recv().unwrap().kind(), "stage");
//! ```
//!
//! Each event is, as kept and streamed, a kind ([`Event::kind`]) and a JSON object
//! ([`Event::data`]); the typed form carries a little more for the terminal (a failed call's
//! message), which is never stored.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::staging::UploadProgress;

/// Something that happened in a job, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The servers about to be reached (and handed the sample).
    Connecting { servers: Vec<String> },
    /// A server reached, or refused.
    Connected(ServerReached),
    /// Part of the sample acknowledged by a server (after each part, `sent` of `total`).
    Upload(UploadProgress),
    /// A stage of the job begins: `triage`, `analyst`, `judge`.
    Stage { stage: String },
    /// A triage step begins (1-based `index` of `total`).
    StepStarted {
        index: usize,
        total: usize,
        title: String,
    },
    /// A triage step ended, or a call the model asked for did.
    CallFinished(CallFinished),
    /// The model answered a stage, asking for `tool_calls` calls in all.
    ModelAnswered { stage: String, tool_calls: usize },
    /// The job could not run this time and is tried again (a worker's sample not fetched).
    Retry {
        attempt: i64,
        reason: String,
        after_s: i64,
    },
    /// The last event: how the job ended, its verdict, and why it failed when it could not run.
    Done {
        status: String,
        verdict: Option<DoneVerdict>,
        error: Option<String>,
    },
}

/// A server as the job found it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerReached {
    pub server: String,
    /// The configured transport.
    pub transport: String,
    /// What was spoken (after any fallback), when connected.
    pub via: Option<String>,
    pub tools: usize,
    pub tools_unavailable: usize,
    /// How the sample reached it: local, uploaded, mirrored…
    pub handover: Option<String>,
    /// Why it could not be used.
    pub error: Option<EventError>,
}

/// A finished triage step (with `index` and `total`) or model call (with `stage`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CallFinished {
    pub index: Option<usize>,
    pub total: Option<usize>,
    /// The agent stage that made the call; None for a triage step.
    pub stage: Option<String>,
    pub title: String,
    pub tool: String,
    pub server: Option<String>,
    /// ok, failed, skipped, not applicable.
    pub status: String,
    pub evidence: Vec<String>,
    pub duration_ms: f64,
    pub error: Option<EventError>,
    /// Why a step was not called.
    pub reason: Option<String>,
}

/// An error as an event tells it: its code (kept) and its message (shown on a terminal only).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventError {
    pub code: String,
    pub message: String,
}

/// The verdict a job ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneVerdict {
    pub verdict: String,
    pub confidence: f64,
    pub source: String,
}

impl Event {
    /// The event's kind as kept and streamed (the SSE event name).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Connecting { .. } => "connecting",
            Self::Connected(_) => "connected",
            Self::Upload(_) => "upload",
            Self::Stage { .. } => "stage",
            Self::StepStarted { .. } => "step_started",
            Self::CallFinished(_) => "call_finished",
            Self::ModelAnswered { .. } => "model_answered",
            Self::Retry { .. } => "retry",
            Self::Done { .. } => "done",
        }
    }

    /// The event's data as kept and streamed: names, counts, codes, never a tool's arguments or
    /// result.
    pub fn data(&self) -> Value {
        match self {
            Self::Connecting { servers } => json!({"servers": servers}),
            Self::Connected(s) => json!({
                "server": s.server, "via": s.via, "tools": s.tools,
                "tools_unavailable": s.tools_unavailable, "handover": s.handover,
                "error": s.error.as_ref().map(|e| &e.message),
            }),
            Self::Upload(p) => json!({"server": p.server, "sent": p.sent, "total": p.total}),
            Self::Stage { stage } => json!({"stage": stage}),
            Self::StepStarted {
                index,
                total,
                title,
            } => json!({"index": index, "total": total, "title": title}),
            Self::CallFinished(c) => {
                let mut data = json!({
                    "title": c.title, "tool": c.tool, "server": c.server, "status": c.status,
                    "evidence": c.evidence, "duration_ms": c.duration_ms,
                    "error": c.error.as_ref().map(|e| &e.code),
                });
                // A triage step says where it is in the plan and why it was not called; a
                // model's call says which stage made it.
                if let Some(stage) = &c.stage {
                    data["stage"] = json!(stage);
                } else {
                    data["index"] = json!(c.index);
                    data["total"] = json!(c.total);
                    data["reason"] = json!(c.reason);
                }
                data
            }
            Self::ModelAnswered { stage, tool_calls } => {
                json!({"stage": stage, "tool_calls": tool_calls})
            }
            Self::Retry {
                attempt,
                reason,
                after_s,
            } => json!({"attempt": attempt, "reason": reason, "after_s": after_s}),
            Self::Done {
                status,
                verdict,
                error,
            } => {
                let verdict = verdict.as_ref().map(|v| {
                    json!({"verdict": v.verdict, "confidence": v.confidence, "source": v.source})
                });
                let mut data = json!({"status": status, "verdict": verdict});
                if let Some(e) = error {
                    data["error"] = json!(e);
                }
                data
            }
        }
    }

    /// True for the last event of a job.
    pub fn is_done(&self) -> bool {
        matches!(self, Self::Done { .. })
    }
}

type Subscriber = Arc<dyn Fn(&Event) + Send + Sync>;

/// One job's event stream: every subscriber hears every event emitted after it subscribed, in
/// the order emitted. Cloning gives another handle on the same stream.
#[derive(Clone, Default)]
pub struct EventStream {
    subscribers: Arc<Mutex<Vec<Subscriber>>>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` with every event from now on, on the task that emits it: keep it quick (draw a
    /// line, send on a channel).
    pub fn subscribe(&self, f: impl Fn(&Event) + Send + Sync + 'static) {
        self.subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(f));
    }

    /// Every event from now on, on an unbounded channel (for an async consumer: a server
    /// notifying its client, a writer keeping them).
    pub fn channel(&self) -> tokio::sync::mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.subscribe(move |e| {
            let _ = tx.send(e.clone());
        });
        rx
    }

    /// Tells every subscriber of `event`.
    pub fn emit(&self, event: Event) {
        // Called outside the lock: a subscriber may subscribe another.
        let subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for s in &subscribers {
            s(&event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subscriber_hears_every_event_in_order() {
        let stream = EventStream::new();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = heard.clone();
        stream.subscribe(move |e| h.lock().unwrap().push(e.kind()));
        let mut rx = stream.channel();
        stream.emit(Event::Stage {
            stage: "triage".into(),
        });
        stream.emit(Event::Upload(UploadProgress {
            server: "remote".into(),
            sent: 5,
            total: 10,
        }));
        stream.clone().emit(Event::Done {
            status: "complete".into(),
            verdict: None,
            error: None,
        });
        assert_eq!(*heard.lock().unwrap(), ["stage", "upload", "done"]);
        let mut kinds = Vec::new();
        while let Ok(e) = rx.try_recv() {
            kinds.push(e.kind());
        }
        assert_eq!(kinds, ["stage", "upload", "done"]);
    }

    #[test]
    fn a_triage_step_and_a_model_call_keep_their_own_fields() {
        let step = Event::CallFinished(CallFinished {
            index: Some(2),
            total: Some(6),
            title: "Hashes".into(),
            tool: "hashes".into(),
            status: "failed".into(),
            error: Some(EventError {
                code: "timeout".into(),
                message: "no answer in 30 s".into(),
            }),
            ..Default::default()
        })
        .data();
        assert_eq!(step["index"], 2);
        assert_eq!(step["error"], "timeout", "the code, never the message");
        assert!(step.get("stage").is_none() && step.get("reason").is_some());
        let call = Event::CallFinished(CallFinished {
            stage: Some("analyst".into()),
            status: "ok".into(),
            ..Default::default()
        })
        .data();
        assert_eq!(call["stage"], "analyst");
        assert!(call.get("index").is_none());
        let failed = Event::Done {
            status: "failed".into(),
            verdict: None,
            error: Some("no sample".into()),
        }
        .data();
        assert_eq!(failed["error"], "no sample");
        assert!(failed["verdict"].is_null());
    }
}
