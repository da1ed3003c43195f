//! analyze_sample and cancel_job: a caller's sample checked against the roots and limits, run as
//! a job through [`crate::analyze::Jobs::run`] (the function `maljan analyze` calls), its events
//! kept in the ledger and forwarded as progress notifications, and cancelled on request.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, atomic::Ordering},
};

use maljan_agent::pipeline::Outcome;
use maljan_client::{CancelOutcome, Event, EventStream, Sample, job::new_job_id};
use maljan_server::{ToolContext, ToolError, blocking};
use maljan_triage::visible;
use tokio_util::sync::CancellationToken;

use super::{
    JobsService,
    report_page::outcome_of,
    tools::{AnalyzeOutcome, AnalyzeSampleArgs, CancelJobArgs, Cancelled, SampleSummary},
};

/// The longest progress message sent (the rest of an event is in the report).
const MESSAGE_CHARS: usize = 200;

impl JobsService {
    pub(super) async fn analyze_sample(
        self: Arc<Self>,
        ctx: ToolContext,
        args: AnalyzeSampleArgs,
    ) -> Result<AnalyzeOutcome, ToolError> {
        let resolved = self.roots.existing(&args.path)?;
        let sample = self.read_sample(resolved, &args.path).await?;
        let servers = self.check_servers(args.servers)?;
        let depth = match args.depth {
            None => self.args.max_depth,
            Some(d) if d as usize <= self.args.max_depth => d as usize,
            Some(d) => {
                return Err(ToolError::bad_argument(format!(
                    "depth {d} is deeper than this server goes ({})",
                    self.args.max_depth
                ))
                .with_remediation(format!(
                    "ask for depth {} or less (the server's --max-depth)",
                    self.args.max_depth
                )));
            }
        };
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.args.max_waiting {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(ToolError::tool_failed(format!(
                "{} jobs are already waiting for a turn",
                self.args.max_waiting
            ))
            .with_remediation(
                "wait for a job to end (list_jobs), or cancel one (cancel_job), then call again",
            ));
        }
        let job_id = new_job_id();
        let cancel = CancellationToken::new();
        self.running().insert(job_id.clone(), cancel.clone());
        let jobs = self.jobs(servers, args.agent, depth);
        // The job runs in a task of its own: a caller that goes away (or cancels) does not cut
        // it short of keeping its report.
        let progress = args.wait.then(|| ctx.clone());
        let service = self.clone();
        let (id, stop) = (job_id.clone(), cancel.clone());
        let summary = SampleSummary {
            name: sample.name.clone(),
            sha256: sample.sha256.clone(),
            size: sample.size,
            kind: None,
        };
        let task = self.tasks.spawn(async move {
            let outcome = service.run_job(&id, &sample, jobs, stop, progress).await;
            service.running().remove(&id);
            outcome
        });
        if !args.wait {
            return Ok(AnalyzeOutcome {
                job_id: job_id.clone(),
                status: "running".into(),
                sample: summary,
                verdict: None,
                evidence: Vec::new(),
                failures: Vec::new(),
                degradations: Vec::new(),
                next: format!(
                    "the job runs: get_report {{\"job_id\": \"{job_id}\"}} gives its report once it has ended (list_jobs shows its status)"
                ),
            });
        }
        // Dropped unfinished (the caller cancelled, or went away): the job is cancelled too.
        let on_drop = cancel.drop_guard();
        let outcome = task.await;
        on_drop.disarm();
        match outcome {
            Ok(Ok(outcome)) => Ok(outcome_of(&self.runtime, &outcome.report).await),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(ToolError::tool_failed(format!(
                "the job's task was lost: {e}"
            ))),
        }
    }

    /// Waits for a turn, then runs the job as `maljan analyze` does, its events recorded in the
    /// ledger (so the console follows it) and forwarded to `progress`'s caller.
    async fn run_job(
        &self,
        job_id: &str,
        sample: &Sample,
        jobs: crate::analyze::Jobs,
        cancel: CancellationToken,
        progress: Option<ToolContext>,
    ) -> Result<Outcome, ToolError> {
        let turn = tokio::select! {
            turn = self.turns.clone().acquire_owned() => turn,
            () = cancel.cancelled() => {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                return Err(ToolError::tool_failed("the job was cancelled before it started")
                    .with_remediation("none needed: it was asked for"));
            }
        };
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let _turn = turn.map_err(|_| ToolError::tool_failed("the server is stopping"))?;
        // The job's event stream (the one every front end subscribes to) drives the caller's
        // progress notifications: one per event, counted, with the event in a line.
        let events = EventStream::new();
        if let Some(ctx) = progress {
            ctx.progress(0.0, None, Some(format!("job {job_id} started")));
            let count = std::sync::atomic::AtomicU64::new(0);
            events.subscribe(move |event: &Event| {
                let n = count.fetch_add(1, Ordering::Relaxed) + 1;
                ctx.progress(
                    n as f64,
                    None,
                    Some(progress_message(event.kind(), &event.data())),
                );
            });
        }
        let outcome = jobs.run(job_id.to_string(), sample, cancel, events).await;
        outcome.map_err(|e| {
            ToolError::tool_failed(format!(
                "the job could not run: {}",
                visible(&format!("{e:#}"))
            ))
            .with_remediation("check the server's config (`maljan servers list`) and its database")
        })
    }

    /// The sample's size and sha256, within the limits, or a refusal that says why.
    async fn read_sample(&self, resolved: PathBuf, shown: &str) -> Result<Sample, ToolError> {
        let max = self.args.max_sample_bytes;
        let shown = shown.to_string();
        blocking(move || {
            let meta = std::fs::metadata(&resolved).map_err(|e| ToolError::io(&shown, e))?;
            if !meta.is_file() {
                return Err(ToolError::bad_argument(format!(
                    "{shown} is not a regular file"
                )));
            }
            if meta.len() == 0 {
                return Err(ToolError::bad_argument(format!(
                    "{shown} is empty (0 bytes): nothing to analyse"
                )));
            }
            if meta.len() > max {
                return Err(ToolError::bad_argument(format!(
                    "{shown} is {} bytes, more than this server analyses ({max} bytes)",
                    meta.len()
                ))
                .with_remediation("the server's --max-sample-bytes sets the limit"));
            }
            Sample::read(Path::new(&resolved)).map_err(|e| ToolError::io(&shown, e))
        })
        .await
    }

    /// A call's servers, each one the config names; empty means every enabled server.
    fn check_servers(&self, servers: Vec<String>) -> Result<Option<Vec<String>>, ToolError> {
        if servers.is_empty() {
            return Ok(None);
        }
        if let Some(unknown) = servers.iter().find(|s| !self.configured.contains(s)) {
            return Err(ToolError::not_configured(format!(
                "no server named '{}' is configured",
                visible(unknown)
            ))
            .with_remediation(format!(
                "use one of: {} (or leave servers out for every enabled one)",
                self.configured.join(", ")
            )));
        }
        Ok(Some(servers))
    }

    pub(super) async fn cancel_job(&self, args: CancelJobArgs) -> Result<Cancelled, ToolError> {
        let id = args.job_id;
        let here = self.running().get(&id).cloned();
        if let Some(cancel) = here {
            cancel.cancel();
            return Ok(Cancelled {
                job_id: id,
                outcome: "cancelling".into(),
            });
        }
        let ledger = self.runtime.ledger();
        let outcome = maljan_agent::worker::cancel(ledger, &id)
            .await
            .map_err(|e| ToolError::tool_failed(format!("the database: {e}")))?;
        let word = match outcome {
            CancelOutcome::Dequeued => "dequeued",
            CancelOutcome::Signalled => "signalled",
            CancelOutcome::Finished => {
                return Err(
                    ToolError::bad_argument(format!("job {} has ended", visible(&id)))
                        .with_remediation("get_report reads its report"),
                );
            }
            CancelOutcome::NotFound => {
                let (l, i) = (ledger.clone(), id.clone());
                let known = tokio::task::spawn_blocking(move || l.has_job(&i))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or(false);
                return Err(no_job(&id, known));
            }
        };
        Ok(Cancelled {
            job_id: id,
            outcome: word.into(),
        })
    }
}

/// A job id the queue does not have: unknown, or a job that is not a queue job (`maljan call`).
pub(super) fn no_job(id: &str, known: bool) -> ToolError {
    if known {
        ToolError::bad_argument(format!("job {} is not running", visible(id)))
            .with_remediation("get_report reads its report")
    } else {
        ToolError::bad_argument(format!("no job '{}'", visible(id)))
            .with_remediation("list_jobs lists the jobs and their ids")
    }
}

/// One job event (its kind and data, as kept) in a line for a progress notification.
fn progress_message(kind: &str, data: &serde_json::Value) -> String {
    let s = |k: &str| data[k].as_str().unwrap_or("").to_string();
    let text = match kind {
        "step_started" => format!(
            "step {}/{}: {}",
            data["index"].as_u64().unwrap_or(0),
            data["total"].as_u64().unwrap_or(0),
            s("title")
        ),
        "call_finished" => format!("{} on {}: {}", s("tool"), s("server"), s("status")),
        "stage" => format!("stage: {}", s("stage")),
        "model_answered" => format!(
            "{}: the model answered ({} tool calls)",
            s("stage"),
            data["tool_calls"].as_u64().unwrap_or(0)
        ),
        "connecting" => "connecting to the servers".to_string(),
        "connected" => format!("connected to {}", s("server")),
        "upload" => format!(
            "handing the sample to {}: {} of {} bytes",
            s("server"),
            data["sent"].as_u64().unwrap_or(0),
            data["total"].as_u64().unwrap_or(0)
        ),
        "done" => match data["verdict"]["verdict"].as_str() {
            Some(v) => format!("done: {}, verdict {v}", s("status")),
            None => format!("done: {}", s("status")),
        },
        other => other.to_string(),
    };
    visible(&text).chars().take(MESSAGE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_messages_say_what_happened_in_one_short_visible_line() {
        let step = serde_json::json!({"index": 3, "total": 9, "title": "strings"});
        assert_eq!(progress_message("step_started", &step), "step 3/9: strings");
        let done = serde_json::json!({"status": "complete", "verdict": {"verdict": "benign"}});
        assert_eq!(
            progress_message("done", &done),
            "done: complete, verdict benign"
        );
        let hostile = serde_json::json!({"tool": format!("x\u{1b}[2J{}", "y".repeat(500)), "server": "s", "status": "ok"});
        let line = progress_message("call_finished", &hostile);
        assert!(!line.contains('\u{1b}'), "{line}");
        assert_eq!(line.chars().count(), MESSAGE_CHARS);
    }
}
