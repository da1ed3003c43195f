//! Whole-directory actions: copy, move, rename, remove, create_file, rotate, sync.

mod common;

use std::time::{Duration, SystemTime};

use common::Harness;
use serde_json::json;

fn set_mtime(path: &std::path::Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[tokio::test]
async fn copy_dir_merges_and_keeps_links_as_links() {
    let h = Harness::new();
    h.write("a/x.txt", "x");
    h.write("a/sub/y.txt", "y");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), h.path("a/out-link")).unwrap();
    h.write("b/existing.txt", "keep");
    let out = h
        .call(
            "FA_copy_dir",
            json!({"dir_path": "a", "target_dir_path": "b"}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 3);
    assert_eq!(std::fs::read_to_string(h.path("b/sub/y.txt")).unwrap(), "y");
    assert!(h.path("b/existing.txt").exists());
    assert!(
        std::fs::symlink_metadata(h.path("b/out-link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        h.call(
            "FA_copy_dir",
            json!({"dir_path": "a", "target_dir_path": "a/inner"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_copy_dir",
            json!({"dir_path": "nope", "target_dir_path": "c"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_copy_dir",
            json!({"dir_path": "a", "target_dir_path": "/tmp/maljan-x"})
        )
        .await
        .unwrap_err(),
        "path_outside_roots"
    );
}

#[tokio::test]
async fn copy_dir_refuses_to_write_through_a_link_in_the_target() {
    let h = Harness::new();
    h.write("a/sub/y.txt", "y");
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(h.path("b")).unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path("b/sub")).unwrap();
    let err = h
        .call(
            "FA_copy_dir",
            json!({"dir_path": "a", "target_dir_path": "b"}),
        )
        .await
        .unwrap_err();
    assert_eq!(err, "path_outside_roots");
    assert!(!outside.path().join("y.txt").exists());
}

#[tokio::test]
async fn copy_all_file_to_dir_moves_the_directory_in() {
    let h = Harness::new();
    h.write("src/f.txt", "f");
    std::fs::create_dir(h.path("dest")).unwrap();
    let out = h
        .call(
            "FA_copy_all_file_to_dir",
            json!({"dir_path": "src", "target_dir_path": "dest"}),
        )
        .await
        .unwrap();
    assert_eq!(out["target"], h.p("dest/src"));
    assert!(h.path("dest/src/f.txt").exists());
    assert!(!h.path("src").exists());
    let err = h
        .call(
            "FA_copy_all_file_to_dir",
            json!({"dir_path": "src", "target_dir_path": "dest"}),
        )
        .await;
    assert_eq!(err.unwrap_err(), "no_such_file");
    let err = h
        .call(
            "FA_copy_all_file_to_dir",
            json!({"dir_path": "dest/src", "target_dir_path": "missing"}),
        )
        .await;
    assert_eq!(err.unwrap_err(), "no_such_file");
}

#[tokio::test]
async fn copy_specify_extension_file_copies_matching_files() {
    let h = Harness::new();
    h.write("src/a.txt", "a");
    h.write("src/deep/b.txt", "b");
    h.write("src/c.log", "c");
    std::fs::create_dir(h.path("dest")).unwrap();
    let args = json!({"file_dir_path": "src", "target_extension": ".txt", "target_path": "dest"});
    let out = h
        .call("FA_copy_specify_extension_file", args)
        .await
        .unwrap();
    assert_eq!(out["count"], 2);
    assert!(h.path("dest/b.txt").exists() && !h.path("dest/c.log").exists());
    let args = json!({"file_dir_path": "src", "target_extension": "", "target_path": "dest"});
    assert_eq!(
        h.call("FA_copy_specify_extension_file", args)
            .await
            .unwrap_err(),
        "bad_argument"
    );
    let args = json!({"file_dir_path": "src", "target_extension": "txt", "target_path": "nodir"});
    assert_eq!(
        h.call("FA_copy_specify_extension_file", args)
            .await
            .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn create_file_in_encodings() {
    let h = Harness::new();
    let out = h
        .call(
            "FA_create_file",
            json!({"file_path": "u.txt", "content": "héllo"}),
        )
        .await
        .unwrap();
    assert_eq!(out["bytes"], 6);
    h.call(
        "FA_create_file",
        json!({"file_path": "l.txt", "content": "héllo", "encoding": "latin-1"}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(h.path("l.txt")).unwrap(), b"h\xe9llo");
    h.call("FA_create_file", json!({"file_path": "empty.txt"}))
        .await
        .unwrap();
    assert_eq!(std::fs::read(h.path("empty.txt")).unwrap().len(), 0);
    let err = h
        .call(
            "FA_create_file",
            json!({"file_path": "a.txt", "content": "日本", "encoding": "ascii"}),
        )
        .await;
    assert_eq!(err.unwrap_err(), "bad_argument");
    let err = h
        .call(
            "FA_create_file",
            json!({"file_path": "a.txt", "encoding": "martian"}),
        )
        .await;
    assert_eq!(err.unwrap_err(), "bad_argument");
    assert_eq!(
        h.call("FA_create_file", json!({"file_path": "no/dir/a.txt"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_create_file", json!({"file_path": "../a.txt"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
}

#[tokio::test]
async fn remove_dir_tree_and_its_refusals() {
    let h = Harness::new();
    h.write("gone/a/b.txt", "x");
    h.write("victim/keep.txt", "k");
    std::os::unix::fs::symlink(h.path("victim"), h.path("dirlink")).unwrap();
    assert_eq!(
        h.call("FA_remove_dir_tree", json!({"dir_path": "dirlink"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert!(h.path("victim/keep.txt").exists());
    h.call("FA_remove_dir_tree", json!({"dir_path": "gone"}))
        .await
        .unwrap();
    assert!(!h.path("gone").exists());
    assert_eq!(
        h.call("FA_remove_dir_tree", json!({"dir_path": "gone"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_remove_dir_tree", json!({"dir_path": "victim/keep.txt"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_remove_dir_tree", json!({"dir_path": "."}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_remove_dir_tree", json!({"dir_path": "/tmp"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
}

#[tokio::test]
async fn rename_dir_and_rename_file() {
    let h = Harness::new();
    h.write("old/one.txt", "1");
    h.write("old/two.txt", "2");
    h.write("old/n.log", "3");
    let out = h
        .call(
            "FA_rename_dir",
            json!({"origin_dir_path": "old", "target_dir": "new"}),
        )
        .await
        .unwrap();
    assert_eq!(out["target"], h.p("new"));
    assert!(h.path("new/one.txt").exists());
    assert_eq!(
        h.call(
            "FA_rename_dir",
            json!({"origin_dir_path": "old", "target_dir": "x"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    std::fs::create_dir(h.path("taken")).unwrap();
    assert_eq!(
        h.call(
            "FA_rename_dir",
            json!({"origin_dir_path": "new", "target_dir": "taken"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_rename_dir",
            json!({"origin_dir_path": "new", "target_dir": "/tmp/x"})
        )
        .await
        .unwrap_err(),
        "path_outside_roots"
    );

    let out = h
        .call(
            "FA_rename_file",
            json!({"origin_file_path": "new", "target_name": "doc", "file_extension": "txt"}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 2);
    assert!(
        h.path("new/doc_0.txt").exists()
            && h.path("new/doc_1.txt").exists()
            && h.path("new/n.log").exists()
    );
    let bad = json!({"origin_file_path": "new", "target_name": "../x"});
    assert_eq!(
        h.call("FA_rename_file", bad).await.unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_rename_file",
            json!({"origin_file_path": "nope", "target_name": "x"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn rotate_backups_keeps_newest_per_slot() {
    let h = Harness::new();
    let day = Duration::from_secs(86_400);
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for i in 0..10u64 {
        let p = h.write(&format!("bk/backup-{i}.zip"), "x");
        set_mtime(&p, base - day * i as u32);
    }
    h.write("bk/notes.txt", "keep");
    let args = json!({"directory": "bk", "pattern": "backup-*.zip", "keep_daily": 3, "keep_weekly": 0, "keep_monthly": 0, "dry_run": true});
    let out = h.call("FA_rotate_backups", args.clone()).await.unwrap();
    assert_eq!(out["kept"].as_array().unwrap().len(), 3);
    assert_eq!(out["deleted"].as_array().unwrap().len(), 7);
    assert!(
        h.path("bk/backup-9.zip").exists(),
        "dry run deletes nothing"
    );
    let mut args = args;
    args["dry_run"] = json!(false);
    h.call("FA_rotate_backups", args).await.unwrap();
    assert!(h.path("bk/backup-0.zip").exists() && h.path("bk/backup-2.zip").exists());
    assert!(!h.path("bk/backup-3.zip").exists() && h.path("bk/notes.txt").exists());
    let bad = json!({"directory": "bk", "keep_daily": -1});
    assert_eq!(
        h.call("FA_rotate_backups", bad).await.unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_rotate_backups", json!({"directory": "nope"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn sync_dir_copies_changes_and_prunes() {
    let h = Harness::new();
    h.write("src/a.txt", "a");
    h.write("src/sub/b.txt", "b");
    h.write("dst/stale.txt", "old");
    let out = h
        .call("FA_sync_dir", json!({"src": "src", "dst": "dst"}))
        .await
        .unwrap();
    assert_eq!(out["copied"], json!(["a.txt", "sub/b.txt"]));
    let out = h
        .call("FA_sync_dir", json!({"src": "src", "dst": "dst"}))
        .await
        .unwrap();
    assert_eq!(out["skipped"].as_array().unwrap().len(), 2);
    assert!(out["copied"].as_array().unwrap().is_empty());
    h.write("src/a.txt", "changed!");
    let out = h.call("FA_sync_dir", json!({"src": "src", "dst": "dst", "compare": "checksum", "delete": true, "dry_run": true})).await.unwrap();
    assert_eq!(out["copied"], json!(["a.txt"]));
    assert_eq!(out["deleted"], json!(["stale.txt"]));
    assert!(h.path("dst/stale.txt").exists());
    h.call(
        "FA_sync_dir",
        json!({"src": "src", "dst": "dst", "compare": "checksum", "delete": true}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(h.path("dst/a.txt")).unwrap(),
        "changed!"
    );
    assert!(!h.path("dst/stale.txt").exists());
    assert_eq!(
        h.call(
            "FA_sync_dir",
            json!({"src": "src", "dst": "d2", "compare": "fuzzy"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_sync_dir", json!({"src": "nope", "dst": "d2"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_sync_dir", json!({"src": "src", "dst": "src/inner"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
}
