//! put_sample over streamable HTTP with the official Python SDK client: the staged path is
//! private, inside the server's roots, and accepted by the server's other tools; the staging
//! primitives are advertised in tools/list but stay out of the manifest; --no-put-sample turns
//! them off.

mod common;

use std::{os::unix::fs::PermissionsExt, process::Command, time::Duration};

use common::*;
use sha2::Digest as _;

fn py_call(url: &str, tool: &str, args: &str) -> std::process::Output {
    let script = repo_root().join("tests/peers/py_client.py");
    run(
        Command::new(peer("MALJAN_PY")).arg(script).args([
            "--mode", "legacy", "--json", "--call", tool, "--args", args, "--http", url,
        ]),
        Duration::from_secs(60),
    )
}

fn structured(out: &std::process::Output) -> serde_json::Value {
    // --json prints tools/list, then the call result: the last JSON document is the call's.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let start = stdout.rfind("\n{\n").map(|i| i + 1).unwrap_or(0);
    let v: serde_json::Value =
        serde_json::from_str(&stdout[start..]).unwrap_or_else(|e| panic!("{e}: {}", text(out)));
    v["structuredContent"].clone()
}

#[test]
fn a_sample_put_over_http_is_staged_privately_and_usable() {
    let root = scratch_root();
    let staging = tempfile::tempdir().unwrap();
    let staging_dir = staging.path().join("stage");
    let port = free_port();
    let _server = spawn(Command::new(maljan()).args([
        "serve",
        "files",
        "--root",
        root.path().to_str().unwrap(),
        "--http",
        &format!("127.0.0.1:{port}"),
        "--staging-dir",
        staging_dir.to_str().unwrap(),
    ]));
    wait_answering(port);
    let url = format!("http://127.0.0.1:{port}/mcp");
    // "hello\n" in base64, with its sha256, under a hostile name.
    let args = format!(
        r#"{{"filename":"../../etc/cron.d/x","content_b64":"aGVsbG8K","sha256":"{HELLO_SHA256}"}}"#
    );
    let out = py_call(&url, "put_sample", &args);
    assert!(out.status.success(), "{}", text(&out));
    // Advertised in tools/list (that is how a client learns the server receives samples), but
    // kept out of the capability manifest.
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        listed.contains("\"name\": \"put_sample_begin\""),
        "staging primitives must be advertised in tools/list"
    );
    let caps = py_call(&url, "capabilities", "{}");
    let manifest = structured(&caps);
    let names: Vec<&str> = manifest["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.is_empty(), "{}", text(&caps));
    assert!(
        !names.iter().any(|n| n.starts_with("put_sample")),
        "staging primitives must stay out of the manifest: {names:?}"
    );
    let path = structured(&out)["path"].as_str().unwrap().to_string();
    let staged = std::path::Path::new(&path);
    assert!(
        staged.starts_with(staging_dir.canonicalize().unwrap()),
        "{path}"
    );
    assert_eq!(staged.file_name().unwrap(), "x");
    assert_eq!(std::fs::read(staged).unwrap(), b"hello\n");
    assert_eq!(
        std::fs::metadata(staged).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The server's other tools accept the staged path.
    let out = py_call(&url, "FA_file_checksum", &format!(r#"{{"path":"{path}"}}"#));
    assert!(text(&out).contains(HELLO_SHA256), "{}", text(&out));
    // A wrong digest is bad_argument and leaves nothing behind.
    let before = walk_count(&staging_dir);
    let out = py_call(
        &url,
        "put_sample",
        &format!(
            r#"{{"filename":"y","content_b64":"aGVsbG8K","sha256":"{}"}}"#,
            "0".repeat(64)
        ),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("bad_argument"));
    assert_eq!(walk_count(&staging_dir), before);
}

/// A sample big enough for the HTTP intake (which takes content_b64 out of the body before rmcp
/// parses it), sent by a client nobody here wrote: it is staged byte for byte, and the server's
/// log says the intake took it.
#[test]
fn a_large_sample_from_the_python_sdk_goes_through_the_intake() {
    use base64::Engine as _;
    let root = scratch_root();
    let staging = tempfile::tempdir().unwrap();
    let log = staging.path().join("server.log");
    let port = free_port();
    let _server = Running(
        Command::new(maljan())
            .args(["serve", "files", "--root"])
            .arg(root.path())
            .args(["--http", &format!("127.0.0.1:{port}"), "--staging-dir"])
            .arg(staging.path().join("stage"))
            .env("MALJAN_LOG", "info,maljan_server=debug")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_answering(port);
    // 80 KiB: its base64 fits one command-line argument (128 KiB at most) and the body is over
    // the intake's 64 KiB threshold.
    let data: Vec<u8> = (0..80 * 1024u32).map(|i| (i * 31 % 251) as u8).collect();
    let sha = hex::encode(sha2::Sha256::digest(&data));
    let content = base64::engine::general_purpose::STANDARD.encode(&data);
    let args = format!(r#"{{"filename":"big.bin","content_b64":"{content}","sha256":"{sha}"}}"#);
    let out = py_call(&format!("http://127.0.0.1:{port}/mcp"), "put_sample", &args);
    assert!(out.status.success(), "{}", text(&out));
    let path = structured(&out)["path"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(&path).unwrap(), data);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("put_sample content taken from the request body"),
        "the intake did not take it: {logged}"
    );
    assert!(
        !logged.contains(&content[..64]),
        "content must never be logged"
    );
}

#[test]
fn no_put_sample_turns_the_primitives_off() {
    let root = scratch_root();
    let port = free_port();
    let _server = spawn(Command::new(maljan()).args([
        "serve",
        "files",
        "--root",
        root.path().to_str().unwrap(),
        "--http",
        &format!("127.0.0.1:{port}"),
        "--no-put-sample",
    ]));
    wait_answering(port);
    // With put_sample on, this empty sample would stage fine; off, the tool does not exist.
    let out = py_call(
        &format!("http://127.0.0.1:{port}/mcp"),
        "put_sample",
        r#"{"filename":"a","content_b64":"","sha256":""}"#,
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("structuredContent"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_bearer_token_is_required_when_set() {
    let root = scratch_root();
    let token_file = root.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let port = free_port();
    let _server = spawn(Command::new(maljan()).args([
        "serve",
        "files",
        "--root",
        root.path().to_str().unwrap(),
        "--http",
        &format!("127.0.0.1:{port}"),
        "--auth-token-file",
        token_file.to_str().unwrap(),
    ]));
    wait_answering(port);
    let out = py_call(
        &format!("http://127.0.0.1:{port}/mcp"),
        "capabilities",
        "{}",
    );
    assert!(!out.status.success(), "a call without the token must fail");
    assert_eq!(status_of(port, None), 401);
    assert_eq!(status_of(port, Some("wrong")), 401);
    let with_token = status_of(port, Some("s3cret-token"));
    assert!(
        (200..300).contains(&with_token),
        "the right token was refused: {with_token}"
    );
}

/// POSTs an initialize request by hand and returns the HTTP status.
fn status_of(port: u16, token: Option<&str>) -> u16 {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

fn walk_count(dir: &std::path::Path) -> usize {
    fn walk(d: &std::path::Path) -> usize {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        1 + if e.path().is_dir() {
                            walk(&e.path())
                        } else {
                            0
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(dir)
}
