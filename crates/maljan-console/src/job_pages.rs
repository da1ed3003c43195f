//! The jobs' pages: the list (searched and filtered in SQL, see `browse`), the submit form, a
//! job (its verdict, facts, child tree and steps, from the report it kept), its ledger, and the
//! global ledger of every job's calls.

use std::{collections::HashMap, sync::Arc};

use axum::{
    Extension,
    extract::{Multipart, Path, Query, State},
    http::{HeaderMap, header},
    response::{IntoResponse, Redirect, Response},
};
use maljan_client::{JobRow, ledger::Page};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::{
    api::{STATUSES, call_filter, evidence_row, load_report, page_number},
    browse::{CallQuery, JobQuery, VERDICTS},
    jobs::{self, Refused},
    pages::{error_page, page, with_status},
    security::Viewer,
    servers::FieldErrors,
    state::{AppState, Problem},
};

/// A job as the lists show it: its ledger row, the sample's name and the verdict of its report.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobListed {
    pub job_id: String,
    pub label: String,
    /// The sample's name as it was submitted (or the job's label when it had no sample).
    pub sample_name: String,
    pub sample_sha256: Option<String>,
    pub sample_size: Option<i64>,
    /// The report's verdict word (malicious, suspicious, benign, unknown); null while the job
    /// has none.
    pub verdict: Option<String>,
    /// queued, running, complete, degraded, failed or cancelled.
    pub status: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub finished_at: Option<String>,
    pub calls: i64,
    pub failed_calls: i64,
    pub degradations: Vec<String>,
}

impl JobListed {
    fn new(job: JobRow, sample_name: String, verdict: Option<String>) -> Self {
        Self {
            job_id: job.job_id,
            label: job.label,
            sample_name,
            sample_sha256: job.sample_sha256,
            sample_size: job.sample_size,
            verdict,
            status: job.status,
            created_at: job.created_at,
            finished_at: job.finished_at,
            calls: job.calls,
            failed_calls: job.failed_calls,
            degradations: job.degradations,
        }
    }
}

/// One page of the jobs list as the pages and the API show it: each job's ledger row with the
/// sample's name and its verdict, newest first, narrowed by `query` in SQL.
pub async fn job_list(
    st: &Arc<AppState>,
    query: JobQuery,
    page_no: usize,
    per_page: usize,
) -> Result<Page<JobListed>, Problem> {
    let hits = st.browser.jobs(query, page_no, per_page).await?;
    let mut items = Vec::with_capacity(hits.items.len());
    for hit in hits.items {
        let row = st
            .ledger
            .job(&hit.job_id)
            .map_err(|e| Problem::new(500, e.to_string()))?;
        // A job removed between the two reads is left out of the page.
        if let Some(job) = row {
            items.push(JobListed::new(job, hit.sample_name, hit.verdict));
        }
    }
    Ok(Page {
        items,
        total: hits.total,
        page: hits.page,
        per_page: hits.per_page,
    })
}

pub async fn jobs_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (query, page_no) = match (JobQuery::parse(&q), page_number(&q, "page", 1)) {
        (Ok(s), Ok(p)) => (s, p),
        (Err(e), _) | (_, Err(e)) => return error_page(&st, &viewer, e),
    };
    let counts = match st.ledger.job_status_counts() {
        Ok(c) => c,
        Err(e) => return error_page(&st, &viewer, Problem::new(500, e.to_string())),
    };
    let jobs = match job_list(&st, query.clone(), page_no, 50).await {
        Ok(p) => p,
        Err(p) => return error_page(&st, &viewer, p),
    };
    let count = |s: &str| counts.iter().find(|(k, _)| k == s).map_or(0, |(_, n)| *n);
    // A status tab keeps the search and the verdict filter.
    let others = JobQuery {
        status: None,
        ..query.clone()
    }
    .keep();
    let tabs: Vec<Value> = STATUSES
        .iter()
        .map(|s| json!({"status": s, "count": count(s)}))
        .collect();
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    let live: Vec<String> = st
        .live
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .cloned()
        .collect();
    let pages = jobs.pages();
    page(
        &st,
        &viewer,
        "jobs",
        "jobs.html",
        json!({
            "jobs": jobs.items, "matched": jobs.total, "tabs": tabs, "all": total, "query": query,
            "filtered": query.is_filtered(), "keep": query.keep(), "keep_others": others,
            "verdicts": VERDICTS, "status": query.status, "page": page_no, "pages": pages, "live": live,
        }),
    )
}

pub async fn new_job(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    job_form(&st, &viewer, None, &FieldErrors::new(), 200)
}

fn job_form(
    st: &AppState,
    viewer: &Viewer,
    error: Option<String>,
    errors: &FieldErrors,
    status: u16,
) -> Response {
    let config = st.config();
    let servers: Vec<Value> = config
        .servers
        .iter()
        .filter(|(_, s)| s.enabled)
        .map(|(n, s)| json!({"name": n, "label": s.label}))
        .collect();
    with_status(
        status,
        page(
            st,
            viewer,
            "new",
            "job_new.html",
            json!({
                "servers": servers, "error": error, "errors": errors, "max_bytes": st.opts.max_sample_bytes,
                "model": config.llm.as_ref().map(|l| format!("{} ({})", l.model, l.provider)),
            }),
        ),
    )
}

pub async fn post_new_job(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    form: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let Ok(form) = form else {
        return job_form(
            &st,
            &viewer,
            Some("the form was not a file upload (multipart/form-data)".into()),
            &FieldErrors::new(),
            400,
        );
    };
    let sub = match jobs::read_submission(&st, form).await {
        Ok(s) => s,
        Err(Refused::Problem(p)) => {
            return job_form(&st, &viewer, Some(p.error), &FieldErrors::new(), p.status);
        }
        Err(Refused::Fields(f)) => return job_form(&st, &viewer, None, &f, 422),
    };
    match jobs::start(&st, sub).await {
        Ok(id) => Redirect::to(&format!("/jobs/{id}")).into_response(),
        Err(p) => job_form(&st, &viewer, Some(p.error), &FieldErrors::new(), p.status),
    }
}

pub async fn job_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Response {
    let job = match st.ledger.job(&id) {
        Ok(Some(j)) => j,
        Ok(None) => return error_page(&st, &viewer, Problem::new(404, format!("no job '{id}'"))),
        Err(e) => return error_page(&st, &viewer, Problem::new(500, e.to_string())),
    };
    let live = st.live_job(&id).is_some();
    let report = if live {
        None
    } else {
        load_report(&st, &id).ok()
    };
    page(
        &st,
        &viewer,
        "jobs",
        "job.html",
        json!({"job": job, "live": live, "report": report}),
    )
}

pub async fn cancel_job(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match jobs::cancel(&st, &id).await {
        Ok(()) | Err(Problem { status: 409, .. }) => {
            // Back where the button was (a relative path on this console only).
            let back = headers
                .get(header::REFERER)
                .and_then(|v| v.to_str().ok())
                .and_then(|r| r.find("/jobs").map(|i| r[i..].to_string()))
                .unwrap_or_else(|| format!("/jobs/{id}"));
            Redirect::to(&back).into_response()
        }
        Err(p) => error_page(&st, &viewer, p),
    }
}

pub async fn ledger_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let job = match st.ledger.job(&id) {
        Ok(Some(j)) => j,
        Ok(None) => return error_page(&st, &viewer, Problem::new(404, format!("no job '{id}'"))),
        Err(e) => return error_page(&st, &viewer, Problem::new(500, e.to_string())),
    };
    let (filter, mut page_no) = match (call_filter(&q), page_number(&q, "page", 1)) {
        (Ok(f), Ok(p)) => (f, p),
        (Err(e), _) | (_, Err(e)) => return error_page(&st, &viewer, e),
    };
    const PER_PAGE: usize = 50;
    let target = q.get("ev").cloned();
    if let Some(ev) = &target {
        match st.ledger.call_position(&id, ev) {
            Ok(Some(pos)) if filter.tool.is_none() && filter.ok.is_none() => {
                page_no = pos as usize / PER_PAGE + 1
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                return error_page(
                    &st,
                    &viewer,
                    Problem::new(404, format!("job {id} has no evidence '{ev}'")),
                );
            }
            Err(e) => return error_page(&st, &viewer, Problem::new(500, e.to_string())),
        }
    }
    let rows = match st.ledger.calls_page(&id, filter.clone(), page_no, PER_PAGE) {
        Ok(p) => p,
        Err(e) => return error_page(&st, &viewer, Problem::new(500, e.to_string())),
    };
    let shown: Vec<Value> = rows
        .items
        .iter()
        .map(|e| {
            let mut row = evidence_row(e);
            // A page shows the first 4 KiB of an output; the API gives it whole.
            if let Some(text) = e.result.as_deref().filter(|t| t.len() > 4096) {
                let mut end = 4096;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                row["output"] = json!(format!("{}…", &text[..end]));
                row["output_cut"] = json!(true);
            }
            row
        })
        .collect();
    let pages = rows.pages();
    page(
        &st,
        &viewer,
        "jobs",
        "ledger.html",
        json!({
            "job": job, "rows": shown, "total": rows.total, "page": page_no, "pages": pages,
            "tools": st.ledger.job_tools(&id).unwrap_or_default(), "tool": filter.tool,
            "ok": filter.ok, "target": target,
        }),
    )
}

/// Every call of every job, newest first: time, job, server, tool, outcome and duration, paged
/// and filtered by server, tool and outcome. Each row links to the call in its job's ledger.
pub async fn global_ledger_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    const PER_PAGE: usize = 100;
    let (query, page_no) = match (CallQuery::parse(&q), page_number(&q, "page", 1)) {
        (Ok(f), Ok(p)) => (f, p),
        (Err(e), _) | (_, Err(e)) => return error_page(&st, &viewer, e),
    };
    let (rows, (servers, tools)) = match (
        st.browser.calls(query.clone(), page_no, PER_PAGE).await,
        st.browser.call_names().await,
    ) {
        (Ok(r), Ok(n)) => (r, n),
        (Err(p), _) | (_, Err(p)) => return error_page(&st, &viewer, p),
    };
    let mut keep = form_urlencoded::Serializer::new(String::new());
    if let Some(s) = &query.server {
        keep.append_pair("server", s);
    }
    if let Some(t) = &query.tool {
        keep.append_pair("tool", t);
    }
    if let Some(ok) = query.ok {
        keep.append_pair("ok", if ok { "true" } else { "false" });
    }
    let keep = keep.finish();
    let pages = rows.pages();
    page(
        &st,
        &viewer,
        "ledger",
        "calls.html",
        json!({
            "rows": rows.items, "total": rows.total, "page": page_no, "pages": pages,
            "servers": servers, "tools": tools, "query": query,
            "keep": if keep.is_empty() { keep } else { keep + "&" },
        }),
    )
}
