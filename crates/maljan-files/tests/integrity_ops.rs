//! Manifests, duplicates, integrity baselines and background watches.

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::json;

#[tokio::test]
async fn manifest_write_then_verify() {
    let h = Harness::new();
    h.write("tree/a.txt", "abc");
    h.write("tree/sub/b.txt", "b");
    let out = h
        .call(
            "FA_write_manifest",
            json!({"root": "tree", "manifest_path": "m/manifest.json"}),
        )
        .await
        .unwrap();
    assert_eq!(
        out["files"]["a.txt"]["checksum"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(out["files"]["sub/b.txt"]["size"], 1);
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(h.path("m/manifest.json")).unwrap()).unwrap();
    assert_eq!(on_disk["version"], 1);
    assert_eq!(on_disk["algorithm"], "sha256");
    let ok = h
        .call(
            "FA_verify_manifest",
            json!({"root": "tree", "manifest_path": "m/manifest.json"}),
        )
        .await
        .unwrap();
    assert_eq!(ok["ok"], true);
    assert_eq!(ok["matched"].as_array().unwrap().len(), 2);

    h.write("tree/a.txt", "changed");
    std::fs::remove_file(h.path("tree/sub/b.txt")).unwrap();
    h.write("tree/new.txt", "n");
    let bad = h
        .call(
            "FA_verify_manifest",
            json!({"root": "tree", "manifest_path": "m/manifest.json"}),
        )
        .await
        .unwrap();
    assert_eq!(bad["ok"], false);
    assert_eq!(bad["modified"], json!(["a.txt"]));
    assert_eq!(bad["missing"], json!(["sub/b.txt"]));
    assert_eq!(bad["extra"], json!(["new.txt"]));
}

#[tokio::test]
async fn manifest_errors_and_hostile_entries() {
    let h = Harness::new();
    h.write("tree/a.txt", "a");
    h.write("junk.json", "{not json");
    h.write("evil.json", r#"{"version":1,"algorithm":"sha256","files":{"../../etc/passwd":{"size":1,"checksum":"00"}}}"#);
    let args = json!({"root": "tree", "manifest_path": "m.json", "algorithm": "crc"});
    assert_eq!(
        h.call("FA_write_manifest", args).await.unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_write_manifest",
            json!({"root": "nope", "manifest_path": "m.json"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_verify_manifest",
            json!({"root": "tree", "manifest_path": "junk.json"})
        )
        .await
        .unwrap_err(),
        "unsupported_format"
    );
    assert_eq!(
        h.call(
            "FA_verify_manifest",
            json!({"root": "tree", "manifest_path": "evil.json"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_verify_manifest",
            json!({"root": "tree", "manifest_path": "none.json"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn duplicates_are_grouped_by_content() {
    let h = Harness::new();
    let big = "x".repeat(100_000);
    h.write("d/big1", &big);
    h.write("d/sub/big2", &big);
    h.write("d/big3", format!("{}y", &big[1..]));
    h.write("d/s1", "same");
    h.write("d/s2", "same");
    h.write("d/e1", "");
    h.write("d/e2", "");
    let out = h
        .call("FA_find_duplicates", json!({"root": "d"}))
        .await
        .unwrap();
    assert_eq!(out["count"], 2);
    assert_eq!(out["groups"][0], json!([h.p("d/big1"), h.p("d/sub/big2")]));
    assert_eq!(out["groups"][1], json!([h.p("d/s1"), h.p("d/s2")]));
    let out = h
        .call(
            "FA_find_duplicates",
            json!({"root": "d", "min_size": 0, "sample_bytes": 16, "algorithm": "md5"}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 3, "empty files count with min_size 0");
    assert_eq!(
        h.call(
            "FA_find_duplicates",
            json!({"root": "d", "sample_bytes": 0})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_find_duplicates", json!({"root": "nope"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn baseline_verify_accept_and_snapshot() {
    let h = Harness::new();
    h.write("t/keep.txt", "keep");
    h.write("t/edit.txt", "before");
    h.write("t/move-me.txt", "moving content");
    h.write("t/gone.txt", "gone");
    let snap = h
        .call("FA_integrity_snapshot", json!({"target": "t"}))
        .await
        .unwrap();
    assert_eq!(snap["entries"].as_array().unwrap().len(), 4);
    assert_eq!(snap["entries"][0]["path"], "edit.txt");
    let stored = h
        .call(
            "FA_integrity_baseline",
            json!({"target": "t", "baseline": "b/base.json"}),
        )
        .await
        .unwrap();
    assert_eq!(stored["entries"], 4);
    let clean = h
        .call(
            "FA_integrity_verify",
            json!({"target": "t", "baseline": "b/base.json"}),
        )
        .await
        .unwrap();
    assert_eq!(clean["ok"], true, "{clean}");

    h.write("t/edit.txt", "after!");
    std::fs::rename(h.path("t/move-me.txt"), h.path("t/moved.txt")).unwrap();
    std::fs::remove_file(h.path("t/gone.txt")).unwrap();
    h.write("t/new.txt", "new");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(h.path("t/keep.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let drift = h
        .call(
            "FA_integrity_verify",
            json!({"target": "t", "baseline": "b/base.json"}),
        )
        .await
        .unwrap();
    assert_eq!(drift["ok"], false);
    let counts = &drift["counts"];
    assert_eq!(
        (counts["modified"].as_u64(), counts["renamed"].as_u64()),
        (Some(1), Some(1)),
        "{drift}"
    );
    assert_eq!(
        (counts["deleted"].as_u64(), counts["created"].as_u64()),
        (Some(1), Some(1)),
        "{drift}"
    );
    assert_eq!(counts["permission_changed"], 1);
    let renamed = drift["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "renamed")
        .unwrap();
    assert_eq!(
        (renamed["path"].as_str(), renamed["previous_path"].as_str()),
        (Some("moved.txt"), Some("move-me.txt"))
    );
    let quick = h
        .call(
            "FA_integrity_verify",
            json!({"target": "t", "baseline": "b/base.json", "deep": false}),
        )
        .await
        .unwrap();
    assert_eq!(quick["deep"], false);
    assert_eq!(quick["counts"]["modified"], 1);

    h.call(
        "FA_integrity_accept",
        json!({"target": "t", "baseline": "b/base.json"}),
    )
    .await
    .unwrap();
    let clean = h
        .call(
            "FA_integrity_verify",
            json!({"target": "t", "baseline": "b/base.json"}),
        )
        .await
        .unwrap();
    assert_eq!(clean["ok"], true);
}

#[tokio::test]
async fn baseline_errors() {
    let h = Harness::new();
    h.write("t/a", "a");
    h.write("bad.json", "[]");
    assert_eq!(
        h.call(
            "FA_integrity_verify",
            json!({"target": "t", "baseline": "none.json"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_integrity_verify",
            json!({"target": "t", "baseline": "bad.json"})
        )
        .await
        .unwrap_err(),
        "unsupported_format"
    );
    assert_eq!(
        h.call(
            "FA_integrity_accept",
            json!({"target": "t", "baseline": "none.json"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    let args = json!({"target": "t", "baseline": "b.json", "algorithm": "nope"});
    assert_eq!(
        h.call("FA_integrity_baseline", args).await.unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_integrity_snapshot", json!({"target": "/etc"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
}

#[tokio::test]
async fn a_watch_runs_in_the_background_until_stopped() {
    let h = Harness::new();
    h.write("t/a.txt", "a");
    h.call(
        "FA_integrity_baseline",
        json!({"target": "t", "baseline": "base.json"}),
    )
    .await
    .unwrap();
    let args = json!({"name": "w1", "target": "t", "baseline": "base.json", "interval": 0.1});
    let started = h
        .call("FA_integrity_watch_start", args.clone())
        .await
        .unwrap();
    assert_eq!(started["running"], true);
    assert_eq!(
        h.call("FA_integrity_watch_start", args).await.unwrap_err(),
        "bad_argument",
        "names are unique"
    );
    h.write("t/a.txt", "tampered");
    let mut seen_drift = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let s = h
            .call("FA_integrity_status", json!({"name": "w1"}))
            .await
            .unwrap();
        if s["monitors"][0]["last_report"]["ok"] == false {
            seen_drift = true;
            break;
        }
    }
    assert!(seen_drift, "the watch never reported the tampering");
    let all = h.call("FA_integrity_status", json!({})).await.unwrap();
    assert_eq!(all["monitors"].as_array().unwrap().len(), 1);
    let stopped = h
        .call("FA_integrity_watch_stop", json!({"name": "w1"}))
        .await
        .unwrap();
    assert_eq!(stopped["running"], false);
    assert_eq!(
        h.call("FA_integrity_watch_stop", json!({"name": "w1"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_integrity_status", json!({"name": "w1"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    let no_base = json!({"name": "w2", "target": "t", "baseline": "missing.json"});
    assert_eq!(
        h.call("FA_integrity_watch_start", no_base)
            .await
            .unwrap_err(),
        "no_such_file"
    );
    let bad_interval = json!({"name": "w3", "target": "t", "baseline": "base.json", "interval": 0});
    assert_eq!(
        h.call("FA_integrity_watch_start", bad_interval)
            .await
            .unwrap_err(),
        "bad_argument"
    );
}
