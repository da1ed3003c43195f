//! What `maljan analyze` prints on the terminal (stderr, stdout) shows every control character
//! and bidi override of a sample's name or a server's words as a visible escape: a file named
//! with ESC/OSC/CSI, C1 controls or U+202E, a hostile MCP server's error code and remedy, for one
//! sample and for several.

mod common;

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use common::{maljan, run};

/// An OSC retitle, a CSI screen clear, an 8-bit CSI (C1) and a right-to-left override.
const HOSTILE: &str = "\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{202e}exe.txt";

fn analyze(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    run(
        Command::new(maljan())
            .arg("analyze")
            .args(args)
            .current_dir(cwd)
            .env("MALJAN_HOME", home)
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_LLM_MODEL")
            .env("MALJAN_LOG", "warn")
            .stdin(Stdio::null()),
        Duration::from_secs(180),
    )
}

/// No control character but line feeds, and no bidi override, in what reached the terminal.
fn assert_inert(out: &Output) {
    for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let bad: Vec<char> = text
            .chars()
            .filter(|&c| maljan_triage::visible::is_hidden(c) && c != '\n')
            .collect();
        assert!(bad.is_empty(), "{what} carries {bad:?}: {text:?}");
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_hostile_file_name_is_shown_escaped_in_every_message() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let empty = tmp.path().join(format!("empty{HOSTILE}"));
    std::fs::write(&empty, b"").unwrap();
    let out = analyze(&home, tmp.path(), &["--no-agent", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_inert(&out);
    assert!(
        stderr(&out).contains("empty\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u{202e}exe.txt is empty")
    );

    let missing = tmp.path().join(format!("gone{HOSTILE}"));
    let out = analyze(
        &home,
        tmp.path(),
        &["--no-agent", missing.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_inert(&out);
    assert!(stderr(&out).contains("no sample at"), "{}", stderr(&out));

    // A report into a missing folder with such a name.
    let sample = tmp.path().join(format!("prog{HOSTILE}"));
    std::fs::copy("/usr/bin/true", &sample).unwrap();
    let report = tmp.path().join(format!("dir{HOSTILE}")).join("r.md");
    let out = analyze(
        &home,
        tmp.path(),
        &[
            "--no-agent",
            sample.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_inert(&out);
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));

    // A whole run on it: the progress, the summary and the report's path.
    let out = analyze(&home, tmp.path(), &["--no-agent", sample.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_inert(&out);
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        path.starts_with("maljan-report-prog_") && tmp.path().join(&path).is_file(),
        "{path}"
    );
}

#[test]
fn several_samples_with_hostile_names_show_them_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = tmp.path().join("samples");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy("/usr/bin/true", dir.join(format!("a{HOSTILE}"))).unwrap();
    std::fs::write(dir.join(format!("b{HOSTILE}")), b"").unwrap();
    std::fs::write(dir.join(format!("c{HOSTILE}")), b"plain text\n").unwrap();
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = analyze(
        &home,
        tmp.path(),
        &[
            "--no-agent",
            dir.to_str().unwrap(),
            "--report",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_inert(&out);
    let err = stderr(&out);
    assert!(
        err.contains("b\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u{202e}exe.txt is empty"),
        "{err}"
    );
    // The index keeps the names, escaped for Markdown and with the controls visible.
    let md = std::fs::read_to_string(out_dir.join("maljan-index.md")).unwrap();
    assert!(
        !md.chars()
            .any(|c| maljan_triage::visible::is_hidden(c) && c != '\n')
    );
    // a, b (its name and its reason) and c.
    assert_eq!(md.matches("\\\\x1b\\]0;pwned").count(), 4, "{md}");
}

/// A stdio MCP server whose one tool fails with hostile text in its error's code, message and
/// remedy, and whose names carry it too.
const EVIL_SERVER: &str = r#"
import json, sys
E = "\x1b]0;pwned\x07\x1b[2J\u009b31m\u202eexe.txt"
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "evil" + E, "version": "1" + E}}
    elif meth == "tools/list":
        r = {"tools": [{"name": "work", "description": "d" + E,
                        "inputSchema": {"type": "object", "properties": {}}}]}
    elif meth == "tools/call":
        body = {"error": {"code": "bad" + E, "message": "m" + E, "remediation": "r" + E},
                "tool": "work"}
        r = {"content": [{"type": "text", "text": json.dumps(body)}], "isError": True}
    elif meth == "ping":
        r = {}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                          "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

#[test]
fn a_hostile_server_s_error_is_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let script = tmp.path().join("evil.py");
    std::fs::write(&script, EVIL_SERVER).unwrap();
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.analysis]\ncommand = {:?}\nargs = [\"serve\", \"analysis\"]\n\n\
             [servers.evil]\ncommand = \"python3\"\nargs = [{:?}]\n",
            maljan(),
            script
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("triage.toml"),
        "[[extra_steps]]\nserver = \"evil\"\ntool = \"work\"\nargs = {}\n",
    )
    .unwrap();
    let sample = tmp.path().join("s.bin");
    std::fs::copy("/usr/bin/true", &sample).unwrap();
    let report = tmp.path().join("r.json");
    let out = analyze(
        &home,
        tmp.path(),
        &[
            "--no-agent",
            sample.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_inert(&out);
    // The failure line names the tool, with the server's words escaped.
    let line = err
        .lines()
        .find(|l| l.contains(" work: "))
        .unwrap_or_else(|| panic!("no failure line: {err}"));
    assert!(line.contains("\\x1b]0;pwned\\x07"), "{line}");
}
