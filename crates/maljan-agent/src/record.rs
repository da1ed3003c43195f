//! What the agent keeps of a run besides the conversation: what it writes to the ledger (tokens
//! per request, notes on calls), the byte counts the bench reads, each stage's outcome, and the
//! job's evidence ids read back from the ledger (what a verdict may cite).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use maljan_client::{Job, ModelUsage};
use maljan_triage::report::{StageReport, Turn};

use crate::llm::{Attempt, Reply};

/// Figures of one run the bench reads (not part of the report).
#[derive(Debug, Clone, Default)]
pub struct RunFigures {
    /// Per analyst step: the agent's own time (the step minus the model's latency and the tools').
    pub step_overhead: Vec<Duration>,
    /// Bytes of the tools' raw answers, and of what the model was sent for them.
    pub raw_bytes: usize,
    pub sent_bytes: usize,
    /// Bytes of every request body sent to a model.
    pub request_bytes: usize,
}

/// Writes what the agent does to the ledger (tokens per request, notes on calls) and counts bytes.
#[derive(Default)]
pub struct Ledgered {
    pub figures: RunFigures,
}

impl Ledgered {
    pub fn usage(&mut self, job: &Arc<Job>, stage: &str, reply: &Reply) {
        self.figures.request_bytes += reply.request_bytes;
        let u = ModelUsage {
            job_id: job.id().to_string(),
            stage: stage.to_string(),
            provider: reply.provider.to_string(),
            model: reply.model.clone(),
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            duration_ms: reply.latency.as_secs_f64() * 1000.0,
        };
        if let Err(e) = job.runtime().ledger().record_model_usage(u) {
            tracing::warn!(job = %job.id(), "ledger: {e}");
        }
    }

    pub fn note(&mut self, job: &Arc<Job>, ev_id: &str, note: &str) {
        if let Err(e) = job.runtime().ledger().add_call_note(job.id(), ev_id, note) {
            tracing::warn!(job = %job.id(), "ledger: {e}");
        }
    }

    pub fn bytes(&mut self, raw: usize, sent: usize) {
        self.figures.raw_bytes += raw;
        self.figures.sent_bytes += sent;
    }
}

/// One stage as it ran.
#[derive(Debug, Clone)]
pub struct StageOutcome {
    pub name: String,
    pub status: String,
    pub ended_because: Option<String>,
    pub requests: usize,
    pub tool_calls: usize,
    pub duration: Duration,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub conversation: Vec<Turn>,
    /// `provider/model` → (requests, input, output).
    pub usage: BTreeMap<String, (usize, u64, u64)>,
    /// Degradation reasons: fallbacks used, providers that failed.
    pub fallbacks: Vec<String>,
    pub step_overhead: Vec<Duration>,
}

impl StageOutcome {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            status: "complete".into(),
            ended_because: None,
            requests: 0,
            tool_calls: 0,
            duration: Duration::ZERO,
            input_tokens: 0,
            output_tokens: 0,
            conversation: vec![],
            usage: BTreeMap::new(),
            fallbacks: vec![],
            step_overhead: vec![],
        }
    }

    pub fn count(&mut self, reply: &Reply) {
        self.requests += 1;
        self.input_tokens += reply.usage.input_tokens;
        self.output_tokens += reply.usage.output_tokens;
        let e = self
            .usage
            .entry(format!("{}/{}", reply.provider, reply.model))
            .or_default();
        e.0 += 1;
        e.1 += reply.usage.input_tokens;
        e.2 += reply.usage.output_tokens;
    }

    pub fn note_fallbacks(&mut self, failed: &[Attempt], answered: Option<&Reply>) {
        if failed.is_empty() {
            return;
        }
        let what = failed
            .iter()
            .map(Attempt::describe)
            .collect::<Vec<_>>()
            .join("; ");
        self.fallbacks.push(match answered {
            Some(r) => format!(
                "model provider failed ({what}); the {} stage fell back to {}/{}",
                self.name, r.provider, r.model
            ),
            None => format!("no model answered in the {} stage ({what})", self.name),
        });
    }

    pub(crate) fn report(&self) -> StageReport {
        StageReport {
            name: self.name.clone(),
            status: self.status.clone(),
            ended_because: self.ended_because.clone(),
            requests: self.requests,
            tool_calls: self.tool_calls,
            duration_ms: self.duration.as_secs_f64() * 1000.0,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        }
    }
}

/// The evidence ids in this job's ledger.
pub fn ledger_ids(job: &Arc<Job>) -> BTreeSet<String> {
    job.runtime()
        .ledger()
        .calls(Some(job.id()), usize::MAX / 2)
        .map(|calls| calls.into_iter().map(|c| c.ev_id).collect())
        .unwrap_or_default()
}

pub(crate) fn ledger_listing(job: &Arc<Job>) -> String {
    job.runtime()
        .ledger()
        .calls(Some(job.id()), usize::MAX / 2)
        .map(|calls| {
            calls
                .iter()
                .filter(|c| !maljan_client::manifest::is_staging_tool(&c.tool))
                .map(|c| {
                    format!(
                        "- {}: {} on {} ({})",
                        c.ev_id,
                        c.tool,
                        c.server,
                        if c.ok { "answered" } else { "failed" }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}
