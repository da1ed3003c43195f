//! A watch on a path outside the roots is refused, also through a symlink inside them, and a
//! bad event kind names the ones accepted.

#[path = "common/automation.rs"]
mod automation;

use std::sync::Arc;

use automation::{call, serve};
use maljan_files::SystemClock;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_outside_the_roots_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    let server = serve(&root, None, Arc::new(SystemClock), |_| {});
    let list = json!([["FA_create_dir", {"dir_path": root.join("x").to_string_lossy()}]]);
    for path in [
        outside.path().to_path_buf(),
        root.join("link"),
        root.join("../"),
    ] {
        let err = call(
            &server,
            "FA_watch_start",
            json!({"name": "w", "path": path.to_string_lossy(), "action_list": list}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err["code"],
            "path_outside_roots",
            "{}: {err}",
            path.display()
        );
    }
    assert_eq!(
        call(&server, "FA_watch_list", json!({})).await.unwrap(),
        json!([])
    );

    let err = call(&server, "FA_watch_start", json!({"name": "w", "path": root.to_string_lossy(), "action_list": list, "events": ["opened"]}))
        .await
        .unwrap_err();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("unsupported event types"),
        "{err}"
    );
    let err = call(
        &server,
        "FA_watch_start",
        json!({"name": "w", "path": root.to_string_lossy(), "action_list": [["FA_no_such", {}]]}),
    )
    .await
    .unwrap_err();
    assert_eq!(err["code"], "bad_argument", "{err}");
    // Inside the roots it starts.
    let ok = call(&server, "FA_watch_start", json!({"name": "w", "path": root.to_string_lossy(), "action_list": list, "recursive": false}))
        .await
        .unwrap();
    assert_eq!(ok["running"], true, "{ok}");
    let all = call(&server, "FA_watch_stop_all", json!({})).await.unwrap();
    assert_eq!(all.as_array().unwrap().len(), 1);
}
