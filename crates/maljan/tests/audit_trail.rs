//! The audit trail over a real server: every call of a run — the top-level one and the calls
//! its action list makes — is recorded with its outcome, duration and one correlation id, no
//! secret reaches the state database, and the trail survives a restart.

mod common;

use common::session::Session;
use serde_json::{Value, json};

/// An AES key (base64 of 32 bytes): a secret the trail must never keep.
const SECRET: &str = "aHVudGVyMi1UT1BTRUNSRVQtMDEyMzQ1Njc4OWFiY2Q=";

#[test]
fn every_call_of_a_run_is_recorded_and_no_secret_is() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let state = dir.path().join("state");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.txt"), "hello").unwrap();
    let r = root.to_str().unwrap();
    let args = ["--root", r, "--state-dir", state.to_str().unwrap()];
    let mut s = Session::start(&args, &[]);
    let a = root.join("a.txt");
    let run = s.call(
        "FA_execute_action",
        json!({"action_list": [
            ["FA_file_checksum", {"path": a.to_str().unwrap()}],
            ["FA_create_dir", {"dir_path": root.join("made").to_str().unwrap()}],
            ["FA_encrypt_file", {"source": a.to_str().unwrap(), "target": root.join("a.enc").to_str().unwrap(), "key": SECRET}],
            ["FA_file_checksum", {"path": root.join("missing").to_str().unwrap()}],
        ]}),
    );
    assert!(!run.value.to_string().contains(SECRET));
    // The top-level call and its four nested calls share one correlation id.
    let outer = s.ok("FA_audit_search", json!({"action": "FA_execute_action"}));
    let outer = &outer.as_array().unwrap()[0];
    assert_eq!(outer["status"], if run.is_error { "error" } else { "ok" });
    let correlation = outer["correlation_id"].as_str().unwrap().to_string();
    let records = s.ok("FA_audit_search", json!({"correlation_id": correlation}));
    let records = records.as_array().unwrap();
    let mut tools: Vec<&str> = records
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "FA_create_dir",
            "FA_encrypt_file",
            "FA_execute_action",
            "FA_file_checksum",
            "FA_file_checksum"
        ],
        "{records:?}"
    );
    for r in records {
        assert!(r["duration_ms"].as_f64().unwrap() >= 0.0);
        assert!(r["timestamp"].as_str().unwrap().contains('T'));
    }
    let failed: Vec<&Value> = records.iter().filter(|r| r["status"] == "error").collect();
    assert!(
        failed
            .iter()
            .any(|r| r["action"] == "FA_file_checksum"
                && r["metadata"]["error_code"] == "no_such_file"),
        "{failed:?}"
    );
    let encrypt = records
        .iter()
        .find(|r| r["action"] == "FA_encrypt_file")
        .unwrap();
    assert_eq!(encrypt["metadata"]["arguments"]["key"], "<redacted>");
    assert_eq!(encrypt["resource"], a.to_str().unwrap());
    assert_ne!(encrypt["metadata"]["parent_call_id"], Value::Null);

    // Filters: counts, text, status, time, and unknown ones refused.
    assert_eq!(
        s.ok("FA_audit_count", json!({"correlation_id": correlation})),
        5
    );
    // No secret in what the trail returns, nor anywhere in the state database's files.
    assert!(!Value::Array(records.clone()).to_string().contains(SECRET));
    for entry in std::fs::read_dir(&state).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains(SECRET));
    }
    assert_eq!(
        s.ok(
            "FA_audit_count",
            json!({"text": "FA_ENCRYPT", "correlation_id": correlation})
        ),
        2,
        "text ignores ASCII case (the call, and the action list naming it)"
    );
    assert!(
        s.ok("FA_audit_count", json!({"status": "error"}))
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_eq!(
        s.ok(
            "FA_audit_count",
            json!({"since": "2999-01-01T00:00:00+00:00"})
        ),
        0
    );
    assert_eq!(
        s.ok(
            "FA_audit_count",
            json!({"resource_prefix": r, "action": "FA_create_dir"})
        ),
        1
    );
    let page = s.ok(
        "FA_audit_search",
        json!({"correlation_id": correlation, "limit": 2}),
    );
    assert_eq!(page.as_array().unwrap().len(), 2);
    let unknown = s.call("FA_audit_search", json!({"colour": "red"}));
    assert!(
        unknown.is_error && unknown.value.to_string().contains("colour"),
        "{}",
        unknown.value
    );
    // db_path must be inside the roots.
    let outside = s.call(
        "FA_audit_configure",
        json!({"db_path": "/tmp/elsewhere.sqlite"}),
    );
    assert_eq!(
        outside.value["error"]["code"], "path_outside_roots",
        "{}",
        outside.value
    );
    drop(s);

    // The trail outlives the server.
    let mut again = Session::start(&args, &[]);
    assert_eq!(
        again.ok("FA_audit_count", json!({"correlation_id": correlation})),
        5
    );
    // Purge: nothing is older than an hour; everything is older than 0 s.
    assert_eq!(
        again.ok("FA_audit_purge", json!({"older_than_seconds": 3600})),
        0
    );
    assert!(
        again
            .ok("FA_audit_purge", json!({"older_than_seconds": 0}))
            .as_u64()
            .unwrap()
            >= 5
    );
    // A configured file inside the roots takes the trail from then on.
    let file = root.join("audit.sqlite");
    let configured = again.ok(
        "FA_audit_configure",
        json!({"db_path": file.to_str().unwrap()}),
    );
    assert_eq!(configured["active"], true);
    again.ok("FA_list_dir", json!({"dir_path": r}));
    assert_eq!(
        again.ok("FA_audit_count", json!({"action": "FA_list_dir"})),
        1
    );
    assert!(file.exists());
}
