//! The files server serves every FA_* action automation-file registers: `maljan tools files`
//! (with the opt-in FA_run_shell named, as an operator would) is compared with the executor
//! registry of the automation-file package installed in the peers venv, and the test prints
//! which actions are missing before it fails.

mod common;

use std::{collections::BTreeSet, process::Command, time::Duration};

use common::{maljan, peer, run, text};

/// The FA_* names automation-file's own executor registers.
fn automation_file_actions() -> BTreeSet<String> {
    let out = run(
        Command::new(peer("MALJAN_PY")).args([
            "-c",
            "from automation_file import executor\n\
             print('\\n'.join(n for n in executor.registry.event_dict if n.startswith('FA_')))",
        ]),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "automation-file is not importable: {}",
        text(&out)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn served() -> BTreeSet<String> {
    let all = run(
        Command::new(maljan()).args(["tools", "files"]),
        Duration::from_secs(60),
    );
    assert!(all.status.success(), "{}", text(&all));
    let tools: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    let mut names: BTreeSet<String> = (tools.as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    // FA_run_shell is opt-in: listed only when the operator names it.
    let shell = run(
        Command::new(maljan()).args(["tools", "files", "--allowed-actions", "FA_run_shell"]),
        Duration::from_secs(60),
    );
    if shell.status.success() {
        names.insert("FA_run_shell".into());
    }
    names
}

#[test]
fn every_automation_file_action_is_served() {
    let wanted = automation_file_actions();
    assert_eq!(
        wanted.len(),
        179,
        "automation-file 0.0.55 registers 179 FA_* actions"
    );
    let served = served();
    let missing: Vec<&String> = wanted.difference(&served).collect();
    println!(
        "{} of {} automation-file actions served",
        wanted.len() - missing.len(),
        wanted.len()
    );
    for name in &missing {
        println!("missing: {name}");
    }
    assert!(missing.is_empty(), "{} missing: {missing:?}", missing.len());
}

/// automation-file's semantic tools as its own server lists them (`mcp --no-bridge`):
/// each name with its argument names and its required ones.
fn automation_file_semantic_tools(
    root: &std::path::Path,
) -> Vec<(String, Vec<String>, Vec<String>)> {
    let input = root.join("list.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = run(
        Command::new(peer("MALJAN_PY"))
            .args(["-m", "automation_file", "mcp", "--no-bridge", "--root"])
            .arg(root)
            .stdin(std::fs::File::open(&input).unwrap()),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "automation-file's server failed: {}",
        text(&out)
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    let reply: serde_json::Value = listed
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["id"] == 2)
        .expect("a tools/list answer");
    described(reply["result"]["tools"].as_array().unwrap())
}

fn described(tools: &[serde_json::Value]) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut out: Vec<_> = tools
        .iter()
        .map(|t| {
            let schema = &t["inputSchema"];
            let mut args: Vec<String> = (schema["properties"].as_object())
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            args.sort();
            let mut required: Vec<String> = (schema["required"].as_array())
                .map(|r| r.iter().map(|n| n.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            required.sort();
            (t["name"].as_str().unwrap().to_string(), args, required)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_semantic_tools_have_automation_files_names_and_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let wanted = automation_file_semantic_tools(dir.path());
    assert_eq!(
        wanted.len(),
        14,
        "automation-file 0.0.55 lists 14 semantic tools"
    );
    // --no-bridge lists what automation-file's does, and maljan's own `capabilities`.
    let semantic: Vec<serde_json::Value> = listed(&["--no-bridge"])
        .into_iter()
        .filter(|t| t["name"] != "capabilities")
        .collect();
    assert_eq!(described(&semantic), wanted);
    let narrowed: Vec<String> = listed(&["--no-bridge", "--tools", "file_read,audit_search"])
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(narrowed, ["file_read", "audit_search", "capabilities"]);
    let bridge_only = listed(&["--tools", "none"]);
    assert!(
        bridge_only
            .iter()
            .all(|t| t["name"].as_str().unwrap().starts_with("FA_") || t["name"] == "capabilities")
    );
    let typo = run(
        Command::new(maljan()).args(["tools", "files", "--tools", "file_raed"]),
        Duration::from_secs(60),
    );
    assert!(
        !typo.status.success() && text(&typo).contains("file_raed"),
        "{}",
        text(&typo)
    );
}

/// `maljan tools files` with `flags`: the descriptors as tools/list gives them.
fn listed(flags: &[&str]) -> Vec<serde_json::Value> {
    let out = run(
        Command::new(maljan()).args(["tools", "files"]).args(flags),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    tools.as_array().unwrap().clone()
}
