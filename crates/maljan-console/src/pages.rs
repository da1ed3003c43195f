//! The pages: server-rendered from the templates in `views`, over the same functions as the API
//! (`servers`, `jobs`, the ledger's pages). Forms post back to their page (CSRF-checked by the
//! guard) and redirect after a success; a refused value re-renders the form with its error.

use std::{collections::HashMap, sync::Arc};

use axum::{
    Extension, Router,
    body::Bytes,
    extract::{Multipart, Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use maljan_client::ServerConfig;
use serde_json::{Value, json};

use crate::{
    api::{STATUSES, call_filter, evidence_row, load_report, page_number, status_filter},
    jobs::{self, Refused},
    security::{self, ClientAddr, Identity, Scope, Viewer, serde_urlencoded_pairs},
    servers::{self, FieldErrors, ServerInput},
    state::{AppState, Problem},
};

pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(dashboard))
        .route("/servers", get(servers_page))
        .route("/servers/new", get(new_server).post(post_new_server))
        .route("/servers/{name}", get(edit_server).post(post_edit_server))
        .route("/servers/{name}/test", post(test_server))
        .route("/jobs", get(jobs_page))
        .route("/jobs/new", get(new_job).post(post_new_job))
        .route("/jobs/{id}", get(job_page))
        .route("/jobs/{id}/cancel", post(cancel_job))
        .route("/jobs/{id}/ledger", get(ledger_page))
        .route("/settings", get(settings))
        .route("/settings/llm-test", post(llm_test))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .fallback(
            |State(st): State<Arc<AppState>>, Extension(viewer): Extension<Viewer>| async move {
                error_page(&st, &viewer, Problem::new(404, "no such page"))
            },
        )
}

/// What every page's frame needs: the CSRF token, and what the viewer may do (a page offers
/// only the actions its scope allows; the guard refuses the others anyway).
fn frame(viewer: &Viewer, nav: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("csrf".into(), json!(viewer.csrf));
    m.insert("nav".into(), json!(nav));
    m.insert("login".into(), json!(viewer.session));
    m.insert("scope".into(), json!(viewer.scope.map(Scope::as_str)));
    m.insert("admin".into(), json!(viewer.scope == Some(Scope::Admin)));
    m.insert(
        "can_submit".into(),
        json!(viewer.scope >= Some(Scope::Submit)),
    );
    m
}

fn page(st: &AppState, viewer: &Viewer, nav: &str, name: &str, extra: Value) -> Response {
    let mut ctx = frame(viewer, nav);
    if let Value::Object(o) = extra {
        ctx.extend(o);
    }
    st.views.render(name, Value::Object(ctx))
}

fn with_status(status: u16, r: Response) -> Response {
    let mut r = r;
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r
}

fn error_page(st: &AppState, viewer: &Viewer, p: Problem) -> Response {
    with_status(
        p.status,
        page(
            st,
            viewer,
            "",
            "error.html",
            json!({"status": p.status, "error": p.error}),
        ),
    )
}

async fn dashboard(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let counts = st.ledger.job_status_counts().unwrap_or_default();
    let recent = st
        .ledger
        .jobs_page(None, 1, 8)
        .map(|p| p.items)
        .unwrap_or_default();
    let config = st.config();
    let servers: Vec<Value> = config
        .servers
        .iter()
        .map(|(n, s)| servers::describe(&st, n, s))
        .collect();
    page(
        &st,
        &viewer,
        "dashboard",
        "dashboard.html",
        json!({
            "counts": counts, "recent": recent, "servers": servers,
            "running": st.live.lock().unwrap_or_else(|e| e.into_inner()).len(),
        }),
    )
}

async fn servers_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let config = st.config();
    let servers: Vec<Value> = config
        .servers
        .iter()
        .map(|(n, s)| servers::describe(&st, n, s))
        .collect();
    page(
        &st,
        &viewer,
        "servers",
        "servers.html",
        json!({"servers": servers, "config_path": config.path}),
    )
}

/// The form's fields, as typed (shown again when something is refused).
fn form_values(pairs: &[(String, String)]) -> (ServerInput, Value, Result<(), FieldErrors>) {
    let one = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut errors = FieldErrors::new();
    let mut env = std::collections::BTreeMap::new();
    for line in one("env")
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        match line.split_once('=') {
            Some((k, v)) => {
                env.insert(k.trim().to_string(), v.to_string());
            }
            None => {
                errors.insert(
                    "env".into(),
                    format!("'{line}': expected KEY=VALUE, one a line"),
                );
            }
        }
    }
    let lines = |k: &str| -> Vec<String> {
        one(k)
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let ticked: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "tools")
        .map(|(_, v)| v.clone())
        .collect();
    let tools_shown = one("tools_shown").is_some();
    let input = ServerInput {
        name: one("name").map(|n| n.trim().to_string()),
        transport: one("transport"),
        command: one("command"),
        args: Some(lines("args")),
        cwd: one("cwd"),
        env: Some(env),
        env_allow: Some(
            one("env_allow")
                .unwrap_or_default()
                .split([',', ' ', '\n'])
                .map(str::to_string)
                .collect(),
        ),
        url: one("url"),
        auth_token: one("auth_token"),
        clear_token: one("clear_token").is_some(),
        mirror_dir: one("mirror_dir"),
        tools: tools_shown.then(|| Some(ticked.clone())),
        label: one("label"),
        enabled: Some(one("enabled").is_some()),
    };
    let shown = json!({
        "name": one("name").unwrap_or_default(), "transport": one("transport").unwrap_or_else(|| "stdio".into()),
        "command": one("command").unwrap_or_default(), "args": one("args").unwrap_or_default(),
        "cwd": one("cwd").unwrap_or_default(), "env": one("env").unwrap_or_default(),
        "env_allow": one("env_allow").unwrap_or_default(), "url": one("url").unwrap_or_default(),
        "mirror_dir": one("mirror_dir").unwrap_or_default(), "label": one("label").unwrap_or_default(),
        "enabled": one("enabled").is_some(), "ticked": ticked,
    });
    (
        input,
        shown,
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        },
    )
}

fn values_of(name: &str, s: &ServerConfig) -> Value {
    json!({
        "name": name, "transport": s.transport.as_str(), "command": s.command, "args": s.args.join("\n"),
        "cwd": s.cwd, "env": s.env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("\n"),
        "env_allow": s.env_allow.join(", "), "url": maljan_client::redact::scrub_url(&s.url), "mirror_dir": s.mirror_dir,
        "label": s.label, "enabled": s.enabled, "ticked": s.tools.clone().unwrap_or_default(),
        "all_tools": s.tools.is_none(), "has_token": !s.auth_token.is_empty(),
    })
}

fn server_form(
    st: &AppState,
    viewer: &Viewer,
    editing: Option<&str>,
    values: Value,
    test: Option<Value>,
    errors: &FieldErrors,
    status: u16,
) -> Response {
    // What Test and Save will start, said plainly: a stdio server is a program run as the
    // console's owner.
    let runs = (values["transport"] == "stdio")
        .then(|| {
            let args: Vec<String> = values["args"]
                .as_str()
                .unwrap_or("")
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            servers::command_line(values["command"].as_str().unwrap_or(""), &args)
        })
        .filter(|line| !line.is_empty());
    with_status(
        status,
        page(
            st,
            viewer,
            "servers",
            "server_form.html",
            json!({
                "editing": editing, "v": values, "test": test, "errors": errors,
                "runs": runs, "run_as": servers::run_as(),
            }),
        ),
    )
}

async fn new_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let values = json!({"transport": "stdio", "enabled": true, "ticked": []});
    server_form(&st, &viewer, None, values, None, &FieldErrors::new(), 200)
}

async fn edit_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Path(name): Path<String>,
) -> Response {
    let config = st.config();
    let Some(s) = config.servers.get(&name) else {
        return error_page(
            &st,
            &viewer,
            Problem::new(404, format!("no server named '{name}'")),
        );
    };
    let test = st.last_test(&name).map(|t| json!(t));
    server_form(
        &st,
        &viewer,
        Some(&name),
        values_of(&name, s),
        test,
        &FieldErrors::new(),
        200,
    )
}

/// Test (nothing saved) or Save, from the new-server and edit forms alike.
async fn submit_server_form(
    st: &Arc<AppState>,
    viewer: &Viewer,
    editing: Option<&str>,
    body: &Bytes,
) -> Response {
    let pairs = serde_urlencoded_pairs(body);
    let action = pairs
        .iter()
        .find(|(k, _)| k == "action")
        .map(|(_, v)| v.as_str())
        .unwrap_or("save");
    let (mut input, mut shown, parsed) = form_values(&pairs);
    let name = editing
        .map(str::to_string)
        .or_else(|| input.name.clone())
        .unwrap_or_default();
    if let Some(n) = editing {
        input.name = Some(n.to_string());
        shown["name"] = json!(n);
        if action == "delete" {
            return match servers::remove(st, n) {
                Ok(()) => Redirect::to("/servers").into_response(),
                Err(p) => error_page(st, viewer, p),
            };
        }
    }
    if let Some(s) = editing.and_then(|n| st.config().servers.get(n).cloned()) {
        shown["has_token"] = json!(!s.auth_token.is_empty());
    }
    if let Err(errors) = parsed {
        return server_form(st, viewer, editing, shown, None, &errors, 422);
    }
    let config = st.config();
    if action == "test" {
        if editing.is_none() && config.servers.contains_key(&name) {
            let e = FieldErrors::from([(
                "name".to_string(),
                format!("a server named '{name}' exists already"),
            )]);
            return server_form(st, viewer, editing, shown, None, &e, 422);
        }
        return match servers::build(
            &config,
            &name,
            editing.and_then(|n| config.servers.get(n)),
            &input,
        ) {
            Ok(cfg) => {
                let outcome = servers::test_values(&config, &name, cfg).await;
                server_form(
                    st,
                    viewer,
                    editing,
                    shown,
                    Some(json!(outcome)),
                    &FieldErrors::new(),
                    200,
                )
            }
            Err(errors) => server_form(st, viewer, editing, shown, None, &errors, 422),
        };
    }
    // A new server may run no tool until its tools are ticked (after a Test lists them).
    if editing.is_none() && input.tools.is_none() {
        input.tools = Some(Some(Vec::new()));
    }
    match servers::store(st, &name, &input, editing.is_none()) {
        Ok(_) => Redirect::to(&format!("/servers#server-{name}")).into_response(),
        Err(Ok(errors)) => server_form(st, viewer, editing, shown, None, &errors, 422),
        Err(Err(p)) => error_page(st, viewer, p),
    }
}

async fn post_new_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    body: Bytes,
) -> Response {
    submit_server_form(&st, &viewer, None, &body).await
}

async fn post_edit_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if !st.config().servers.contains_key(&name) {
        return error_page(
            &st,
            &viewer,
            Problem::new(404, format!("no server named '{name}'")),
        );
    }
    submit_server_form(&st, &viewer, Some(&name), &body).await
}

async fn test_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Path(name): Path<String>,
) -> Response {
    let config = st.config();
    let Some(cfg) = config.servers.get(&name).cloned() else {
        return error_page(
            &st,
            &viewer,
            Problem::new(404, format!("no server named '{name}'")),
        );
    };
    let outcome = servers::test_values(&config, &name, cfg).await;
    st.record_test(&name, outcome);
    Redirect::to(&format!("/servers#server-{name}")).into_response()
}

async fn jobs_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (status, page_no) = match (status_filter(&q), page_number(&q, "page", 1)) {
        (Ok(s), Ok(p)) => (s, p),
        (Err(e), _) | (_, Err(e)) => return error_page(&st, &viewer, e),
    };
    let (jobs, counts) = match (
        st.ledger.jobs_page(status.as_deref(), page_no, 50),
        st.ledger.job_status_counts(),
    ) {
        (Ok(p), Ok(c)) => (p, c),
        (Err(e), _) | (_, Err(e)) => {
            return error_page(&st, &viewer, Problem::new(500, e.to_string()));
        }
    };
    let count = |s: &str| counts.iter().find(|(k, _)| k == s).map_or(0, |(_, n)| *n);
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
            "jobs": jobs.items, "tabs": tabs, "all": total, "status": status, "page": page_no, "pages": pages, "live": live,
        }),
    )
}

async fn new_job(
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

async fn post_new_job(
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
    let sub = match jobs::read_submission(&st, form, None).await {
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

async fn job_page(
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

async fn cancel_job(
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

async fn ledger_page(
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

async fn settings(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    settings_page(&st, &viewer, None)
}

fn settings_page(st: &AppState, viewer: &Viewer, test: Option<Value>) -> Response {
    let config = st.config();
    let llm = config.llm.as_ref().map(|l| json!({"provider": l.provider, "model": l.model,
        "base_url": maljan_client::redact::scrub_url(&l.base_url), "has_key": !l.api_key.is_empty()}));
    page(
        st,
        viewer,
        "settings",
        "settings.html",
        json!({
            "llm": llm, "test": test, "config_path": config.path, "ledger_path": config.ledger_path(),
            "tokens": st.auth.tokens().iter().map(|t| json!({"id": t.id(), "scope": t.scope.as_str(),
                "label": t.label, "created_at": t.created_at, "last_used": t.last_used})).collect::<Vec<_>>(),
            "login_file": crate::AuthStore::login_file_in(&st.data_dir), "has_password": st.auth.has_password(),
            "listen": st.opts.listen.to_string(), "max_bytes": st.opts.max_sample_bytes,
        }),
    )
}

/// The same check as `maljan llm test`: the first endpoint of the chain is asked to call a
/// `ping` tool once.
async fn llm_test(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    use maljan_agent::llm::{self, Message, ToolSpec};
    let config = st.config();
    let keys = maljan_client::KeySource::in_dir(&config.data_dir);
    let eps = match llm::resolve(&config, &keys, &llm::Overrides::from_env(), None) {
        Ok(Some(eps)) => eps,
        Ok(None) => {
            return settings_page(
                &st,
                &viewer,
                Some(
                    json!({"ok": false, "detail": "no model configured: add [llm] to the config file"}),
                ),
            );
        }
        Err(e) => {
            return settings_page(
                &st,
                &viewer,
                Some(json!({"ok": false, "detail": e.to_string()})),
            );
        }
    };
    let ep = &eps[0];
    let tool = ToolSpec {
        name: "ping".into(),
        description: "Answers pong. Call it when asked to.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let messages = [Message::User {
        content: "Call the tool `ping` once, with no arguments.".into(),
    }];
    let started = std::time::Instant::now();
    let outcome = match ep.complete(&llm::http_client(), &messages, &[tool]).await {
        Ok(reply) => {
            let called = reply.tool_calls.iter().any(|c| c.name == "ping");
            json!({"ok": called, "detail": format!("{} answered in {:.0} ms; {}", reply.model,
                started.elapsed().as_secs_f64() * 1000.0,
                if called { "it called the tool" } else { "it answered in text: the analyst stage needs a model that calls tools" })})
        }
        Err(e) => json!({"ok": false, "detail": format!("{}: {e}", ep.label())}),
    };
    settings_page(&st, &viewer, Some(outcome))
}

async fn login_form(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Extension(client): Extension<ClientAddr>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match q.get("token") {
        // The owner's login URL: exchanged for a session, and the address loses the token.
        Some(token) => attempt_login(&st, &viewer, client, token).await,
        None => login_page(&st, &viewer, None, 200),
    }
}

fn login_page(st: &AppState, viewer: &Viewer, error: Option<String>, status: u16) -> Response {
    let file = crate::AuthStore::login_file_in(&st.data_dir);
    with_status(
        status,
        page(
            st,
            viewer,
            "",
            "login.html",
            json!({"error": error, "login_file": file}),
        ),
    )
}

async fn login(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    Extension(client): Extension<ClientAddr>,
    body: Bytes,
) -> Response {
    let pairs = serde_urlencoded_pairs(&body);
    let secret = pairs
        .iter()
        .find(|(k, _)| k == "password")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    attempt_login(&st, &viewer, client, &secret).await
}

/// One login attempt with a password or a token, under the client's back-off: the owner's
/// login token and the admin password open an admin session, an API token a session of its
/// scope (which ends when the token is revoked).
async fn attempt_login(
    st: &AppState,
    viewer: &Viewer,
    client: ClientAddr,
    secret: &str,
) -> Response {
    if let Err(wait) = st.throttle.check(client.0) {
        let mut resp = login_page(
            st,
            viewer,
            Some(format!(
                "too many failed logins from your address: try again in {} s",
                wait.as_secs().max(1)
            )),
            429,
        );
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            http::HeaderValue::from(wait.as_secs().max(1)),
        );
        return resp;
    }
    let opened = match st.auth.check_token(secret) {
        Some(Identity::Token { id, scope }) => Some((scope, (id != "owner").then_some(id))),
        _ if !secret.is_empty() && st.auth.check_password(secret) => Some((Scope::Admin, None)),
        _ => None,
    };
    let Some((scope, token_id)) = opened else {
        let locked = st.throttle.failed(client.0);
        let mut error = "wrong password or token".to_string();
        if let Some(wait) = locked {
            error.push_str(&format!(
                "; too many failed logins from your address: the next try in {} s",
                wait.as_secs().max(1)
            ));
        }
        return login_page(st, viewer, Some(error), 401);
    };
    st.throttle.succeeded(client.0);
    let sid = st.auth.new_session(scope, token_id.as_deref());
    (
        [(header::SET_COOKIE, security::session_cookie(&sid))],
        Redirect::to("/"),
    )
        .into_response()
}

async fn logout(
    State(st): State<Arc<AppState>>,
    identity: Option<Extension<Identity>>,
) -> Response {
    if let Some(Extension(Identity::Session { sid, .. })) = identity {
        st.auth.end_session(&sid);
    }
    let clear = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        security::SESSION_COOKIE
    );
    ([(header::SET_COOKIE, clear)], Redirect::to("/login")).into_response()
}
