//! Text, diff/patch and structured-data actions.

mod common;

use common::Harness;
use serde_json::json;

#[tokio::test]
async fn split_then_merge_restores_the_file() {
    let h = Harness::new();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    h.write("big.bin", &data);
    let out = h
        .call(
            "FA_file_split",
            json!({"file_path": "big.bin", "chunk_size": 3000, "output_dir": "parts"}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 4);
    assert_eq!(out["parts"][0], h.p("parts/big.bin.part000"));
    assert_eq!(
        std::fs::metadata(h.path("parts/big.bin.part003"))
            .unwrap()
            .len(),
        1000
    );
    let parts = out["parts"].clone();
    let merged = h
        .call(
            "FA_file_merge",
            json!({"parts": parts, "target_path": "joined.bin"}),
        )
        .await
        .unwrap();
    assert_eq!(merged["bytes"], 10_000);
    assert_eq!(std::fs::read(h.path("joined.bin")).unwrap(), data);
    let beside = h
        .call(
            "FA_file_split",
            json!({"file_path": "big.bin", "chunk_size": 6000}),
        )
        .await
        .unwrap();
    assert_eq!(beside["parts"][1], h.p("big.bin.part001"));
}

#[tokio::test]
async fn split_and_merge_errors() {
    let h = Harness::new();
    h.write("f", "0123456789");
    assert_eq!(
        h.call("FA_file_split", json!({"file_path": "f", "chunk_size": 0}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_file_split",
            json!({"file_path": "nope", "chunk_size": 2})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call("FA_file_merge", json!({"parts": [], "target_path": "o"}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call(
            "FA_file_merge",
            json!({"parts": ["f", "nope"], "target_path": "o"})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert!(
        !h.path("o").exists(),
        "nothing is written when a part is missing"
    );
}

#[tokio::test]
async fn encoding_convert_line_count_and_sed() {
    let h = Harness::new();
    h.write("l1.txt", b"caf\xe9\nna\xefve\n");
    let args = json!({"file_path": "l1.txt", "target_path": "u8.txt", "source_encoding": "latin-1", "target_encoding": "utf-8"});
    h.call("FA_encoding_convert", args).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(h.path("u8.txt")).unwrap(),
        "café\nnaïve\n"
    );
    let args = json!({"file_path": "u8.txt", "target_path": "a.txt", "source_encoding": "utf-8", "target_encoding": "ascii"});
    assert_eq!(
        h.call("FA_encoding_convert", args).await.unwrap_err(),
        "bad_argument"
    );
    let args = json!({"file_path": "u8.txt", "target_path": "a.txt", "source_encoding": "utf-8", "target_encoding": "ascii", "errors": "replace"});
    h.call("FA_encoding_convert", args).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(h.path("a.txt")).unwrap(),
        "caf?\nna?ve\n"
    );
    let args = json!({"file_path": "u8.txt", "target_path": "a.txt", "source_encoding": "utf-8", "target_encoding": "x", "errors": "strict"});
    assert_eq!(
        h.call("FA_encoding_convert", args).await.unwrap_err(),
        "bad_argument"
    );

    assert_eq!(
        h.call("FA_line_count", json!({"file_path": "u8.txt"}))
            .await
            .unwrap()["lines"],
        2
    );
    h.write("nofinal.txt", "a\nb\nc");
    assert_eq!(
        h.call("FA_line_count", json!({"file_path": "nofinal.txt"}))
            .await
            .unwrap()["lines"],
        3
    );
    assert_eq!(
        h.call("FA_line_count", json!({"file_path": "l1.txt"}))
            .await
            .unwrap_err(),
        "bad_argument",
        "latin-1 bytes are not UTF-8"
    );
    assert_eq!(
        h.call(
            "FA_line_count",
            json!({"file_path": "l1.txt", "encoding": "latin-1"})
        )
        .await
        .unwrap()["lines"],
        2
    );

    h.write("s.txt", "foo bar foo baz foo");
    let out = h
        .call(
            "FA_sed_replace",
            json!({"file_path": "s.txt", "pattern": "foo", "replacement": "X", "count": 2}),
        )
        .await
        .unwrap();
    assert_eq!(out["replacements"], 2);
    assert_eq!(
        std::fs::read_to_string(h.path("s.txt")).unwrap(),
        "X bar X baz foo"
    );
    let args = json!({"file_path": "s.txt", "pattern": r"(ba)(\w)", "replacement": r"\2\1", "regex": true});
    assert_eq!(
        h.call("FA_sed_replace", args).await.unwrap()["replacements"],
        2
    );
    assert_eq!(
        std::fs::read_to_string(h.path("s.txt")).unwrap(),
        "X rba X zba foo"
    );
    let args =
        json!({"file_path": "s.txt", "pattern": "(unclosed", "replacement": "", "regex": true});
    assert_eq!(
        h.call("FA_sed_replace", args).await.unwrap_err(),
        "bad_argument"
    );
    let args = json!({"file_path": "s.txt", "pattern": "x", "replacement": "", "count": -1});
    assert_eq!(
        h.call("FA_sed_replace", args).await.unwrap_err(),
        "bad_argument"
    );
}

#[tokio::test]
async fn diff_and_patch_round_trip() {
    let h = Harness::new();
    h.write("old.txt", "one\ntwo\nthree\nfour\n");
    h.write("new.txt", "one\nTWO\nthree\nfour\nfive\n");
    let d = h
        .call(
            "FA_diff_files",
            json!({"left": "old.txt", "right": "new.txt", "context": 1}),
        )
        .await
        .unwrap();
    assert_eq!(d["identical"], false);
    let diff = d["diff"].as_str().unwrap().to_string();
    assert!(
        diff.contains("-two\n+TWO\n") && diff.contains("+five\n"),
        "{diff}"
    );
    let out = h
        .call(
            "FA_apply_patch",
            json!({"target": "old.txt", "patch": diff}),
        )
        .await
        .unwrap();
    assert!(out["hunks"].as_u64().unwrap() >= 1);
    assert_eq!(
        std::fs::read_to_string(h.path("old.txt")).unwrap(),
        "one\nTWO\nthree\nfour\nfive\n"
    );
    let again = h
        .call(
            "FA_apply_patch",
            json!({"target": "old.txt", "patch": diff}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        again, "bad_argument",
        "a patch that no longer matches changes nothing"
    );
    assert_eq!(
        h.call(
            "FA_apply_patch",
            json!({"target": "old.txt", "patch": "garbage"})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    let same = h
        .call(
            "FA_diff_files",
            json!({"left": "old.txt", "right": "old.txt"}),
        )
        .await
        .unwrap();
    assert_eq!(same["identical"], true);
    assert_eq!(same["diff"], "");
    assert_eq!(
        h.call(
            "FA_diff_files",
            json!({"left": "old.txt", "right": "x", "context": 3})
        )
        .await
        .unwrap_err(),
        "no_such_file"
    );
    assert_eq!(
        h.call(
            "FA_diff_files",
            json!({"left": "old.txt", "right": "new.txt", "context": -1})
        )
        .await
        .unwrap_err(),
        "bad_argument"
    );
    h.write("bin", b"\xff\xfe\x00");
    assert_eq!(
        h.call("FA_diff_files", json!({"left": "bin", "right": "new.txt"}))
            .await
            .unwrap_err(),
        "unsupported_format"
    );
}

#[tokio::test]
async fn diff_dirs_by_content() {
    let h = Harness::new();
    h.write("l/same.txt", "s");
    h.write("l/changed.txt", "1");
    h.write("l/removed.txt", "r");
    h.write("r/same.txt", "s");
    h.write("r/changed.txt", "2");
    h.write("r/sub/added.txt", "a");
    let out = h
        .call("FA_diff_dirs", json!({"left": "l", "right": "r"}))
        .await
        .unwrap();
    assert_eq!(out["added"], json!(["sub/added.txt"]));
    assert_eq!(out["removed"], json!(["removed.txt"]));
    assert_eq!(out["changed"], json!(["changed.txt"]));
    assert_eq!(out["identical"], false);
    assert_eq!(
        h.call("FA_diff_dirs", json!({"left": "l", "right": "nope"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn json_and_yaml_dotted_edits() {
    let h = Harness::new();
    h.write(
        "c.json",
        r#"{"server": {"port": 80, "hosts": ["a", "b"]}, "z": 1}"#,
    );
    h.write("c.yaml", "server:\n  port: 80\n  hosts: [a, b]\n");
    for (prefix, file) in [("FA_json", "c.json"), ("FA_yaml", "c.yaml")] {
        let get = |k: &str| json!({"path": file, "key_path": k});
        let v = h
            .call(&format!("{prefix}_get"), get("server.port"))
            .await
            .unwrap();
        assert_eq!(v, json!({"value": 80, "found": true}), "{prefix}");
        let v = h
            .call(&format!("{prefix}_get"), get("server.hosts.-1"))
            .await
            .unwrap();
        assert_eq!(v["value"], "b");
        let v = h
            .call(
                &format!("{prefix}_get"),
                json!({"path": file, "key_path": "nope.x", "default": "dflt"}),
            )
            .await
            .unwrap();
        assert_eq!(v, json!({"value": "dflt", "found": false}));
        h.call(
            &format!("{prefix}_set"),
            json!({"path": file, "key_path": "server.tls.enabled", "value": true}),
        )
        .await
        .unwrap();
        let v = h
            .call(&format!("{prefix}_get"), get("server.tls.enabled"))
            .await
            .unwrap();
        assert_eq!(v["value"], true);
        let d = h
            .call(&format!("{prefix}_delete"), get("server.hosts.0"))
            .await
            .unwrap();
        assert_eq!(d["changed"], true);
        let d = h
            .call(&format!("{prefix}_delete"), get("server.absent"))
            .await
            .unwrap();
        assert_eq!(d["changed"], false);
        assert_eq!(
            h.call(&format!("{prefix}_get"), get("server.hosts.0"))
                .await
                .unwrap()["value"],
            "b"
        );
        let empty = json!({"path": file, "key_path": "", "value": 1});
        assert_eq!(
            h.call(&format!("{prefix}_set"), empty).await.unwrap_err(),
            "bad_argument"
        );
        assert_eq!(
            h.call(
                &format!("{prefix}_get"),
                json!({"path": "none", "key_path": "a"})
            )
            .await
            .unwrap_err(),
            "no_such_file"
        );
    }
    let text = std::fs::read_to_string(h.path("c.json")).unwrap();
    assert!(
        text.find("\"server\"").unwrap() < text.find("\"z\"").unwrap(),
        "key order is kept"
    );
    h.write("broken.json", "{");
    let args = json!({"path": "broken.json", "key_path": "a"});
    assert_eq!(
        h.call("FA_json_get", args).await.unwrap_err(),
        "unsupported_format"
    );
}

#[tokio::test]
async fn csv_and_jsonl() {
    let h = Harness::new();
    h.write(
        "p.csv",
        "name,city,age\nann,Oslo,31\nbob,Rome,40\ncid,Oslo,25\n",
    );
    let args = json!({"src": "p.csv", "target": "oslo.csv", "columns": ["age", "name"], "where_column": "city", "where_equals": "Oslo"});
    assert_eq!(h.call("FA_csv_filter", args).await.unwrap()["rows"], 2);
    assert_eq!(
        std::fs::read_to_string(h.path("oslo.csv")).unwrap(),
        // Python's csv writer ends rows with \r\n.
        "age,name\r\n31,ann\r\n25,cid\r\n"
    );
    let args = json!({"src": "p.csv", "target": "x.csv", "columns": ["nope"]});
    assert_eq!(
        h.call("FA_csv_filter", args).await.unwrap_err(),
        "bad_argument"
    );
    let args = json!({"src": "p.csv", "target": "x.csv", "where_column": "city"});
    assert_eq!(
        h.call("FA_csv_filter", args).await.unwrap_err(),
        "bad_argument"
    );
    let args = json!({"src": "p.csv", "target": "x.csv", "delimiter": ";;"});
    assert_eq!(
        h.call("FA_csv_filter", args).await.unwrap_err(),
        "bad_argument"
    );

    assert_eq!(
        h.call(
            "FA_csv_to_jsonl",
            json!({"src": "p.csv", "target": "p.jsonl"})
        )
        .await
        .unwrap()["rows"],
        3
    );
    let recs = h
        .call("FA_jsonl_iter", json!({"path": "p.jsonl", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(recs["count"], 2);
    assert_eq!(
        recs["records"][1],
        json!({"name": "bob", "city": "Rome", "age": "40"})
    );
    h.call(
        "FA_jsonl_append",
        json!({"path": "p.jsonl", "record": {"name": "dee", "n": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(
        h.call("FA_jsonl_iter", json!({"path": "p.jsonl"}))
            .await
            .unwrap()["count"],
        4
    );
    h.call(
        "FA_jsonl_append",
        json!({"path": "fresh.jsonl", "record": {}}),
    )
    .await
    .unwrap();
    assert_eq!(
        h.call("FA_jsonl_append", json!({"path": "p.jsonl", "record": [1]}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    h.write("bad.jsonl", "{\"a\":1}\n[1,2]\n");
    assert_eq!(
        h.call("FA_jsonl_iter", json!({"path": "bad.jsonl"}))
            .await
            .unwrap_err(),
        "unsupported_format"
    );
    assert_eq!(
        h.call("FA_jsonl_iter", json!({"path": "p.jsonl", "limit": -1}))
            .await
            .unwrap_err(),
        "bad_argument"
    );
    assert_eq!(
        h.call("FA_csv_to_jsonl", json!({"src": "none.csv", "target": "x"}))
            .await
            .unwrap_err(),
        "no_such_file"
    );
}

#[tokio::test]
async fn a_grep_over_its_backtracking_budget_ends_with_a_clear_error() {
    let h = Harness::new();
    h.write("a.txt", "x".repeat(30));
    h.write("b.txt", "plain\n");
    // A back-reference runs on the backtracking engine; nested repetition exhausts its budget.
    let args = json!({"root": h.p(""), "pattern": r"(x+x+)+y\1", "regex": true});
    let (code, message) = h.error("FA_grep", args).await;
    assert_eq!(code, "bad_argument");
    assert!(message.contains("gave up"), "{message}");
}
