//! The jobs server's four tools: their arguments and answers (the schemas hosts and models
//! see), their descriptions, and which handler each reaches.

use std::sync::Arc;

use maljan_server::{Registry, TaskSupport, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JobsService;

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AnalyzeSampleArgs {
    /// The sample: a file under this server's roots (--root; symlinks are resolved before the
    /// check), or the path put_sample returned. It is copied before the analysis; never written.
    pub path: String,
    /// The analysis servers to use, by their names in maljan's config, in order of preference.
    /// Empty or absent: every enabled server.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Let the model stages (analyst, judge) run when a model is configured. false: triage and
    /// the heuristic verdict only.
    #[serde(default = "yes")]
    pub agent: bool,
    /// How deep members of members are analysed (archives, attachments, embedded objects); 0
    /// analyses the sample alone. Absent: the server's --max-depth, which is also the most.
    #[serde(default)]
    pub depth: Option<u32>,
    /// Wait for the verdict (progress notifications meanwhile, when the request has a
    /// progressToken). false: answer at once with the job id; read the verdict with get_report.
    #[serde(default = "yes")]
    pub wait: bool,
}

/// What get_report renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub(super) enum ReportFormat {
    /// Markdown, for people and models.
    #[default]
    Md,
    /// The report's JSON (schema maljan.triage.report/v1), every step's result included.
    Json,
}

impl ReportFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Md => "md",
            Self::Json => "json",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetReportArgs {
    /// The job's id (analyze_sample's job_id, or one list_jobs gives).
    pub job_id: String,
    /// md (the default) or json.
    #[serde(default)]
    pub format: ReportFormat,
    /// The first character of the page (0: the start).
    #[serde(default)]
    pub offset: Option<u64>,
    /// The most characters in the page (default 20000, at most 200000).
    #[serde(default)]
    pub limit: Option<u64>,
    /// The next_cursor of the page before, instead of an offset.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// The job statuses list_jobs can filter by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum JobStatusFilter {
    Queued,
    Running,
    Complete,
    Degraded,
    Failed,
    Cancelled,
}

impl JobStatusFilter {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Complete => "complete",
            Self::Degraded => "degraded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListJobsArgs {
    /// Only jobs with this status.
    #[serde(default)]
    pub status: Option<JobStatusFilter>,
    /// Jobs per page, newest first (default 20, at most 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The page, from 1.
    #[serde(default)]
    pub page: Option<u32>,
    /// The next_cursor of the page before, instead of a page number.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CancelJobArgs {
    /// The job's id.
    pub job_id: String,
}

/// analyze_sample's answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct AnalyzeOutcome {
    pub job_id: String,
    /// running (wait was false), complete, degraded (some step failed: see failures),
    /// failed or cancelled.
    pub status: String,
    pub sample: SampleSummary,
    /// The verdict and what it rests on; null while the job runs, and for a job without one.
    pub verdict: Option<VerdictSummary>,
    /// The ledger's record of each evidence id the verdict cites.
    pub evidence: Vec<EvidenceRef>,
    /// Each distinct failed call once: code, tool, remedy.
    pub failures: Vec<FailureSummary>,
    /// Why the job is degraded (a server unavailable or rested, a sample not handed over).
    pub degradations: Vec<String>,
    /// Where to read the rest.
    pub next: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct SampleSummary {
    pub name: String,
    pub sha256: String,
    pub size: u64,
    /// The file type identify_file gave, when it ran.
    pub kind: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct VerdictSummary {
    /// STIX 2.1's malware-analysis result: malicious, suspicious, benign or unknown.
    pub verdict: String,
    /// From 0 to 1.
    pub confidence: f64,
    /// agent (the judge model, checked against the ledger) or heuristic (the facts' score).
    pub source: String,
    /// The model that answered, for an agent verdict.
    pub model: Option<String>,
    pub family: Option<String>,
    pub summary: String,
    pub claims: Vec<ClaimSummary>,
    pub facts: Vec<FactSummary>,
    /// Set when the model's verdict contradicts the facts: why, in a sentence.
    pub disagreement: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct ClaimSummary {
    pub text: String,
    /// Evidence ids in this job's ledger.
    pub evidence: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct FactSummary {
    /// The fact's id in maljan's facts table (packed, process_injection, …).
    pub id: String,
    pub name: String,
    /// malicious, benign or neutral.
    pub leaning: String,
    pub strong: bool,
    pub observations: Vec<String>,
    pub evidence: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct EvidenceRef {
    pub ev_id: String,
    pub server: String,
    pub tool: String,
    pub ok: bool,
    /// The call's error code when it failed.
    pub error_code: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct FailureSummary {
    pub code: String,
    pub tool: String,
    pub server: Option<String>,
    pub remediation: String,
    pub count: u64,
}

/// get_report's answer: one page of the rendered report.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct ReportPage {
    pub job_id: String,
    /// md or json.
    pub format: String,
    /// The job's status (the report's, once it is kept).
    pub status: String,
    /// False while the job runs (no report yet): text is then empty.
    pub ready: bool,
    pub text: String,
    /// Where this page starts, in characters.
    pub offset: u64,
    /// The report's whole length, in characters.
    pub total_chars: u64,
    /// Where the next page starts; null on the last page.
    pub next_offset: Option<u64>,
    /// Pass as cursor for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// list_jobs' answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct JobList {
    pub jobs: Vec<JobSummary>,
    /// Jobs matching the filter, in all.
    pub total: u64,
    pub page: u32,
    pub pages: u32,
    /// Pass as cursor for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct JobSummary {
    pub job_id: String,
    /// Who started it and on what ("sample /path", "console: name").
    pub label: String,
    pub sample_sha256: Option<String>,
    pub sample_size: Option<u64>,
    /// queued, running, complete, degraded, failed or cancelled.
    pub status: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub calls: u64,
    pub failed_calls: u64,
}

/// cancel_job's answer.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Cancelled {
    pub job_id: String,
    /// cancelling (it runs here and stops now), signalled (its worker elsewhere stops at its
    /// next lease renewal) or dequeued (it had not started and never will).
    pub outcome: String,
}

pub(super) fn registry(service: Arc<JobsService>) -> Registry {
    let mut registry = Registry::new();
    let servers = if service.configured.is_empty() {
        "none".to_string()
    } else {
        service.configured.join(", ")
    };
    let s = service.clone();
    registry.add(
        ToolMeta::new(
            "analyze_sample",
            format!(
                "Analyse one sample file with maljan's whole job — triage (identify_file, hashes, \
                 the format's own tool, strings, IOCs, packers, capabilities, YARA), then what it \
                 carries (archive members, attachments, embedded objects) to `depth` levels, \
                 then, with a model configured and agent true, the analyst and judge — and \
                 answer the verdict (malicious, suspicious, benign or unknown) with the facts \
                 and ledger evidence it rests on, and the job id. `path` must lie under this \
                 server's roots, or be what put_sample returned. Configured servers: {servers}. \
                 A job takes seconds to minutes; wait false answers at once and get_report reads \
                 the verdict later. Cancelling the call cancels the job (its report is kept). A host that declares the \
                 tasks extension (io.modelcontextprotocol/tasks) may run it as a task."
            ),
        )
        .title("Analyse a sample")
        .writes()
        .not_idempotent()
        // A job outlasts what many hosts wait for one call: a host that declares the tasks
        // extension gets a task to poll; any other host, an ordinary call with progress.
        .task_support(TaskSupport::Optional),
        move |ctx, args: AnalyzeSampleArgs| {
            let s = s.clone();
            async move { s.analyze_sample(ctx, args).await }
        },
    );
    let s = service.clone();
    registry.add(
        ToolMeta::new(
            "get_report",
            "One page of a job's report, as Markdown (md) or the report's JSON (json): the \
             sample, the verdict with its facts and claims, every step with its evidence id and \
             result, failures with their remedies, and the child samples. Page with offset and \
             limit (characters) or the next_cursor of the page before.",
        )
        .title("Read a job's report"),
        move |_ctx, args: GetReportArgs| {
            let s = s.clone();
            async move { s.get_report(args).await }
        },
    );
    let s = service.clone();
    registry.add(
        ToolMeta::new(
            "list_jobs",
            "The jobs in maljan's database, newest first, whoever started them (this server, \
             `maljan analyze`, the console, workers): id, label, sample SHA-256, status and \
             call counts, optionally only those of one status. Page with page and limit or the \
             next_cursor of the page before.",
        )
        .title("List jobs"),
        move |_ctx, args: ListJobsArgs| {
            let s = s.clone();
            async move { s.list_jobs(args).await }
        },
    );
    let s = service;
    registry.add(
        ToolMeta::new(
            "cancel_job",
            "Cancel a queued or running job: one this server runs stops now; one a worker \
             elsewhere runs stops at its next lease renewal; a queued one never starts. Its \
             report is kept, marked cancelled.",
        )
        .title("Cancel a job")
        .destructive(),
        move |_ctx, args: CancelJobArgs| {
            let s = s.clone();
            async move { s.cancel_job(args).await }
        },
    );
    registry
}
