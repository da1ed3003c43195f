//! A job's events kept in the ledger as its numbered job events, whichever process runs it (the
//! console, a worker on another node, `maljan analyze`): the ledger is one subscriber of the job's
//! event stream (`maljan_client::job::events`), beside the terminal. A console streams the kept
//! events to its watchers from the ledger, live through PostgreSQL's LISTEN/NOTIFY
//! (`maljan_client::ledger::JOB_EVENTS_CHANNEL`) or from its own process, and resumes a stream
//! from `Last-Event-ID`.
//!
//! Each event is kept as `(kind, JSON data)` ([`Event::kind`], [`Event::data`]): `connecting`,
//! `connected`, `upload`, `stage`, `step_started`, `model_answered`, `call_finished`, `retry`,
//! and last `done` (the status and the verdict). The events are written in order by one task, so
//! their numbers follow the order they happened in.

use maljan_client::{CallRecord, Event, EventStream, JobEvent, Ledger, job::events};
use tokio::sync::mpsc;

/// The ledger's record of one job's events; [`JobEvents::finish`] waits until all are kept.
pub struct JobEvents {
    /// `None` ends the recording (the events before it are kept first).
    tx: mpsc::UnboundedSender<Option<Event>>,
    writer: tokio::task::JoinHandle<()>,
}

impl JobEvents {
    /// Keeps every event of `events` from now on as `job_id`'s in `ledger`, until its `done`;
    /// `on_stored` hears each once it is stored (numbered), for watchers in this process.
    pub fn record(
        ledger: Ledger,
        job_id: String,
        events: &EventStream,
        on_stored: impl Fn(JobEvent) + Send + 'static,
    ) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Option<Event>>();
        let heard = tx.clone();
        events.subscribe(move |e| {
            let _ = heard.send(Some(e.clone()));
        });
        let writer = tokio::spawn(async move {
            while let Some(Some(event)) = rx.recv().await {
                let (l, id, kind, data) = (
                    ledger.clone(),
                    job_id.clone(),
                    event.kind(),
                    event.data().to_string(),
                );
                let kept = data.clone();
                match tokio::task::spawn_blocking(move || l.append_job_event(&id, kind, &kept))
                    .await
                {
                    Ok(Ok(seq)) => on_stored(JobEvent {
                        seq,
                        kind: kind.to_string(),
                        data,
                    }),
                    Ok(Err(e)) => tracing::warn!("job {job_id}: an event was not kept: {e}"),
                    Err(_) => {}
                }
                if event.is_done() {
                    break;
                }
            }
        });
        Self { tx, writer }
    }

    /// Waits until every event emitted so far is kept, and stops recording.
    pub async fn finish(self) {
        let _ = self.tx.send(None);
        let _ = self.writer.await;
    }
}

/// The `call_finished` event of a call the model made in `stage` (drawn like a triage step's).
pub fn call_event(stage: &str, call: &CallRecord) -> Event {
    Event::CallFinished(events::CallFinished {
        index: None,
        total: None,
        stage: Some(stage.to_string()),
        title: call.tool.clone(),
        tool: call.tool.clone(),
        server: Some(call.server.clone()),
        status: if call.ok { "ok" } else { "failed" }.to_string(),
        evidence: vec![call.ev_id.clone()],
        duration_ms: call.duration_ms,
        error: call.error.as_ref().map(|e| events::EventError {
            code: e.code.as_str().to_string(),
            message: e.message.clone(),
        }),
        reason: None,
    })
}

/// The last event of a job that could not run (its sample not fetched, say).
pub fn failed(error: &str) -> Event {
    Event::Done {
        status: "failed".into(),
        verdict: None,
        error: Some(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[tokio::test]
    async fn events_are_numbered_in_order_and_end_at_done() {
        let ledger = Ledger::open_in_memory();
        ledger.create_job("j", "t", None).unwrap();
        let stream = EventStream::new();
        let recording = JobEvents::record(ledger.clone(), "j".into(), &stream, |_| {});
        stream.emit(Event::Connecting {
            servers: vec!["analysis".to_string()],
        });
        stream.emit(Event::Stage {
            stage: "triage".into(),
        });
        stream.emit(failed("the sample could not be fetched"));
        stream.emit(Event::Stage {
            stage: "after".into(),
        });
        recording.finish().await;
        let kept = ledger.job_events("j", 0).unwrap();
        let kinds: Vec<(i64, &str)> = kept.iter().map(|e| (e.seq, e.kind.as_str())).collect();
        assert_eq!(kinds, [(1, "connecting"), (2, "stage"), (3, "done")]);
        let done: Value = serde_json::from_str(&kept[2].data).unwrap();
        assert_eq!(done["status"], "failed");
    }
}
