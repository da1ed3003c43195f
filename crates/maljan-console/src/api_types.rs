//! The JSON bodies of the API under `/api/v1`: what each handler sends and reads, as types, so
//! the OpenAPI description (`openapi`) is generated from the same types the handlers serialize.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::{
    api::page_number, browse::CallRow, job_pages::JobListed, servers::ServerView, state::Problem,
};

/// Every error but a field's: `{"error": "…"}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

/// A value a field cannot take (422): `{"errors": {field: "…"}}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FieldErrorsBody {
    pub errors: BTreeMap<String, String>,
}

/// Which page of a list, and how long a page is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Paging {
    /// 1-based; default 1.
    #[param(minimum = 1)]
    pub page: usize,
    /// Rows on a page; default 50, at most 500.
    #[param(minimum = 1, maximum = 500)]
    pub per_page: usize,
}

impl Paging {
    pub fn parse(q: &HashMap<String, String>) -> Result<Self, Problem> {
        Ok(Self {
            page: page_number(q, "page", 1)?,
            per_page: page_number(q, "per_page", 50)?,
        })
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ServerList {
    pub servers: Vec<ServerView>,
}

/// The multipart form of a submission.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Read field by field from the multipart stream; this type describes it.
pub struct SubmitForm {
    /// The sample's bytes; its file name is kept as the sample's name.
    #[schema(value_type = String, format = Binary)]
    sample: Vec<u8>,
    /// Comma-separated server names; absent: every enabled server.
    servers: Option<String>,
    /// on (the default) or off: run the model's stages when a model is configured.
    agent: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobLinks {
    pub job: String,
    pub events: String,
    pub page: String,
}

/// A submission accepted: the job is queued.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Submitted {
    pub job_id: String,
    pub status: String,
    pub links: JobLinks,
}

/// One page of jobs, with how many jobs have each status.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobListed>,
    /// Jobs matching the filters.
    pub total: i64,
    pub page: usize,
    pub per_page: usize,
    pub pages: usize,
    /// Every job's status, counted (filters aside).
    pub counts: BTreeMap<String, i64>,
}

/// A report's verdict, in short.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VerdictSummary {
    /// malicious, suspicious, benign or unknown.
    pub verdict: String,
    pub confidence: f64,
    /// heuristic or agent.
    pub source: String,
    pub summary: String,
}

/// One job: its ledger row, whether it runs in this console, and its report's verdict.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobDetail {
    pub job_id: String,
    pub label: String,
    pub sample_path: Option<String>,
    pub sample_sha256: Option<String>,
    pub sample_size: Option<i64>,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: String,
    pub calls: i64,
    pub failed_calls: i64,
    pub degradations: Vec<String>,
    /// Whether this console's workers run it now.
    pub live: bool,
    pub verdict: Option<VerdictSummary>,
    /// The kept report's status; null until the job ends.
    pub report_status: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Cancelling {
    pub job_id: String,
    pub cancelling: bool,
}

/// A job's ledger, filtered.
#[derive(Debug, Clone, Serialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EvidenceQuery {
    /// Only this tool's calls.
    pub tool: Option<String>,
    /// true: the calls that succeeded; false: the failed ones.
    pub ok: Option<bool>,
}

/// One call of a job, with its arguments and output as JSON (text when they are not JSON).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EvidenceRow {
    pub ev_id: String,
    pub server: String,
    pub tool: String,
    pub args: Value,
    pub ok: bool,
    pub code: Option<String>,
    pub message: Option<String>,
    pub remedy: Option<String>,
    pub started_at: String,
    pub wait_ms: f64,
    pub duration_ms: f64,
    pub output: Option<Value>,
    /// The ledger kept only the first part of the output.
    pub output_truncated: bool,
}

impl From<&maljan_client::LedgerEntry> for EvidenceRow {
    fn from(e: &maljan_client::LedgerEntry) -> Self {
        let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or_else(|_| t.into());
        Self {
            ev_id: e.ev_id.clone(),
            server: e.server.clone(),
            tool: e.tool.clone(),
            args: parse(&e.args),
            ok: e.ok,
            code: e.error_code.clone(),
            message: e.message.clone(),
            remedy: e.remediation.clone(),
            started_at: e.started_at.clone(),
            wait_ms: e.wait_ms,
            duration_ms: e.duration_ms,
            output: e.result.as_deref().map(parse),
            output_truncated: e.result_truncated,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EvidencePage {
    pub evidence: Vec<EvidenceRow>,
    pub total: i64,
    pub page: usize,
    pub per_page: usize,
    pub pages: usize,
}

/// Every job's calls, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallPage {
    pub calls: Vec<CallRow>,
    pub total: i64,
    pub page: usize,
    pub per_page: usize,
    pub pages: usize,
}

/// Which rendering of a report.
#[derive(Debug, Clone, Serialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// json (the default), html, md, stix or csv (the IOCs).
    pub format: Option<String>,
}

/// Where a job's event stream resumes.
#[derive(Debug, Clone, Serialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Send only the events after this number (as the `Last-Event-ID` header does).
    #[param(minimum = 0)]
    pub after: Option<i64>,
}
