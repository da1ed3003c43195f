//! The jobs list and the dashboard show each job's sample name and verdict, and the list is
//! searched by name (any case, wildcards literal) or SHA-256 prefix and filtered by verdict and
//! status in the database — the same on SQLite and PostgreSQL, in the pages and the API.

mod common;

use axum::http::StatusCode;
use serde_json::{Value, json};

/// A finished job recorded as `maljan analyze` records one: a sample, a status and a kept report
/// with `verdict` (None: no report).
fn recorded(c: &common::Console, id: &str, name: &str, sha: &str, verdict: Option<&str>) {
    let l = &c.state.ledger;
    l.create_job(id, &format!("analyze: {name}"), Some((name, sha, 1234)))
        .unwrap();
    l.finish_job(
        id,
        if verdict.is_some() {
            "complete"
        } else {
            "failed"
        },
    )
    .unwrap();
    if let Some(v) = verdict {
        let report = json!({"status": "complete", "sample": {"name": name, "sha256": sha},
            "verdict": {"verdict": v, "confidence": 0.9, "summary": "", "source": "heuristic"}});
        l.save_report(id, &report.to_string()).unwrap();
    }
}

async fn ids(c: &common::Console, query: &str) -> Vec<String> {
    let (s, v) = c.json("GET", &format!("/api/v1/jobs?{query}"), None).await;
    assert_eq!(s, StatusCode::OK, "{query}: {v}");
    let ids: Vec<String> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        v["total"],
        ids.len() as i64,
        "{query}: one page holds them all"
    );
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_searched_and_filtered_on_sqlite() {
    jobs_are_searched_and_filtered(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_searched_and_filtered_on_postgres() {
    jobs_are_searched_and_filtered(common::Store::Postgres).await;
}

async fn jobs_are_searched_and_filtered(store: common::Store) {
    let c = common::console_over(store, true);
    let (a, b, d) = ("a1".repeat(32), "b2".repeat(32), "ab".repeat(32));
    recorded(&c, "j-invoice", "Invoice_2026.PDF", &a, Some("malicious"));
    recorded(&c, "j-setup", "setup.exe", &b, Some("benign"));
    recorded(&c, "j-percent", "100%_done.doc", &d, None);
    // One submitted through the API and run by the console's workers: a queue job.
    let (queued, job) = c.run_job(&[("agent", "off")]).await;
    let queued_verdict = job["verdict"]["verdict"].as_str().unwrap().to_string();

    // Each job with its name and verdict.
    let (s, v) = c.json("GET", "/api/v1/jobs", None).await;
    assert_eq!(s, StatusCode::OK);
    let by_id = |id: &str| -> Value {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {v}"))
    };
    assert_eq!(by_id("j-invoice")["sample_name"], "Invoice_2026.PDF");
    assert_eq!(by_id("j-invoice")["verdict"], "malicious");
    assert_eq!(by_id("j-percent")["verdict"], Value::Null);
    assert_eq!(by_id(&queued)["sample_name"], "dropper.bin");
    assert_eq!(by_id(&queued)["verdict"], queued_verdict.as_str());

    // By name: any part, any case; `%` and `_` are the name's own characters.
    assert_eq!(ids(&c, "name=invoice").await, ["j-invoice"]);
    assert_eq!(ids(&c, "name=DROPPER").await, [queued.as_str()]);
    assert_eq!(ids(&c, "name=%25").await, ["j-percent"]);
    assert_eq!(ids(&c, "name=_done").await, ["j-percent"]);
    assert!(ids(&c, "name=nothing-like-it").await.is_empty());
    // By SHA-256 prefix, any case.
    assert_eq!(ids(&c, "sha256=A1A1").await, ["j-invoice"]);
    assert_eq!(ids(&c, &format!("sha256={a}")).await, ["j-invoice"]);
    // `q`: a name, or a SHA-256 prefix when it is hex ("ab" is both: the hash of j-percent).
    assert_eq!(ids(&c, "q=setup").await, ["j-setup"]);
    assert_eq!(ids(&c, "q=abab").await, ["j-percent"]);
    // By verdict, and `none` for a job without one.
    // (The submitted job, the newest, is listed first where its own verdict matches.)
    let with_queued = |verdict: &str, fixture: &str| -> Vec<String> {
        let mut v = Vec::new();
        if queued_verdict == verdict {
            v.push(queued.clone());
        }
        v.push(fixture.to_string());
        v
    };
    assert_eq!(
        ids(&c, "verdict=malicious").await,
        with_queued("malicious", "j-invoice")
    );
    assert_eq!(
        ids(&c, "verdict=benign").await,
        with_queued("benign", "j-setup")
    );
    assert_eq!(ids(&c, "verdict=none").await, ["j-percent"]);
    assert_eq!(
        ids(&c, "verdict=benign&name=invoice").await,
        Vec::<String>::new()
    );
    assert_eq!(
        ids(&c, "verdict=malicious&name=invoice&status=complete").await,
        ["j-invoice"]
    );
    assert_eq!(
        ids(&c, &format!("verdict={queued_verdict}&name=dropper")).await,
        [queued.as_str()]
    );
    // Paged under a filter: the total is the filter's.
    let (_, v) = c
        .json("GET", "/api/v1/jobs?verdict=none&per_page=1&page=1", None)
        .await;
    assert_eq!(
        (v["total"].as_i64(), v["pages"].as_i64()),
        (Some(1), Some(1)),
        "{v}"
    );
    let (_, v) = c.json("GET", "/api/v1/jobs?per_page=2&page=2", None).await;
    assert_eq!(
        (v["total"].as_i64(), v["jobs"].as_array().map(Vec::len)),
        (Some(4), Some(2))
    );
    // Refused values say what is expected.
    for (bad, says) in [
        ("verdict=evil", "verdict=evil: expected one of malicious"),
        ("sha256=xyz", "hex digits"),
        ("status=done", "status=done: expected one of"),
    ] {
        let (s, v) = c.json("GET", &format!("/api/v1/jobs?{bad}"), None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");
        assert!(v["error"].as_str().unwrap().contains(says), "{bad}: {v}");
    }

    // The page: the search box keeps its value, the rows show the name and the verdict.
    let (s, html) = c.page("/jobs?q=INVOICE&verdict=malicious").await;
    assert_eq!(s, StatusCode::OK);
    let table = &html[html.find("id=\"jobs-table\"").expect("the jobs table")..];
    assert!(table.contains(">Invoice_2026.PDF</a>"), "{table}");
    assert!(table.contains("<span class=\"badge v-malicious\">malicious</span>"));
    assert!(!table.contains("setup.exe") && !table.contains("dropper.bin"));
    assert!(
        html.contains("name=\"q\" value=\"INVOICE\""),
        "the search is kept"
    );
    assert!(html.contains("<option value=\"malicious\" selected>"));
    assert!(html.contains("id=\"matched\">1 matching"));
    // A status tab keeps the search.
    assert!(
        html.contains("href=\"/jobs?verdict=malicious&amp;q=INVOICE&amp;status=complete\""),
        "{html}"
    );
    let (_, html) = c.page("/jobs?verdict=suspicious&q=setup").await;
    assert!(html.contains("id=\"no-jobs\">No jobs match this search."));

    // The dashboard: the recent jobs with their names and verdicts, and a search box.
    let (s, html) = c.page("/").await;
    assert_eq!(s, StatusCode::OK);
    let recent = &html[html.find("id=\"recent-jobs\"").expect("recent jobs")..];
    let row = &recent[recent.find("data-job=\"j-setup\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(">setup.exe</a>") && row.contains("badge v-benign"),
        "{row}"
    );
    assert!(html.contains("id=\"dashboard-search\""));
}
