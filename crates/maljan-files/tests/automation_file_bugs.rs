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

/// (line, text) of each grep hit, in file order.
fn hits(matches: &serde_json::Value) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = matches
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["line"].as_u64().unwrap(),
                h["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn grep_ends_lines_where_python_does() {
    let text: &[u8] = b"x\ry\rzy\r\nmid y\n\ry end\ry";
    let (mine, theirs) = trees(&[("t.txt", text)]);
    let args = json!({"root": ".", "pattern": "y"});
    let expected = automation_file(
        theirs.path(),
        "FA_grep",
        &under(theirs.path(), &args, &["root"]),
    );
    let got = mine
        .call("FA_grep", under(&mine.root(), &args, &["root"]))
        .await
        .unwrap();
    assert_eq!(hits(&got["matches"]), hits(&expected));
    assert_eq!(hits(&expected).len(), 5, "{expected}");
}

#[tokio::test]
async fn missing_parent_folders_are_made_as_automation_file_makes_them() {
    let (mine, theirs) = trees(&[
        ("a.txt", b"caf\xC3\xA9\n"),
        ("b.txt", b"two\n"),
        ("d/x.txt", b"x"),
    ]);
    let cases = [
        (
            "FA_encoding_convert",
            json!({"file_path": "a.txt", "target_path": "n1/d/a.txt", "source_encoding": "utf-8", "target_encoding": "latin-1"}),
            vec!["file_path", "target_path"],
            "n1/d/a.txt",
        ),
        (
            "FA_file_merge",
            json!({"parts": [], "target_path": "n2/d/m.txt"}),
            vec!["target_path"],
            "n2/d/m.txt",
        ),
        (
            "FA_storage_write_text",
            json!({"uri": "n3/d/w.txt", "text": "hé"}),
            vec!["uri"],
            "n3/d/w.txt",
        ),
        (
            "FA_storage_copy",
            json!({"source": "a.txt", "target": "n4/d/c.txt"}),
            vec!["source", "target"],
            "n4/d/c.txt",
        ),
        (
            "FA_storage_upload",
            json!({"local_path": "a.txt", "uri": "n5/d/u.txt"}),
            vec!["local_path", "uri"],
            "n5/d/u.txt",
        ),
        (
            "FA_storage_download",
            json!({"uri": "a.txt", "local_path": "n6/d/l.txt"}),
            vec!["uri", "local_path"],
            "n6/d/l.txt",
        ),
    ];
    for (action, args, paths, written) in cases {
        let mut args = args;
        if action == "FA_file_merge" {
            args["parts"] = json!(["a.txt", "b.txt"]);
        }
        let on = |root: &std::path::Path| {
            let mut a = under(root, &args, &paths);
            if let Some(parts) = a.get_mut("parts") {
                for p in parts.as_array_mut().unwrap() {
                    *p = json!(root.join(p.as_str().unwrap()).to_string_lossy());
                }
            }
            a
        };
        automation_file(theirs.path(), action, &on(theirs.path()));
        mine.call(action, on(&mine.root()))
            .await
            .unwrap_or_else(|e| panic!("{action}: {e}"));
        assert_eq!(
            read(&mine.root(), written),
            read(theirs.path(), written),
            "{action}"
        );
    }
    // A zip of a directory into a folder that does not exist yet: the same members.
    let args = json!({"dir_we_want_to_zip": "d", "zip_name": "n7/d/z"});
    let paths = ["dir_we_want_to_zip", "zip_name"];
    automation_file(
        theirs.path(),
        "FA_zip_dir",
        &under(theirs.path(), &args, &paths),
    );
    mine.call("FA_zip_dir", under(&mine.root(), &args, &paths))
        .await
        .unwrap();
    let members = |root: &std::path::Path| {
        automation_file(
            root,
            "FA_zip_file_info",
            &json!({"zip_file_path": root.join("n7/d/z.zip").to_string_lossy()}),
        )
    };
    assert_eq!(members(&mine.root()), members(theirs.path()));
}

#[tokio::test]
async fn yaml_strings_read_back_as_strings_in_pyyaml() {
    for value in [
        json!("yes"),
        json!("no"),
        json!("on"),
        json!("off"),
        json!("null"),
        json!("~"),
        json!("1.5"),
        json!("2001-12-14"),
        json!("0x1F"),
        json!("017"),
        json!("1_000"),
        json!("1:30"),
        json!(true),
        json!("plain"),
    ] {
        let (mine, theirs) = trees(&[("c.yaml", b"a: 1\n")]);
        let args = json!({"path": "c.yaml", "key_path": "s.flag", "value": value});
        automation_file(
            theirs.path(),
            "FA_yaml_set",
            &under(theirs.path(), &args, &["path"]),
        );
        mine.call("FA_yaml_set", under(&mine.root(), &args, &["path"]))
            .await
            .unwrap();
        let get = |root: &std::path::Path| {
            automation_file(
                root,
                "FA_yaml_get",
                &under(
                    root,
                    &json!({"path": "c.yaml", "key_path": "s.flag"}),
                    &["path"],
                ),
            )
        };
        assert_eq!(get(&mine.root()), get(theirs.path()), "{value}");
        assert_eq!(get(&mine.root()), value);
    }
}

#[tokio::test]
async fn csv_to_parquet_keeps_a_ragged_rows_cells_as_pyarrow_does() {
    let csv: &[u8] = b"a,b\n1,2,3,4\n5\n\"x, y\",z\n";
    let (mine, theirs) = trees(&[("r.csv", csv)]);
    let args = json!({"csv_path": "r.csv", "parquet_path": "new/r.parquet"});
    let paths = ["csv_path", "parquet_path"];
    let rows = automation_file(
        theirs.path(),
        "FA_csv_to_parquet",
        &under(theirs.path(), &args, &paths),
    );
    let got = mine
        .call("FA_csv_to_parquet", under(&mine.root(), &args, &paths))
        .await
        .unwrap();
    assert_eq!(got["rows"], rows);
    // Each file read back by automation-file (pyarrow) gives the same records.
    let records = |root: &std::path::Path| {
        automation_file(
            root,
            "FA_parquet_read",
            &json!({"path": root.join("new/r.parquet").to_string_lossy()}),
        )
    };
    assert_eq!(records(&mine.root()), records(theirs.path()));
    assert_eq!(records(&mine.root())[0]["None"], json!(["3", "4"]));
}

#[tokio::test]
async fn parquet_records_of_mixed_kinds_are_refused_as_pyarrow_refuses_them() {
    for records in [
        json!([{"a": 1}, {"a": "x"}]),
        json!([{"a": "x"}, {"a": 1}]),
        json!([{"a": true}, {"a": 1}]),
        json!([{"a": [1, "x"]}]),
        json!([{"a": {"x": 1}}, {"a": {"x": "s"}}]),
    ] {
        let (mine, theirs) = trees(&[]);
        let args = json!({"path": "m.parquet", "records": records});
        let theirs_said = automation_file_outcome(
            theirs.path(),
            "FA_parquet_write",
            &under(theirs.path(), &args, &["path"]),
        );
        assert!(theirs_said.is_err(), "{records}: {theirs_said:?}");
        let mine_said = mine
            .call("FA_parquet_write", under(&mine.root(), &args, &["path"]))
            .await;
        assert_eq!(mine_said.unwrap_err(), "bad_argument", "{records}");
        assert!(!mine.path("m.parquet").exists());
    }
    // Integers and floats share a column in both.
    let (mine, theirs) = trees(&[]);
    let args = json!({"path": "f.parquet", "records": [{"a": 1}, {"a": 1.5}, {"a": null}]});
    automation_file(
        theirs.path(),
        "FA_parquet_write",
        &under(theirs.path(), &args, &["path"]),
    );
    mine.call("FA_parquet_write", under(&mine.root(), &args, &["path"]))
        .await
        .unwrap();
    let records = |root: &std::path::Path| {
        automation_file(
            root,
            "FA_parquet_read",
            &json!({"path": root.join("f.parquet").to_string_lossy()}),
        )
    };
    assert_eq!(records(&mine.root()), records(theirs.path()));
}
