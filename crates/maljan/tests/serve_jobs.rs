//! `maljan serve jobs` as a host drives it, through the official Python SDK client: a sample
//! under the root analysed (progress notifications while it runs, the verdict with its evidence
//! and the job id in the answer), its report read as md and json page by page, the job listed
//! (and seen by `maljan jobs list`: the same queue), a running job cancelled, and hostile input
//! refused with maljan's error codes — a path outside the root, a symlink leading out of it, an
//! empty file, a depth past the server's, an unknown job — while the sample's folder is never
//! written to. Over HTTP, a sample handed over with put_sample is analysed, and the size limit
//! holds for an upload and for a path alike.

mod common;

use std::{path::Path, process::Command, time::Duration};

use common::*;
use serde_json::{Value, json};

const EICAR: &[u8] = br"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

/// Runs `steps` against the server started by `target` (stdio: the command after `--`; HTTP:
/// `--http URL`), with `home` as maljan's data directory; returns every answer in order.
fn drive(home: &Path, steps: &Value, target: &[&str]) -> Vec<Value> {
    let script = repo_root().join("tests/peers/py_jobs_client.py");
    let out = run(
        Command::new(peer("MALJAN_PY"))
            .arg(script)
            .arg("--steps")
            .arg(steps.to_string())
            .args(target)
            .env("MALJAN_HOME", home)
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_DATABASE_URL")
            .env("MALJAN_LOG", "warn"),
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The answers of step `n` (several when it paged or polled).
fn step(answers: &[Value], n: u64) -> Vec<&Value> {
    answers.iter().filter(|a| a["step"] == n).collect()
}

fn error_code(answer: &Value) -> String {
    assert_eq!(answer["is_error"], true, "{answer}");
    let error: Value = serde_json::from_str(answer["text"].as_str().unwrap()).unwrap();
    error["error"]["code"].as_str().unwrap().to_string()
}

/// Every entry of `dir` with its size and modification time: what "never written" compares.
fn listing(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                m.len(),
                m.modified().unwrap(),
            )
        })
        .collect();
    all.sort();
    all
}

#[test]
fn a_sample_under_the_root_is_analysed_reported_listed_and_hostile_input_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root, outside) = (
        tmp.path().join("home"),
        tmp.path().join("evidence"),
        tmp.path().join("outside"),
    );
    for d in [&root, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(root.join("eicar.com"), EICAR).unwrap();
    std::fs::write(root.join("empty.bin"), b"").unwrap();
    std::fs::write(outside.join("secret.bin"), b"not yours").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.bin"), root.join("escape.bin")).unwrap();
    let before = listing(&root);
    let sample = root.join("eicar.com");
    let steps = json!([
        {"tool": "analyze_sample", "save": "a", "progress": true,
         "args": {"path": sample, "agent": false, "depth": 1}},
        {"tool": "get_report", "follow": "next_cursor",
         "args": {"job_id": "${a.job_id}", "format": "md", "limit": 700}},
        {"tool": "get_report", "follow": "next_cursor",
         "args": {"job_id": "${a.job_id}", "format": "json", "limit": 4000}},
        {"tool": "list_jobs", "args": {"limit": 1}},
        {"tool": "list_jobs", "args": {"status": "${a.status}"}},
        {"tool": "analyze_sample", "args": {"path": outside.join("secret.bin")}},
        {"tool": "analyze_sample", "args": {"path": root.join("escape.bin")}},
        {"tool": "analyze_sample", "args": {"path": root.join("empty.bin")}},
        {"tool": "analyze_sample", "args": {"path": sample, "depth": 99}},
        {"tool": "analyze_sample", "args": {"path": sample, "servers": ["nowhere"]}},
        {"tool": "cancel_job", "args": {"job_id": "job-that-never-was"}},
        {"tool": "cancel_job", "args": {"job_id": "${a.job_id}"}},
        {"tool": "get_report", "args": {"job_id": "${a.job_id}", "cursor": "json:5"}},
    ]);
    let answers = drive(
        &home,
        &steps,
        &[
            "--",
            maljan(),
            "serve",
            "jobs",
            "--root",
            root.to_str().unwrap(),
        ],
    );

    // The verdict, its evidence, the job id; progress heard while it ran, always rising.
    let analysed = step(&answers, 0)[0];
    assert_eq!(analysed["is_error"], false, "{analysed}");
    let a = &analysed["structured"];
    let job_id = a["job_id"].as_str().unwrap();
    assert!(job_id.starts_with("job-"), "{a}");
    assert!(
        ["complete", "degraded"].contains(&a["status"].as_str().unwrap()),
        "{a}"
    );
    assert_eq!(a["sample"]["name"], "eicar.com");
    let verdict = &a["verdict"];
    assert!(
        ["malicious", "suspicious"].contains(&verdict["verdict"].as_str().unwrap()),
        "EICAR's signature is a known-bad fact: {verdict}"
    );
    assert_eq!(verdict["source"], "heuristic", "agent: false");
    let cited: Vec<&str> = (verdict["facts"].as_array().unwrap().iter())
        .flat_map(|f| f["evidence"].as_array().unwrap())
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(!cited.is_empty(), "{verdict}");
    let evidence: Vec<&str> = (a["evidence"].as_array().unwrap().iter())
        .map(|e| e["ev_id"].as_str().unwrap())
        .collect();
    for id in &cited {
        assert!(
            evidence.contains(id),
            "{id} is cited and must be in the ledger: {a}"
        );
    }
    let progress = analysed["progress"].as_array().unwrap();
    assert!(progress.len() >= 3, "{progress:?}");
    let values: Vec<f64> = progress.iter().map(|p| p[0].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let messages: Vec<&str> = progress.iter().filter_map(|p| p[2].as_str()).collect();
    assert!(
        messages.iter().any(|m| m.starts_with("step "))
            && messages.iter().any(|m| m.starts_with("done: ")),
        "{messages:?}"
    );

    // The report as Markdown and as JSON, page by page, joined back whole.
    for (n, format) in [(1, "md"), (2, "json")] {
        let pages = step(&answers, n);
        assert!(pages.len() > 1, "{format}: one page only");
        let mut joined = String::new();
        for (i, page) in pages.iter().enumerate() {
            let p = &page["structured"];
            assert_eq!(p["ready"], true, "{p}");
            assert_eq!(
                p["offset"].as_u64().unwrap() as usize,
                joined.chars().count()
            );
            joined.push_str(p["text"].as_str().unwrap());
            assert_eq!(p["next_cursor"].is_null(), i == pages.len() - 1, "{p}");
        }
        let total = pages[0]["structured"]["total_chars"].as_u64().unwrap();
        assert_eq!(joined.chars().count() as u64, total, "{format}");
        if format == "json" {
            let report: Value = serde_json::from_str(&joined).unwrap();
            assert_eq!(report["job_id"], job_id);
            assert_eq!(report["verdict"]["verdict"], verdict["verdict"]);
        } else {
            assert!(
                joined.contains("eicar.com") && joined.contains(job_id),
                "{joined}"
            );
        }
    }

    // Listed: newest first, filtered by status.
    let newest = &step(&answers, 3)[0]["structured"];
    assert_eq!(newest["jobs"][0]["job_id"], job_id, "{newest}");
    assert_eq!(newest["jobs"].as_array().unwrap().len(), 1);
    let same_status = &step(&answers, 4)[0]["structured"];
    assert!(
        (same_status["jobs"].as_array().unwrap().iter()).all(|j| j["status"] == a["status"]),
        "{same_status}"
    );

    // Hostile input: refused with maljan's codes, each with a remedy.
    assert_eq!(error_code(step(&answers, 5)[0]), "path_outside_roots");
    assert_eq!(
        error_code(step(&answers, 6)[0]),
        "path_outside_roots",
        "a symlink out of the root is judged by where it leads"
    );
    assert_eq!(error_code(step(&answers, 7)[0]), "bad_argument");
    assert!(
        step(&answers, 7)[0]["text"]
            .as_str()
            .unwrap()
            .contains("empty")
    );
    assert_eq!(error_code(step(&answers, 8)[0]), "bad_argument");
    assert_eq!(error_code(step(&answers, 9)[0]), "not_configured");
    assert_eq!(error_code(step(&answers, 10)[0]), "bad_argument");
    let ended = step(&answers, 11)[0];
    assert_eq!(error_code(ended), "bad_argument");
    assert!(
        ended["text"].as_str().unwrap().contains("has ended"),
        "{ended}"
    );
    assert_eq!(
        error_code(step(&answers, 12)[0]),
        "bad_argument",
        "a json cursor for an md page"
    );

    // The evidence folder is as it was: nothing carved or extracted beside the sample.
    assert_eq!(listing(&root), before);

    // The same queue and database as the CLI's.
    let listed = Command::new(maljan())
        .args(["jobs", "list"])
        .env("MALJAN_HOME", &home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_DATABASE_URL")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(job_id),
        "{}",
        text(&listed)
    );
}

#[test]
fn a_running_job_is_cancelled_and_keeps_its_report() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("evidence"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("eicar.com"), EICAR).unwrap();
    // A triage step on a server that never answers (within a minute): the job is still
    // running when it is cancelled.
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.analysis]\ncommand = {:?}\nargs = [\"serve\", \"analysis\"]\n\n\
             [servers.stuck]\ncommand = {:?}\nenv = {{ FIXTURE_TIMEOUT_S = \"60\" }}\n",
            maljan(),
            maljan_testkit::bin_path("fixture-hang"),
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("triage.toml"),
        "[[extra_steps]]\nserver = \"stuck\"\ntool = \"work\"\nargs = {}\n",
    )
    .unwrap();
    let steps = json!([
        {"tool": "analyze_sample", "save": "a",
         "args": {"path": root.join("eicar.com"), "wait": false, "agent": false}},
        {"tool": "list_jobs", "save": "running",
         "until": {"field": "total", "equals": 1, "tries": 60}, "args": {"status": "running"}},
        {"tool": "cancel_job", "args": {"job_id": "${a.job_id}"}},
        {"tool": "get_report", "until": {"field": "ready", "equals": true, "tries": 120},
         "args": {"job_id": "${a.job_id}", "format": "json", "limit": 200000}},
    ]);
    let answers = drive(
        &home,
        &steps,
        &[
            "--",
            maljan(),
            "serve",
            "jobs",
            "--root",
            root.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let started = &step(&answers, 0)[0]["structured"];
    assert_eq!(started["status"], "running", "{started}");
    assert!(started["verdict"].is_null());
    let running = &step(&answers, 1).last().unwrap()["structured"];
    assert_eq!(running["jobs"][0]["job_id"], started["job_id"], "{running}");
    let cancelled = &step(&answers, 2)[0];
    assert_eq!(cancelled["is_error"], false, "{cancelled}");
    assert_eq!(cancelled["structured"]["outcome"], "cancelling");
    let page = &step(&answers, 3).last().unwrap()["structured"];
    assert_eq!(page["ready"], true, "{page}");
    assert_eq!(page["status"], "cancelled", "{page}");
    let report: Value = serde_json::from_str(page["text"].as_str().unwrap()).unwrap();
    assert_eq!(report["status"], "cancelled");
}
