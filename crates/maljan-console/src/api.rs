//! The JSON API under `/api/v1`: what the pages use and scripts can too, with the same auth
//! (see `security`). Every error is JSON: `{"error": "…"}`, or `{"errors": {field: "…"}}` with
//! 422 for a value a field cannot take. Each handler carries its OpenAPI description
//! (`utoipa::path`, over the body types in `api_types`), gathered in `openapi`; the router is
//! built from one table ([`endpoints`]) that the OpenAPI test walks.

use std::{collections::HashMap, sync::Arc};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Multipart, Path, Query, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{MethodRouter, delete, get, patch, post},
};
use maljan_client::CallFilter;
use maljan_triage::{Report, render};
use serde::Serialize;
use serde_json::Value;

use crate::{
    api_types::{
        CallPage, Cancelling, ErrorBody, EventsQuery, EvidencePage, EvidenceQuery, EvidenceRow,
        FieldErrorsBody, JobDetail, JobLinks, JobList, Paging, ReportQuery, ServerList, SubmitForm,
        Submitted, VerdictSummary,
    },
    browse::{CallQuery, JobQuery},
    jobs::{self, Refused},
    servers::{self, FieldErrors, ServerInput, ServerView, TestOutcome},
    state::{AppState, Problem},
};

/// Every endpoint under `/api/v1`: its method, its path (axum's and OpenAPI's `{name}` alike)
/// and its handler. The router is built from it, and the OpenAPI test checks each one is served
/// and described.
pub fn endpoints() -> Vec<(Method, &'static str, MethodRouter<Arc<AppState>>)> {
    vec![
        (Method::GET, "/servers", get(list_servers)),
        (Method::POST, "/servers", post(create_server)),
        (Method::POST, "/servers/test", post(test_unsaved)),
        (Method::GET, "/servers/{name}", get(get_server)),
        (Method::PATCH, "/servers/{name}", patch(patch_server)),
        (Method::DELETE, "/servers/{name}", delete(delete_server)),
        (Method::POST, "/servers/{name}/test", post(test_saved)),
        (Method::GET, "/jobs", get(list_jobs)),
        (Method::POST, "/jobs", post(submit_job)),
        (Method::GET, "/jobs/{id}", get(get_job)),
        (Method::POST, "/jobs/{id}/cancel", post(cancel_job)),
        (Method::GET, "/jobs/{id}/events", get(job_events)),
        (Method::GET, "/jobs/{id}/evidence", get(evidence)),
        (Method::GET, "/jobs/{id}/report", get(report)),
        (Method::GET, "/calls", get(list_calls)),
        (
            Method::GET,
            "/openapi.json",
            get(crate::openapi::openapi_json),
        ),
    ]
}

pub fn routes() -> Router<Arc<AppState>> {
    endpoints()
        .into_iter()
        // Routing one path twice merges its methods.
        .fold(Router::new(), |r, (_, path, handler)| {
            r.route(path, handler)
        })
        .fallback(|| async { problem(Problem::new(404, "no such API endpoint")) })
}

pub fn problem(p: Problem) -> Response {
    let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(ErrorBody { error: p.error })).into_response()
}

fn fields(errors: FieldErrors) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(FieldErrorsBody { errors }),
    )
        .into_response()
}

fn ledger_err(e: impl std::fmt::Display) -> Response {
    problem(Problem::new(500, e.to_string()))
}

fn ok<T: Serialize>(status: StatusCode, body: T) -> Response {
    (status, Json(body)).into_response()
}

/// The body as a [`ServerInput`], with a clear error for bad JSON or an unknown field.
fn server_input(body: &Bytes) -> Result<ServerInput, Problem> {
    serde_json::from_slice(body)
        .map_err(|e| Problem::new(400, format!("the body is not a server object: {e}")))
}

/// The configured servers, each with its last test and its breaker.
#[utoipa::path(get, path = "/servers", tag = "servers",
    responses((status = 200, body = ServerList)))]
pub async fn list_servers(State(st): State<Arc<AppState>>) -> Response {
    let config = st.config();
    let servers = config
        .servers
        .iter()
        .map(|(name, s)| servers::describe(&st, name, s))
        .collect();
    ok(StatusCode::OK, ServerList { servers })
}

/// One configured server.
#[utoipa::path(get, path = "/servers/{name}", tag = "servers",
    params(("name" = String, Path, description = "the server's name")),
    responses((status = 200, body = ServerView), (status = 404, body = ErrorBody)))]
pub async fn get_server(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match st.config().servers.get(&name) {
        Some(s) => ok(StatusCode::OK, servers::describe(&st, &name, s)),
        None => problem(Problem::new(404, format!("no server named '{name}'"))),
    }
}

fn stored(st: &Arc<AppState>, name: &str, input: &ServerInput, creating: bool) -> Response {
    match servers::store(st, name, input, creating) {
        Ok(s) => {
            let status = if creating {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            ok(status, servers::describe(st, name, &s))
        }
        Err(Ok(errors)) => fields(errors),
        Err(Err(p)) => problem(p),
    }
}

/// Adds a server (admin), checked as `maljan servers add` checks it; its token is stored sealed.
/// Without `tools` it may run every tool it lists.
#[utoipa::path(post, path = "/servers", tag = "servers", request_body = ServerInput,
    responses((status = 201, body = ServerView), (status = 400, body = ErrorBody),
        (status = 422, body = FieldErrorsBody)))]
pub async fn create_server(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let input = match server_input(&body) {
        Ok(i) => i,
        Err(p) => return problem(p),
    };
    let Some(name) = input.name.clone().filter(|n| !n.is_empty()) else {
        return fields(FieldErrors::from([(
            "name".into(),
            "a server needs a name".into(),
        )]));
    };
    stored(&st, &name, &input, true)
}

/// Changes a server (admin): absent fields keep their value.
#[utoipa::path(patch, path = "/servers/{name}", tag = "servers", request_body = ServerInput,
    params(("name" = String, Path, description = "the server's name")),
    responses((status = 200, body = ServerView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = FieldErrorsBody)))]
pub async fn patch_server(
    State(st): State<Arc<AppState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let input = match server_input(&body) {
        Ok(i) => i,
        Err(p) => return problem(p),
    };
    if input.name.as_ref().is_some_and(|n| n != &name) {
        return fields(FieldErrors::from([(
            "name".into(),
            "a server cannot be renamed: add it under the new name and delete this one".into(),
        )]));
    }
    stored(&st, &name, &input, false)
}

/// Removes a server (admin).
#[utoipa::path(delete, path = "/servers/{name}", tag = "servers",
    params(("name" = String, Path, description = "the server's name")),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody)))]
pub async fn delete_server(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match servers::remove(&st, &name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(p) => problem(p),
    }
}

/// Tests values that are not saved (admin): a new server, or a saved one's changed fields (its
/// stored token is kept when none is given).
#[utoipa::path(post, path = "/servers/test", tag = "servers", request_body = ServerInput,
    responses((status = 200, body = TestOutcome), (status = 400, body = ErrorBody),
        (status = 422, body = FieldErrorsBody)))]
pub async fn test_unsaved(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let input = match server_input(&body) {
        Ok(i) => i,
        Err(p) => return problem(p),
    };
    let name = input.name.clone().unwrap_or_else(|| "unsaved".into());
    let config = st.config();
    match servers::build(&config, &name, config.servers.get(&name), &input) {
        Ok(cfg) => ok(
            StatusCode::OK,
            servers::test_values(&config, &name, cfg).await,
        ),
        Err(errors) => fields(errors),
    }
}

/// Tests a saved server (admin) and keeps the outcome for its card.
#[utoipa::path(post, path = "/servers/{name}/test", tag = "servers",
    params(("name" = String, Path, description = "the server's name")),
    responses((status = 200, body = TestOutcome), (status = 404, body = ErrorBody)))]
pub async fn test_saved(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    let config = st.config();
    let Some(cfg) = config.servers.get(&name).cloned() else {
        return problem(Problem::new(404, format!("no server named '{name}'")));
    };
    let outcome = servers::test_values(&config, &name, cfg).await;
    st.record_test(&name, outcome.clone());
    ok(StatusCode::OK, outcome)
}

pub fn refused(r: Refused) -> Response {
    match r {
        Refused::Problem(p) => problem(p),
        Refused::Fields(f) => fields(f),
    }
}

/// Submits a sample (submit scope): it is stored and queued for the workers.
#[utoipa::path(post, path = "/jobs", tag = "jobs",
    request_body(content = SubmitForm, content_type = "multipart/form-data"),
    responses((status = 202, body = Submitted), (status = 400, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = FieldErrorsBody)))]
pub async fn submit_job(
    State(st): State<Arc<AppState>>,
    form: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let form = match form {
        Ok(f) => f,
        Err(e) => {
            return problem(Problem::new(
                400,
                format!(
                    "expected a multipart form with a `sample` file: {}",
                    e.body_text()
                ),
            ));
        }
    };
    let sub = match jobs::read_submission(&st, form).await {
        Ok(s) => s,
        Err(r) => return refused(r),
    };
    match jobs::start(&st, sub).await {
        Ok(id) => ok(
            StatusCode::ACCEPTED,
            Submitted {
                links: JobLinks {
                    job: format!("/api/v1/jobs/{id}"),
                    events: format!("/api/v1/jobs/{id}/events"),
                    page: format!("/jobs/{id}"),
                },
                job_id: id,
                status: "queued".into(),
            },
        ),
        Err(p) => problem(p),
    }
}

pub fn page_number(
    q: &HashMap<String, String>,
    key: &str,
    default: usize,
) -> Result<usize, Problem> {
    match q.get(key).map(String::as_str) {
        None | Some("") => Ok(default),
        Some(v) => {
            v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                Problem::new(400, format!("{key}={v}: expected a whole number from 1"))
            })
        }
    }
}

pub const STATUSES: [&str; 6] = [
    "queued",
    "running",
    "complete",
    "degraded",
    "failed",
    "cancelled",
];

/// Jobs, newest first: searched by the sample's name or SHA-256 prefix and filtered by status
/// and verdict, in the database.
#[utoipa::path(get, path = "/jobs", tag = "jobs", params(JobQuery, Paging),
    responses((status = 200, body = JobList), (status = 400, body = ErrorBody)))]
pub async fn list_jobs(
    State(st): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (query, paging) = match (JobQuery::parse(&q), Paging::parse(&q)) {
        (Ok(f), Ok(p)) => (f, p),
        (Err(e), _) | (_, Err(e)) => return problem(e),
    };
    let counts = match st.ledger.job_status_counts() {
        Ok(c) => c,
        Err(e) => return ledger_err(e),
    };
    match crate::job_pages::job_list(&st, query, paging.page, paging.per_page).await {
        Ok(page) => ok(
            StatusCode::OK,
            JobList {
                pages: page.pages(),
                jobs: page.items,
                total: page.total,
                page: page.page,
                per_page: page.per_page,
                counts: counts.into_iter().collect(),
            },
        ),
        Err(p) => problem(p),
    }
}

/// One job, with its verdict once its report is kept.
#[utoipa::path(get, path = "/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses((status = 200, body = JobDetail), (status = 404, body = ErrorBody)))]
pub async fn get_job(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    let row = match st.ledger.job(&id) {
        Ok(Some(r)) => r,
        Ok(None) => return problem(Problem::new(404, format!("no job '{id}'"))),
        Err(e) => return ledger_err(e),
    };
    let report: Option<Report> = st
        .ledger
        .report(&id)
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok());
    let verdict = report
        .as_ref()
        .and_then(|r| r.verdict.as_ref())
        .map(|v| VerdictSummary {
            verdict: v.verdict.as_str().into(),
            confidence: v.confidence,
            source: v.source.as_str().into(),
            summary: v.summary.clone(),
        });
    ok(
        StatusCode::OK,
        JobDetail {
            live: st.live_job(&id).is_some(),
            verdict,
            report_status: report.as_ref().map(|r| r.status.as_str().to_string()),
            job_id: row.job_id,
            label: row.label,
            sample_path: row.sample_path,
            sample_sha256: row.sample_sha256,
            sample_size: row.sample_size,
            created_at: row.created_at,
            finished_at: row.finished_at,
            status: row.status,
            calls: row.calls,
            failed_calls: row.failed_calls,
            degradations: row.degradations,
        },
    )
}

/// Cancels a queued or running job (submit scope), wherever it runs.
#[utoipa::path(post, path = "/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses((status = 202, body = Cancelling), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the job had ended")))]
pub async fn cancel_job(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match jobs::cancel(&st, &id).await {
        Ok(()) => ok(
            StatusCode::ACCEPTED,
            Cancelling {
                job_id: id,
                cancelling: true,
            },
        ),
        Err(p) => problem(p),
    }
}

/// The job's progress as server-sent events (`stage`, `step`, `call_finished`, …, `done`),
/// resumable from `Last-Event-ID` or `after`.
#[utoipa::path(get, path = "/jobs/{id}/events", tag = "jobs",
    params(("id" = String, Path, description = "the job's id"), EventsQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "resume after this event number")),
    responses((status = 200, description = "an event stream", content_type = "text/event-stream", body = String),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn job_events(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(q.get("after").map(String::as_str))
        .map(|v| v.trim().parse::<i64>());
    let after = match after {
        None => 0,
        Some(Ok(n)) if n >= 0 => n,
        Some(_) => return problem(Problem::new(400, "Last-Event-ID: expected an event number")),
    };
    match jobs::events(&st, &id, after) {
        Ok(sse) => sse.into_response(),
        Err(p) => problem(p),
    }
}

pub fn call_filter(q: &HashMap<String, String>) -> Result<CallFilter, Problem> {
    let ok = match q.get("ok").map(String::as_str) {
        None | Some("") | Some("all") => None,
        Some("true" | "1" | "ok") => Some(true),
        Some("false" | "0" | "failed") => Some(false),
        Some(v) => return Err(Problem::new(400, format!("ok={v}: expected true or false"))),
    };
    Ok(CallFilter {
        tool: q.get("tool").filter(|t| !t.is_empty()).cloned(),
        ok,
    })
}

/// A job's calls in order, with their arguments and outputs, filtered and paged.
#[utoipa::path(get, path = "/jobs/{id}/evidence", tag = "ledger",
    params(("id" = String, Path, description = "the job's id"), EvidenceQuery, Paging),
    responses((status = 200, body = EvidencePage), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn evidence(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (filter, paging) = match (call_filter(&q), Paging::parse(&q)) {
        (Ok(f), Ok(p)) => (f, p),
        (Err(e), _) | (_, Err(e)) => return problem(e),
    };
    match st.ledger.has_job(&id) {
        Ok(true) => {}
        Ok(false) => return problem(Problem::new(404, format!("no job '{id}'"))),
        Err(e) => return ledger_err(e),
    }
    match st
        .ledger
        .calls_page(&id, filter, paging.page, paging.per_page)
    {
        Ok(p) => ok(
            StatusCode::OK,
            EvidencePage {
                pages: p.pages(),
                evidence: p.items.iter().map(EvidenceRow::from).collect(),
                total: p.total,
                page: p.page,
                per_page: p.per_page,
            },
        ),
        Err(e) => ledger_err(e),
    }
}

/// Every job's calls, newest first (no arguments or outputs: see a job's evidence), filtered by
/// server, tool and outcome, and paged.
#[utoipa::path(get, path = "/calls", tag = "ledger", params(CallQuery, Paging),
    responses((status = 200, body = CallPage), (status = 400, body = ErrorBody)))]
pub async fn list_calls(
    State(st): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (query, paging) = match (CallQuery::parse(&q), Paging::parse(&q)) {
        (Ok(f), Ok(p)) => (f, p),
        (Err(e), _) | (_, Err(e)) => return problem(e),
    };
    match st.browser.calls(query, paging.page, paging.per_page).await {
        Ok(p) => ok(
            StatusCode::OK,
            CallPage {
                pages: p.pages(),
                calls: p.items,
                total: p.total,
                page: p.page,
                per_page: p.per_page,
            },
        ),
        Err(p) => problem(p),
    }
}

/// A ledger row with its arguments and output as JSON (text when they are not JSON).
pub fn evidence_row(e: &maljan_client::LedgerEntry) -> Value {
    serde_json::to_value(EvidenceRow::from(e)).unwrap_or_default()
}

/// The kept report of a job, or why there is none.
pub fn load_report(st: &AppState, id: &str) -> Result<Report, Problem> {
    match st
        .ledger
        .report(id)
        .map_err(|e| Problem::new(500, e.to_string()))?
    {
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| Problem::new(500, format!("the kept report does not read back: {e}"))),
        None if st.live_job(id).is_some() => Err(Problem::new(
            409,
            format!("job {id} is still running: its report is kept when it ends"),
        )),
        None if st.ledger.has_job(id).unwrap_or(false) => Err(Problem::new(
            404,
            format!("no report is kept for job {id} (it was not run by the console)"),
        )),
        None => Err(Problem::new(404, format!("no job '{id}'"))),
    }
}

/// A finished job's report, as `maljan analyze` writes it: JSON (the triage report), HTML,
/// Markdown, STIX 2.1 or the IOCs as CSV.
#[utoipa::path(get, path = "/jobs/{id}/report", tag = "jobs",
    params(("id" = String, Path, description = "the job's id"), ReportQuery),
    responses(
        (status = 200, description = "the report in the format asked for", content(
            (Object = "application/json"),
            (String = "text/html"),
            (String = "text/markdown"),
            (Object = "application/stix+json"),
            (String = "text/csv"))),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "the job is still running")))]
pub async fn report(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let format = q.get("format").map(String::as_str).unwrap_or("json");
    if !matches!(format, "html" | "md" | "markdown" | "json" | "stix" | "csv") {
        return problem(Problem::new(
            400,
            format!("format={format}: expected html, md, json, stix or csv"),
        ));
    }
    let report = match load_report(&st, &id) {
        Ok(r) => r,
        Err(p) => return problem(p),
    };
    match format {
        "html" => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                // The renderer's page is self-contained with inline CSS and no script at all.
                (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
            ],
            render::html(&report),
        )
            .into_response(),
        "md" | "markdown" => ([(header::CONTENT_TYPE, "text/markdown; charset=utf-8")], render::markdown(&report)).into_response(),
        "json" => ([(header::CONTENT_TYPE, "application/json")], render::json(&report)).into_response(),
        "stix" => ([(header::CONTENT_TYPE, "application/stix+json;version=2.1")], render::stix(&report)).into_response(),
        _ => ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], render::iocs_csv(&report)).into_response(),
    }
}
