//! The commands of automation-file's own page (in ../shared/seeds/), adapted only in the
//! command name (`python -m automation_file mcp` becomes `maljan serve files`), run as written
//! against the built binary.

mod common;

use std::{path::Path, process::Command, time::Duration};

use common::*;
use serde_json::Value;

/// The page's smoke test, verbatim but for the command: three lines into the server's stdin.
const SMOKE_TEST: &str = r#"printf '%s\n%s\n%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
  '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"FA_fast_find","arguments":{"root":".","pattern":"*.py","limit":3}}}' \
  | "$MALJAN" serve files"#;

/// A directory with four Python files (and one that is not), to search from.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a.py", "b.py", "c.py", "d.py", "notes.txt"] {
        std::fs::write(dir.path().join(name), "x = 1\n").unwrap();
    }
    dir
}

/// Runs a shell command line in `cwd` with $MALJAN set; its stdout lines as JSON.
fn shell(cwd: &Path, line: &str) -> Vec<Value> {
    let out = run(
        Command::new("sh")
            .args(["-c", line])
            .env("MALJAN", maljan())
            .current_dir(cwd),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn tool_names(list: &Value) -> Vec<&str> {
    let tools = list["result"]["tools"].as_array();
    let tools = tools.unwrap_or_else(|| panic!("no tools: {list}"));
    tools.iter().filter_map(|t| t["name"].as_str()).collect()
}

#[test]
fn the_printf_smoke_test_gets_one_real_answer_per_line() {
    let dir = project();
    let answers = shell(dir.path(), SMOKE_TEST);
    assert_eq!(answers.len(), 3, "{answers:?}");
    for (answer, id) in answers.iter().zip(1..) {
        assert_eq!(answer["id"], id, "{answer}");
        assert!(answer.get("error").is_none(), "{answer}");
    }
    let init = &answers[0]["result"];
    assert_eq!(
        init["protocolVersion"], "2025-11-25",
        "the newest with a handshake"
    );
    assert_eq!(init["serverInfo"]["name"], "maljan-files");
    let names = tool_names(&answers[1]);
    for name in [
        "FA_fast_find",
        "FA_list_dir",
        "FA_file_checksum",
        "capabilities",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let found = &answers[2]["result"];
    assert_eq!(found["isError"], false, "{found}");
    let matches = found["structuredContent"]["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 3, "the limit: {found}");
    let root = dir.path().canonicalize().unwrap();
    for m in matches {
        let path = Path::new(m.as_str().unwrap());
        assert_eq!(path.parent(), Some(root.as_path()), "{m}");
        assert_eq!(path.extension().and_then(|e| e.to_str()), Some("py"), "{m}");
    }
    assert_eq!(found["structuredContent"]["truncated"], true, "{found}");
}

#[test]
fn name_and_version_flags_name_the_server() {
    let dir = project();
    let line = SMOKE_TEST.replace(
        "serve files",
        "serve files --name automation_file --version 1.0.0",
    );
    let answers = shell(dir.path(), &line);
    assert_eq!(answers.len(), 3, "it served: {answers:?}");
    let info = &answers[0]["result"]["serverInfo"];
    assert_eq!(info["name"], "automation_file", "{info}");
    assert_eq!(info["version"], "1.0.0", "{info}");
    // The older spelling still works.
    let line = SMOKE_TEST.replace("serve files", "serve files --server-version 2.0.0");
    let answers = shell(dir.path(), &line);
    assert_eq!(answers[0]["result"]["serverInfo"]["version"], "2.0.0");
}

#[test]
fn maljan_version_still_prints_maljans_version() {
    let out = run(
        Command::new(maljan()).arg("--version"),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        printed.trim(),
        format!("maljan {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn allowed_actions_serve_exactly_those() {
    let dir = project();
    let line = SMOKE_TEST.replace(
        "serve files",
        "serve files --allowed-actions FA_list_dir,FA_file_checksum",
    );
    let answers = shell(dir.path(), &line);
    let mut names = tool_names(&answers[1]);
    names.sort();
    assert_eq!(names, ["FA_file_checksum", "FA_list_dir", "capabilities"]);
    // FA_fast_find is not served: its call is refused by name.
    let refused = answers[2].to_string();
    assert!(refused.contains("FA_fast_find"), "{refused}");
    assert_eq!(answers[2]["error"]["code"], -32602, "{refused}");
}
