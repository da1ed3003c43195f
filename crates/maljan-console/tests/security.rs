//! Who may use the console: a session's changes need its CSRF token and must come from the
//! console's own pages (Host/Origin checks); off loopback, nothing without a session or a bearer
//! token and the admin password is required; security headers on every answer. (That loopback
//! needs a login too is `login_required.rs`.)

mod common;

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use serde_json::json;

fn post_json(host: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method("POST")
        .uri(uri)
        .header(header::HOST, host)
        .header(header::CONTENT_TYPE, "application/json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_refuses_cross_site_and_csrf_less_changes() {
    let c = common::console();
    let post_json = |host: &str, uri: &str| post_json(host, uri).header(header::COOKIE, c.cookie());
    let body = || Body::from(json!({"name": "x", "command": "srv"}).to_string());
    let (s, v) = common::read_json(
        c.send(post_json(&c.host, "/api/v1/servers").body(body()).unwrap())
            .await,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "no CSRF token: {v}");
    assert!(v["error"].as_str().unwrap().contains("CSRF"));
    let req = post_json(&c.host, "/api/v1/servers")
        .header("x-csrf-token", "0".repeat(64))
        .body(body())
        .unwrap();
    assert_eq!(
        c.send(req).await.status(),
        StatusCode::FORBIDDEN,
        "a wrong CSRF token"
    );
    let req = post_json(&c.host, "/api/v1/servers")
        .header("x-csrf-token", c.csrf())
        .header(header::ORIGIN, "http://evil.example")
        .body(body())
        .unwrap();
    let (s, v) = common::read_json(c.send(req).await).await;
    assert_eq!(
        s,
        StatusCode::FORBIDDEN,
        "a cross-site POST with a stolen token: {v}"
    );
    assert!(v["error"].as_str().unwrap().contains("cross-site"));
    let req = post_json(&c.host, "/api/v1/servers")
        .header("x-csrf-token", c.csrf())
        .header("sec-fetch-site", "cross-site")
        .body(body())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::FORBIDDEN);
    // A form posted from another site (no JS needed for that attack): refused by Origin.
    let req = c
        .req_bare("POST", "/servers/echo/test")
        .header(header::ORIGIN, "http://evil.example")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("_csrf={}", c.csrf())))
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::FORBIDDEN);
    let req = c
        .req_bare("POST", "/servers/echo/test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("_csrf=nope"))
        .unwrap();
    assert_eq!(
        c.send(req).await.status(),
        StatusCode::FORBIDDEN,
        "a form without its token"
    );
    assert!(
        !std::fs::read_to_string(&c.config_path)
            .unwrap()
            .contains("[servers.x]"),
        "nothing refused was saved"
    );
    // The same request from the console's own page goes through.
    let req = post_json(&c.host, "/api/v1/servers")
        .header("x-csrf-token", c.csrf())
        .header(header::ORIGIN, format!("http://{}", c.host))
        .header("sec-fetch-site", "same-origin")
        .body(body())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::CREATED);

    // DNS rebinding: a page of another name that resolves here is not this console.
    let req = Request::builder()
        .uri("/api/v1/servers")
        .header(header::HOST, "evil.example:8700")
        .body(Body::empty())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::MISDIRECTED_REQUEST);
    let req = Request::builder()
        .uri("/")
        .header(header::HOST, "localhost:8700")
        .header(header::COOKIE, c.cookie())
        .body(Body::empty())
        .unwrap();
    let resp = c.send(req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let h = resp.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'")
            && csp.contains("script-src 'self'")
            && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["referrer-policy"], "same-origin");
    let (_, html) = common::read_text(resp).await;
    assert!(
        !html.contains("<script>") && html.contains("<script src=\"/assets/app.js\""),
        "no inline script"
    );
    let req = Request::builder()
        .uri("/assets/app.js")
        .header(header::HOST, &c.host)
        .body(Body::empty())
        .unwrap();
    let resp = c.send(req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_nothing_without_a_token_or_a_session() {
    let c = common::console_on("10.0.0.7:8700", 1 << 20);
    let get = |uri: &str| {
        Request::builder()
            .uri(uri)
            .header(header::HOST, "10.0.0.7:8700")
    };
    for uri in ["/api/v1/servers", "/api/v1/jobs", "/api/v1/jobs/x/events"] {
        let (s, v) = common::read_json(c.send(get(uri).body(Body::empty()).unwrap()).await).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{uri}: {v}");
    }
    let resp = c.send(get("/servers").body(Body::empty()).unwrap()).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[header::LOCATION], "/login");
    // The loopback CSRF token is no key off loopback.
    let req = post_json("10.0.0.7:8700", "/api/v1/servers")
        .header("x-csrf-token", c.state.auth.csrf_for("loopback"))
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::UNAUTHORIZED);

    let token = c.token(maljan_console::Scope::Admin);
    let with = |b: axum::http::request::Builder, t: &str| {
        b.header(header::AUTHORIZATION, format!("Bearer {t}"))
    };
    let (s, _) = common::read_json(
        c.send(
            with(get("/api/v1/servers"), &token)
                .body(Body::empty())
                .unwrap(),
        )
        .await,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = common::read_json(
        c.send(
            with(get("/api/v1/servers"), "mjc_wrong")
                .body(Body::empty())
                .unwrap(),
        )
        .await,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // A bearer request carries no ambient authority: no CSRF token needed.
    let req = with(post_json("10.0.0.7:8700", "/api/v1/servers"), &token)
        .body(Body::from(
            json!({"name": "viatoken", "command": "srv"}).to_string(),
        ))
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::CREATED);
    let file = std::fs::read_to_string(c.dir.path().join("data/console-auth.toml")).unwrap();
    assert!(
        file.contains("$argon2") && !file.contains(&token) && !file.contains("correct horse"),
        "hashes only:\n{file}"
    );

    // Logging in: the login form's own token, a wrong password, then the right one.
    let login_csrf = c.state.auth.csrf_for("login");
    let form = |pw: &str, csrf: &str| {
        Request::builder()
            .method("POST")
            .uri("/login")
            .header(header::HOST, "10.0.0.7:8700")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("_csrf={csrf}&password={pw}")))
            .unwrap()
    };
    assert_eq!(
        c.send(form("correct+horse+battery", "bad")).await.status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        c.send(form("wrong+password", &login_csrf)).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let resp = c.send(form("correct+horse+battery", &login_csrf)).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let cookie = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let resp = c
        .send(
            get("/servers")
                .header(header::COOKIE, &session)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let (_, html) = common::read_text(resp).await;
    let sid = session.split_once('=').unwrap().1;
    let csrf = c.state.auth.csrf_for(sid);
    assert!(
        html.contains(&csrf),
        "the page carries its session's CSRF token"
    );
    let req = post_json("10.0.0.7:8700", "/api/v1/servers/echo/test")
        .header(header::COOKIE, &session)
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        c.send(req).await.status(),
        StatusCode::FORBIDDEN,
        "a cookie alone does not change anything"
    );
    let req = post_json("10.0.0.7:8700", "/api/v1/servers/echo/test")
        .header(header::COOKIE, &session)
        .header("x-csrf-token", &csrf)
        .body(Body::empty())
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::OK);
    // Logging out ends the session.
    let req = Request::builder()
        .method("POST")
        .uri("/logout")
        .header(header::HOST, "10.0.0.7:8700")
        .header(header::COOKIE, &session)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("_csrf={csrf}")))
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::SEE_OTHER);
    let resp = c
        .send(
            get("/api/v1/servers")
                .header(header::COOKIE, &session)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

#[test]
fn off_loopback_without_a_password_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = maljan_client::Config::builtin();
    config.data_dir = dir.path().to_path_buf();
    let opts = maljan_console::ConsoleOptions {
        listen: "0.0.0.0:8700".parse().unwrap(),
        ..Default::default()
    };
    let err = maljan_console::AppState::with_ledger(
        opts,
        config,
        maljan_client::Ledger::open_in_memory(),
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("set-password"), "{err}");
}
