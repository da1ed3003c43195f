//! Patterns and codec names as automation-file takes them: look-around and back-references in
//! FA_sed_replace and FA_grep, and Python's BOM codecs (utf-8-sig, utf-32) in
//! FA_encoding_convert and FA_sed_replace. Each case runs the same call on automation-file 0.0.55
//! (the peers venv's package, its registered FA_* function called directly) and on maljan, each
//! in its own copy of the same tree, and compares the answer and the bytes left on disk.

mod common;
#[path = "common/differential.rs"]
mod differential;
#[path = "common/peers.rs"]
mod peers;

use std::path::Path;

use differential::{automation_file, read, trees, under};
use serde_json::{Value, json};

#[tokio::test]
async fn sed_replace_takes_look_around_and_back_references_as_python_does() {
    let text: &[u8] = b"$5 and 6 and $70\nit is is so so\nfoobar foobaz\n";
    let cases = [
        json!({"pattern": r"(?<=\$)\d+", "replacement": "N", "regex": true}),
        json!({"pattern": r"\b(\w+) \1\b", "replacement": r"\1", "regex": true}),
        json!({"pattern": r"foo(?!bar)", "replacement": "X", "regex": true, "count": 1}),
        json!({"pattern": r"(?<![\w$])\d+", "replacement": r"<\g<0>>", "regex": true}),
    ];
    for case in cases {
        let (mine, theirs) = trees(&[("t.txt", text)]);
        let mut args = case.clone();
        args["file_path"] = json!("t.txt");
        let expected = automation_file(
            theirs.path(),
            "FA_sed_replace",
            &under(theirs.path(), &args, &["file_path"]),
        );
        let got = mine
            .call("FA_sed_replace", under(&mine.root(), &args, &["file_path"]))
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(got["replacements"], expected, "{case}");
        assert_eq!(
            String::from_utf8(read(&mine.root(), "t.txt")).unwrap(),
            String::from_utf8(read(theirs.path(), "t.txt")).unwrap(),
            "{case}"
        );
    }
}

#[tokio::test]
async fn grep_takes_back_references_as_python_does() {
    let files: &[(&str, &[u8])] = &[
        ("a.txt", b"good\nbad\nbook keeper\n"),
        ("b.txt", b"\xFF\xFEbinary-ish but see\nnothing\n"),
    ];
    for pattern in [r"(\w)\1", r"(?<=b)oo", r"e(?=e)"] {
        let (mine, theirs) = trees(files);
        let args = json!({"root": ".", "pattern": pattern, "regex": true});
        let hits = |v: &Value| {
            let mut hits: Vec<(String, u64, String)> = (v.as_array().unwrap().iter())
                .map(|h| {
                    let name = Path::new(h["path"].as_str().unwrap()).file_name().unwrap();
                    let line = h["line"].as_u64().unwrap();
                    (
                        name.to_string_lossy().into_owned(),
                        line,
                        h["text"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            hits.sort();
            hits
        };
        let expected = automation_file(
            theirs.path(),
            "FA_grep",
            &under(theirs.path(), &args, &["root"]),
        );
        let got = mine
            .call("FA_grep", under(&mine.root(), &args, &["root"]))
            .await
            .unwrap_or_else(|e| panic!("{pattern}: {e}"));
        assert!(!hits(&expected).is_empty(), "{pattern} matches something");
        assert_eq!(hits(&got["matches"]), hits(&expected), "{pattern}");
    }
}

#[tokio::test]
async fn byte_order_mark_codecs_convert_as_python_does() {
    let with_bom: &[u8] = b"\xEF\xBB\xBFcaf\xC3\xA9\n";
    let cases = [
        ("utf-8-sig", "utf-16"),
        ("utf-8", "utf-8-sig"),
        ("utf_8_sig", "utf-32"),
        ("utf-8-sig", "utf-32-be"),
        ("utf-8-sig", "latin-1"),
    ];
    for (from, to) in cases {
        let (mine, theirs) = trees(&[("in.txt", with_bom)]);
        let args = json!({"file_path": "in.txt", "target_path": "out.txt",
                          "source_encoding": from, "target_encoding": to});
        let paths = ["file_path", "target_path"];
        let expected = automation_file(
            theirs.path(),
            "FA_encoding_convert",
            &under(theirs.path(), &args, &paths),
        );
        assert_eq!(expected, json!(true), "{from} → {to}");
        mine.call("FA_encoding_convert", under(&mine.root(), &args, &paths))
            .await
            .unwrap_or_else(|e| panic!("{from} → {to}: {e}"));
        assert_eq!(
            read(&mine.root(), "out.txt"),
            read(theirs.path(), "out.txt"),
            "{from} → {to}"
        );
    }
    // A file read as utf-8-sig and written back keeps its mark, as Python's codec writes it.
    let (mine, theirs) = trees(&[("t.txt", with_bom)]);
    let args =
        json!({"file_path": "t.txt", "pattern": "é", "replacement": "e", "encoding": "utf-8-sig"});
    let expected = automation_file(
        theirs.path(),
        "FA_sed_replace",
        &under(theirs.path(), &args, &["file_path"]),
    );
    let got = mine
        .call("FA_sed_replace", under(&mine.root(), &args, &["file_path"]))
        .await
        .unwrap();
    assert_eq!(got["replacements"], expected);
    assert_eq!(read(&mine.root(), "t.txt"), read(theirs.path(), "t.txt"));
}
