//! The jobs API: a multipart submit answers 202 at once, the job runs in the console's process
//! on the same runtime and agent as `maljan analyze`, its events stream and resume from
//! Last-Event-ID, its ledger rows page and filter, its report comes in each format; bad input
//! gets a clear error and leaves nothing behind. The job tests run over SQLite and over a real
//! PostgreSQL.

mod common;

use axum::{
    body::Body,
    http::{StatusCode, header},
};
use serde_json::Value;

async fn events(c: &common::Console, id: &str, last: Option<&str>) -> Vec<(i64, String, Value)> {
    let mut b = c.req("GET", &format!("/api/v1/jobs/{id}/events"));
    if let Some(l) = last {
        b = b.header("last-event-id", l);
    }
    let resp = c.send(b.body(Body::empty()).unwrap()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let (_, text) = common::read_text(resp).await;
    text.split("\n\n")
        .filter(|b| b.contains("data:"))
        .map(|block| {
            let field = |k: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(k))
                    .unwrap_or("")
                    .trim()
                    .to_string()
            };
            (
                field("id:").parse().unwrap(),
                field("event:"),
                serde_json::from_str(&field("data:")).unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_job_runs_streams_and_reports_on_sqlite() {
    a_submitted_job_runs_streams_and_reports(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_job_runs_streams_and_reports_on_postgres() {
    a_submitted_job_runs_streams_and_reports(common::Store::Postgres).await;
}

async fn a_submitted_job_runs_streams_and_reports(store: common::Store) {
    let c = common::console_over(store, true);
    let (id, job) = c
        .run_job(&[("agent", "off"), ("servers", "analysis")])
        .await;
    assert_eq!(job["verdict"]["source"], "heuristic", "{job}");
    assert!(job["calls"].as_i64().unwrap() >= 3, "{job}");

    let all = events(&c, &id, None).await;
    let kinds: Vec<&str> = all.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(all.first().map(|e| e.0), Some(1));
    assert!(
        kinds.contains(&"step_started") && kinds.contains(&"call_finished"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"done"));
    let finished = all
        .iter()
        .find(|e| e.1 == "call_finished" && e.2["status"] == "ok")
        .expect("a call answered");
    let ev = finished.2["evidence"][0].as_str().unwrap().to_string();
    assert!(ev.starts_with("ev_"));
    let resumed = events(&c, &id, Some("2")).await;
    assert_eq!(
        resumed.first().map(|e| e.0),
        Some(3),
        "resumes after Last-Event-ID"
    );
    assert_eq!(resumed.len(), all.len() - 2);

    let (s, page) = c
        .json(
            "GET",
            &format!("/api/v1/jobs/{id}/evidence?per_page=2"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert_eq!(page["evidence"].as_array().unwrap().len(), 2);
    assert_eq!(page["total"], job["calls"]);
    let row = &page["evidence"][0];
    for k in [
        "ev_id",
        "args",
        "ok",
        "code",
        "remedy",
        "duration_ms",
        "output",
    ] {
        assert!(row.get(k).is_some(), "{k} in {row}");
    }
    let (_, hashes) = c
        .json(
            "GET",
            &format!("/api/v1/jobs/{id}/evidence?tool=hashes&ok=true"),
            None,
        )
        .await;
    assert_eq!(hashes["total"], 1, "{hashes}");
    assert_eq!(hashes["evidence"][0]["tool"], "hashes");
    let (s, _) = c
        .json("GET", &format!("/api/v1/jobs/{id}/evidence?ok=maybe"), None)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    for (format, ctype, needle) in [
        ("html", "text/html", "<html"),
        ("md", "text/markdown", &*id),
        ("json", "application/json", "maljan.triage.report/v1"),
    ] {
        let resp = c
            .send(
                c.req("GET", &format!("/api/v1/jobs/{id}/report?format={format}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "{format}");
        assert!(
            resp.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(ctype)
        );
        if format == "html" {
            let csp = resp.headers()["content-security-policy"].to_str().unwrap();
            assert!(
                !csp.contains("script-src") && csp.contains("default-src 'none'"),
                "{csp}"
            );
        }
        let (_, text) = common::read_text(resp).await;
        assert!(text.contains(needle), "{format}");
    }
    let (s, v) = c
        .json(
            "GET",
            &format!("/api/v1/jobs/{id}/report?format=stix"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["type"], "bundle", "{v}");
    assert!(
        v["objects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["type"] == "malware-analysis"),
        "{v}"
    );
    let (s, _) = c
        .json("GET", &format!("/api/v1/jobs/{id}/report?format=pdf"), None)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let (s, list) = c.json("GET", "/api/v1/jobs?status=all&page=1", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["jobs"][0]["job_id"], id.as_str());
    let status = job["status"].as_str().unwrap();
    assert_eq!(list["counts"][status], 1, "{list}");
    let (_, none) = c.json("GET", "/api/v1/jobs?status=running", None).await;
    assert_eq!(none["total"], 0);
    let (s, _) = c.json("GET", "/api/v1/jobs?status=sleeping", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = c.json("GET", "/api/v1/jobs?page=0", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, v) = c
        .json("POST", &format!("/api/v1/jobs/{id}/cancel"), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_can_be_cancelled_on_sqlite() {
    a_running_job_can_be_cancelled(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_can_be_cancelled_on_postgres() {
    a_running_job_can_be_cancelled(common::Store::Postgres).await;
}

async fn a_running_job_can_be_cancelled(store: common::Store) {
    let c = common::console_over(store, false);
    // The echo fixture's `work` is not in the plan; a sample for a server set that exists makes
    // a job whose cancel is answered at once, running or just ended.
    let (s, v) = c
        .submit("s.bin", &common::sample_bytes(), &[("agent", "off")])
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let id = v["job_id"].as_str().unwrap();
    let (s, v) = c
        .json("POST", &format!("/api/v1/jobs/{id}/cancel"), None)
        .await;
    assert!(
        s == StatusCode::ACCEPTED || s == StatusCode::CONFLICT,
        "{s} {v}"
    );
    let job = c.wait_done(id).await;
    if s == StatusCode::ACCEPTED {
        assert_eq!(job["report_status"], "cancelled", "{job}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_jobs_are_404_on_every_endpoint_on_sqlite() {
    unknown_jobs_are_404_on_every_endpoint(common::Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_jobs_are_404_on_every_endpoint_on_postgres() {
    unknown_jobs_are_404_on_every_endpoint(common::Store::Postgres).await;
}

async fn unknown_jobs_are_404_on_every_endpoint(store: common::Store) {
    let c = common::console_over(store, false);
    for (m, path) in [
        ("GET", ""),
        ("GET", "/events"),
        ("GET", "/evidence"),
        ("GET", "/report"),
        ("POST", "/cancel"),
    ] {
        let (s, v) = c.json(m, &format!("/api/v1/jobs/j-nope{path}"), None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{m} {path}: {v}");
        assert!(v["error"].as_str().unwrap().contains("j-nope"), "{v}");
    }
    let (s, _) = c.json("GET", "/api/v1/nothing-here", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_submissions_are_refused_and_leave_nothing() {
    let c = common::console_on("127.0.0.1:8700", 1000);
    let samples = c.state.samples_dir.clone();
    let (s, v) = c.submit("big.bin", &vec![7u8; 5000], &[]).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert!(v["error"].as_str().unwrap().contains("larger than"), "{v}");
    let (s, v) = c.submit("e.bin", b"", &[]).await;
    assert_eq!(
        (s, v["errors"]["sample"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("the sample is empty")
        )
    );
    let (s, v) = c.submit("s.bin", b"abc", &[("servers", "echo,nope")]).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        v["errors"]["servers"].as_str().unwrap().contains("'nope'"),
        "{v}"
    );
    let (s, v) = c.submit("s.bin", b"abc", &[("agent", "sometimes")]).await;
    assert_eq!(
        (s, v["errors"]["agent"].is_string()),
        (StatusCode::UNPROCESSABLE_ENTITY, true)
    );
    let (s, v) = c.submit("s.bin", b"abc", &[("colour", "red")]).await;
    assert_eq!(
        (s, v["errors"]["colour"].is_string()),
        (StatusCode::UNPROCESSABLE_ENTITY, true)
    );
    let (ctype, body) = common::multipart("x", b"abc", &[]);
    let body = String::from_utf8_lossy(&body).replace("name=\"sample\"", "name=\"other\"");
    let _ = ctype;
    let req = c
        .req("POST", "/api/v1/jobs")
        .header(
            header::CONTENT_TYPE,
            "multipart/form-data; boundary=maljanTestBoundary7d1f",
        )
        .body(Body::from(body))
        .unwrap();
    let (s, _) = common::read_json(c.send(req).await).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let req = c
        .req("POST", "/api/v1/jobs")
        .header(header::CONTENT_TYPE, "multipart/form-data; boundary=zzz")
        .body(Body::from("--zzz\r\ngarbage"))
        .unwrap();
    let (s, v) = common::read_json(c.send(req).await).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let req = c
        .req("POST", "/api/v1/jobs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .unwrap();
    let (s, v) = common::read_json(c.send(req).await).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["error"].as_str().unwrap().contains("multipart"), "{v}");
    let left: Vec<_> = std::fs::read_dir(&samples).unwrap().collect();
    assert!(left.is_empty(), "refused uploads leave nothing: {left:?}");
    let (_, list) = c.json("GET", "/api/v1/jobs", None).await;
    assert_eq!(list["total"], 0, "no job was created: {list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_s_tool_calls_stream_as_they_finish_with_their_evidence() {
    let model = maljan_testkit::ScriptedModel::start(&serde_json::json!({"turns": [
        {"tool_calls": [{"id": "c1", "name": "hashes", "arguments": "{}"}]},
        {"text": "hashed [ev_0001]"},
        {"text": serde_json::json!({"verdict": "unknown", "confidence": 0.2, "family": null,
            "summary": "thin", "claims": [], "techniques": []}).to_string()},
    ]}));
    let c = common::console_with_config(&format!(
        "\n[llm]\nprovider = \"openai\"\nbase_url = {:?}\nmodel = \"scripted\"\n",
        model.url
    ));
    let (id, job) = c.run_job(&[("agent", "on"), ("servers", "analysis")]).await;
    assert_eq!(job["verdict"]["source"], "agent", "{job}");
    let all = events(&c, &id, None).await;
    let call = all
        .iter()
        .find(|e| e.1 == "call_finished" && e.2["stage"] == "analyst")
        .unwrap_or_else(|| panic!("the model's call streamed: {all:?}"));
    assert_eq!(call.2["tool"], "hashes", "{:?}", call.2);
    assert_eq!(call.2["status"], "ok", "{:?}", call.2);
    let ev = call.2["evidence"][0].as_str().unwrap();
    let (s, row) = c
        .json(
            "GET",
            &format!("/api/v1/jobs/{id}/evidence?tool=hashes"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{row}");
    assert!(
        row["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["ev_id"] == ev),
        "{ev} is a ledger row: {row}"
    );
}
