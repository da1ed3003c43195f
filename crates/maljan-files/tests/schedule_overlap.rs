//! A job's runs are guarded: a firing while its previous run is still going is recorded as
//! skipped (unless allow_overlap), a run over its timeout ends as timeout, and
//! FA_schedule_cancel ends the runs in progress.

#[path = "common/automation.rs"]
mod automation;

use std::sync::Arc;

use automation::{call, serve, until};
use maljan_files::SystemClock;
use maljan_server::{ToolError, ToolMeta};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A server with `test_gate`, a tool that returns once the test adds a permit.
fn gated(root: &std::path::Path) -> (Arc<maljan_server::ToolServer>, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let server = serve(root, None, Arc::new(SystemClock), move |reg| {
        reg.add(
            ToolMeta::new("test_gate", "Waits for the test"),
            move |_ctx, _a: NoArgs| {
                let g = g.clone();
                async move {
                    g.acquire().await.unwrap().forget();
                    Ok::<_, ToolError>(json!({"passed": true}))
                }
            },
        );
    });
    (server, gate)
}

async fn state_of(server: &Arc<maljan_server::ToolServer>, run_id: &str) -> Value {
    let runs = call(server, "FA_schedule_history", json!({}))
        .await
        .unwrap();
    runs.as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == run_id)
        .unwrap()["state"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_firing_that_would_overlap_is_skipped() {
    let root = tempfile::tempdir().unwrap();
    let (server, gate) = gated(root.path());
    call(
        &server,
        "FA_schedule_job",
        json!({"name": "slow", "action_list": [["test_gate", {}]]}),
    )
    .await
    .unwrap();
    let first = call(&server, "FA_schedule_run", json!({"name": "slow"}))
        .await
        .unwrap();
    assert_eq!(first["state"], "started", "{first}");
    let second = call(&server, "FA_schedule_run", json!({"name": "slow"}))
        .await
        .unwrap();
    assert_eq!(second["state"], "skipped", "{second}");
    assert!(
        second["reason"].as_str().unwrap().contains("overlap"),
        "{second}"
    );
    let listed = call(&server, "FA_schedule_list", json!({})).await.unwrap();
    assert_eq!(listed[0]["running"], true);
    assert_eq!(listed[0]["skipped"], 1);

    gate.add_permits(1);
    let id = first["run_id"].as_str().unwrap().to_string();
    until("the first run to complete", || async {
        (state_of(&server, &id).await == "completed").then_some(())
    })
    .await;
    let skipped = call(&server, "FA_schedule_history", json!({"state": "skipped"}))
        .await
        .unwrap();
    assert_eq!(skipped.as_array().unwrap().len(), 1);

    // With allow_overlap both run.
    call(
        &server,
        "FA_schedule_job",
        json!({"name": "both", "action_list": [["test_gate", {}]], "allow_overlap": true}),
    )
    .await
    .unwrap();
    let a = call(&server, "FA_schedule_run", json!({"name": "both"}))
        .await
        .unwrap();
    let b = call(&server, "FA_schedule_run", json!({"name": "both"}))
        .await
        .unwrap();
    assert_eq!(
        (a["state"].clone(), b["state"].clone()),
        (json!("started"), json!("started"))
    );
    gate.add_permits(2);
    for run in [a, b] {
        let id = run["run_id"].as_str().unwrap().to_string();
        until("both runs to complete", || async {
            (state_of(&server, &id).await == "completed").then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_ends_at_its_timeout_or_when_cancelled() {
    let root = tempfile::tempdir().unwrap();
    let (server, _gate) = gated(root.path());
    call(
        &server,
        "FA_schedule_job",
        json!({"name": "bounded", "action_list": [["test_gate", {}]], "timeout": 0.2}),
    )
    .await
    .unwrap();
    let run = call(&server, "FA_schedule_run", json!({"name": "bounded"}))
        .await
        .unwrap();
    let id = run["run_id"].as_str().unwrap().to_string();
    until("the timeout", || async {
        (state_of(&server, &id).await == "timeout").then_some(())
    })
    .await;
    let runs = call(&server, "FA_schedule_history", json!({"job": "bounded"}))
        .await
        .unwrap();
    assert!(
        runs[0]["error"].as_str().unwrap().contains("timeout"),
        "{runs}"
    );

    call(
        &server,
        "FA_schedule_job",
        json!({"name": "stuck", "action_list": [["test_gate", {}]]}),
    )
    .await
    .unwrap();
    let run = call(&server, "FA_schedule_run", json!({"name": "stuck"}))
        .await
        .unwrap();
    let cancelled = call(&server, "FA_schedule_cancel", json!({"name": "stuck"}))
        .await
        .unwrap();
    assert_eq!(cancelled[0]["run_id"], run["run_id"], "{cancelled}");
    assert_eq!(cancelled[0]["state"], "cancelled", "{cancelled}");
    let listed = call(&server, "FA_schedule_list", json!({})).await.unwrap();
    let stuck = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "stuck")
        .unwrap()
        .clone();
    assert_eq!(stuck["running"], false, "{stuck}");

    // Bad input is refused with the reason, and the server goes on.
    let err = call(
        &server,
        "FA_schedule_add",
        json!({"name": "x", "cron_expression": "61 * * * *", "action_list": [["test_gate", {}]]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err["code"], "bad_argument", "{err}");
    let err = call(&server, "FA_schedule_run", json!({"name": "nope"}))
        .await
        .unwrap_err();
    assert!(
        err["message"].as_str().unwrap().contains("no such job"),
        "{err}"
    );
    let err = call(
        &server,
        "FA_schedule_job",
        json!({"name": "stuck", "action_list": [["test_gate", {}]]}),
    )
    .await
    .unwrap_err();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("already registered"),
        "{err}"
    );
}
