//! `maljan serve files --storage-config FILE` (or MALJAN_STORAGE_CONFIG): a bad file stops
//! start-up naming the key at fault and never a secret; a good one is read and its profiles
//! answer the storage actions (here, a refused private endpoint: no server is needed).

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::{Value, json};

#[test]
fn a_bad_storage_config_stops_startup_without_showing_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("storage.toml");
    std::fs::write(
        &config,
        "[s3.default]\nsecret_access_key = \"TOPSECRETVALUE\"\naccess_key_id = \"k\"\nendpont_url = \"x\"\n",
    )
    .unwrap();
    let out = run(
        Command::new(maljan()).args([
            "serve",
            "files",
            "--storage-config",
            config.to_str().unwrap(),
        ]),
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    let all = text(&out);
    assert!(
        all.contains("endpont_url") && !all.contains("TOPSECRETVALUE"),
        "{all}"
    );

    let out = run(
        Command::new(maljan())
            .args(["serve", "files"])
            .env("MALJAN_STORAGE_CONFIG", dir.path().join("missing.toml")),
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("missing.toml"), "{}", text(&out));
}

#[test]
fn the_storage_config_profiles_reach_the_actions() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("storage.toml");
    std::fs::write(dir.path().join("secret"), "SECRETFROMFILE\n").unwrap();
    std::fs::write(
        &config,
        "[s3.default]\nendpoint_url = \"http://127.0.0.1:9\"\naccess_key_id = \"k\"\nsecret_access_key_file = \"secret\"\n",
    )
    .unwrap();
    let mut child = Command::new(maljan())
        .args(["serve", "files", "--root", dir.path().to_str().unwrap()])
        .env("MALJAN_STORAGE_CONFIG", &config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "FA_s3_list_bucket", "arguments": {"bucket": "b"}}}),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let answer: Value = loop {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["id"] == 1 {
            break v;
        }
    };
    drop(stdin);
    let _ = child.wait();
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("allow_private_endpoint") && !text.contains("SECRETFROMFILE"),
        "{text}"
    );
}
