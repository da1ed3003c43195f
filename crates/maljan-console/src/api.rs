//! The JSON API under `/api/v1`: what the pages use and scripts can too, with the same auth
//! (see `security`). Every error is JSON: `{"error": "…"}`, or `{"errors": {field: "…"}}` with
//! 422 for a value a field cannot take.

use std::{collections::HashMap, sync::Arc};

use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::{Multipart, Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use maljan_client::CallFilter;
use maljan_triage::{Report, render};
use serde_json::{Value, json};

use crate::{
    jobs::{self, Refused},
    security::CsrfInForm,
    servers::{self, FieldErrors, ServerInput},
    state::{AppState, Problem},
};

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/servers", get(list_servers).post(create_server))
        .route("/servers/test", post(test_unsaved))
        .route(
            "/servers/{name}",
            get(get_server).patch(patch_server).delete(delete_server),
        )
        .route("/servers/{name}/test", post(test_saved))
        .route("/jobs", get(list_jobs).post(submit_job))
        .route("/jobs/{id}", get(get_job))
        .route("/jobs/{id}/cancel", post(cancel_job))
        .route("/jobs/{id}/events", get(job_events))
        .route("/jobs/{id}/evidence", get(evidence))
        .route("/jobs/{id}/report", get(report))
        .fallback(|| async { problem(Problem::new(404, "no such API endpoint")) })
}

pub fn problem(p: Problem) -> Response {
    let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(json!({"error": p.error}))).into_response()
}

fn fields(errors: FieldErrors) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(json!({"errors": errors})),
    )
        .into_response()
}

fn ledger_err(e: impl std::fmt::Display) -> Response {
    problem(Problem::new(500, e.to_string()))
}

/// The body as a [`ServerInput`], with a clear error for bad JSON or an unknown field.
fn server_input(body: &Bytes) -> Result<ServerInput, Problem> {
    serde_json::from_slice(body)
        .map_err(|e| Problem::new(400, format!("the body is not a server object: {e}")))
}

async fn list_servers(State(st): State<Arc<AppState>>) -> Response {
    let config = st.config();
    let list: Vec<Value> = config
        .servers
        .iter()
        .map(|(name, s)| servers::describe(&st, name, s))
        .collect();
    Json(json!({"servers": list})).into_response()
}

async fn get_server(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match st.config().servers.get(&name) {
        Some(s) => Json(servers::describe(&st, &name, s)).into_response(),
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
            (status, Json(servers::describe(st, name, &s))).into_response()
        }
        Err(Ok(errors)) => fields(errors),
        Err(Err(p)) => problem(p),
    }
}

async fn create_server(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
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

async fn patch_server(
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

async fn delete_server(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match servers::remove(&st, &name) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(p) => problem(p),
    }
}

/// Tests values that are not saved: a new server, or a saved one's changed fields (its stored
/// token is kept when none is given).
async fn test_unsaved(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let input = match server_input(&body) {
        Ok(i) => i,
        Err(p) => return problem(p),
    };
    let name = input.name.clone().unwrap_or_else(|| "unsaved".into());
    let config = st.config();
    match servers::build(&config, &name, config.servers.get(&name), &input) {
        Ok(cfg) => Json(servers::test_values(&config, &name, cfg).await).into_response(),
        Err(errors) => fields(errors),
    }
}

async fn test_saved(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    let config = st.config();
    let Some(cfg) = config.servers.get(&name).cloned() else {
        return problem(Problem::new(404, format!("no server named '{name}'")));
    };
    let outcome = servers::test_values(&config, &name, cfg).await;
    st.record_test(&name, outcome.clone());
    Json(outcome).into_response()
}

pub fn refused(r: Refused) -> Response {
    match r {
        Refused::Problem(p) => problem(p),
        Refused::Fields(f) => fields(f),
    }
}

async fn submit_job(
    State(st): State<Arc<AppState>>,
    csrf: Option<Extension<CsrfInForm>>,
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
    let sub = match jobs::read_submission(&st, form, csrf.map(|c| c.0)).await {
        Ok(s) => s,
        Err(r) => return refused(r),
    };
    match jobs::start(&st, sub).await {
        Ok(id) => (
            StatusCode::ACCEPTED,
            Json(json!({"job_id": id, "status": "queued",
                        "links": {"job": format!("/api/v1/jobs/{id}"), "events": format!("/api/v1/jobs/{id}/events"),
                                  "page": format!("/jobs/{id}")}})),
        )
            .into_response(),
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

pub fn status_filter(q: &HashMap<String, String>) -> Result<Option<String>, Problem> {
    match q.get("status").map(String::as_str) {
        None | Some("") | Some("all") => Ok(None),
        Some(s) if STATUSES.contains(&s) => Ok(Some(s.to_string())),
        Some(s) => Err(Problem::new(
            400,
            format!("status={s}: expected one of {}", STATUSES.join(", ")),
        )),
    }
}

async fn list_jobs(
    State(st): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (status, page, per_page) = match (
        status_filter(&q),
        page_number(&q, "page", 1),
        page_number(&q, "per_page", 50),
    ) {
        (Ok(s), Ok(p), Ok(n)) => (s, p, n),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return problem(e),
    };
    let (page, counts) = match (
        st.ledger.jobs_page(status.as_deref(), page, per_page),
        st.ledger.job_status_counts(),
    ) {
        (Ok(p), Ok(c)) => (p, c),
        (Err(e), _) | (_, Err(e)) => return ledger_err(e),
    };
    let counts: serde_json::Map<String, Value> =
        counts.into_iter().map(|(k, v)| (k, json!(v))).collect();
    Json(json!({"jobs": page.items, "total": page.total, "page": page.page, "per_page": page.per_page,
                "pages": page.pages(), "counts": counts}))
    .into_response()
}

async fn get_job(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
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
    let verdict = report.as_ref().and_then(|r| r.verdict.as_ref()).map(|v| {
        json!({"verdict": v.verdict.as_str(), "confidence": v.confidence, "source": v.source.as_str(), "summary": v.summary})
    });
    let mut out = serde_json::to_value(&row).unwrap_or_default();
    out["live"] = json!(st.live_job(&id).is_some());
    out["verdict"] = verdict.unwrap_or(Value::Null);
    out["report_status"] = json!(report.as_ref().map(|r| r.status.as_str()));
    Json(out).into_response()
}

async fn cancel_job(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match jobs::cancel(&st, &id).await {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(json!({"job_id": id, "cancelling": true})),
        )
            .into_response(),
        Err(p) => problem(p),
    }
}

async fn job_events(
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

async fn evidence(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (filter, page, per_page) = match (
        call_filter(&q),
        page_number(&q, "page", 1),
        page_number(&q, "per_page", 50),
    ) {
        (Ok(f), Ok(p), Ok(n)) => (f, p, n),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return problem(e),
    };
    match st.ledger.has_job(&id) {
        Ok(true) => {}
        Ok(false) => return problem(Problem::new(404, format!("no job '{id}'"))),
        Err(e) => return ledger_err(e),
    }
    match st.ledger.calls_page(&id, filter, page, per_page) {
        Ok(p) => {
            let pages = p.pages();
            let rows: Vec<Value> = p.items.iter().map(evidence_row).collect();
            Json(json!({"evidence": rows, "total": p.total, "page": p.page, "per_page": p.per_page, "pages": pages}))
                .into_response()
        }
        Err(e) => ledger_err(e),
    }
}

/// A ledger row with its arguments and output as JSON (text when they are not JSON).
pub fn evidence_row(e: &maljan_client::LedgerEntry) -> Value {
    let parse = |t: &str| serde_json::from_str::<Value>(t).unwrap_or_else(|_| json!(t));
    json!({"ev_id": e.ev_id, "server": e.server, "tool": e.tool, "args": parse(&e.args),
           "ok": e.ok, "code": e.error_code, "message": e.message, "remedy": e.remediation,
           "started_at": e.started_at, "wait_ms": e.wait_ms, "duration_ms": e.duration_ms,
           "output": e.result.as_deref().map(parse), "output_truncated": e.result_truncated})
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

async fn report(
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
