//! `maljan serve files` and `maljan tools files` flags, through the real binary on stdio.

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::{Value, json};

/// The state directory of every server these tests start: their own, never the user's (whose
/// database another maljan may have migrated further).
fn state_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// `maljan serve files ARGS` with piped stdin and stdout.
fn serve_files(args: &[&str], stderr: Stdio) -> std::process::Child {
    Command::new(maljan())
        .args(["serve", "files"])
        .args(args)
        .env("MALJAN_STATE_DIR", state_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Sends lines to `maljan serve files ARGS` on stdio, closes stdin, returns stdout lines and stderr.
fn session(args: &[&str], lines: &[Value]) -> (Vec<Value>, String) {
    let mut child = serve_files(args, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut out = Vec::new();
    let mut reader = stdout.lines();
    let requests = lines.iter().filter(|l| l.get("id").is_some()).count();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    while out.len() < requests {
        let line = reader.next().expect("server closed stdout early").unwrap();
        // Every stdout line must be a JSON-RPC message: nothing else may reach stdout.
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("non-protocol stdout line ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        out.push(v);
    }
    drop(stdin);
    // Requests run concurrently, so answers arrive in any order: index them by id.
    out.sort_by_key(|v| v["id"].as_i64());
    let output = child.wait_with_output().unwrap();
    (out, String::from_utf8_lossy(&output.stderr).to_string())
}

/// `printf '…' | maljan serve files --root ROOT`: writes every line, closes stdin, and returns
/// every stdout line in the order it came, once the server has exited successfully.
fn piped(root: &str, lines: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut child = serve_files(&["--root", root], Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    out
}

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})
}

fn list() -> Value {
    json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})
}

fn call(id: i64, name: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}})
}

fn names(list_response: &Value) -> Vec<String> {
    list_response["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn error_code(response: &Value) -> String {
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    v["error"]["code"].as_str().unwrap_or_default().to_string()
}

#[test]
fn name_and_version_flags_and_startup_log() {
    let root = scratch_root();
    let (out, stderr) = session(
        &[
            "--root",
            root.path().to_str().unwrap(),
            "--name",
            "my-files",
            "--server-version",
            "7.7.7",
        ],
        &[
            init(),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            list(),
        ],
    );
    assert_eq!(out[0]["result"]["serverInfo"]["name"], "my-files");
    assert_eq!(out[0]["result"]["serverInfo"]["version"], "7.7.7");
    let count = names(&out[1]).len();
    assert!(
        stderr.contains("my-files") && stderr.contains(&format!("tools={count}")),
        "{stderr}"
    );
}

#[test]
fn read_only_hides_and_refuses_destructive_tools() {
    let root = scratch_root();
    let r = root.path().to_str().unwrap();
    let target = format!("{r}/hello.txt");
    let (out, _) = session(
        &["--root", r, "--read-only"],
        &[
            init(),
            list(),
            call(2, "FA_remove_file", json!({"file_path": target})),
        ],
    );
    let listed = names(&out[1]);
    assert!(
        !listed
            .iter()
            .any(|n| n == "FA_remove_file" || n == "FA_copy_file"),
        "{listed:?}"
    );
    assert!(listed.iter().any(|n| n == "FA_file_checksum"));
    let refused = &out[2];
    let said = refused.to_string();
    // Under --read-only the tool does not exist: the call is refused as an unknown tool.
    assert_eq!(refused["error"]["code"], -32602, "{said}");
    assert!(said.contains("unknown tool 'FA_remove_file'"), "{said}");
    assert!(
        root.path().join("hello.txt").exists(),
        "the file was removed under --read-only"
    );
}

#[test]
fn allowed_actions_limits_the_list_exactly() {
    let root = scratch_root();
    let (out, _) = session(
        &[
            "--root",
            root.path().to_str().unwrap(),
            "--allowed-actions",
            "FA_file_checksum,FA_list_dir",
        ],
        &[init(), list()],
    );
    let mut listed = names(&out[1]);
    listed.sort();
    assert_eq!(listed, ["FA_file_checksum", "FA_list_dir", "capabilities"]);
}

#[test]
fn an_unknown_allowed_action_stops_startup_naming_the_nearest() {
    let out = run(
        Command::new(maljan()).args(["serve", "files", "--allowed-actions", "FA_file_cheksum"]),
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    let all = text(&out);
    assert!(
        all.contains("FA_file_cheksum") && all.contains("FA_file_checksum"),
        "{all}"
    );
}

#[test]
fn paths_outside_the_roots_are_refused() {
    let root = scratch_root();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"s").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    let r = root.path().to_str().unwrap();
    let (out, _) = session(
        &["--root", r],
        &[
            init(),
            call(1, "FA_file_checksum", json!({"path": "/etc/hostname"})),
            call(2, "FA_file_checksum", json!({"path": format!("{r}/../x")})),
            call(
                3,
                "FA_file_checksum",
                json!({"path": format!("{r}/link/secret")}),
            ),
            call(
                4,
                "FA_copy_file",
                json!({"file_path": format!("{r}/hello.txt"), "target_path": format!("{r}/link/copied")}),
            ),
        ],
    );
    for response in &out[1..] {
        assert_eq!(error_code(response), "path_outside_roots", "{response}");
    }
    assert!(!outside.path().join("copied").exists());
}

#[test]
fn tools_command_prints_the_tools_list_descriptors() {
    let out = run(
        Command::new(maljan()).args(["tools", "files", "--read-only"]),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", text(&out));
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = tools.as_array().unwrap();
    let checksum = tools
        .iter()
        .find(|t| t["name"] == "FA_file_checksum")
        .unwrap();
    assert_eq!(checksum["inputSchema"]["type"], "object");
    assert_eq!(
        checksum["inputSchema"]["properties"]["algorithm"]["default"],
        "sha256"
    );
    assert_eq!(checksum["annotations"]["readOnlyHint"], true);
    // Every tool listed under --read-only says it changes nothing; those that only add are
    // gone as well as those that overwrite or delete.
    for tool in tools {
        assert_eq!(
            tool["annotations"]["readOnlyHint"], true,
            "{}",
            tool["name"]
        );
    }
    for writer in [
        "FA_create_dir",
        "FA_jsonl_append",
        "FA_integrity_watch_start",
        "FA_integrity_watch_stop",
        "FA_remove_file",
    ] {
        assert!(
            !tools.iter().any(|t| t["name"] == writer),
            "{writer} is listed"
        );
    }
}

#[test]
fn a_client_that_does_not_wait_gets_the_initialize_answer_first() {
    // A printf pipe sends its calls right behind initialize: the answer to initialize must
    // still come out first, then one answer for every request.
    let root = scratch_root();
    let r = root.path().to_str().unwrap();
    std::fs::write(root.path().join("a.txt"), "one\ntwo\n").unwrap();
    let mut lines = vec![
        init(),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    ];
    lines.extend((1..=20).map(|id| call(id, "FA_line_count", json!({"file_path": "a.txt"}))));
    lines.push(json!({"jsonrpc":"2.0","id":21,"method":"ping"}));
    let out = piped(r, lines);
    assert_eq!(out[0]["id"], 0, "first out: {}", out[0]);
    assert!(out[0]["result"]["serverInfo"].is_object(), "{}", out[0]);
    let mut ids: Vec<i64> = out.iter().filter_map(|v| v["id"].as_i64()).collect();
    ids.sort();
    assert_eq!(ids, (0..=21).collect::<Vec<_>>());
    for answer in out
        .iter()
        .filter(|v| (1..=20).contains(&v["id"].as_i64().unwrap()))
    {
        assert_eq!(
            answer["result"]["structuredContent"]["lines"], 2,
            "{answer}"
        );
    }
}

/// `printf '…' | maljan serve files`: stdin closes right after the last request, while a call
/// is still running on the blocking pool. Its answer must still come, after the quick ones.
#[test]
fn calls_still_running_when_stdin_closes_are_answered() {
    let root = scratch_root();
    let r = root.path().to_str().unwrap();
    let big = root.path().join("big.bin");
    std::fs::write(&big, vec![7u8; 8 << 20]).unwrap();
    let out = piped(
        r,
        [
            init(),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            call(1, "FA_file_checksum", json!({"path": big})),
            json!({"jsonrpc":"2.0","id":2,"method":"ping"}),
            call(3, "FA_file_checksum", json!({"path": "/etc/hostname"})),
        ],
    );
    let ids: Vec<i64> = out.iter().filter_map(|v| v["id"].as_i64()).collect();
    assert_eq!(ids.len(), 4, "{out:?}");
    assert_eq!(
        ids.last(),
        Some(&1),
        "the 8 MiB checksum answers last: {ids:?}"
    );
    let by_id = |id: i64| out.iter().find(|v| v["id"] == id).unwrap();
    assert_eq!(by_id(2)["result"], json!({}));
    assert_eq!(error_code(by_id(3)), "path_outside_roots");
    let checksum = &by_id(1)["result"]["structuredContent"];
    assert_eq!(checksum["size"], 8 << 20, "{checksum}");
}

/// Every entry below `dir` (links not followed): path, kind, size, mode and modification time.
fn tree_state(dir: &std::path::Path) -> Vec<(String, u32, u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = path.symlink_metadata().unwrap();
            if meta.is_dir() {
                pending.push(path.clone());
            }
            out.push((
                path.strip_prefix(dir).unwrap().display().to_string(),
                meta.mode(),
                meta.len(),
                meta.modified().unwrap(),
            ));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Arguments for `tool` from its input schema: every property it has, each given a value that
/// would make a writing tool write into `dir` (new paths, existing files, flags on).
fn plausible_arguments(tool: &Value, dir: &str) -> Value {
    let at = |name: &str| format!("{dir}/{name}");
    let tool_name = tool["name"].as_str().unwrap();
    let by_name = |name: &str| -> Option<Value> {
        Some(match (tool_name, name) {
            ("FA_grep", "pattern") => json!("a"),
            ("FA_diff_dirs", "left" | "right") => json!(dir),
            ("FA_json_get" | "FA_jsonl_iter", "path") => json!(at("data.json")),
            // The semantic tools: a directory to list or search, a file for the rest.
            ("storage_list" | "file_search", "uri") => json!(dir),
            ("file_search", "content") => json!("a"),
            ("file_read", "encoding") => json!("utf-8"),
            ("file_checksum" | "file_verify", "algorithm") => json!("sha256"),
            ("audit_search", "since" | "until") => json!("2026-01-01T00:00:00+00:00"),
            (_, name) => match name {
                "path" | "file_path" | "left" | "source" | "uri" => json!(at("data.txt")),
                "right" => json!(at("other.txt")),
                "zip_file_path" => json!(at("archive.zip")),
                "file_name" => json!("inner.txt"),
                "baseline" => json!(at("baseline.json")),
                "manifest_path" => json!(at("manifest.json")),
                "csv_path" | "src" => json!(at("data.csv")),
                "dir_path" | "root" | "target" | "directory" | "file_dir_path"
                | "origin_dir_path" | "dir_we_want_to_zip" => json!(dir),
                "target_path" | "target_dir" | "target_dir_path" | "dst" | "extract_path"
                | "output_dir" | "parquet_path" | "zip_name" | "reference" => {
                    json!(at("new-entry"))
                }
                "key_path" => json!("a"),
                "pattern" => json!("*"),
                "name" => json!("watch"),
                "expected" => json!("00"),
                "password" => json!("pw"),
                "dry_run" => json!(false),
                "action_list" => json!([["FA_create_dir", {"dir_path": at("made-by-action")}]]),
                "record" | "value" => json!({"k": "v"}),
                _ => return None,
            },
        })
    };
    let mut args = serde_json::Map::new();
    let properties = tool["inputSchema"]["properties"].as_object().unwrap();
    for (name, schema) in properties {
        let kind = match &schema["type"] {
            Value::String(t) => t.clone(),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("string")
                .to_string(),
            _ => "string".to_string(),
        };
        let value = by_name(name).unwrap_or_else(|| match kind.as_str() {
            // Flags on: whatever a flag turns on (an index, a deep pass) must not write either.
            "boolean" => json!(true),
            _ if !schema["default"].is_null() => schema["default"].clone(),
            "integer" | "number" => json!(1),
            "array" => json!([at("data.txt")]),
            "object" => json!({}),
            _ => json!("x"),
        });
        args.insert(name.clone(), value);
    }
    Value::Object(args)
}

#[test]
fn read_only_tools_change_nothing_whatever_they_are_given() {
    let root = scratch_root();
    let dir = root.path().canonicalize().unwrap();
    let r = dir.to_str().unwrap();
    std::fs::write(dir.join("data.txt"), "a\nb\n").unwrap();
    std::fs::write(dir.join("other.txt"), "a\nc\n").unwrap();
    std::fs::write(dir.join("data.csv"), "a,b\n1,2\n").unwrap();
    std::fs::write(dir.join("data.json"), "{\"a\": 1}\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/inner.txt"), "inner").unwrap();
    // An archive, a baseline and a manifest for the tools that read them: made by the server
    // itself, before --read-only, so they are what the tools expect.
    let made = session(
        &["--root", r],
        &[
            init(),
            call(1, "FA_zip_file", json!({"file": [format!("{r}/sub/inner.txt")], "zip_file_path": format!("{r}/archive.zip")})),
            call(2, "FA_integrity_baseline", json!({"target": format!("{r}/sub"), "baseline": format!("{r}/baseline.json")})),
            call(3, "FA_write_manifest", json!({"root": format!("{r}/sub"), "manifest_path": format!("{r}/manifest.json")})),
        ],
    )
    .0;
    for answer in &made[1..] {
        assert!(answer["result"]["isError"] != true, "{answer}");
    }
    let before = tree_state(&dir);

    let (listed, _) = session(&["--root", r, "--read-only"], &[init(), list()]);
    let tools = listed[1]["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for writer in [
        "FA_create_dir",
        "FA_jsonl_append",
        "FA_integrity_watch_start",
        "FA_integrity_watch_stop",
        "FA_execute_action",
    ] {
        assert!(
            !names.contains(&writer),
            "{writer} is listed under --read-only"
        );
    }
    let mut calls = vec![init()];
    for (i, tool) in tools.iter().enumerate() {
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        let args = plausible_arguments(tool, r);
        calls.push(call(i as i64 + 1, tool["name"].as_str().unwrap(), args));
    }
    let (answers, _) = session(&["--root", r, "--read-only"], &calls);
    assert_eq!(answers.len(), calls.len(), "every call is answered");
    let succeeded = answers[1..]
        .iter()
        .filter(|a| a["result"].is_object() && a["result"]["isError"] != true)
        .count();
    // Most tools do their work with these arguments: the tree staying the same means something.
    let failed: Vec<String> = answers[1..]
        .iter()
        .zip(&calls[1..])
        .filter(|(a, _)| !(a["result"].is_object() && a["result"]["isError"] != true))
        .map(|(a, c)| {
            format!(
                "{} -> {}",
                c["params"]["name"], a["result"]["content"][0]["text"]
            )
        })
        .collect();
    assert!(
        succeeded * 2 > tools.len(),
        "{succeeded} of {}: {failed:#?}",
        tools.len()
    );
    assert_eq!(
        tree_state(&dir),
        before,
        "a read-only tool changed the tree"
    );
}
