//! The global ledger: every call of every job, newest first — time, job, server, tool, outcome
//! or error code, duration — paged and filtered in the database on SQLite and PostgreSQL, each
//! row linked to its evidence, and names from a server shown through the one escaping (a bidi
//! override or an escape sequence is shown, never obeyed).

mod common;

use axum::http::StatusCode;
use maljan_client::LedgerEntry;

/// A call as the runtime records it.
fn call(job: &str, n: usize, server: &str, tool: &str, failed: bool) -> LedgerEntry {
    let at = 1_780_000_000_000 + n as i64 * 1000;
    LedgerEntry {
        job_id: job.into(),
        ev_id: format!("ev_{n:04}"),
        server: server.into(),
        tool: tool.into(),
        args: "{\"path\": \"/tmp/secret-argument\"}".into(),
        result: Some("{}".into()),
        result_truncated: false,
        ok: !failed,
        error_code: failed.then(|| "timeout".to_string()),
        message: failed.then(|| "no answer".to_string()),
        remediation: None,
        started_at: maljan_client::time::rfc3339_ms(at),
        started_at_ms: at,
        wait_ms: 0.0,
        duration_ms: 12.5 + n as f64,
        trial: false,
    }
}

/// The `<tbody>` rows of the calls table.
fn rows(html: &str) -> Vec<String> {
    let at = html.find("id=\"calls-table\"").expect("the calls table");
    let body = &html[at..html[at..].find("</tbody>").unwrap() + at];
    body.split("<tr>").skip(2).map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_listed_newest_first_and_paged_on_sqlite() {
    every_call_is_listed_newest_first_and_paged(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_listed_newest_first_and_paged_on_postgres() {
    every_call_is_listed_newest_first_and_paged(common::Store::Postgres).await;
}

async fn every_call_is_listed_newest_first_and_paged(store: common::Store) {
    let c = common::console_over(store, false);
    let l = &c.state.ledger;
    l.create_job("job-a", "analyze: a.bin", None).unwrap();
    l.create_job("job-b", "analyze: b.bin", None).unwrap();
    // 70 calls of job-a, then 60 of job-b from a server whose names carry a bidi override and
    // an escape sequence; every tenth of those failed.
    for n in 1..=70 {
        l.record(call("job-a", n, "echo", "echo", false)).unwrap();
    }
    for n in 1..=60 {
        l.record(call(
            "job-b",
            n,
            "evil\u{1b}[2J",
            "scan\u{202e}txt.exe",
            n % 10 == 0,
        ))
        .unwrap();
    }

    let (s, html) = c.page("/ledger").await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("id=\"calls-total\">130 calls"), "{html}");
    assert!(html.contains("page 1 of 2"));
    let first = rows(&html);
    assert_eq!(first.len(), 100, "a page of 100");
    // Newest first: job-b's last call (failed, n = 60), then its 59th.
    let top = &first[0];
    for part in [
        "href=\"/jobs/job-b\"",
        "<span class=\"badge bad\">timeout</span>",
        "72.5 ms",
        "href=\"/jobs/job-b/ledger?ev=ev_0060#ev_0060\"",
        &maljan_client::time::rfc3339_ms(1_780_000_000_000 + 60_000),
    ] {
        assert!(top.contains(part), "{part} in {top}");
    }
    assert!(
        first[1].contains("ev_0059") && first[1].contains("<span class=\"badge ok\">ok</span>")
    );
    // Names are shown, never obeyed.
    assert!(!html.contains('\u{202e}') && !html.contains('\u{1b}'));
    assert!(
        top.contains("scan\\u{202e}txt.exe") && top.contains("evil\\x1b[2J"),
        "{top}"
    );
    // The arguments stay on the job's own ledger page.
    assert!(!html.contains("secret-argument"));

    let (_, html) = c.page("/ledger?page=2").await;
    let second = rows(&html);
    assert_eq!(second.len(), 30);
    assert!(second.last().unwrap().contains("job-a") && second.last().unwrap().contains("ev_0001"));

    // Filtered by tool, server and outcome; the pager keeps the filter.
    let (_, html) = c.page("/ledger?tool=echo").await;
    assert!(html.contains("id=\"calls-total\">70 calls"));
    assert!(rows(&html).iter().all(|r| r.contains("job-a")));
    let (_, html) = c.page("/ledger?ok=false").await;
    assert!(html.contains("id=\"calls-total\">6 calls"));
    let (_, html) = c.page(&format!("/ledger?server={}", "evil%1B%5B2J")).await;
    assert!(html.contains("id=\"calls-total\">60 calls"));
    let (_, html) = c.page("/ledger?ok=true").await;
    assert!(html.contains("id=\"calls-total\">124 calls"));
    assert!(
        html.contains("href=\"?ok=true&amp;page=2\""),
        "the next page keeps the filter: {html}"
    );
    let (s, _) = c.page("/ledger?ok=maybe").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // The API: the same rows as JSON.
    let (s, v) = c
        .json("GET", "/api/v1/calls?per_page=5&ok=false", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["total"].as_i64(), v["pages"].as_i64()),
        (Some(6), Some(2))
    );
    let top = &v["calls"][0];
    assert_eq!(
        (&top["job_id"], &top["ev_id"], &top["code"], &top["tool"]),
        (
            &serde_json::json!("job-b"),
            &serde_json::json!("ev_0060"),
            &serde_json::json!("timeout"),
            &serde_json::json!("scan\u{202e}txt.exe")
        )
    );
    assert!(top.get("args").is_none(), "no arguments in the global list");
}
