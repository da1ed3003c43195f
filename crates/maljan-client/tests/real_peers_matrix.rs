//! The runtime against real MCP peers (install them once with `scripts/peers.sh`, whose output
//! sets MALJAN_PY, MALJAN_NODE, MALJAN_SERVER_EVERYTHING, MALJAN_SERVER_FILESYSTEM): the Python
//! SDK server over stdio, streamable HTTP (SSE replies and JSON replies) and legacy SSE;
//! server-everything over stdio, streamable HTTP and SSE; server-filesystem over stdio; maljan's
//! own files server over stdio; and `http` falling back to legacy SSE. A missing variable fails the
//! test with the command that fixes it.

mod common;
use common::{Peer, peers_dir};

use std::{
    path::Path,
    process::{Command, Stdio},
};

use maljan_client::{JobSpec, ServerConfig, TransportKind};
use maljan_testkit::{free_port, peer_env};
use serde_json::{Value, json};

fn spawn(cmd: &mut Command, port: u16) -> Peer {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start peer");
    let peer = Peer(child);
    // A bound port is not yet a serving one: wait for a real HTTP answer.
    maljan_testkit::wait_answering(&format!("127.0.0.1:{port}"), "/mcp");
    peer
}

fn py_http(transport: &str, port: u16, extra: &[&str]) -> Peer {
    let py = peer_env("MALJAN_PY");
    let mut cmd = Command::new(py);
    cmd.arg(peers_dir().join("py_server.py"))
        .args(["--transport", transport, "--port", &port.to_string()])
        .args(extra);
    spawn(&mut cmd, port)
}

/// server-everything binds every interface: a preload makes `listen(port)` bind loopback only.
fn everything_http(mode: &str, port: u16, scratch: &Path) -> Peer {
    let preload = scratch.join("loopback.cjs");
    std::fs::write(
        &preload,
        r#"const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  } else if (args[0] && typeof args[0] === 'object' && !args[0].host) {
    args[0].host = '127.0.0.1';
  }
  return listen.apply(this, args);
};
"#,
    )
    .unwrap();
    let mut cmd = Command::new(peer_env("MALJAN_NODE"));
    cmd.arg("-r")
        .arg(&preload)
        .arg(peer_env("MALJAN_SERVER_EVERYTHING"))
        .arg(mode)
        .env("PORT", port.to_string());
    spawn(&mut cmd, port)
}

fn http(kind: TransportKind, url: String) -> ServerConfig {
    ServerConfig {
        transport: kind,
        url,
        enabled: true,
        ..Default::default()
    }
}

fn stdio(command: String, args: Vec<String>) -> ServerConfig {
    ServerConfig {
        transport: TransportKind::Stdio,
        command,
        args,
        enabled: true,
        ..Default::default()
    }
}

/// Connects, lists, calls `tool` with `args`, checks the text, and returns the view's `via`.
async fn check(cfg: ServerConfig, tool: &str, args: Value, expect_text: &str) -> String {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("peer", cfg)], b);
    let job = rt.new_job(JobSpec::labelled("peer")).unwrap();
    let h = job.server("peer").unwrap();
    let view = h
        .view()
        .await
        .unwrap_or_else(|e| panic!("view: {} / {}", e.message, e.remediation));
    assert!(
        view.tool(tool).is_some(),
        "{tool} not in {:?}",
        view.tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let rec = h.call(tool, args).await;
    assert!(rec.ok, "{:?}", rec.error);
    assert!(
        rec.text().contains(expect_text),
        "{:?} does not contain {expect_text:?}",
        rec.text()
    );
    // A second call on the same connection.
    let again = h.call(tool, rec.args.clone()).await;
    assert!(again.ok, "{:?}", again.error);
    assert_eq!(rt.ledger().count(Some(job.id())).unwrap(), 2);
    assert_eq!(rt.slot("peer").unwrap().connects(), 1);
    rt.shutdown().await;
    view.via.clone()
}

#[tokio::test]
async fn python_sdk_over_stdio() {
    let cfg = stdio(
        peer_env("MALJAN_PY"),
        vec![peers_dir().join("py_server.py").display().to_string()],
    );
    check(cfg, "echo", json!({"message":"hi"}), "Echo: hi").await;
}

#[tokio::test]
async fn python_sdk_over_streamable_http_with_sse_replies() {
    let port = free_port();
    let _p = py_http("streamable-http", port, &[]);
    let via = check(
        http(
            TransportKind::StreamableHttp,
            format!("http://127.0.0.1:{port}/mcp"),
        ),
        "add",
        json!({"a":2,"b":3}),
        "5",
    )
    .await;
    assert_eq!(via, "streamable-http");
}

#[tokio::test]
async fn python_sdk_over_streamable_http_with_json_replies() {
    let port = free_port();
    let _p = py_http("streamable-http", port, &["--json-response"]);
    check(
        http(
            TransportKind::StreamableHttp,
            format!("http://127.0.0.1:{port}/mcp"),
        ),
        "echo",
        json!({"message":"j"}),
        "Echo: j",
    )
    .await;
}

#[tokio::test]
async fn python_sdk_over_legacy_sse() {
    let port = free_port();
    let _p = py_http("sse", port, &[]);
    let via = check(
        http(TransportKind::Sse, format!("http://127.0.0.1:{port}/sse")),
        "echo",
        json!({"message":"s"}),
        "Echo: s",
    )
    .await;
    assert_eq!(via, "sse");
}

#[tokio::test]
async fn http_falls_back_to_legacy_sse_when_the_post_is_refused() {
    let port = free_port();
    let _p = py_http("sse", port, &[]);
    let via = check(
        http(TransportKind::Http, format!("http://127.0.0.1:{port}/sse")),
        "echo",
        json!({"message":"f"}),
        "Echo: f",
    )
    .await;
    assert_eq!(via, "sse");
}

#[tokio::test]
async fn http_uses_streamable_http_when_offered() {
    let port = free_port();
    let _p = py_http("streamable-http", port, &[]);
    let via = check(
        http(TransportKind::Http, format!("http://127.0.0.1:{port}/mcp")),
        "echo",
        json!({"message":"h"}),
        "Echo: h",
    )
    .await;
    assert_eq!(via, "streamable-http");
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let cfg = stdio(
        peer_env("MALJAN_NODE"),
        vec![peer_env("MALJAN_SERVER_EVERYTHING"), "stdio".into()],
    );
    check(cfg, "echo", json!({"message":"e"}), "Echo: e").await;
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let s = tempfile::tempdir().unwrap();
    let port = free_port();
    let _p = everything_http("streamableHttp", port, s.path());
    check(
        http(
            TransportKind::StreamableHttp,
            format!("http://127.0.0.1:{port}/mcp"),
        ),
        "echo",
        json!({"message":"x"}),
        "Echo: x",
    )
    .await;
}

#[tokio::test]
async fn server_everything_over_legacy_sse() {
    let s = tempfile::tempdir().unwrap();
    let port = free_port();
    let _p = everything_http("sse", port, s.path());
    check(
        http(TransportKind::Sse, format!("http://127.0.0.1:{port}/sse")),
        "echo",
        json!({"message":"y"}),
        "Echo: y",
    )
    .await;
}

#[tokio::test]
async fn server_filesystem_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello from a file").unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cfg = stdio(
        peer_env("MALJAN_NODE"),
        vec![
            peer_env("MALJAN_SERVER_FILESYSTEM"),
            root.display().to_string(),
        ],
    );
    check(
        cfg,
        "read_text_file",
        json!({"path": root.join("hello.txt")}),
        "hello from a file",
    )
    .await;
}

#[tokio::test]
async fn maljan_files_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("listed.txt"), "x").unwrap();
    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    let cfg = stdio(
        maljan.display().to_string(),
        vec![
            "serve".into(),
            "files".into(),
            "--root".into(),
            dir.path().display().to_string(),
        ],
    );
    check(
        cfg,
        "FA_list_dir",
        json!({"dir_path": dir.path()}),
        "listed.txt",
    )
    .await;
}
