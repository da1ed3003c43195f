//! Issue 44 item 6: one CSRF check for every state-changing request with a session cookie,
//! whatever its content type. The example — `multipart/form-data; boundary=z` with a
//! JSON body — and its variants (a multipart form whose first field is not `_csrf`, text/plain,
//! no content type, a wrong `_csrf` field) are refused on every endpoint; the console's own
//! forms and bearer requests go through.

mod common;

use axum::{
    body::Body,
    http::{StatusCode, header},
};
use serde_json::json;

/// Every state-changing endpoint, with a body its handler would accept.
fn endpoints(marker: &std::path::Path) -> Vec<(&'static str, String, String)> {
    let hostile =
        json!({"name": "p", "command": "sh", "args": ["-c", format!("id > {}", marker.display())]})
            .to_string();
    vec![
        ("POST", "/api/v1/servers".into(), hostile.clone()),
        ("POST", "/api/v1/servers/test".into(), hostile.clone()),
        (
            "PATCH",
            "/api/v1/servers/echo".into(),
            json!({"label": "changed"}).to_string(),
        ),
        ("DELETE", "/api/v1/servers/echo".into(), String::new()),
        ("POST", "/api/v1/servers/echo/test".into(), String::new()),
        ("POST", "/api/v1/jobs/j-none/cancel".into(), String::new()),
        ("POST", "/api/v1/jobs".into(), String::new()),
        ("POST", "/settings/llm-test".into(), String::new()),
        ("POST", "/servers/echo/test".into(), String::new()),
        (
            "POST",
            "/servers/new".into(),
            "action=save&name=p&transport=stdio&command=sh".into(),
        ),
        ("POST", "/servers/echo".into(), "action=delete".into()),
        ("POST", "/jobs/j-none/cancel".into(), String::new()),
        ("POST", "/jobs/new".into(), String::new()),
        ("POST", "/logout".into(), String::new()),
    ]
}

fn unchanged(c: &common::Console, marker: &std::path::Path) {
    let config = std::fs::read_to_string(&c.config_path).unwrap();
    assert!(
        config.contains("[servers.echo]")
            && !config.contains("[servers.p]")
            && !config.contains("changed"),
        "{config}"
    );
    assert!(!marker.exists(), "the hostile command ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multipart_content_type_over_a_json_body_is_checked_on_every_endpoint() {
    let c = common::console();
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("m");
    let forged_multipart = |field: &str, value: &str| {
        format!(
            "--z\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n--z--\r\n"
        )
    };
    for (method, uri, body) in endpoints(&marker) {
        let variants: Vec<(&str, String)> = vec![
            // The example: the header says multipart, the body is JSON.
            ("multipart/form-data; boundary=z", body.clone()),
            ("Multipart/Form-Data; boundary=\"z\"", body.clone()),
            ("multipart/form-data", body.clone()),
            // A multipart form whose first field is not the token, or a wrong token.
            (
                "multipart/form-data; boundary=z",
                forged_multipart("name", "p"),
            ),
            (
                "multipart/form-data; boundary=z",
                forged_multipart("_csrf", "0000"),
            ),
            ("text/plain", body.clone()),
            ("application/json", body.clone()),
            ("", body.clone()),
            (
                "application/x-www-form-urlencoded",
                format!("_csrf=wrong&{body}"),
            ),
        ];
        for (ctype, payload) in variants {
            let mut b = c.req_bare(method, &uri);
            if !ctype.is_empty() {
                b = b.header(header::CONTENT_TYPE, ctype);
            }
            let resp = c.send(b.body(Body::from(payload)).unwrap()).await;
            let status = resp.status();
            let (_, text) = common::read_text(resp).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {uri} as {ctype:?}: {text}"
            );
            assert!(text.contains("CSRF"), "{method} {uri} as {ctype:?}: {text}");
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    unchanged(&c, &marker);
    // The owner's session still holds: logout was refused too.
    let (s, _) = c.json("GET", "/api/v1/servers", None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_own_forms_and_bearer_requests_go_through() {
    let c = common::console_analysis();
    // The submit form's token as its first field, the sample after it.
    let (ctype, body) = common::multipart(
        "s.bin",
        &common::sample_bytes(),
        &[("_csrf", &c.csrf()), ("agent", "off")],
    );
    let resp = c
        .send(
            c.req_bare("POST", "/jobs/new")
                .header(header::CONTENT_TYPE, ctype)
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
    assert_eq!(
        resp.status(),
        StatusCode::SEE_OTHER,
        "the page's own upload"
    );
    let job = resp.headers()[header::LOCATION]
        .to_str()
        .unwrap()
        .to_string();
    c.wait_done(job.trim_start_matches("/jobs/")).await;
    // The token header with any body.
    let (ctype, body) = common::multipart("s.bin", &common::sample_bytes(), &[("agent", "off")]);
    let resp = c
        .send(
            c.req("POST", "/api/v1/jobs")
                .header(header::CONTENT_TYPE, ctype)
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let (_, v) = common::read_json(resp).await;
    c.wait_done(v["job_id"].as_str().unwrap()).await;
    // A urlencoded form with its field.
    let resp = c
        .send(
            c.req_bare("POST", "/servers/echo/test")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("_csrf={}", c.csrf())))
                .unwrap(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    // A bearer request needs no CSRF token, whatever its content type.
    let admin = c.token(maljan_console::Scope::Admin);
    let req = c
        .req_token("POST", "/api/v1/servers", &admin)
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=z")
        .body(Body::from(
            json!({"name": "viatoken", "command": common::echo_bin()}).to_string(),
        ))
        .unwrap();
    assert_eq!(c.send(req).await.status(), StatusCode::CREATED);
}
