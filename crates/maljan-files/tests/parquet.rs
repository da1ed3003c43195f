//! The Parquet actions (cargo feature `parquet`): FA_parquet_write, FA_parquet_read,
//! FA_csv_to_parquet, their errors, confinement, the read-only policy, and files shared with
//! pyarrow when a Python with pyarrow is at hand.
#![cfg(feature = "parquet")]

mod common;

use common::Harness;
use serde_json::{Value, json};

fn names(columns: &Value) -> Vec<&str> {
    columns
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn write_then_read_round_trips_the_records() {
    let h = Harness::new();
    let records = json!([
        {"id": 1, "name": "alpha", "score": 1.5, "ok": true, "tags": ["a", "b"]},
        {"id": 2, "name": "beta", "score": 2, "ok": false, "tags": []},
        {"id": 3, "name": null, "score": null, "ok": null, "tags": null, "extra": "x"}
    ]);
    let out = h
        .call(
            "FA_parquet_write",
            json!({"path": "sub/dir/t.parquet", "records": records}),
        )
        .await
        .unwrap();
    assert_eq!(out["rows"], 3);
    assert_eq!(out["path"], h.p("sub/dir/t.parquet"));
    assert_eq!(
        names(&out["columns"]),
        ["id", "name", "score", "ok", "tags", "extra"]
    );
    assert_eq!(out["columns"][0]["type"], "Int64");
    assert_eq!(out["columns"][2]["type"], "Float64");
    let bytes = std::fs::read(h.path("sub/dir/t.parquet")).unwrap();
    assert_eq!(&bytes[..4], b"PAR1");

    let back = h
        .call("FA_parquet_read", json!({"path": "sub/dir/t.parquet"}))
        .await
        .unwrap();
    assert_eq!(back["count"], 3);
    assert_eq!(back["total_rows"], 3);
    let want = json!([
        {"id": 1, "name": "alpha", "score": 1.5, "ok": true, "tags": ["a", "b"], "extra": null},
        {"id": 2, "name": "beta", "score": 2.0, "ok": false, "tags": [], "extra": null},
        {"id": 3, "name": null, "score": null, "ok": null, "tags": null, "extra": "x"}
    ]);
    assert_eq!(back["records"], want);
    // Keys come back in the columns' order.
    let keys: Vec<&String> = back["records"][0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "name", "score", "ok", "tags", "extra"]);
}

#[tokio::test]
async fn limit_and_columns_narrow_the_answer() {
    let h = Harness::new();
    let records: Vec<Value> = (0..20_000)
        .map(|i| json!({"n": i, "sq": i * i, "label": format!("row {i}")}))
        .collect();
    h.call(
        "FA_parquet_write",
        json!({"path": "big.parquet", "records": records}),
    )
    .await
    .unwrap();
    let out = h
        .call(
            "FA_parquet_read",
            json!({"path": "big.parquet", "limit": 3, "columns": ["label", "n"]}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 3);
    assert_eq!(out["total_rows"], 20_000);
    assert_eq!(names(&out["columns"]), ["label", "n"]);
    assert_eq!(
        out["records"],
        json!([{"label": "row 0", "n": 0}, {"label": "row 1", "n": 1}, {"label": "row 2", "n": 2}])
    );
    let keys: Vec<&String> = out["records"][0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["label", "n"], "the caller's column order");
    // The limit spans batches (the reader decodes 8,192 rows at a time).
    let out = h
        .call(
            "FA_parquet_read",
            json!({"path": "big.parquet", "limit": 10_000, "columns": ["sq"]}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 10_000);
    assert_eq!(out["records"][9_999], json!({"sq": 9_999i64 * 9_999}));
    let none = h
        .call(
            "FA_parquet_read",
            json!({"path": "big.parquet", "limit": 0}),
        )
        .await
        .unwrap();
    assert_eq!(none["count"], 0);
    assert_eq!(none["records"], json!([]));
}

#[tokio::test]
async fn csv_to_parquet_keeps_strings_as_automation_file_does() {
    let h = Harness::new();
    h.write("in.csv", "zip;city;n\n00123;Köln;7\n99999;Paris\n");
    let out = h
        .call(
            "FA_csv_to_parquet",
            json!({"csv_path": "in.csv", "parquet_path": "out.parquet", "delimiter": ";"}),
        )
        .await
        .unwrap();
    assert_eq!(out["rows"], 2);
    assert_eq!(names(&out["columns"]), ["zip", "city", "n"]);
    assert!(
        out["columns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["type"] == "Utf8")
    );
    let back = h
        .call("FA_parquet_read", json!({"path": "out.parquet"}))
        .await
        .unwrap();
    // Leading zeros survive (no type guessing) and a short row's missing field is null.
    assert_eq!(
        back["records"],
        json!([
            {"zip": "00123", "city": "Köln", "n": "7"},
            {"zip": "99999", "city": "Paris", "n": null}
        ])
    );

    // The encoding argument decodes the CSV first.
    h.write("latin.csv", b"name\nM\xfcller\n");
    h.call(
        "FA_csv_to_parquet",
        json!({"csv_path": "latin.csv", "parquet_path": "latin.parquet", "encoding": "latin-1"}),
    )
    .await
    .unwrap();
    let back = h
        .call("FA_parquet_read", json!({"path": "latin.parquet"}))
        .await
        .unwrap();
    assert_eq!(back["records"][0]["name"], "Müller");
}

#[tokio::test]
async fn errors_name_their_remedy() {
    let h = Harness::new();
    h.call(
        "FA_parquet_write",
        json!({"path": "t.parquet", "records": [{"a": 1, "b": "x"}]}),
    )
    .await
    .unwrap();

    let (code, _) = h
        .error("FA_parquet_read", json!({"path": "missing.parquet"}))
        .await;
    assert_eq!(code, "no_such_file");
    let (code, _) = h
        .error(
            "FA_csv_to_parquet",
            json!({"csv_path": "missing.csv", "parquet_path": "x.parquet"}),
        )
        .await;
    assert_eq!(code, "no_such_file");

    // An unknown column: bad_argument, and the remedy lists the columns the file has.
    let outcome = h
        .server
        .call(
            "FA_parquet_read",
            json!({"path": "t.parquet", "columns": ["a", "nope"]})
                .as_object()
                .unwrap()
                .clone(),
            tokio_util::sync::CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert!(outcome.is_error);
    let err = &outcome.value["error"];
    assert_eq!(err["code"], "bad_argument");
    assert!(err["message"].as_str().unwrap().contains("nope"), "{err}");
    assert!(
        err["remediation"].as_str().unwrap().contains("a, b"),
        "{err}"
    );

    let (code, _) = h
        .error("FA_parquet_read", json!({"path": "t.parquet", "limit": -1}))
        .await;
    assert_eq!(code, "bad_argument");

    // Not a Parquet file.
    h.write("fake.parquet", "just text, no footer");
    let (code, msg) = h
        .error("FA_parquet_read", json!({"path": "fake.parquet"}))
        .await;
    assert_eq!(code, "unsupported_format", "{msg}");

    // Records that cannot share a column, records that are not objects.
    let (code, _) = h
        .error(
            "FA_parquet_write",
            json!({"path": "bad.parquet", "records": [{"a": 1}, {"a": {"nested": true}}]}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    assert!(!h.path("bad.parquet").exists());
    let (code, _) = h
        .error(
            "FA_parquet_write",
            json!({"path": "bad.parquet", "records": [1, 2]}),
        )
        .await;
    assert_eq!(code, "bad_argument");

    // An encoding nobody knows: bad_argument naming the supported ones.
    h.write("in.csv", "a\n1\n");
    let outcome = h
        .server
        .call(
            "FA_csv_to_parquet",
            json!({"csv_path": "in.csv", "parquet_path": "o.parquet", "encoding": "klingon-8"})
                .as_object()
                .unwrap()
                .clone(),
            tokio_util::sync::CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    let err = &outcome.value["error"];
    assert_eq!(err["code"], "bad_argument");
    let says = format!("{} {}", err["message"], err["remediation"]);
    assert!(says.contains("utf-8") && says.contains("latin-1"), "{says}");
    let (code, _) = h
        .error(
            "FA_csv_to_parquet",
            json!({"csv_path": "in.csv", "parquet_path": "o.parquet", "delimiter": ";;"}),
        )
        .await;
    assert_eq!(code, "bad_argument");
    // The server still answers after all of that.
    assert_eq!(
        h.call("FA_parquet_read", json!({"path": "t.parquet"}))
            .await
            .unwrap()["count"],
        1
    );
}

#[tokio::test]
async fn paths_outside_the_roots_are_refused() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.parquet");
    let (code, _) = h
        .error(
            "FA_parquet_write",
            json!({"path": target.to_string_lossy(), "records": [{"a": 1}]}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    assert!(!target.exists());
    let (code, _) = h
        .error(
            "FA_parquet_write",
            json!({"path": "../escaped.parquet", "records": [{"a": 1}]}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");

    // A file outside, reached by path or through a symlink inside the root.
    std::fs::write(&target, b"PAR1").unwrap();
    let (code, _) = h
        .error("FA_parquet_read", json!({"path": target.to_string_lossy()}))
        .await;
    assert_eq!(code, "path_outside_roots");
    std::os::unix::fs::symlink(&target, h.path("link.parquet")).unwrap();
    let (code, _) = h
        .error("FA_parquet_read", json!({"path": "link.parquet"}))
        .await;
    assert_eq!(code, "path_outside_roots");
    h.write("in.csv", "a\n1\n");
    let (code, _) = h
        .error(
            "FA_csv_to_parquet",
            json!({"csv_path": "in.csv", "parquet_path": outside.path().join("o.parquet").to_string_lossy()}),
        )
        .await;
    assert_eq!(code, "path_outside_roots");
    assert!(!outside.path().join("o.parquet").exists());
}

#[tokio::test]
async fn read_only_keeps_the_reader_only() {
    let h = Harness::new();
    let reg = h.server.registry();
    assert!(reg.get("FA_parquet_read").unwrap().meta.read_only);
    for name in ["FA_parquet_write", "FA_csv_to_parquet"] {
        assert!(reg.get(name).unwrap().meta.destructive, "{name}");
    }
    let s = &reg.get("FA_csv_to_parquet").unwrap().input_schema;
    assert_eq!(s["properties"]["delimiter"]["default"], ",");
    assert_eq!(s["properties"]["encoding"]["default"], "utf-8");
    assert_eq!(s["required"], json!(["csv_path", "parquet_path"]));
    let s = &reg.get("FA_parquet_read").unwrap().input_schema;
    assert_eq!(s["required"], json!(["path"]));
    assert!(s["properties"]["limit"].is_object() && s["properties"]["columns"].is_object());

    // What `maljan serve files --read-only` leaves (serve.rs keeps only read-only tools).
    let ro = Harness::with(
        |r| {
            r.retain(|m| m.read_only);
        },
        false,
    );
    assert!(ro.server.registry().get("FA_parquet_read").is_some());
    assert!(ro.server.registry().get("FA_parquet_write").is_none());
    assert!(ro.server.registry().get("FA_csv_to_parquet").is_none());
    // Nor can an action list reach them.
    let allowed = ["FA_execute_action", "FA_parquet_read"];
    let h = Harness::with(
        |r| {
            r.retain(|m| allowed.contains(&m.name.as_str()));
        },
        false,
    );
    let list = json!([["FA_parquet_write", {"path": "x.parquet", "records": [{"a": 1}]}]]);
    let out = h
        .call("FA_execute_action", json!({"action_list": list}))
        .await
        .unwrap();
    assert_eq!(out["results"][0]["status"], "failed");
    assert!(!h.path("x.parquet").exists());
}

/// The peers' Python (MALJAN_PY, installed with pyarrow by scripts/peers.sh). Missing, or
/// unable to import pyarrow, is a broken set-up: the test fails rather than pass untested.
fn pyarrow_python() -> String {
    let py = std::env::var("MALJAN_PY").expect(
        "MALJAN_PY is not set: run the tests through scripts/test.sh, or `eval \"$(scripts/peers.sh)\"` first",
    );
    let probe = std::process::Command::new(&py)
        .args(["-c", "import pyarrow.parquet"])
        .output()
        .expect("run MALJAN_PY");
    assert!(
        probe.status.success(),
        "MALJAN_PY cannot import pyarrow: run scripts/peers.sh again ({})",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    py
}

#[tokio::test]
async fn files_are_shared_with_pyarrow() {
    let py = pyarrow_python();
    let h = Harness::new();
    h.call(
        "FA_parquet_write",
        json!({"path": "ours.parquet", "records": [{"a": 1, "s": "x", "f": 0.5}, {"a": 2, "s": null, "f": 1}]}),
    )
    .await
    .unwrap();
    let script = r#"
import json, sys, pyarrow as pa, pyarrow.parquet as pq
rows = pq.read_table(sys.argv[1]).to_pylist()
print(json.dumps(rows))
t = pa.Table.from_pylist([{"k": "v", "n": 3, "b": b"\x00\x01"}, {"k": None, "n": 4, "b": None}])
pq.write_table(t, sys.argv[2])
for codec in ("gzip", "lz4", "zstd", "none"):
    pq.write_table(t, sys.argv[2] + "." + codec, compression=codec)
"#;
    let out = std::process::Command::new(&py)
        .args(["-c", script, &h.p("ours.parquet"), &h.p("theirs.parquet")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read_by_python: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        read_by_python,
        json!([{"a": 1, "s": "x", "f": 0.5}, {"a": 2, "s": null, "f": 1.0}])
    );
    let back = h
        .call("FA_parquet_read", json!({"path": "theirs.parquet"}))
        .await
        .unwrap();
    let want = json!([{"k": "v", "n": 3, "b": "AAE="}, {"k": null, "n": 4, "b": null}]);
    assert_eq!(back["records"], want);
    for codec in ["gzip", "lz4", "none"] {
        let back = h
            .call(
                "FA_parquet_read",
                json!({"path": format!("theirs.parquet.{codec}")}),
            )
            .await
            .unwrap();
        assert_eq!(back["records"], want, "{codec}");
    }
    // zstd is not built in: the error says so and how to get round it.
    let outcome = h
        .server
        .call(
            "FA_parquet_read",
            json!({"path": "theirs.parquet.zstd"})
                .as_object()
                .unwrap()
                .clone(),
            tokio_util::sync::CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    let err = &outcome.value["error"];
    assert_eq!(err["code"], "unsupported_format", "{err}");
    assert!(err["message"].as_str().unwrap().contains("zstd"), "{err}");
    assert!(
        err["remediation"].as_str().unwrap().contains("snappy"),
        "{err}"
    );
}
