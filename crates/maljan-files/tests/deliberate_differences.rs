//! Where maljan differs from automation-file 0.0.55 on purpose (the README's table "Where maljan
//! differs from automation-file, and why"): each row is run on both, in identical trees, and each
//! answer asserted — automation-file's as it is today, so a change on its side shows up here too.

mod common;
#[path = "common/differential.rs"]
mod differential;
#[path = "common/peers.rs"]
mod peers;

use std::io::Write;

use differential::{automation_file, automation_file_outcome, trees, under};
use serde_json::json;

#[tokio::test]
async fn a_path_outside_the_roots_is_refused() {
    let (mine, theirs) = trees(&[("a.txt", b"hi\n")]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
    let secret = outside
        .path()
        .join("secret.txt")
        .to_string_lossy()
        .into_owned();
    let theirs_read = automation_file(
        theirs.path(),
        "FA_line_count",
        &json!({"file_path": secret}),
    );
    assert_eq!(theirs_read, json!(1), "automation-file reads anywhere");
    let mine_read = mine
        .call("FA_line_count", json!({"file_path": secret}))
        .await;
    assert_eq!(mine_read.unwrap_err(), "path_outside_roots");
}

#[tokio::test]
async fn a_zip_slip_archive_is_refused_whole_before_anything_is_written() {
    let slip = {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default();
        zip.start_file("../evil.txt", options).unwrap();
        zip.write_all(b"x").unwrap();
        zip.start_file("ok.txt", options).unwrap();
        zip.write_all(b"fine").unwrap();
        zip.finish().unwrap().into_inner()
    };
    let (mine, theirs) = trees(&[("slip.zip", &slip)]);
    let args = json!({"zip_file_path": "slip.zip", "extract_path": "out"});
    let paths = ["zip_file_path", "extract_path"];
    automation_file(
        theirs.path(),
        "FA_unzip_all",
        &under(theirs.path(), &args, &paths),
    );
    // Python's zipfile drops the "..": the member lands inside as out/evil.txt.
    assert!(theirs.path().join("out/evil.txt").exists());
    let mine_said = mine
        .call("FA_unzip_all", under(&mine.root(), &args, &paths))
        .await;
    assert_eq!(mine_said.unwrap_err(), "bad_argument");
    assert!(!mine.path("out/ok.txt").exists(), "nothing is written");
    assert!(!mine.root().parent().unwrap().join("evil.txt").exists());
}

#[tokio::test]
async fn a_root_itself_is_not_removed() {
    let (mine, theirs) = trees(&[("a.txt", b"hi\n")]);
    let their_root = theirs.path().to_string_lossy().into_owned();
    let theirs_said = automation_file(
        theirs.path(),
        "FA_remove_dir_tree",
        &json!({"dir_path": their_root}),
    );
    assert_eq!(theirs_said, json!(true));
    assert!(
        !theirs.path().exists(),
        "automation-file removes the folder it was given"
    );
    let mine_said = mine
        .call("FA_remove_dir_tree", json!({"dir_path": mine.p("")}))
        .await;
    assert!(mine_said.is_err(), "{mine_said:?}");
    assert!(mine.path("a.txt").exists(), "the root and its files stay");
}

#[tokio::test]
async fn a_symlink_is_copied_as_a_link() {
    let (mine, theirs) = trees(&[("tree/a.txt", b"hi\n")]);
    for root in [mine.root(), theirs.path().to_path_buf()] {
        std::os::unix::fs::symlink("a.txt", root.join("tree/link.txt")).unwrap();
    }
    let args = json!({"dir_path": "tree", "target_dir_path": "copy"});
    let paths = ["dir_path", "target_dir_path"];
    automation_file(
        theirs.path(),
        "FA_copy_dir",
        &under(theirs.path(), &args, &paths),
    );
    let theirs_link = theirs.path().join("copy/link.txt");
    assert!(
        !theirs_link.is_symlink(),
        "automation-file copies the target's bytes"
    );
    mine.call("FA_copy_dir", under(&mine.root(), &args, &paths))
        .await
        .unwrap();
    let mine_link = mine.path("copy/link.txt");
    assert!(mine_link.is_symlink(), "maljan keeps the link");
    assert_eq!(
        std::fs::read_link(mine_link).unwrap(),
        std::path::Path::new("a.txt")
    );
}

#[tokio::test]
async fn a_string_is_not_taken_for_a_boolean() {
    let (mine, theirs) = trees(&[("a.txt", b"a.c\nabc\n")]);
    // "false" is a non-empty string, so Python reads it as true: the pattern is a regex.
    let args = json!({"root": ".", "pattern": "a.c", "regex": "false"});
    let theirs_hits = automation_file(
        theirs.path(),
        "FA_grep",
        &under(theirs.path(), &args, &["root"]),
    );
    assert_eq!(theirs_hits.as_array().unwrap().len(), 2, "{theirs_hits}");
    let mine_said = mine
        .call("FA_grep", under(&mine.root(), &args, &["root"]))
        .await;
    assert_eq!(mine_said.unwrap_err(), "bad_argument");
}

#[tokio::test]
async fn two_files_of_one_name_are_not_zipped_over_each_other() {
    let (mine, theirs) = trees(&[("x/a.txt", b"one\n"), ("y/a.txt", b"two\n")]);
    let files = |root: &std::path::Path| {
        json!([
            root.join("x/a.txt").to_string_lossy(),
            root.join("y/a.txt").to_string_lossy()
        ])
    };
    let theirs_args = json!({"zip_file_path": theirs.path().join("z.zip").to_string_lossy(), "file": files(theirs.path())});
    let theirs_said = automation_file_outcome(theirs.path(), "FA_zip_file", &theirs_args);
    assert!(
        theirs_said.is_ok(),
        "automation-file writes both under one name: {theirs_said:?}"
    );
    let mine_args = json!({"zip_file_path": mine.p("z.zip"), "file": files(&mine.root())});
    assert_eq!(
        mine.call("FA_zip_file", mine_args).await.unwrap_err(),
        "bad_argument"
    );
    assert!(!mine.path("z.zip").exists(), "no partial zip");
}
