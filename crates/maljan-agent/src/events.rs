//! A job's progress kept as its numbered job events in the ledger, whichever process runs it (the
//! console, or a worker on another node): a console streams them to its watchers from the ledger,
//! live through PostgreSQL's LISTEN/NOTIFY (`maljan_client::ledger::JOB_EVENTS_CHANNEL`) or from
//! its own process, and resumes a stream from `Last-Event-ID`.
//!
//! Each event is `(kind, JSON data)`: `connecting`, `connected`, `upload`, `step_started`,
//! `stage`, `model_answered`, `call_finished`, and last `done` (the status and the verdict). The
//! events are written in order by one task, so their numbers follow the order they happened in.

use maljan_client::{CallRecord, Job, JobEvent, Ledger};
use maljan_triage::{Progress, Report, StepReport, report::ServerInfo};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::AgentProgress;

/// The progress of one job, recorded as its events; the recording ends with [`JobEvents::done`].
#[derive(Clone)]
pub struct JobEvents {
    tx: mpsc::UnboundedSender<(String, Value)>,
}

impl JobEvents {
    /// Starts recording `job_id`'s events in `ledger`; `on_stored` hears each once it is stored
    /// (numbered), for watchers in this process. Await the handle to know every event is stored.
    pub fn record(
        ledger: Ledger,
        job_id: String,
        on_stored: impl Fn(JobEvent) + Send + 'static,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, Value)>();
        let writer = tokio::spawn(async move {
            while let Some((kind, data)) = rx.recv().await {
                let (l, id, k, d) = (
                    ledger.clone(),
                    job_id.clone(),
                    kind.clone(),
                    data.to_string(),
                );
                match tokio::task::spawn_blocking(move || l.append_job_event(&id, &k, &d)).await {
                    Ok(Ok(seq)) => on_stored(JobEvent {
                        seq,
                        kind: kind.clone(),
                        data: data.to_string(),
                    }),
                    Ok(Err(e)) => tracing::warn!("job {job_id}: an event was not kept: {e}"),
                    Err(_) => {}
                }
                if kind == "done" {
                    break;
                }
            }
        });
        (Self { tx }, writer)
    }

    pub fn send(&self, kind: &str, data: Value) {
        let _ = self.tx.send((kind.to_string(), data));
    }

    /// Records the sample's upload to each server as it goes.
    pub fn watch_uploads(&self, job: &Job) {
        let tx = self.tx.clone();
        job.on_upload_progress(move |p| {
            let _ = tx.send((
                "upload".into(),
                json!({"server": p.server, "sent": p.sent, "total": p.total}),
            ));
        });
    }

    /// The last event: the job's status and verdict.
    pub fn done(&self, report: &Report) {
        let verdict = report.verdict.as_ref().map(|v| {
            json!({"verdict": v.verdict.as_str(), "confidence": v.confidence, "source": v.source.as_str()})
        });
        self.send(
            "done",
            json!({"status": report.status.as_str(), "verdict": verdict}),
        );
    }

    /// The last event of a job that could not run (its sample not fetched, say).
    pub fn failed(&self, error: &str) {
        self.send(
            "done",
            json!({"status": "failed", "verdict": null, "error": error}),
        );
    }
}

impl Progress for JobEvents {
    fn connecting(&self, servers: &[String]) {
        self.send("connecting", json!({"servers": servers}));
    }
    fn connected(&self, s: &ServerInfo) {
        self.send(
            "connected",
            json!({"server": s.name, "via": s.via, "tools": s.tools,
                   "tools_unavailable": s.tools_unavailable, "handover": s.handover,
                   "error": s.error.as_ref().map(|e| &e.message)}),
        );
    }
    fn step_started(&self, index: usize, total: usize, title: &str) {
        self.send(
            "step_started",
            json!({"index": index, "total": total, "title": title}),
        );
    }
    fn step_finished(&self, step: &StepReport, total: usize) {
        self.send(
            "call_finished",
            json!({"index": step.index, "total": total, "title": step.title, "tool": step.tool,
                   "server": step.server, "status": step.status.as_str(), "evidence": step.evidence,
                   "duration_ms": step.duration_ms,
                   "error": step.error.as_ref().map(|e| &e.code), "reason": step.reason}),
        );
    }
}

impl AgentProgress for JobEvents {
    fn stage_started(&self, stage: &str) {
        self.send("stage", json!({"stage": stage}));
    }
    fn model_answered(&self, stage: &str, tool_calls: usize) {
        self.send(
            "model_answered",
            json!({"stage": stage, "tool_calls": tool_calls}),
        );
    }
    fn upload(&self, p: &maljan_client::UploadProgress) {
        self.send(
            "upload",
            json!({"server": p.server, "sent": p.sent, "total": p.total}),
        );
    }
    fn finished(&self, report: &Report) {
        self.done(report);
    }
    // The same event as a triage step's, so a live view draws the model's calls as they end.
    fn tool_called(&self, stage: &str, call: &CallRecord) {
        self.send(
            "call_finished",
            json!({"stage": stage, "title": call.tool, "tool": call.tool, "server": call.server,
                   "status": if call.ok { "ok" } else { "failed" }, "evidence": [call.ev_id],
                   "duration_ms": call.duration_ms,
                   "error": call.error.as_ref().map(|e| &e.code)}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_numbered_in_order_and_end_at_done() {
        let ledger = Ledger::open_in_memory();
        ledger.create_job("j", "t", None).unwrap();
        let (events, writer) = JobEvents::record(ledger.clone(), "j".into(), |_| {});
        events.connecting(&["analysis".to_string()]);
        events.stage_started("triage");
        events.failed("the sample could not be fetched");
        events.send("after", json!({}));
        writer.await.unwrap();
        let kept = ledger.job_events("j", 0).unwrap();
        let kinds: Vec<(i64, &str)> = kept.iter().map(|e| (e.seq, e.kind.as_str())).collect();
        assert_eq!(kinds, [(1, "connecting"), (2, "stage"), (3, "done")]);
        let done: Value = serde_json::from_str(&kept[2].data).unwrap();
        assert_eq!(done["status"], "failed");
    }
}
