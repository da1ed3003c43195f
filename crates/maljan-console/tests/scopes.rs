//! Issue 44 item 1: tokens and sessions have scopes. Only `admin` adds, changes, tests or removes
//! a server (a stdio server is a program the console starts as its owner) or touches the
//! settings; `submit` submits and cancels jobs; `read` only reads. A session opened with an API
//! token keeps that token's scope. The server form says what command it will run.

mod common;

use axum::{
    body::Body,
    http::{StatusCode, header},
};
use maljan_console::Scope;
use serde_json::{Value, json};

/// Every request that starts, changes or removes a server, as the API and the pages send it.
fn server_changes(marker: &std::path::Path) -> Vec<(&'static str, &'static str, Option<Value>)> {
    let hostile =
        json!({"name": "p", "command": "sh", "args": ["-c", format!("id > {}", marker.display())]});
    vec![
        ("POST", "/api/v1/servers/test", Some(hostile.clone())),
        ("POST", "/api/v1/servers", Some(hostile.clone())),
        (
            "PATCH",
            "/api/v1/servers/echo",
            Some(json!({"command": "sh", "args": hostile["args"]})),
        ),
        ("POST", "/api/v1/servers/echo/test", None),
        ("DELETE", "/api/v1/servers/echo", None),
    ]
}

async fn json_as(
    c: &common::Console,
    token: &str,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let b = c.req_token(method, uri, token);
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string())),
        None => b.body(Body::empty()),
    }
    .unwrap();
    common::read_json(c.send(req).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admin_may_start_change_or_test_a_server() {
    let c = common::console();
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("m");
    for scope in [Scope::Read, Scope::Submit] {
        let token = c.token(scope);
        for (method, uri, body) in server_changes(&marker) {
            let (s, v) = json_as(&c, &token, method, uri, body).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{scope} {method} {uri}: {v}");
            let error = v["error"].as_str().unwrap();
            assert!(
                error.contains("admin") && error.contains(scope.as_str()),
                "the refusal names the scopes: {error}"
            );
        }
        // The settings' model test too.
        let req = c
            .req_token("POST", "/settings/llm-test", &token)
            .body(Body::empty())
            .unwrap();
        assert_eq!(
            c.send(req).await.status(),
            StatusCode::FORBIDDEN,
            "{scope} llm-test"
        );
        // Reading stays open to both.
        let (s, v) = json_as(&c, &token, "GET", "/api/v1/servers", None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    // A job naming a server that a non-admin could not add: refused as unknown.
    let submit = c.token(Scope::Submit);
    let (ctype, body) = common::multipart("x.bin", b"abc", &[("servers", "p")]);
    let req = c
        .req_token("POST", "/api/v1/jobs", &submit)
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body))
        .unwrap();
    let (s, v) = common::read_json(c.send(req).await).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the hostile command ran");
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(
        !config.contains("[servers.p]") && config.contains("[servers.echo]"),
        "{config}"
    );

    // An admin token may.
    let admin = c.token(Scope::Admin);
    let (s, v) = json_as(
        &c,
        &admin,
        "POST",
        "/api/v1/servers",
        Some(json!({"name": "viaadmin", "command": common::echo_bin()})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, _) = json_as(&c, &admin, "POST", "/api/v1/servers/echo/test", None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_submits_and_cancels_read_only_reads() {
    let c = common::console_analysis();
    let read = c.token(Scope::Read);
    let submit = c.token(Scope::Submit);
    let job = |token: &str| {
        let (ctype, body) =
            common::multipart("s.bin", &common::sample_bytes(), &[("agent", "off")]);
        c.req_token("POST", "/api/v1/jobs", token)
            .header(header::CONTENT_TYPE, ctype)
            .body(Body::from(body))
            .unwrap()
    };
    let (s, v) = common::read_json(c.send(job(&read)).await).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "read may not submit: {v}");
    assert!(v["error"].as_str().unwrap().contains("submit"));
    let (s, v) = common::read_json(c.send(job(&submit)).await).await;
    assert_eq!(s, StatusCode::ACCEPTED, "submit may: {v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    let cancel = format!("/api/v1/jobs/{id}/cancel");
    let (s, v) = json_as(&c, &read, "POST", &cancel, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "read may not cancel: {v}");
    let (s, v) = json_as(&c, &submit, "POST", &cancel, None).await;
    assert!(
        s == StatusCode::ACCEPTED || s == StatusCode::CONFLICT,
        "submit may cancel (or the job ended first): {s} {v}"
    );
    c.wait_done(&id).await;
    for uri in [
        format!("/api/v1/jobs/{id}"),
        format!("/api/v1/jobs/{id}/report"),
        format!("/api/v1/jobs/{id}/evidence"),
    ] {
        let (s, v) = json_as(&c, &read, "GET", &uri, None).await;
        assert_eq!(s, StatusCode::OK, "read reads {uri}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_with_a_token_keeps_its_scope_and_the_pages_say_so() {
    let c = common::console();
    let submit = c.token(Scope::Submit);
    let login = axum::http::Request::builder()
        .method("POST")
        .uri("/login")
        .header(header::HOST, &c.host)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!(
            "_csrf={}&password={submit}",
            c.state.auth.csrf_for("login")
        )))
        .unwrap();
    let resp = c.send(login).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let session = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let sid = session.split_once('=').unwrap().1.to_string();
    let csrf = c.state.auth.csrf_for(&sid);
    let get = |uri: &str| {
        axum::http::Request::builder()
            .uri(uri)
            .header(header::HOST, &c.host)
            .header(header::COOKIE, &session)
            .body(Body::empty())
            .unwrap()
    };
    let (s, html) = common::read_text(c.send(get("/servers")).await).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        html.contains("id=\"admin-only\"") && !html.contains("href=\"/servers/new\""),
        "no Add button, and the page says why"
    );
    // The page's form, posted from the page itself: still refused for want of admin.
    let form = axum::http::Request::builder()
        .method("POST")
        .uri("/servers/new")
        .header(header::HOST, &c.host)
        .header(header::COOKIE, &session)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!(
            "_csrf={csrf}&action=test&name=p&transport=stdio&command=sh&args=-c%0Aid"
        )))
        .unwrap();
    let (s, text) = common::read_text(c.send(form).await).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{text}");
    assert!(text.contains("admin"), "{text}");
    // Revoking the token ends the session at once.
    let id = c
        .state
        .auth
        .tokens()
        .iter()
        .find(|t| t.scope == Scope::Submit)
        .unwrap()
        .id()
        .to_string();
    c.state.auth.revoke_token(&id).unwrap();
    let resp = c.send(get("/servers")).await;
    assert_eq!(
        resp.status(),
        StatusCode::SEE_OTHER,
        "the session ended with its token"
    );
}

/// The page's text as a reader sees it (the templates escape `/` and `'`).
fn unescape(html: &str) -> String {
    html.replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_form_says_what_it_will_run() {
    let c = common::console();
    let (s, html) = common::read_text(
        c.send(c.req("GET", "/servers/echo").body(Body::empty()).unwrap())
            .await,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let html = unescape(&html);
    let runs = html
        .find("id=\"runs-command\"")
        .expect("the command is named");
    assert!(
        html[runs..].contains(&common::echo_bin()),
        "the echo server's command"
    );
    assert!(html.contains("with the console's rights"));
    // A tested, unsaved command is shown quoted as it will run.
    let req = c
        .req("POST", "/servers/new")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!(
            "_csrf={}&action=test&name=q&transport=stdio&command=sh&args=-c%0Aexit+1",
            c.csrf()
        )))
        .unwrap();
    let (_, html) = common::read_text(c.send(req).await).await;
    assert!(unescape(&html).contains("sh -c 'exit 1'"), "{html}");
    let (s, v) = c.json("GET", "/api/v1/servers/echo", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["runs"], json!(common::echo_bin()));
}
