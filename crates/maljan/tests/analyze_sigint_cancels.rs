//! Ctrl-C during `maljan analyze` with a model: the process gets a real SIGINT while the model
//! is thinking (the scripted model delays its second turn), exits 130, still writes the report
//! marked cancelled, and the ledger keeps every call made before the signal.

mod common;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::maljan;
use maljan_testkit::ScriptedModel;
use maljan_triage::corpus;
use serde_json::{Value, json};

#[test]
fn sigint_mid_run_exits_130_with_a_cancelled_report_and_the_ledger_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let home = tmp.path().join("home");
    let model = ScriptedModel::start(&json!({"turns": [
        {"tool_calls": [{"id": "c1", "name": "iocs_from_file", "arguments": "{\"limit\": 20}"}]},
        // The analyst's second request hangs far longer than the test waits.
        {"delay_ms": 120_000, "text": "too late"},
    ]}));
    let report = tmp.path().join("r.json");
    let mut run = common::Running(
        Command::new(maljan())
            .arg("analyze")
            .arg(&files["notes.txt"])
            .arg("--report")
            .arg(&report)
            .env("MALJAN_HOME", &home)
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_LLM_API_KEY")
            .env("MALJAN_LOG", "warn")
            .env("MALJAN_LLM_PROVIDER", "openai")
            .env("MALJAN_LLM_BASE_URL", &model.url)
            .env("MALJAN_LLM_MODEL", "scripted")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut run.0;

    // Wait until the model has received the second request: the run is mid-analyst.
    let waited = Instant::now();
    while model.requests().len() < 2 {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "the analyst never sent its second request: {:?}",
            model.requests().len()
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("maljan analyze ended before the signal: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);

    let waited = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "maljan analyze did not end within 60 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{status}");

    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["status"], "cancelled", "{}", r["status"]);
    assert_eq!(r["agent"]["cancelled"], true);
    let analyst = r["agent"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "analyst")
        .expect("the analyst stage is in the report");
    assert_eq!(analyst["status"], "cancelled");
    assert!(
        r["verdict"]["degradation"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{}",
        r["verdict"]
    );
    // The analyst's one tool call, made before the signal, is in the conversation with its id.
    let call_ev = r["agent"]["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "iocs_from_file")
        .and_then(|t| t["evidence"].as_str())
        .expect("the analyst's call is in the conversation")
        .to_string();

    // The ledger kept the rows: the triage's calls and the analyst's.
    let job = r["job_id"].as_str().unwrap();
    let out = Command::new(maljan())
        .args(["ledger", "--json", "--limit", "1000", "--job", job])
        .env("MALJAN_HOME", &home)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().expect("a JSON array of calls");
    let ev_ids: Vec<&str> = rows.iter().filter_map(|c| c["ev_id"].as_str()).collect();
    assert!(
        ev_ids.contains(&call_ev.as_str()),
        "{call_ev} in the ledger: {ev_ids:?}"
    );
    for step in r["steps"].as_array().unwrap() {
        for ev in step["evidence"].as_array().unwrap() {
            assert!(
                ev_ids.contains(&ev.as_str().unwrap()),
                "triage evidence {ev} kept in the ledger: {ev_ids:?}"
            );
        }
    }
}
