//! What the jobs server reads back from the ledger: a finished job's verdict with the evidence
//! it cites (analyze_sample's answer), a report rendered and cut into pages (get_report), and a
//! page of the jobs (list_jobs).

use std::{collections::BTreeSet, sync::Arc};

use maljan_client::{Ledger, Runtime};
use maljan_server::ToolError;
use maljan_triage::{Format, Report, render};

use super::{
    JobsService,
    run::no_job,
    tools::{
        AnalyzeOutcome, ClaimSummary, EvidenceRef, FactSummary, FailureSummary, GetReportArgs,
        JobList, JobSummary, ListJobsArgs, ReportFormat, ReportPage, SampleSummary, VerdictSummary,
    },
};

/// get_report's page when the caller names none, and the most it may ask for, in characters.
const PAGE_CHARS: u64 = 20_000;
const MAX_PAGE_CHARS: u64 = 200_000;
/// list_jobs' page, and its most.
const JOBS_PER_PAGE: u32 = 20;
const MAX_JOBS_PER_PAGE: u32 = 100;
/// The most of a job's calls read to find the ones its verdict cites.
const MAX_CALLS_READ: usize = 20_000;
/// A job id longer than this is no job id (they are `job-<time>-<random>`).
const MAX_ID_CHARS: usize = 200;

fn database(e: impl std::fmt::Display) -> ToolError {
    ToolError::tool_failed(format!("the database: {e}"))
        .with_remediation("check that maljan's database is reachable (`maljan db status`)")
}

async fn read<T: Send + 'static>(
    ledger: &Ledger,
    f: impl FnOnce(&Ledger) -> Result<T, maljan_client::ledger::LedgerError> + Send + 'static,
) -> Result<T, ToolError> {
    let ledger = ledger.clone();
    tokio::task::spawn_blocking(move || f(&ledger))
        .await
        .map_err(database)?
        .map_err(database)
}

fn check_id(id: &str) -> Result<(), ToolError> {
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err(ToolError::bad_argument("job_id: expected a job's id")
            .with_remediation("list_jobs lists the jobs and their ids"));
    }
    Ok(())
}

/// analyze_sample's answer for a job that has ended with `report`.
pub(super) async fn outcome_of(runtime: &Arc<Runtime>, report: &Report) -> AnalyzeOutcome {
    let verdict = report.verdict.as_ref().map(|v| VerdictSummary {
        verdict: v.verdict.as_str().to_string(),
        confidence: v.confidence,
        source: v.source.as_str().to_string(),
        model: v.model.clone(),
        family: v.family.clone(),
        summary: v.summary.clone(),
        claims: (v.claims.iter())
            .map(|c| ClaimSummary {
                text: c.text.clone(),
                evidence: c.evidence.clone(),
            })
            .collect(),
        facts: (v.facts.iter())
            .map(|f| FactSummary {
                id: f.id.clone(),
                name: f.name.clone(),
                leaning: serde_json::to_value(f.leaning)
                    .ok()
                    .and_then(|l| l.as_str().map(str::to_string))
                    .unwrap_or_default(),
                strong: f.strong,
                observations: f.observations.clone(),
                evidence: f.evidence.clone(),
            })
            .collect(),
        disagreement: v.disagreement.as_ref().map(|d| d.reason.clone()),
    });
    let cited: BTreeSet<String> = report
        .verdict
        .iter()
        .flat_map(|v| {
            (v.claims.iter().flat_map(|c| c.evidence.iter()))
                .chain(v.facts.iter().flat_map(|f| f.evidence.iter()))
                .chain(v.techniques.iter().flat_map(|t| t.evidence.iter()))
        })
        .cloned()
        .collect();
    let id = report.job_id.clone();
    // Without the evidence list the verdict still stands: its ids are in the report.
    let calls = read(runtime.ledger(), move |l| {
        l.calls(Some(&id), MAX_CALLS_READ)
    })
    .await
    .unwrap_or_default();
    let evidence = calls
        .into_iter()
        .filter(|c| cited.contains(&c.ev_id))
        .map(|c| EvidenceRef {
            ev_id: c.ev_id,
            server: c.server,
            tool: c.tool,
            ok: c.ok,
            error_code: c.error_code,
        })
        .collect();
    AnalyzeOutcome {
        job_id: report.job_id.clone(),
        status: report.status.as_str().to_string(),
        sample: SampleSummary {
            name: report.sample.name.clone(),
            sha256: report.sample.sha256.clone(),
            size: report.sample.size,
            kind: report.sample.kind.clone(),
        },
        verdict,
        evidence,
        failures: (report.failures.iter())
            .map(|f| FailureSummary {
                code: f.code.clone(),
                tool: f.tool.clone(),
                server: f.server.clone(),
                remediation: f.remediation.clone(),
                count: f.count as u64,
            })
            .collect(),
        degradations: report.degradations.clone(),
        next: format!(
            "get_report {{\"job_id\": \"{}\"}} gives the whole report (every step's result, the child samples), as md or json",
            report.job_id
        ),
    }
}

/// Where a page starts: a cursor (`<format>:<offset>`, from the page before) or an offset.
fn page_start(args: &GetReportArgs) -> Result<u64, ToolError> {
    let Some(cursor) = &args.cursor else {
        return Ok(args.offset.unwrap_or(0));
    };
    if args.offset.is_some() {
        return Err(ToolError::bad_argument("give offset or cursor, not both"));
    }
    let bad = || {
        ToolError::bad_argument("cursor: not one get_report gave").with_remediation(
            "pass the next_cursor of the page before, unchanged, with the same format",
        )
    };
    let (format, offset) = cursor.split_once(':').ok_or_else(bad)?;
    if format != args.format.as_str() {
        return Err(bad());
    }
    offset.parse().map_err(|_| bad())
}

/// The characters [start, start + limit) of `text`, and where the next page starts.
fn cut(text: &str, start: u64, limit: u64) -> (String, u64, Option<u64>) {
    let total = text.chars().count() as u64;
    let start = start.min(total);
    let page: String = text
        .chars()
        .skip(start as usize)
        .take(limit as usize)
        .collect();
    let end = start + page.chars().count() as u64;
    (page, total, (end < total).then_some(end))
}

impl JobsService {
    pub(super) async fn get_report(&self, args: GetReportArgs) -> Result<ReportPage, ToolError> {
        check_id(&args.job_id)?;
        let start = page_start(&args)?;
        let limit = match args.limit {
            None => PAGE_CHARS,
            Some(0) => return Err(ToolError::bad_argument("limit: at least 1 character")),
            Some(n) => n.min(MAX_PAGE_CHARS),
        };
        let id = args.job_id.clone();
        let (job, kept) = read(self.runtime.ledger(), move |l| {
            Ok((l.job(&id)?, l.report(&id)?))
        })
        .await?;
        let Some(job) = job else {
            return Err(no_job(&args.job_id, false));
        };
        let format = args.format;
        let Some(kept) = kept else {
            return Ok(ReportPage {
                job_id: args.job_id,
                format: format.as_str().into(),
                status: job.status,
                ready: false,
                text: String::new(),
                offset: 0,
                total_chars: 0,
                next_offset: None,
                next_cursor: None,
            });
        };
        let unreadable = |e: serde_json::Error| {
            ToolError::tool_failed(format!("the kept report cannot be read: {e}"))
        };
        // The status the report gives: the job's row is marked finished a moment after the
        // report is kept.
        let (text, status) = match format {
            ReportFormat::Json => {
                let report: serde_json::Value = serde_json::from_str(&kept).map_err(unreadable)?;
                let status = report["status"].as_str().unwrap_or(&job.status).to_string();
                (kept, status)
            }
            ReportFormat::Md => {
                let report: Report = serde_json::from_str(&kept)
                    .map_err(|e| unreadable(e).with_remediation("read it as json"))?;
                let status = report.status.as_str().to_string();
                (render::render(&report, Format::Markdown), status)
            }
        };
        let (page, total, next) = cut(&text, start, limit);
        Ok(ReportPage {
            job_id: args.job_id,
            format: format.as_str().into(),
            status,
            ready: true,
            text: page,
            offset: start.min(total),
            total_chars: total,
            next_offset: next,
            next_cursor: next.map(|n| format!("{}:{n}", format.as_str())),
        })
    }

    pub(super) async fn list_jobs(&self, args: ListJobsArgs) -> Result<JobList, ToolError> {
        let per_page = args
            .limit
            .unwrap_or(JOBS_PER_PAGE)
            .clamp(1, MAX_JOBS_PER_PAGE);
        let page = match (&args.cursor, args.page) {
            (Some(_), Some(_)) => {
                return Err(ToolError::bad_argument("give page or cursor, not both"));
            }
            (Some(c), None) => c
                .strip_prefix("page:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    ToolError::bad_argument("cursor: not one list_jobs gave")
                        .with_remediation("pass the next_cursor of the page before, unchanged")
                })?,
            (None, page) => page.unwrap_or(1).max(1),
        };
        let status = args.status.map(|s| s.as_str());
        let found = read(self.runtime.ledger(), move |l| {
            l.jobs_page(status, page as usize, per_page as usize)
        })
        .await?;
        let pages = found.pages() as u32;
        Ok(JobList {
            total: found.total.max(0) as u64,
            page,
            pages,
            next_cursor: (page < pages).then(|| format!("page:{}", page + 1)),
            jobs: found
                .items
                .into_iter()
                .map(|j| JobSummary {
                    job_id: j.job_id,
                    label: j.label,
                    sample_sha256: j.sample_sha256,
                    sample_size: j.sample_size.map(|s| s.max(0) as u64),
                    status: j.status,
                    created_at: j.created_at,
                    finished_at: j.finished_at,
                    calls: j.calls.max(0) as u64,
                    failed_calls: j.failed_calls.max(0) as u64,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(format: ReportFormat, offset: Option<u64>, cursor: Option<&str>) -> GetReportArgs {
        GetReportArgs {
            job_id: "j".into(),
            format,
            offset,
            limit: None,
            cursor: cursor.map(str::to_string),
        }
    }

    #[test]
    fn pages_cut_on_characters_and_join_back_to_the_whole() {
        let text = "aé€😀\nline two\n".repeat(7);
        let mut joined = String::new();
        let mut start = 0;
        loop {
            let (page, total, next) = cut(&text, start, 5);
            assert_eq!(total, text.chars().count() as u64);
            joined.push_str(&page);
            match next {
                Some(n) => start = n,
                None => break,
            }
        }
        assert_eq!(joined, text);
        let (page, _, next) = cut(&text, 10_000, 5);
        assert_eq!(
            (page.as_str(), next),
            ("", None),
            "past the end: empty, last"
        );
    }

    #[test]
    fn a_cursor_is_read_back_only_for_its_own_format() {
        assert_eq!(
            page_start(&args(ReportFormat::Md, None, Some("md:40"))).unwrap(),
            40
        );
        assert_eq!(
            page_start(&args(ReportFormat::Json, Some(7), None)).unwrap(),
            7
        );
        for (format, offset, cursor) in [
            (ReportFormat::Json, None, Some("md:40")),
            (ReportFormat::Md, None, Some("md:-1")),
            (ReportFormat::Md, None, Some("nonsense")),
            (ReportFormat::Md, Some(1), Some("md:40")),
        ] {
            let e = page_start(&args(format, offset, cursor)).unwrap_err();
            assert_eq!(e.code.as_str(), "bad_argument", "{cursor:?}");
        }
    }
}
