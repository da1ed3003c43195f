//! The report model: what a triage run found, in the shape the JSON report has on disk
//! (schema [`SCHEMA`], documented in docs/report-schema.md). The Markdown and HTML renderers read
//! this model and nothing else, so all three say the same thing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::tree::{ChildReport, Recursion, RecursionFinding, RecursionLimits, SkippedMember};
pub use crate::verdict::{
    AgentReport, Claim, Disagreement, Fact, Leaning, StageReport, Technique, TokenUsage, Turn,
    TurnCall, Verdict, VerdictSource, VerdictWord, WithheldTool,
};

/// The JSON report's schema identifier. Bump the suffix on a breaking change; adding fields is not one.
pub const SCHEMA: &str = "maljan.triage.report/v1";

/// How a run ended, and the `maljan analyze` exit status that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every planned step ran or was rightly skipped, and nothing degraded the run.
    Complete,
    /// The report is whole but something failed or degraded (a timeout, a server unavailable, …).
    Degraded,
    /// No step produced an answer: there is nothing to read about the sample.
    Failed,
    /// The operator cancelled the run (Ctrl-C): the report holds what was done until then.
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Degraded => "degraded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The process exit status: 0 complete, 3 degraded, 4 failed, 130 cancelled (as a shell
    /// reports a command ended by SIGINT).
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Complete => 0,
            Self::Degraded => 3,
            Self::Failed => 4,
            Self::Cancelled => 130,
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    /// The verdict: the judge's when a model gave a checked one, else the heuristic's. Null only
    /// in a report made by the triage library alone (maljan-agent always sets it).
    pub verdict: Option<Verdict>,
    pub job_id: String,
    /// RFC 3339, UTC, when the run finished.
    pub generated_at: String,
    pub maljan_version: String,
    pub status: Status,
    pub duration_ms: f64,
    pub sample: SampleInfo,
    /// Every server the run selected, in the order they were selected.
    pub servers: Vec<ServerInfo>,
    /// Every degradation reason of the job, each once.
    pub degradations: Vec<String>,
    /// Each distinct failure once (code, server, tool, remediation), with how often it happened.
    pub failures: Vec<Failure>,
    /// Tools the plan wanted that a server's manifest says cannot run on its host (not called).
    pub unavailable: Vec<Unavailable>,
    pub steps: Vec<StepReport>,
    /// The agent stages (analyst, judge) when a model was configured; null for triage alone.
    #[serde(default)]
    pub agent: Option<AgentReport>,
    /// The child samples (archive members, attachments, embedded objects, carved payloads), each
    /// with its own steps and verdict, as a tree.
    #[serde(default)]
    pub children: Vec<ChildReport>,
    /// The bounds the recursion ran under and what they stopped; null when it did not run.
    #[serde(default)]
    pub recursion: Option<Recursion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleInfo {
    pub name: String,
    /// The local path the sample was read from.
    pub path: String,
    pub size: u64,
    /// Computed locally by the runtime (the hashes step may add more below).
    pub sha256: String,
    /// Hash name → value, from the hashes step (md5, sha1, sha256, sha512, ssdeep, tlsh, …).
    pub hashes: BTreeMap<String, String>,
    /// Short stable type name from identify_file (pe, elf, pdf, …), if it answered.
    pub kind: Option<String>,
    pub description: Option<String>,
    pub mime: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    /// The configured transport: stdio, http, streamable-http, sse.
    pub transport: String,
    /// What was actually spoken (after any fallback), when connected.
    pub via: Option<String>,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub protocol_version: Option<String>,
    /// Whether the server declared a capability manifest.
    pub manifest_declared: bool,
    /// Tools offered (staging primitives excluded) and how many are unavailable on its host.
    pub tools: usize,
    pub tools_unavailable: usize,
    /// How the sample reached it: local, uploaded, uploaded (cached), mirrored.
    pub handover: Option<String>,
    /// How many steps ran on it.
    pub steps: usize,
    /// Why it could not be used, when it could not.
    pub error: Option<ErrorInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub code: String,
    pub message: String,
    pub remediation: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub code: String,
    pub server: Option<String>,
    pub tool: String,
    pub remediation: String,
    /// The first occurrence's message.
    pub message: String,
    pub count: usize,
    /// Evidence ids of the calls that failed this way (empty when no call could be made).
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unavailable {
    pub server: String,
    pub tool: String,
    pub reason: String,
    pub remediation: Option<String>,
    /// What the server still answers without the missing part.
    pub without: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// The tool answered.
    Ok,
    /// The call (or reaching the server) failed; see `error`.
    Failed,
    /// Not called: the tool is unavailable on its server, or no selected server offers it.
    Skipped,
    /// Not called: it does not apply to this sample (no format tool for its type).
    NotApplicable,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
            Self::NotApplicable => "not applicable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// 1-based position in the plan.
    pub index: usize,
    pub title: String,
    /// The tool that ran (for `@format`, the tool it resolved to, when it did).
    pub tool: String,
    pub server: Option<String>,
    pub status: StepStatus,
    /// Ledger evidence ids of this step's calls (`ev_0001`, …).
    pub evidence: Vec<String>,
    pub duration_ms: f64,
    pub error: Option<ErrorInfo>,
    /// Why the step was not called (skipped / not applicable).
    pub reason: Option<String>,
    pub remediation: Option<String>,
    /// The tool's answer: structured content, or the text when it is not JSON.
    pub result: Option<Value>,
}

impl Report {
    /// Evidence ids of the whole run (the sample's steps, the extractions, each child's steps),
    /// in call order.
    pub fn evidence(&self) -> Vec<&str> {
        let children = crate::tree::walk(&self.children);
        let mut ids: Vec<&str> = self
            .steps
            .iter()
            .chain(children.iter().flat_map(|c| c.steps.iter()))
            .flat_map(|s| s.evidence.iter().map(String::as_str))
            .chain(
                self.recursion
                    .iter()
                    .flat_map(|r| r.evidence.iter().map(String::as_str)),
            )
            .collect();
        ids.sort_by_key(|e| {
            e.rsplit('_')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(u64::MAX)
        });
        ids
    }

    pub fn step(&self, tool: &str) -> Option<&StepReport> {
        self.steps.iter().find(|s| s.tool == tool)
    }
}

// What a run tells its job's event stream ([`maljan_client::job::events`]).
impl ServerInfo {
    /// The `connected` event: this server reached, or why not.
    pub fn event(&self) -> maljan_client::Event {
        maljan_client::Event::Connected(maljan_client::job::events::ServerReached {
            server: self.name.clone(),
            transport: self.transport.clone(),
            via: self.via.clone(),
            tools: self.tools,
            tools_unavailable: self.tools_unavailable,
            handover: self.handover.clone(),
            error: self.error.as_ref().map(ErrorInfo::event_error),
        })
    }
}

impl StepReport {
    /// The `call_finished` event of this step, the `total`'th of the plan.
    pub fn event(&self, total: usize) -> maljan_client::Event {
        maljan_client::Event::CallFinished(maljan_client::job::events::CallFinished {
            index: Some(self.index),
            total: Some(total),
            stage: None,
            title: self.title.clone(),
            tool: self.tool.clone(),
            server: self.server.clone(),
            status: self.status.as_str().to_string(),
            evidence: self.evidence.clone(),
            duration_ms: self.duration_ms,
            error: self.error.as_ref().map(ErrorInfo::event_error),
            reason: self.reason.clone(),
        })
    }
}

impl ErrorInfo {
    fn event_error(&self) -> maljan_client::job::events::EventError {
        maljan_client::job::events::EventError {
            code: self.code.clone(),
            message: self.message.clone(),
        }
    }
}

impl Report {
    /// The last event of the job this report ends: its status and verdict.
    pub fn done_event(&self) -> maljan_client::Event {
        maljan_client::Event::Done {
            status: self.status.as_str().to_string(),
            verdict: self
                .verdict
                .as_ref()
                .map(|v| maljan_client::job::events::DoneVerdict {
                    verdict: v.verdict.as_str().to_string(),
                    confidence: v.confidence,
                    source: v.source.as_str().to_string(),
                }),
            error: None,
        }
    }
}
