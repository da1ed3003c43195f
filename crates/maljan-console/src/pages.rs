//! The pages: server-rendered from the templates in `views`, over the same functions as the API
//! (`servers`, `jobs`, the ledger's pages). Forms post back to their page (CSRF-checked by the
//! guard) and redirect after a success; a refused value re-renders the form with its error.

use std::{collections::HashMap, sync::Arc};

use axum::{
    Extension, Router,
    body::Bytes,
    extract::{Query, State},
    http::{StatusCode, header},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use serde_json::{Value, json};

use crate::{
    browse::{JobQuery, VERDICTS},
    job_pages::{
        cancel_job, global_ledger_page, job_page, jobs_page, ledger_page, new_job, post_new_job,
    },
    security::{self, ClientAddr, Identity, Scope, Viewer, serde_urlencoded_pairs},
    server_pages::{
        edit_server, new_server, post_edit_server, post_new_server, servers_page, test_server,
    },
    servers,
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
        .route("/ledger", get(global_ledger_page))
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

pub fn page(st: &AppState, viewer: &Viewer, nav: &str, name: &str, extra: Value) -> Response {
    let mut ctx = frame(viewer, nav);
    if let Value::Object(o) = extra {
        ctx.extend(o);
    }
    st.views.render(name, Value::Object(ctx))
}

pub fn with_status(status: u16, r: Response) -> Response {
    let mut r = r;
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r
}

pub fn error_page(st: &AppState, viewer: &Viewer, p: Problem) -> Response {
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
    let recent = match crate::job_pages::job_list(&st, JobQuery::default(), 1, 8).await {
        Ok(page) => page.items,
        Err(p) => return error_page(&st, &viewer, p),
    };
    let config = st.config();
    let servers: Vec<servers::ServerView> = config
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
            "counts": counts, "recent": recent, "servers": servers, "verdicts": VERDICTS,
            "running": st.live.lock().unwrap_or_else(|e| e.into_inner()).len(),
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
