//! Issue 44 item 1: on loopback too, nobody uses the console without a credential only its
//! owner can read. The example — a local user reads a page's CSRF token and runs
//! `sh -c 'id > /tmp/m'` through `POST /api/v1/servers/test` — and its variants (create, a job,
//! the pages' forms, reading reports and the ledger) are refused; the owner's login URL opens a
//! session and leaves the address without its token; a script is told to use a bearer token.

mod common;

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use serde_json::{Value, json};

fn anonymous(c: &common::Console, method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, &c.host)
}

/// The stdio server of the example, writing its marker under `dir`.
fn hostile(dir: &std::path::Path, name: &str) -> (Value, std::path::PathBuf) {
    let marker = dir.join(format!("{name}.ran"));
    let server = json!({"name": name, "command": "sh", "args": ["-c", format!("id > {}", marker.display())]});
    (server, marker)
}

fn assert_bearer_error(status: StatusCode, v: &Value, what: &str) {
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {v}");
    let error = v["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("Authorization: Bearer") && !error.contains("reload the page"),
        "{what}: a script is told to use a bearer token: {v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_account_without_the_owners_secret_runs_nothing_on_loopback() {
    let c = common::console();
    let scratch = tempfile::tempdir().unwrap();
    // The page's CSRF token is no key: there is no page to read it from, and the old
    // sessionless token of loopback is refused too.
    let (s, _) = common::read_text(
        c.send(
            anonymous(&c, "GET", "/servers/new")
                .body(Body::empty())
                .unwrap(),
        )
        .await,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::SEE_OTHER,
        "a page without a login goes to /login"
    );

    // The example, then the same program through every other door.
    let (example, marker) = hostile(scratch.path(), "p");
    for (method, uri, body) in [
        ("POST", "/api/v1/servers/test", example.clone()),
        ("POST", "/api/v1/servers", example.clone()),
        (
            "PATCH",
            "/api/v1/servers/echo",
            json!({"command": "sh", "args": example["args"]}),
        ),
        ("POST", "/api/v1/servers/echo/test", json!({})),
        ("DELETE", "/api/v1/servers/echo", json!({})),
    ] {
        for csrf in [
            None,
            Some(c.state.auth.csrf_for("loopback")),
            Some(c.state.auth.csrf_for("login")),
        ] {
            let mut b = anonymous(&c, method, uri).header(header::CONTENT_TYPE, "application/json");
            if let Some(t) = &csrf {
                b = b.header("x-csrf-token", t);
            }
            let (s, v) =
                common::read_json(c.send(b.body(Body::from(body.to_string())).unwrap()).await)
                    .await;
            assert_bearer_error(s, &v, &format!("{method} {uri} (csrf {csrf:?})"));
        }
    }
    // A job: a script without a token.
    let (ctype, body) = common::multipart("x.bin", b"abc", &[]);
    let req = anonymous(&c, "POST", "/api/v1/jobs")
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body))
        .unwrap();
    let (s, v) = common::read_json(c.send(req).await).await;
    assert_bearer_error(s, &v, "a job submitted without a token");
    // The pages' forms, posted by a script (no Accept: text/html): the same JSON answer.
    for (uri, form) in [
        (
            "/servers/new",
            "action=test&name=p&transport=stdio&command=sh",
        ),
        ("/servers/echo/test", ""),
        ("/settings/llm-test", ""),
    ] {
        let req = anonymous(&c, "POST", uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!(
                "_csrf={}&{form}",
                c.state.auth.csrf_for("loopback")
            )))
            .unwrap();
        let (s, v) = common::read_json(c.send(req).await).await;
        assert_bearer_error(s, &v, uri);
    }
    // Nothing ran and nothing was saved.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the hostile command ran");
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(
        !config.contains("[servers.p]") && !config.contains("\"sh\""),
        "{config}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_the_ledger_and_pages_are_not_readable_without_a_login() {
    let c = common::console();
    let (s, v) = c
        .submit("sample.bin", &common::sample_bytes(), &[("agent", "off")])
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    c.wait_done(&id).await;
    for uri in [
        "/api/v1/jobs".to_string(),
        format!("/api/v1/jobs/{id}"),
        format!("/api/v1/jobs/{id}/report?format=md"),
        format!("/api/v1/jobs/{id}/evidence"),
        format!("/api/v1/jobs/{id}/events"),
        "/api/v1/servers".into(),
        "/metrics".into(),
    ] {
        let resp = c
            .send(anonymous(&c, "GET", &uri).body(Body::empty()).unwrap())
            .await;
        let status = resp.status();
        if uri.starts_with("/api/") {
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
            assert!(
                resp.headers()[header::WWW_AUTHENTICATE]
                    .to_str()
                    .unwrap()
                    .starts_with("Bearer")
            );
        } else {
            assert_eq!(status, StatusCode::SEE_OTHER, "{uri}");
        }
        let (_, text) = common::read_text(resp).await;
        assert!(
            !text.contains("evil.example.com"),
            "{uri} leaks the report: {text}"
        );
    }
    for uri in [
        format!("/jobs/{id}"),
        format!("/jobs/{id}/ledger"),
        "/".into(),
        "/settings".into(),
    ] {
        let resp = c
            .send(anonymous(&c, "GET", &uri).body(Body::empty()).unwrap())
            .await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(resp.headers()[header::LOCATION], "/login");
    }
    // The login page itself and its assets stay public.
    for uri in ["/login", "/assets/app.css"] {
        let resp = c
            .send(anonymous(&c, "GET", uri).body(Body::empty()).unwrap())
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "{uri}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_login_url_opens_an_admin_session_and_drops_its_token() {
    let c = common::console();
    let owner = c.state.auth.owner_token().to_string();
    let resp = c
        .send(
            anonymous(&c, "GET", &format!("/login?token={owner}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        resp.headers()[header::LOCATION],
        "/",
        "the address loses the token"
    );
    let cookie = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && !cookie.contains(&owner),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let sid = session.split_once('=').unwrap().1.to_string();
    let resp = c
        .send(
            anonymous(&c, "GET", "/servers")
                .header(header::COOKIE, &session)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let (_, html) = common::read_text(resp).await;
    assert!(
        html.contains("Add a server") && html.contains(">admin<"),
        "an admin session"
    );
    // The owner's session may test a server: the admin scope.
    let req = anonymous(&c, "POST", "/api/v1/servers/echo/test")
        .header(header::COOKIE, &session)
        .header("x-csrf-token", c.state.auth.csrf_for(&sid))
        .body(Body::empty())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::OK);
    // The same token works as a bearer token for the owner's scripts.
    let req = c
        .req_token("GET", "/api/v1/servers", &owner)
        .body(Body::empty())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::OK);

    // Wrong tokens: no session, and the page says so.
    for wrong in [
        "",
        "mjo_0000",
        &owner[..owner.len() - 1],
        &format!("{owner}x"),
    ] {
        let resp = c
            .send(
                anonymous(&c, "GET", &format!("/login?token={wrong}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{wrong:?}");
        assert!(resp.headers().get(header::SET_COOKIE).is_none());
        c.state.throttle.succeeded(None);
    }
    // A bearer token that names nobody is refused even beside a good session cookie.
    let req = anonymous(&c, "GET", "/api/v1/servers")
        .header(header::COOKIE, &session)
        .header(header::AUTHORIZATION, "Bearer mjc_nobody")
        .body(Body::empty())
        .unwrap();
    let (s, v) = common::read_json(c.send(req).await).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
}

#[test]
fn the_login_url_names_an_address_a_browser_here_reaches() {
    let url = |a: &str| maljan_console::login_url(a.parse().unwrap(), "T");
    assert_eq!(url("127.0.0.1:8700"), "http://127.0.0.1:8700/login?token=T");
    assert_eq!(url("0.0.0.0:9"), "http://127.0.0.1:9/login?token=T");
    assert_eq!(url("[::1]:9"), "http://[::1]:9/login?token=T");
    assert_eq!(url("10.0.0.7:9"), "http://10.0.0.7:9/login?token=T");
}
