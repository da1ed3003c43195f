//! The pages render, forms post back with their errors shown and nothing half-saved, and a
//! finished job's page leads from the verdict to its evidence rows — over SQLite and over
//! PostgreSQL where a page reads jobs or the ledger.

mod common;

use axum::{
    body::Body,
    http::{StatusCode, header},
};

async fn page(c: &common::Console, uri: &str) -> (StatusCode, String) {
    common::read_text(c.send(c.req("GET", uri).body(Body::empty()).unwrap()).await).await
}

async fn form(c: &common::Console, uri: &str, body: &str) -> (StatusCode, String, Option<String>) {
    let req = c
        .req("POST", uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = c.send(req).await;
    let location = resp
        .headers()
        .get(header::LOCATION)
        .map(|l| l.to_str().unwrap().to_string());
    let (s, text) = common::read_text(resp).await;
    (s, text, location)
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_renders_on_sqlite() {
    every_page_renders(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_renders_on_postgres() {
    every_page_renders(common::Store::Postgres).await;
}

async fn every_page_renders(store: common::Store) {
    let c = common::console_over(store, false);
    for (uri, needle) in [
        ("/", "Dashboard"),
        ("/servers", "fixture echo"),
        ("/servers/new", "Add a server"),
        ("/servers/echo", "Edit"),
        ("/jobs", "Jobs"),
        ("/jobs/new", "Submit a sample"),
        ("/settings", "No model configured"),
        ("/login", "Admin password"),
    ] {
        let (s, html) = page(&c, uri).await;
        assert_eq!(s, StatusCode::OK, "{uri}");
        assert!(html.contains(needle), "{uri} lacks {needle:?}");
        assert!(html.contains("name=\"csrf-token\""), "{uri}");
    }
    let (s, html) = page(&c, "/jobs/j-unknown").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        html.contains("no job &#x27;j-unknown&#x27;") || html.contains("no job 'j-unknown'"),
        "{html}"
    );
    let (s, _) = page(&c, "/servers/nope").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = page(&c, "/no/such/page").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, html) = page(&c, "/jobs?status=sleeping").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(html.contains("status=sleeping"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_form_tests_shows_errors_and_saves() {
    let c = common::console();
    let csrf = c.csrf();
    let (s, html, _) = form(
        &c,
        "/servers/new",
        &format!("_csrf={csrf}&action=save&name=Bad%20Name&transport=stdio&command=x"),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        html.contains("id=\"err-name\"") && html.contains("not a server name"),
        "{html}"
    );
    assert!(
        html.contains("value=\"Bad Name\""),
        "the typed values come back"
    );
    let (s, html, _) = form(
        &c,
        "/servers/new",
        &format!(
            "_csrf={csrf}&action=save&name=web&transport=http&url=http%3A%2F%2Fu%3Ap%40h%2Fmcp"
        ),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("credentials"), "a refused URL is said so");
    let (s, html, _) = form(
        &c,
        "/servers/new",
        &format!("_csrf={csrf}&action=save&name=envy&transport=stdio&command=x&env=NOEQUALS"),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("expected KEY=VALUE"));
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(
        !config.contains("web") && !config.contains("envy"),
        "nothing half-saved"
    );

    let cmd = enc(&common::echo_bin());
    let (s, html, _) = form(
        &c,
        "/servers/new",
        &format!("_csrf={csrf}&action=test&name=fresh&transport=stdio&command={cmd}&enabled=on"),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        html.contains("id=\"test-ok\"")
            && html.contains("frobnicator not found on PATH")
            && html.contains("remedy: install frobnicator"),
        "{html}"
    );
    assert!(
        html.contains("name=\"tools\" value=\"echo\""),
        "the tools to tick"
    );
    assert!(
        !std::fs::read_to_string(&c.config_path)
            .unwrap()
            .contains("fresh"),
        "Test saves nothing"
    );
    let (s, _, location) = form(&c, "/servers/new", &format!("_csrf={csrf}&action=save&name=fresh&transport=stdio&command={cmd}&enabled=on&tools_shown=1&tools=echo")).await;
    assert_eq!(
        (s, location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/servers#server-fresh"))
    );
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(
        config.contains("[servers.fresh]") && config.contains("tools = [\"echo\"]"),
        "{config}"
    );
    // A new server saved without a test runs every tool, as `maljan servers add` does: no
    // allow-list is written (tests/server_form_defaults.rs has the rest).
    let (s, _, _) = form(
        &c,
        "/servers/new",
        &format!("_csrf={csrf}&action=save&name=untested&transport=stdio&command={cmd}&enabled=on"),
    )
    .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    let untested = &config[config.find("[servers.untested]").unwrap()..];
    assert!(!untested.contains("tools ="), "{config}");
    let (s, _, location) = form(
        &c,
        "/servers/untested",
        &format!("_csrf={csrf}&action=delete"),
    )
    .await;
    assert_eq!(
        (s, location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/servers"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_shows_the_verdict_first_and_links_its_evidence_on_sqlite() {
    a_finished_job_shows_the_verdict_first_and_links_its_evidence(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_shows_the_verdict_first_and_links_its_evidence_on_postgres() {
    a_finished_job_shows_the_verdict_first_and_links_its_evidence(common::Store::Postgres).await;
}

async fn a_finished_job_shows_the_verdict_first_and_links_its_evidence(store: common::Store) {
    let c = common::console_over(store, true);
    let (s, v) = c
        .submit("sample.bin", &common::sample_bytes(), &[("agent", "off")])
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let id = v["job_id"].as_str().unwrap();
    c.wait_done(id).await;
    let (s, html) = page(&c, &format!("/jobs/{id}")).await;
    assert_eq!(s, StatusCode::OK);
    let verdict = html.find("id=\"verdict\"").expect("a verdict section");
    assert!(
        verdict < html.find("<h2>Steps").unwrap(),
        "the verdict comes first"
    );
    let link = format!("/jobs/{id}/ledger?ev=ev_0001#ev_0001");
    assert!(html.contains(&link), "evidence links open the ledger row");
    let (s, html) = page(&c, &format!("/jobs/{id}/ledger?ev=ev_0001")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        html.contains("<tr id=\"ev_0001\" class=\"target\">"),
        "{html}"
    );
    let (s, _) = page(&c, &format!("/jobs/{id}/ledger?ev=ev_9999")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, html) = page(&c, "/jobs").await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains(id));
    // An oversize upload from the page: the form again, with the error.
    let small = common::console_on("127.0.0.1:8700", 10);
    let (ctype, body) = common::multipart("big.bin", &[1u8; 100], &[("_csrf", &small.csrf())]);
    let req = small
        .req_bare("POST", "/jobs/new")
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body))
        .unwrap();
    let (s, html) = common::read_text(small.send(req).await).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        html.contains("id=\"submit-error\"") && html.contains("larger than"),
        "{html}"
    );
    let (ctype, body) = common::multipart("x.bin", b"abc", &[("_csrf", "forged")]);
    let req = small
        .req_bare("POST", "/jobs/new")
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body))
        .unwrap();
    let (s, _) = common::read_text(small.send(req).await).await;
    assert_eq!(
        s,
        StatusCode::FORBIDDEN,
        "a multipart form checks its CSRF field"
    );
}
