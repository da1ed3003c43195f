//! `maljan serve files` as the official SDK clients see it: the Python SDK client over stdio (in
//! its default auto mode, which tries the stateless 2026-07-28 discover first, and in legacy
//! mode) and over streamable HTTP; the Inspector CLI (Inspector 2's `mcp-inspector --cli`) listing and calling tools.

mod common;

use std::{process::Command, time::Duration};

use common::*;

fn py_client(args: &[&str]) -> std::process::Output {
    let script = repo_root().join("tests/peers/py_client.py");
    run(
        Command::new(peer("MALJAN_PY")).arg(script).args(args),
        Duration::from_secs(60),
    )
}

#[test]
fn python_sdk_client_over_stdio_in_auto_and_legacy_modes() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let call_args = format!(r#"{{"path":"{root_s}/hello.txt"}}"#);
    for mode in ["auto", "legacy"] {
        let out = py_client(&[
            "--mode",
            mode,
            "--call",
            "FA_file_checksum",
            "--args",
            &call_args,
            "--",
            maljan(),
            "serve",
            "files",
            "--root",
            root_s,
        ]);
        let all = text(&out);
        assert!(out.status.success(), "mode {mode}: {all}");
        assert!(all.contains("server=maljan-files"), "mode {mode}: {all}");
        assert!(
            all.contains("FA_list_dir") && all.contains("capabilities"),
            "mode {mode}: {all}"
        );
        assert!(all.contains(HELLO_SHA256), "mode {mode}: {all}");
    }
}

#[test]
fn python_sdk_client_sees_error_results_with_remedies() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let out = py_client(&[
        "--mode",
        "legacy",
        "--no-list",
        "--call",
        "FA_file_checksum",
        "--args",
        r#"{"path":"/etc/passwd"}"#,
        "--",
        maljan(),
        "serve",
        "files",
        "--root",
        root_s,
    ]);
    let all = text(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an isError result exits 2: {all}"
    );
    assert!(
        all.contains("path_outside_roots") && all.contains("remediation"),
        "{all}"
    );
}

#[test]
fn python_sdk_client_over_streamable_http() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let port = free_port();
    let _server = spawn(Command::new(maljan()).args([
        "serve",
        "files",
        "--root",
        root_s,
        "--http",
        &format!("127.0.0.1:{port}"),
    ]));
    wait_answering(port);
    let call_args = format!(r#"{{"path":"{root_s}/hello.txt"}}"#);
    for mode in ["auto", "legacy"] {
        let out = py_client(&[
            "--mode",
            mode,
            "--call",
            "FA_file_checksum",
            "--args",
            &call_args,
            "--http",
            &format!("http://127.0.0.1:{port}/mcp"),
        ]);
        let all = text(&out);
        assert!(out.status.success(), "mode {mode}: {all}");
        assert!(all.contains(HELLO_SHA256), "mode {mode}: {all}");
    }
}

#[test]
fn inspector_cli_lists_and_calls_tools() {
    let root = scratch_root();
    let root_s = root.path().to_str().unwrap();
    let out = run(
        Command::new(peer("MALJAN_NODE"))
            .args([peer("MALJAN_INSPECTOR").as_str(), "--cli"])
            .args([
                maljan(),
                "serve",
                "files",
                "--root",
                root_s,
                "--method",
                "tools/list",
            ]),
        Duration::from_secs(60),
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let listed: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {all}"));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for expected in [
        "FA_list_dir",
        "FA_fast_find",
        "FA_file_checksum",
        "FA_verify_checksum",
        "FA_create_dir",
        "FA_copy_file",
        "FA_remove_file",
        "capabilities",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let out = run(
        Command::new(peer("MALJAN_NODE"))
            .args([peer("MALJAN_INSPECTOR").as_str(), "--cli"])
            .args([
                maljan(),
                "serve",
                "files",
                "--root",
                root_s,
                "--method",
                "tools/call",
                "--tool-name",
                "FA_file_checksum",
                "--tool-arg",
                &format!("path={root_s}/hello.txt"),
            ]),
        Duration::from_secs(60),
    );
    assert!(text(&out).contains(HELLO_SHA256), "{}", text(&out));
}
