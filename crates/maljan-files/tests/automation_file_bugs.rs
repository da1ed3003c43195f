//! Calls where maljan answered or wrote otherwise than automation-file 0.0.55 (issue 45's list),
//! each run on both in identical trees and compared: the answer, and the bytes left on disk.

mod common;
#[path = "common/differential.rs"]
mod differential;
#[path = "common/peers.rs"]
mod peers;

use std::process::Command;

use differential::{automation_file, automation_file_outcome, read, trees, under};
use serde_json::json;

/// The member list GNU tar prints for an archive.
fn tar_listing(path: &std::path::Path) -> String {
    let out = Command::new("tar").arg("-tf").arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "tar -tf {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_tar_of_one_file_holds_that_file() {
    for compression in [json!("gz"), json!(null)] {
        let (mine, theirs) = trees(&[("a.txt", b"hi\n")]);
        let args = json!({"source": "a.txt", "target": "a.tar", "compression": compression});
        let paths = ["source", "target"];
        automation_file(
            theirs.path(),
            "FA_create_tar",
            &under(theirs.path(), &args, &paths),
        );
        mine.call("FA_create_tar", under(&mine.root(), &args, &paths))
            .await
            .unwrap();
        assert_eq!(
            tar_listing(&mine.path("a.tar")),
            tar_listing(&theirs.path().join("a.tar"))
        );
        assert_eq!(tar_listing(&mine.path("a.tar")), "a.txt\n");
    }
}

#[tokio::test]
async fn a_carriage_return_ends_a_line_as_in_python() {
    for text in [
        &b"x\ry\rz"[..],
        b"a\r\nb\r\n",
        b"one\n\rtwo",
        b"",
        b"no end",
    ] {
        let (mine, theirs) = trees(&[("t.txt", text)]);
        let args = json!({"file_path": "t.txt"});
        let expected = automation_file(
            theirs.path(),
            "FA_line_count",
            &under(theirs.path(), &args, &["file_path"]),
        );
        let got = mine
            .call("FA_line_count", under(&mine.root(), &args, &["file_path"]))
            .await
            .unwrap();
        assert_eq!(
            got["lines"],
            expected,
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }
}

#[tokio::test]
async fn jsonl_lines_are_written_as_python_writes_them() {
    let (mine, theirs) = trees(&[]);
    let args = json!({"path": "deep/new/log.jsonl", "record": {"x": 3, "name": "é", "list": [1, {"a": null}]}});
    assert_eq!(
        automation_file(
            theirs.path(),
            "FA_jsonl_append",
            &under(theirs.path(), &args, &["path"])
        ),
        json!(true)
    );
    mine.call("FA_jsonl_append", under(&mine.root(), &args, &["path"]))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(read(&mine.root(), "deep/new/log.jsonl")).unwrap(),
        String::from_utf8(read(theirs.path(), "deep/new/log.jsonl")).unwrap()
    );
}

#[tokio::test]
async fn md5_is_refused_for_integrity_as_automation_file_refuses_it() {
    let (mine, theirs) = trees(&[("d/a.txt", b"hi\n")]);
    let args = json!({"target": "d", "algorithm": "md5"});
    let theirs_said = automation_file_outcome(
        theirs.path(),
        "FA_integrity_snapshot",
        &under(theirs.path(), &args, &["target"]),
    );
    assert!(
        theirs_said.is_err(),
        "automation-file refuses md5: {theirs_said:?}"
    );
    let mine_said = mine
        .call(
            "FA_integrity_snapshot",
            under(&mine.root(), &args, &["target"]),
        )
        .await;
    assert_eq!(mine_said.unwrap_err(), "bad_argument");
}

#[tokio::test]
async fn a_baseline_written_by_one_is_verified_by_the_other() {
    let (mine, _) = trees(&[("d/a.txt", b"hi\n"), ("d/b.txt", b"there\n")]);
    let root = mine.root();
    // maljan's baseline of the tree, verified by automation-file...
    mine.call(
        "FA_integrity_baseline",
        json!({"target": mine.p("d"), "baseline": mine.p("ours.json")}),
    )
    .await
    .unwrap();
    let theirs_verdict = automation_file(
        &root,
        "FA_integrity_verify",
        &json!({"target": mine.p("d"), "baseline": mine.p("ours.json")}),
    );
    assert_eq!(theirs_verdict["ok"], json!(true), "{theirs_verdict}");
    // ...and automation-file's baseline of the same tree, verified by maljan.
    automation_file(
        &root,
        "FA_integrity_baseline",
        &json!({"target": mine.p("d"), "baseline": mine.p("theirs.json")}),
    );
    let ours_verdict = mine
        .call(
            "FA_integrity_verify",
            json!({"target": mine.p("d"), "baseline": mine.p("theirs.json")}),
        )
        .await
        .unwrap();
    assert_eq!(ours_verdict["ok"], json!(true), "{ours_verdict}");
    // A change is seen by both.
    std::fs::write(mine.path("d/a.txt"), "changed\n").unwrap();
    for baseline in ["ours.json", "theirs.json"] {
        let args = json!({"target": mine.p("d"), "baseline": mine.p(baseline)});
        assert_eq!(
            automation_file(&root, "FA_integrity_verify", &args)["ok"],
            json!(false)
        );
        assert_eq!(
            mine.call("FA_integrity_verify", args).await.unwrap()["ok"],
            json!(false)
        );
    }
}

#[tokio::test]
async fn csv_to_jsonl_keeps_a_ragged_rows_cells_as_python_does() {
    let csv: &[u8] = b"a,b\n1,2,3,4\n5\n\"x, y\",\"\xC3\xA9\"\n";
    let (mine, theirs) = trees(&[("in.csv", csv)]);
    let args = json!({"src": "in.csv", "target": "new/out.jsonl"});
    let paths = ["src", "target"];
    let expected = automation_file(
        theirs.path(),
        "FA_csv_to_jsonl",
        &under(theirs.path(), &args, &paths),
    );
    let got = mine
        .call("FA_csv_to_jsonl", under(&mine.root(), &args, &paths))
        .await
        .unwrap();
    assert_eq!(got["rows"], expected);
    assert_eq!(
        String::from_utf8(read(&mine.root(), "new/out.jsonl")).unwrap(),
        String::from_utf8(read(theirs.path(), "new/out.jsonl")).unwrap()
    );
}

#[tokio::test]
async fn csv_filter_writes_python_line_ends_and_refuses_a_file_without_a_header() {
    let (mine, theirs) = trees(&[("in.csv", b"a,b\n1,2\n3,4\n")]);
    let args =
        json!({"src": "in.csv", "target": "out/x.csv", "where_column": "a", "where_equals": "3"});
    let paths = ["src", "target"];
    let expected = automation_file(
        theirs.path(),
        "FA_csv_filter",
        &under(theirs.path(), &args, &paths),
    );
    let got = mine
        .call("FA_csv_filter", under(&mine.root(), &args, &paths))
        .await
        .unwrap();
    assert_eq!(got["rows"], expected);
    assert_eq!(
        read(&mine.root(), "out/x.csv"),
        read(theirs.path(), "out/x.csv")
    );

    let (mine, theirs) = trees(&[("empty.csv", b"")]);
    let args = json!({"src": "empty.csv", "target": "x.csv"});
    let theirs_said = automation_file_outcome(
        theirs.path(),
        "FA_csv_filter",
        &under(theirs.path(), &args, &paths),
    );
    assert!(theirs_said.is_err(), "{theirs_said:?}");
    let mine_said = mine
        .call("FA_csv_filter", under(&mine.root(), &args, &paths))
        .await;
    assert_eq!(mine_said.unwrap_err(), "bad_argument");
    assert!(
        !mine.path("x.csv").exists(),
        "nothing written for a file without a header"
    );
}
