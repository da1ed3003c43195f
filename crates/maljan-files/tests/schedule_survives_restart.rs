//! A schedule outlives its server: stopped at 10:00 with `*/5 * * * *`, started again at 10:12,
//! it catches up once for the due times it missed (10:05 and 10:10 — one run, trigger
//! catch_up), then fires at 10:15 exactly, on an injected clock.

#[path = "common/automation.rs"]
mod automation;

use automation::{call, serve, until};
use chrono::{TimeZone, Utc};
use maljan_files::ManualClock;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_survives_a_restart_catches_up_once_and_fires_on_time() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 1, 5, 10, 0, 30).unwrap());
    let list = json!([["FA_create_dir", {"dir_path": root.join("out").to_string_lossy()}]]);

    let first = serve(&root, Some(state.path()), clock.clone(), |_| {});
    let job = call(&first, "FA_schedule_add", json!({"name": "tick", "cron_expression": "*/5 * * * *", "action_list": list, "timezone": "UTC", "timeout": 30}))
        .await
        .unwrap();
    assert_eq!(job["next_due"], "2026-01-05T10:05:00.000Z", "{job}");
    drop(first);

    // Down from 10:00:30 to 10:12: 10:05 and 10:10 pass unseen.
    clock.set(Utc.with_ymd_and_hms(2026, 1, 5, 10, 12, 0).unwrap());
    let second = serve(&root, Some(state.path()), clock.clone(), |_| {});
    let history = |want: usize| {
        let server = second.clone();
        move || {
            let server = server.clone();
            async move {
                let runs = call(&server, "FA_schedule_history", json!({"job": "tick"}))
                    .await
                    .unwrap();
                let runs = runs.as_array().unwrap().clone();
                let done = runs.iter().filter(|r| r["state"] != "started").count();
                (done == want).then_some(runs)
            }
        }
    };
    let runs = until("the catch-up run", history(1)).await;
    assert_eq!(runs[0]["trigger"], "catch_up", "{runs:?}");
    assert_eq!(runs[0]["scheduled_at"], "2026-01-05T10:05:00.000Z");
    assert_eq!(runs[0]["state"], "completed", "{runs:?}");
    assert!(root.join("out").is_dir(), "the action list ran");
    let listed = call(&second, "FA_schedule_list", json!({})).await.unwrap();
    assert_eq!(
        listed[0]["next_due"], "2026-01-05T10:15:00.000Z",
        "{listed}"
    );

    clock.set(Utc.with_ymd_and_hms(2026, 1, 5, 10, 15, 0).unwrap());
    let runs = until("the 10:15 run", history(2)).await;
    let on_time = &runs[0];
    assert_eq!(on_time["trigger"], "cron", "{runs:?}");
    assert_eq!(on_time["scheduled_at"], "2026-01-05T10:15:00.000Z");
    assert_eq!(
        on_time["started_at"], "2026-01-05T10:15:00.000Z",
        "fired at its due time"
    );
    assert_eq!(on_time["state"], "completed", "{runs:?}");
    let listed = call(&second, "FA_schedule_list", json!({})).await.unwrap();
    assert_eq!(listed[0]["runs"], 2);
    assert_eq!(listed[0]["last_state"], "completed");
    assert_eq!(listed[0]["next_due"], "2026-01-05T10:20:00.000Z");

    // Removed, it stays removed across a restart too.
    call(&second, "FA_schedule_remove", json!({"name": "tick"}))
        .await
        .unwrap();
    drop(second);
    let third = serve(&root, Some(state.path()), clock.clone(), |_| {});
    let listed = call(&third, "FA_schedule_list", json!({})).await.unwrap();
    assert_eq!(listed, Value::Array(vec![]));
}
