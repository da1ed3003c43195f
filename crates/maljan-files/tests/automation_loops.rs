//! Automation cannot feed itself (issue 44, item 4): a background run carries its depth and its
//! origins, so a schedule that fires itself (directly, twice per run, or through another
//! schedule), a chain of schedules deeper than the nesting limit, a schedule fired more often
//! than its rate limit, and a watch whose actions write where it watches are each refused with a
//! clear error, recorded once, and the number of runs stays bounded.

#[path = "common/automation.rs"]
mod automation;

use std::{sync::Arc, time::Duration};

use automation::{call, serve, until};
use maljan_files::{ManualClock, SystemClock};
use maljan_server::ToolServer;
use serde_json::{Value, json};

/// Every recorded run, once none is still going.
async fn settled_runs(server: &Arc<ToolServer>) -> Vec<Value> {
    until("the runs to end", || async {
        let runs = call(server, "FA_schedule_history", json!({"limit": 1000}))
            .await
            .unwrap();
        let runs = runs.as_array().unwrap().clone();
        runs.iter().all(|r| r["state"] != "started").then_some(runs)
    })
    .await
}

fn refused(runs: &[Value]) -> Vec<&Value> {
    runs.iter().filter(|r| r["state"] == "refused").collect()
}

async fn job(server: &Arc<ToolServer>, name: &str, list: Value) {
    call(
        server,
        "FA_schedule_job",
        json!({"name": name, "action_list": list, "allow_overlap": true}),
    )
    .await
    .unwrap();
}

fn run_of(name: &str) -> Value {
    json!(["FA_schedule_run", {"name": name}])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_that_runs_itself_is_refused_once() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(root.path(), None, Arc::new(SystemClock), |_| {});
    job(&server, "self", json!([run_of("self")])).await;
    call(&server, "FA_schedule_run", json!({"name": "self"}))
        .await
        .unwrap();
    let runs = settled_runs(&server).await;
    assert_eq!(runs.len(), 2, "one run and one refusal: {runs:#?}");
    let refusal = refused(&runs);
    assert_eq!(refusal.len(), 1, "{runs:#?}");
    let error = refusal[0]["error"].as_str().unwrap();
    assert!(
        error.contains("a loop") && error.contains("schedule:self → schedule:self"),
        "{error}"
    );
    // The run whose action was refused says so.
    let run = runs.iter().find(|r| r["state"] != "refused").unwrap();
    assert_eq!(run["state"], "failed", "{run}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_that_runs_itself_twice_per_run_does_not_grow() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(root.path(), None, Arc::new(SystemClock), |_| {});
    job(&server, "twice", json!([run_of("twice"), run_of("twice")])).await;
    call(&server, "FA_schedule_run", json!({"name": "twice"}))
        .await
        .unwrap();
    let runs = settled_runs(&server).await;
    // Both self-fires refused; the loop recorded once.
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert_eq!(refused(&runs).len(), 1, "{runs:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_schedules_firing_each_other_are_refused_at_the_first_return() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(root.path(), None, Arc::new(SystemClock), |_| {});
    job(&server, "ping", json!([run_of("pong")])).await;
    job(&server, "pong", json!([run_of("ping")])).await;
    call(&server, "FA_schedule_run", json!({"name": "ping"}))
        .await
        .unwrap();
    let runs = settled_runs(&server).await;
    assert_eq!(runs.len(), 3, "ping, pong, and ping refused: {runs:#?}");
    let refusal = refused(&runs);
    assert_eq!(refusal.len(), 1, "{runs:#?}");
    assert_eq!(refusal[0]["job"], "ping");
    let error = refusal[0]["error"].as_str().unwrap();
    assert!(
        error.contains("schedule:ping → schedule:pong → schedule:ping"),
        "{error}"
    );
    // The run pong started carries its origin.
    let pong = runs.iter().find(|r| r["job"] == "pong").unwrap();
    assert!(
        pong["reason"]
            .as_str()
            .is_some_and(|r| r.contains("schedule:ping")),
        "{pong}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timer_fired_schedule_that_runs_itself_is_refused_once() {
    let root = tempfile::tempdir().unwrap();
    let start = chrono::Utc::now();
    let clock = ManualClock::new(start);
    let server = serve(root.path(), None, clock.clone(), |_| {});
    call(
        &server,
        "FA_schedule_add",
        json!({"name": "tick", "cron_expression": "* * * * *", "action_list": [run_of("tick")], "allow_overlap": true}),
    )
    .await
    .unwrap();
    clock.advance(chrono::Duration::minutes(2));
    let runs = until("the timer's firing and its refusal", || async {
        let runs = call(&server, "FA_schedule_history", json!({"limit": 1000}))
            .await
            .unwrap();
        let runs = runs.as_array().unwrap().clone();
        (runs.len() >= 2 && runs.iter().all(|r| r["state"] != "started")).then_some(runs)
    })
    .await;
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert_eq!(refused(&runs).len(), 1, "{runs:#?}");
    // The timer fired the run; the run's own FA_schedule_run was the refused attempt.
    let fired = runs.iter().find(|r| r["state"] != "refused").unwrap();
    assert!(
        fired["trigger"] == "cron" || fired["trigger"] == "catch_up",
        "{runs:#?}"
    );
    assert_eq!(refused(&runs)[0]["trigger"], "manual");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chain_of_schedules_counts_against_the_nesting_limit() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(root.path(), None, Arc::new(SystemClock), |_| {});
    // link0 fires link1, which fires link2, ... : no loop, only depth.
    for i in 0..20 {
        job(
            &server,
            &format!("link{i}"),
            json!([run_of(&format!("link{}", i + 1))]),
        )
        .await;
    }
    call(&server, "FA_schedule_run", json!({"name": "link0"}))
        .await
        .unwrap();
    let runs = settled_runs(&server).await;
    // Each run is two levels below the one that fired it (its action, then its own run), so
    // the 16 levels hold 8 runs; the ninth is refused.
    let refusal = refused(&runs);
    assert_eq!(refusal.len(), 1, "{runs:#?}");
    assert_eq!(runs.len(), 9, "{runs:#?}");
    let error = refusal[0]["error"].as_str().unwrap();
    assert!(error.contains("levels deep"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_fired_over_its_rate_limit_is_refused_and_recorded_once() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(root.path(), None, Arc::new(SystemClock), |_| {});
    let dir = root.path().to_string_lossy().to_string();
    job(&server, "busy", json!([["FA_list_dir", {"dir_path": dir}]])).await;
    let mut errors = Vec::new();
    for _ in 0..75 {
        if let Err(e) = call(&server, "FA_schedule_run", json!({"name": "busy"})).await {
            errors.push(e);
        }
    }
    assert_eq!(errors.len(), 15, "{errors:#?}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("60 times within 60 s"),
        "{}",
        errors[0]
    );
    let runs = settled_runs(&server).await;
    assert_eq!(runs.len(), 61, "60 runs and one refusal");
    assert_eq!(refused(&runs).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_whose_actions_write_where_it_watches_fires_once() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let inbox = root.join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let server = serve(&root, None, Arc::new(SystemClock), |_| {});
    // Each firing writes a new file into the folder it watches.
    let list = json!([["FA_create_file", {"file_path": inbox.join("echo.txt").to_string_lossy(), "content": "again"}]]);
    call(
        &server,
        "FA_watch_start",
        json!({"name": "echo", "path": inbox.to_string_lossy(), "action_list": list, "events": ["created", "modified"], "debounce": 0.2}),
    )
    .await
    .unwrap();
    std::fs::write(inbox.join("in.txt"), "from outside").unwrap();
    let listed = until("the firing and its own change refused", || async {
        let listed = call(&server, "FA_watch_list", json!({})).await.unwrap();
        (listed[0]["refused"].as_u64() >= Some(1)).then_some(listed)
    })
    .await;
    assert_eq!(listed[0]["fired"], 1, "{listed}");
    let error = listed[0]["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("a loop"), "{listed}");
    // Many debounce windows later, still one firing.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listed = call(&server, "FA_watch_list", json!({})).await.unwrap();
    assert_eq!(listed[0]["fired"], 1, "{listed}");
    // An outside change after the quiet fires it again: the watch still works.
    std::fs::write(inbox.join("in2.txt"), "more").unwrap();
    until("the second firing", || async {
        let listed = call(&server, "FA_watch_list", json!({})).await.unwrap();
        (listed[0]["fired"] == 2).then_some(())
    })
    .await;
}
