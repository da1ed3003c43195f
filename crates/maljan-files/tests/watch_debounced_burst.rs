//! A watch fires its action list once per debounced burst of events, and comes back when the
//! server starts again on the same state directory.

#[path = "common/automation.rs"]
mod automation;

use std::{sync::Arc, time::Duration};

use automation::{call, serve, until};
use maljan_files::SystemClock;
use serde_json::json;

async fn fired(server: &Arc<maljan_server::ToolServer>) -> u64 {
    let listed = call(server, "FA_watch_list", json!({})).await.unwrap();
    listed[0]["fired"].as_u64().unwrap()
}

fn burst(path: &std::path::Path) {
    for i in 0..30 {
        std::fs::write(path, format!("write {i}")).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_writes_fires_the_watch_once() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let inbox = root.join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let marker = root.join("marks");
    let list = json!([["FA_create_dir", {"dir_path": marker.to_string_lossy()}]]);

    let first = serve(&root, Some(state.path()), Arc::new(SystemClock), |_| {});
    let started = call(&first, "FA_watch_start", json!({"name": "inbox", "path": inbox.to_string_lossy(), "action_list": list, "events": ["created", "modified"], "debounce": 0.3}))
        .await
        .unwrap();
    assert_eq!(started["running"], true, "{started}");
    drop(first);

    // The watch is back after a restart.
    let server = serve(&root, Some(state.path()), Arc::new(SystemClock), |_| {});
    until("the watch to restart", || async {
        let listed = call(&server, "FA_watch_list", json!({})).await.unwrap();
        (listed[0]["running"] == true).then_some(())
    })
    .await;

    burst(&inbox.join("a.txt"));
    until("the first firing", || async {
        (fired(&server).await == 1).then_some(())
    })
    .await;
    assert!(marker.is_dir(), "the action list ran");
    // Several debounce windows later, still once.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(fired(&server).await, 1, "one burst, one firing");

    burst(&inbox.join("a.txt"));
    until("the second firing", || async {
        (fired(&server).await == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(fired(&server).await, 2);

    // An event kind it does not watch fires nothing.
    std::fs::remove_file(inbox.join("a.txt")).unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(fired(&server).await, 2, "deleted is not watched");

    let stopped = call(&server, "FA_watch_stop", json!({"name": "inbox"}))
        .await
        .unwrap();
    assert_eq!(stopped["name"], "inbox");
    assert_eq!(
        call(&server, "FA_watch_list", json!({})).await.unwrap(),
        json!([])
    );
}
