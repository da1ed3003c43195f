//! Pipeline definitions as automation-file writes them: validated with the path of each
//! problem, parameters and upstream results substituted, `when` and `retry` obeyed, dry runs
//! planned without running, runs recorded for status and history, and a pipeline scheduled.

#[path = "common/automation.rs"]
mod automation;

use std::sync::Arc;

use automation::{call, serve};
use maljan_files::SystemClock;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_definition_is_validated_run_recorded_and_scheduled() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    std::fs::write(root.join("in.txt"), b"hello").unwrap();
    let p = |n: &str| root.join(n).to_string_lossy().into_owned();
    let server = serve(&root, None, Arc::new(SystemClock), |_| {});

    let bad = json!({"schema_version": 2, "name": "", "extra": 1, "tasks": {
        "a": {"action": ["FA_nope", {}], "when": "sometimes", "depends_on": ["zz"]},
        "b": {"action": ["FA_list_dir", {"dir_path": "${params.missing}"}], "retry": {"max_attempts": 0}},
    }});
    let checked = call(&server, "FA_pipeline_validate", json!({"definition": bad}))
        .await
        .unwrap();
    assert_eq!(checked["valid"], false);
    let errors: Vec<String> = serde_json::from_value(checked["errors"].clone()).unwrap();
    for want in [
        "extra: unknown key",
        "schema_version",
        "name:",
        "tasks.a.action: unknown action 'FA_nope'",
        "tasks.a.when",
        "unknown task 'zz'",
        "${params.missing}",
        "tasks.b.retry.max_attempts",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{want} not in {errors:?}"
        );
    }
    let err = call(&server, "FA_pipeline_run", json!({"definition": bad}))
        .await
        .unwrap_err();
    assert_eq!(err["code"], "bad_argument", "{err}");

    let definition = json!({"schema_version": 1, "name": "copy", "params": {"target": "out.txt"}, "tasks": {
        "copy": {"action": ["FA_copy_file", {"file_path": p("in.txt"), "target_path": format!("{}/${{params.target}}", root.display())}]},
        "hash": {"action": ["FA_file_checksum", {"path": p("out.txt")}], "depends_on": ["copy"]},
        "broken": {"action": ["FA_copy_file", {"file_path": p("absent.txt"), "target_path": p("x.txt")}], "retry": {"max_attempts": 2, "backoff": 0}},
        "after_broken": {"action": ["FA_list_dir", {"dir_path": p("")}], "depends_on": ["broken"]},
        "on_broken": {"action": ["FA_create_dir", {"dir_path": p("recovered")}], "depends_on": ["broken"], "when": "on_failure"},
    }});
    assert_eq!(
        call(
            &server,
            "FA_pipeline_validate",
            json!({"definition": definition})
        )
        .await
        .unwrap()["valid"],
        true
    );
    let plan = call(
        &server,
        "FA_pipeline_run",
        json!({"definition": definition, "dry_run": true}),
    )
    .await
    .unwrap();
    assert_eq!(plan["tasks"]["hash"]["status"], "planned");
    assert_eq!(plan["tasks"]["hash"]["level"], 1);
    assert!(!root.join("out.txt").exists(), "a dry run runs nothing");

    let run = call(
        &server,
        "FA_pipeline_run",
        json!({"definition": definition}),
    )
    .await
    .unwrap();
    assert_eq!(run["status"], "failed", "{run}");
    let tasks = &run["tasks"];
    assert_eq!(tasks["copy"]["status"], "succeeded", "{run}");
    assert_eq!(
        std::fs::read(root.join("out.txt")).unwrap(),
        b"hello",
        "params substituted"
    );
    assert_eq!(tasks["hash"]["status"], "succeeded");
    assert_eq!(tasks["broken"]["status"], "failed");
    assert_eq!(tasks["broken"]["attempts"], 2, "retried");
    assert_eq!(tasks["after_broken"]["status"], "skipped");
    assert_eq!(tasks["after_broken"]["reason"], "upstream_failed");
    assert_eq!(tasks["on_broken"]["status"], "succeeded", "on_failure ran");
    assert!(root.join("recovered").is_dir());

    let id = run["run_id"].as_str().unwrap();
    let status = call(&server, "FA_pipeline_status", json!({"run_id": id}))
        .await
        .unwrap();
    assert_eq!(
        status["tasks"]["broken"]["error"],
        run["tasks"]["broken"]["error"]
    );
    let history = call(&server, "FA_pipeline_history", json!({"pipeline": "copy"}))
        .await
        .unwrap();
    assert_eq!(
        history.as_array().unwrap().len(),
        1,
        "a dry run is not recorded"
    );
    let err = call(&server, "FA_pipeline_status", json!({"run_id": "nope"}))
        .await
        .unwrap_err();
    assert!(
        err["message"].as_str().unwrap().contains("unknown run"),
        "{err}"
    );

    // A definition file under the roots, scheduled on the cron it declares.
    let mut scheduled = definition.clone();
    scheduled["name"] = json!("nightly");
    scheduled["schedule"] = json!({"cron": "0 2 * * *", "timezone": "Europe/Paris"});
    std::fs::write(root.join("nightly.json"), scheduled.to_string()).unwrap();
    let job = call(
        &server,
        "FA_schedule_pipeline",
        json!({"definition": p("nightly.json")}),
    )
    .await
    .unwrap();
    assert_eq!(job["name"], "nightly", "{job}");
    assert_eq!(job["target"], "pipeline");
    assert_eq!(job["cron"], "0 2 * * *");
    assert_eq!(job["timezone"], "Europe/Paris");
    let err = call(
        &server,
        "FA_schedule_pipeline",
        json!({"definition": "/etc/passwd"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err["code"], "path_outside_roots", "{err}");
}
