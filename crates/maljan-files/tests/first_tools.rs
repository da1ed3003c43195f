//! The first seven actions: list, find, checksum, verify, create, copy, remove.

mod common;

use common::Harness;
use serde_json::json;

#[tokio::test]
async fn list_dir_lists_entries_with_kinds() {
    let h = Harness::new();
    h.write("a.txt", "hello");
    h.write("sub/b.txt", "x");
    let out = h
        .call("FA_list_dir", json!({"dir_path": h.p("")}))
        .await
        .unwrap();
    assert_eq!(out["count"], 2);
    assert_eq!(out["entries"][0]["name"], "a.txt");
    assert_eq!(out["entries"][0]["kind"], "file");
    assert_eq!(out["entries"][0]["size"], 5);
    assert_eq!(out["entries"][1]["kind"], "dir");
    let out = h
        .call("FA_list_dir", json!({"dir_path": ".", "recursive": true}))
        .await
        .unwrap();
    assert_eq!(out["count"], 3);
    let out = h
        .call(
            "FA_list_dir",
            json!({"dir_path": ".", "recursive": true, "max_entries": 2}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 2);
    assert_eq!(out["truncated"], true);
}

#[tokio::test]
async fn list_dir_errors() {
    let h = Harness::new();
    h.write("f", "x");
    assert_eq!(
        h.call("FA_list_dir", json!({"dir_path": "missing"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_list_dir", json!({"dir_path": "f"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_list_dir", json!({"dir_path": "/etc"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
    assert_eq!(
        h.call("FA_list_dir", json!({"dir_path": ".", "max_entries": 0}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_list_dir", json!({"dir_path": ".", "bogus": 1}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn fast_find_matches_names_case_insensitively() {
    let h = Harness::new();
    h.write("a/Report.LOG", "");
    h.write("a/b/c/deep.log", "");
    h.write("a/keep.txt", "");
    std::fs::create_dir_all(h.path("dir.log")).unwrap();
    let out = h
        .call("FA_fast_find", json!({"root": h.p(""), "pattern": "*.log"}))
        .await
        .unwrap();
    let matches: Vec<&str> = out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(matches, vec![h.p("a/Report.LOG"), h.p("a/b/c/deep.log")]);
    let out = h
        .call(
            "FA_fast_find",
            json!({"root": ".", "pattern": "*.log", "files_only": false}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 3);
    let out = h
        .call("FA_fast_find", json!({"root": ".", "limit": 1}))
        .await
        .unwrap();
    assert_eq!(out["count"], 1);
    assert_eq!(out["truncated"], true);
    let out = h
        .call("FA_fast_find", json!({"root": ".", "pattern": "[kK]eep.*"}))
        .await
        .unwrap();
    assert_eq!(out["count"], 1);
}

#[tokio::test]
async fn fast_find_does_not_follow_symlinks_out() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path("out")).unwrap();
    let out = h
        .call("FA_fast_find", json!({"root": ".", "pattern": "secret*"}))
        .await
        .unwrap();
    assert_eq!(out["count"], 0);
}

#[tokio::test]
async fn fast_find_errors() {
    let h = Harness::new();
    assert_eq!(
        h.call("FA_fast_find", json!({"root": "nope"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_fast_find", json!({"root": "/"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
    assert_eq!(
        h.call("FA_fast_find", json!({"root": ".", "pattern": "[a"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_fast_find", json!({"root": ".", "limit": 0}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn checksum_of_known_content() {
    let h = Harness::new();
    h.write("abc", "abc");
    let out = h
        .call("FA_file_checksum", json!({"path": "abc"}))
        .await
        .unwrap();
    assert_eq!(
        out["digest"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(out["algorithm"], "sha256");
    assert_eq!(out["size"], 3);
    let out = h
        .call(
            "FA_file_checksum",
            json!({"path": "abc", "algorithm": "md5", "chunk_size": 1}),
        )
        .await
        .unwrap();
    assert_eq!(out["digest"], "900150983cd24fb0d6963f7d28e17f72");
    let out = h
        .call(
            "FA_file_checksum",
            json!({"path": "abc", "algorithm": "sha512"}),
        )
        .await
        .unwrap();
    assert!(
        out["digest"]
            .as_str()
            .unwrap()
            .starts_with("ddaf35a193617aba")
    );
}

#[tokio::test]
async fn checksum_errors() {
    let h = Harness::new();
    h.write("abc", "abc");
    assert_eq!(
        h.call("FA_file_checksum", json!({"path": "missing"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_file_checksum", json!({"path": "."}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_file_checksum", json!({"path": "../x"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
    let (code, msg) = h
        .error("FA_file_checksum", json!({"path": "abc", "chunk_size": 0}))
        .await;
    assert_eq!(code, "bad_argument");
    assert!(msg.contains("chunk_size"), "{msg}");
    let (code, msg) = h
        .error(
            "FA_file_checksum",
            json!({"path": "abc", "algorithm": "whirlpool"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(
        msg.contains("sha256") && msg.contains("md5") && msg.contains("blake2b"),
        "{msg}"
    );
    assert_eq!(
        h.call(
            "FA_file_checksum",
            json!({"path": "abc", "chunk_size": "big"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn verify_checksum_matches_and_mismatches() {
    let h = Harness::new();
    h.write("abc", "abc");
    let good = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
    let out = h
        .call(
            "FA_verify_checksum",
            json!({"path": "abc", "expected": good}),
        )
        .await
        .unwrap();
    assert_eq!(out["matched"], true);
    let out = h
        .call(
            "FA_verify_checksum",
            json!({"path": "abc", "expected": "00"}),
        )
        .await
        .unwrap();
    assert_eq!(out["matched"], false);
    assert_eq!(out["actual"], good.to_lowercase());
    assert_eq!(
        h.call(
            "FA_verify_checksum",
            json!({"path": "abc", "expected": "xyz"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_verify_checksum",
            json!({"path": "nope", "expected": "00"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_verify_checksum",
            json!({"path": "abc", "expected": "00", "algorithm": "x"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn create_dir_is_idempotent_and_confined() {
    let h = Harness::new();
    let out = h
        .call("FA_create_dir", json!({"dir_path": "x/y/z"}))
        .await
        .unwrap();
    assert_eq!(out["created"], true);
    assert!(h.path("x/y/z").is_dir());
    let out = h
        .call("FA_create_dir", json!({"dir_path": "x/y/z"}))
        .await
        .unwrap();
    assert_eq!(out["created"], false);
    assert_eq!(
        h.call("FA_create_dir", json!({"dir_path": "../../escape"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
    h.write("file", "");
    assert_eq!(
        h.call("FA_create_dir", json!({"dir_path": "file/sub"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn dangling_symlink_targets_are_refused() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("created-by-server");
    std::os::unix::fs::symlink(&victim, h.path("dangling")).unwrap();
    h.write("src.txt", "payload");
    let err = h
        .call(
            "FA_copy_file",
            json!({"file_path": "src.txt", "target_path": "dangling"}),
        )
        .await
        .unwrap_err();
    assert_eq!(err, "path_outside_roots");
    assert!(!victim.exists());
    assert_eq!(
        h.call("FA_create_dir", json!({"dir_path": "dangling/x"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
}

#[tokio::test]
async fn copy_file_to_path_and_into_dir() {
    let h = Harness::new();
    let src = h.write("src.txt", "payload");
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(&src)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let out = h
        .call(
            "FA_copy_file",
            json!({"file_path": "src.txt", "target_path": "dst.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(out["bytes"], 7);
    assert_eq!(std::fs::read(h.path("dst.txt")).unwrap(), b"payload");
    assert_eq!(
        std::fs::metadata(h.path("dst.txt"))
            .unwrap()
            .modified()
            .unwrap(),
        old
    );
    std::fs::create_dir(h.path("d")).unwrap();
    let out = h
        .call(
            "FA_copy_file",
            json!({"file_path": "src.txt", "target_path": "d", "copy_metadata": false}),
        )
        .await
        .unwrap();
    assert_eq!(out["target"], h.p("d/src.txt"));
    assert_ne!(
        std::fs::metadata(h.path("d/src.txt"))
            .unwrap()
            .modified()
            .unwrap(),
        old
    );
}

#[tokio::test]
async fn copy_file_errors() {
    let h = Harness::new();
    h.write("src.txt", "x");
    assert_eq!(
        h.call(
            "FA_copy_file",
            json!({"file_path": "no", "target_path": "x"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_copy_file",
            json!({"file_path": ".", "target_path": "x"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_copy_file",
            json!({"file_path": "src.txt", "target_path": "/tmp/out"})
        )
        .await
        .unwrap_err(),
        "path_outside_roots"
    );
    assert_eq!(
        h.call(
            "FA_copy_file",
            json!({"file_path": "src.txt", "target_path": "nodir/x"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_copy_file",
            json!({"file_path": "src.txt", "target_path": "src.txt"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn remove_file_removes_links_not_targets() {
    let h = Harness::new();
    h.write("victim.txt", "keep me");
    std::os::unix::fs::symlink(h.path("victim.txt"), h.path("link")).unwrap();
    h.call("FA_remove_file", json!({"file_path": "link"}))
        .await
        .unwrap();
    assert!(h.path("victim.txt").exists());
    assert!(std::fs::symlink_metadata(h.path("link")).is_err());
    h.call("FA_remove_file", json!({"file_path": "victim.txt"}))
        .await
        .unwrap();
    assert!(!h.path("victim.txt").exists());
}

#[tokio::test]
async fn remove_file_errors() {
    let h = Harness::new();
    std::fs::create_dir(h.path("d")).unwrap();
    assert_eq!(
        h.call("FA_remove_file", json!({"file_path": "gone"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_remove_file", json!({"file_path": "d"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_remove_file", json!({"file_path": "/etc/hostname"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
    assert_eq!(
        h.call("FA_remove_file", json!({"file_path": h.p("")}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path("out")).unwrap();
    assert_eq!(
        h.call("FA_remove_file", json!({"file_path": "out/f"}))
            .await
            .unwrap_err(),
        "path_outside_roots"
    );
    assert!(outside.path().join("f").exists());
}

#[test]
fn destructive_tools_carry_the_hint() {
    let h = Harness::new();
    let reg = h.server.registry();
    for name in ["FA_copy_file", "FA_remove_file"] {
        assert!(reg.get(name).unwrap().meta.destructive, "{name}");
    }
    for name in [
        "FA_list_dir",
        "FA_fast_find",
        "FA_file_checksum",
        "FA_verify_checksum",
    ] {
        assert!(reg.get(name).unwrap().meta.read_only, "{name}");
    }
    let create = &reg.get("FA_create_dir").unwrap().meta;
    assert!(!create.read_only && !create.destructive);
    let without_timeout: Vec<&str> = reg
        .tools()
        .iter()
        .filter(|tool| tool.meta.name != "capabilities" && tool.meta.timeout.is_none())
        .map(|tool| tool.meta.name.as_str())
        .collect();
    assert!(
        without_timeout.is_empty(),
        "tools without a timeout: {without_timeout:?}"
    );
}

#[test]
fn schemas_keep_automation_file_names_and_defaults() {
    let h = Harness::new();
    let reg = h.server.registry();
    let s = &reg.get("FA_file_checksum").unwrap().input_schema;
    assert_eq!(s["properties"]["algorithm"]["default"], "sha256");
    assert_eq!(s["properties"]["chunk_size"]["default"], 1048576);
    assert_eq!(s["required"], json!(["path"]));
    let s = &reg.get("FA_fast_find").unwrap().input_schema;
    assert_eq!(s["properties"]["pattern"]["default"], "*");
    assert_eq!(s["properties"]["files_only"]["default"], true);
    assert_eq!(s["properties"]["use_index"]["default"], true);
    let s = &reg.get("FA_copy_file").unwrap().input_schema;
    assert_eq!(s["properties"]["copy_metadata"]["default"], true);
    assert_eq!(s["required"], json!(["file_path", "target_path"]));
}
