//! Issue 44 item 7: a sample's name is the submitter's (or an archive's) to choose, and it reaches
//! the terminal through `maljan jobs list`, `jobs show`, `ledger --jobs` and `ledger --job`. Named
//! with CSI (ESC[31m, ESC[2J), an OSC 8 hyperlink, an OSC window title, an 8-bit CSI (C1 0x9b), a
//! right-to-left override (U+202E), a bell and a carriage return, it is shown with every one of
//! them written out (`\x1b`, `\x9b`, `\u{202e}`), never as itself; the JSON forms keep the exact
//! name, written with JSON escapes.

use std::{path::Path, process::Command};

const BIN: &str = env!("CARGO_BIN_EXE_maljan");

/// The hostile names, and what each must read as on the terminal.
const NAMES: [(&str, &str); 6] = [
    ("red\x1b[31mX\x1b[0m.exe", "red\\x1b[31mX\\x1b[0m.exe"),
    (
        // A file name holds no '/': the link's target is a bare host.
        "link\x1b]8;;https:evil.example\x07click\x1b]8;;\x07.pdf",
        "link\\x1b]8;;https:evil.example\\x07click\\x1b]8;;\\x07.pdf",
    ),
    ("csi\u{9b}2Jwiped.doc", "csi\\x9b2Jwiped.doc"),
    ("invoice\u{202e}fdp.exe", "invoice\\u{202e}fdp.exe"),
    ("title\x1b]0;owned\x07.js", "title\\x1b]0;owned\\x07.js"),
    ("hide\rsafe.txt", "hide\\x0dsafe.txt"),
];

fn maljan(home: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_DATABASE_URL")
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .current_dir(home)
        .output()
        .expect("maljan runs");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert!(out.status.success(), "maljan {args:?}: {stderr}");
    (stdout, stderr)
}

/// Nothing that drives a terminal: no control character but the line feed, no bidi override.
fn assert_inert(what: &str, text: &str) {
    let raw: Vec<char> = text
        .chars()
        .filter(|&c| c != '\n' && maljan_triage::visible::is_hidden(c))
        .collect();
    assert!(raw.is_empty(), "{what} printed {raw:?} raw:\n{text:?}");
    for c in ['\x1b', '\u{9b}', '\u{202e}', '\x07', '\r'] {
        assert!(!text.contains(c), "{what} printed {c:?}:\n{text:?}");
    }
}

#[test]
fn hostile_sample_names_are_shown_visibly_by_jobs_and_ledger() {
    let home = tempfile::tempdir().unwrap();
    let samples = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    for (i, (name, _)) in NAMES.iter().enumerate() {
        let path = samples.path().join(name);
        std::fs::write(&path, format!("sample {i}")).unwrap();
        let (out, _) = maljan(home.path(), &["submit", path.to_str().unwrap()]);
        ids.push(out.trim().to_string());
    }

    let (list, err) = maljan(home.path(), &["jobs", "list"]);
    assert_inert("jobs list", &list);
    assert_inert("jobs list (stderr)", &err);
    let (ledger_jobs, err) = maljan(home.path(), &["ledger", "--jobs"]);
    assert_inert("ledger --jobs", &ledger_jobs);
    assert_inert("ledger --jobs (stderr)", &err);
    for ((_, shown), id) in NAMES.iter().zip(&ids) {
        assert!(list.contains(shown), "jobs list shows {shown}:\n{list}");
        assert!(
            ledger_jobs.contains(shown),
            "ledger --jobs shows {shown}:\n{ledger_jobs}"
        );
        let (show, err) = maljan(home.path(), &["jobs", "show", id]);
        assert_inert("jobs show", &show);
        assert_inert("jobs show (stderr)", &err);
        assert!(show.contains(shown), "jobs show shows {shown}:\n{show}");
        let (job, err) = maljan(home.path(), &["ledger", "--job", id]);
        assert_inert("ledger --job", &job);
        assert_inert("ledger --job (stderr)", &err);
        assert!(job.contains(shown), "ledger --job shows {shown}:\n{job}");
    }

    // The JSON forms: inert on a terminal, the exact name when read back.
    let (json, _) = maljan(home.path(), &["jobs", "list", "--json"]);
    assert_inert("jobs list --json", &json);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let (ledger_json, _) = maljan(home.path(), &["ledger", "--jobs", "--json"]);
    assert_inert("ledger --jobs --json", &ledger_json);
    let ledger_rows: Vec<serde_json::Value> = serde_json::from_str(&ledger_json).unwrap();
    for (name, _) in NAMES {
        assert!(
            rows.iter().any(|r| r["sample_name"] == name),
            "jobs list --json keeps {name:?}: {json}"
        );
        let label = format!("sample {name}");
        assert!(
            ledger_rows.iter().any(|r| r["label"] == label.as_str()),
            "ledger --jobs --json keeps {name:?}: {ledger_json}"
        );
    }
    let (show_json, _) = maljan(home.path(), &["jobs", "show", &ids[3], "--json"]);
    assert_inert("jobs show --json", &show_json);
    let v: serde_json::Value = serde_json::from_str(&show_json).unwrap();
    assert_eq!(v["queue"]["sample_name"], NAMES[3].0);
}
