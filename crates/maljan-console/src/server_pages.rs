//! The servers' pages: the cards (each server, its last test and its tools), and the add and
//! edit forms, which Test without saving, then Save with the same checks as the API.

use std::sync::Arc;

use axum::{
    Extension,
    body::Bytes,
    extract::{Path, State},
    response::{IntoResponse, Redirect, Response},
};
use maljan_client::ServerConfig;
use serde_json::{Value, json};

use crate::{
    pages::{error_page, page, with_status},
    security::{Viewer, serde_urlencoded_pairs},
    servers::{self, FieldErrors, ServerInput},
    state::{AppState, Problem},
};

pub async fn servers_page(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let config = st.config();
    let servers: Vec<servers::ServerView> = config
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
    // The tools the Test listed (a hidden field each): every one ticked is "every tool".
    let listed: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "tool_listed")
        .map(|(_, v)| v.clone())
        .collect();
    let all_ticked = !listed.is_empty() && listed.iter().all(|t| ticked.contains(t));
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
        "all_tools": tools_shown && all_ticked, "all_ticked": all_ticked,
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

pub async fn new_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    // Every tool until some are unticked, as `maljan servers add` without `--tool`.
    let values = json!({"transport": "stdio", "enabled": true, "ticked": [], "all_tools": true});
    server_form(&st, &viewer, None, values, None, &FieldErrors::new(), 200)
}

pub async fn edit_server(
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
    if input.tools.is_none() {
        // No allow-list on the form yet (before the first Test): the ticks start from the saved
        // entry's, or from every tool for a new server.
        let saved = editing.and_then(|n| config.servers.get(n));
        let list = saved.and_then(|s| s.tools.clone());
        shown["all_tools"] = json!(list.is_none());
        shown["ticked"] = json!(list.unwrap_or_default());
    }
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
    // Every tool the Test listed left ticked: no allow-list at all (tools the server adds later
    // run too), as `maljan servers add` without `--tool` — for a new server, or one that had
    // none. Without a Test, a new server runs every tool likewise (the field stays unset).
    let had_list = editing
        .and_then(|n| config.servers.get(n))
        .is_some_and(|s| s.tools.is_some());
    if input.tools.is_some() && shown["all_ticked"] == true && !had_list {
        input.tools = Some(None);
    }
    match servers::store(st, &name, &input, editing.is_none()) {
        Ok(_) => Redirect::to(&format!("/servers#server-{name}")).into_response(),
        Err(Ok(errors)) => server_form(st, viewer, editing, shown, None, &errors, 422),
        Err(Err(p)) => error_page(st, viewer, p),
    }
}

pub async fn post_new_server(
    State(st): State<Arc<AppState>>,
    Extension(viewer): Extension<Viewer>,
    body: Bytes,
) -> Response {
    submit_server_form(&st, &viewer, None, &body).await
}

pub async fn post_edit_server(
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

pub async fn test_server(
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
