//! Issue 4 item 2 and issue 25 item 2: over streamable HTTP, a 2025-11-25 session is
//! re-initialised when the server answers 404 for an expired one. The real peer is the Python SDK
//! server as a 2025-11-25 server (tests/peers/py_2026_server.py --legacy: the client's discovery
//! finds no `server/discover` and falls back to `initialize`, which opens a session):
//! it is called once, then stopped and started again on the same port, which loses every session,
//! so the next request carrying the old `Mcp-Session-Id` is answered 404 (the server's log shows
//! the rejection and the new session).
//! The next call must still succeed, over the same runtime connection (the transport initialised a
//! new session itself; the runtime did not reconnect), and both calls must be in the ledger.

mod common;
use common::{Peer, repo_peers_dir};

use std::{
    path::Path,
    process::{Command, Stdio},
};

use maljan_client::{JobSpec, ServerConfig, TransportKind};
use maljan_testkit::{free_port, peer_env};
use serde_json::json;

/// Starts py_server.py on `port`, its stderr (its log) into `log`, and waits until it accepts
/// connections.
fn start(port: u16, extra: &[&str], log: &Path) -> Peer {
    let err = std::fs::File::create(log).unwrap();
    let child = Command::new(peer_env("MALJAN_PY"))
        .arg(repo_peers_dir().join("py_2026_server.py"))
        .args([
            "--legacy",
            "--transport",
            "streamable-http",
            "--port",
            &port.to_string(),
        ])
        .args(extra)
        // The SDK logs through rich, which wraps lines at the terminal's width (80 without
        // one); a wide width keeps each log line on one line for the assertions below.
        .env("COLUMNS", "1000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("start py_server.py");
    let peer = Peer(child);
    maljan_testkit::wait_answering(&format!("127.0.0.1:{port}"), "/mcp");
    peer
}

async fn recovers(extra: &[&str]) {
    let s = common::Scratch::new();
    let port = free_port();
    let log1 = s.dir.path().join("first.log");
    let log2 = s.dir.path().join("second.log");
    let cfg = ServerConfig {
        transport: TransportKind::StreamableHttp,
        url: format!("http://127.0.0.1:{port}/mcp"),
        enabled: true,
        ..Default::default()
    };
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("py", cfg)], b);
    let job = rt.new_job(JobSpec::labelled("session-expiry")).unwrap();
    let h = job.server("py").unwrap();

    let first_server = start(port, extra, &log1);
    let first = h.call("echo", json!({"message": "before"})).await;
    assert!(first.ok, "{:?}", first.error);
    assert_eq!(first.text(), "Echo: before");

    // A restart loses every session: the old Mcp-Session-Id is unknown to the new process.
    drop(first_server);
    let _second_server = start(port, extra, &log2);
    let second = h.call("echo", json!({"message": "after"})).await;
    assert!(
        second.ok,
        "the call after the restart failed: {:?}",
        second.error
    );
    assert_eq!(second.text(), "Echo: after");

    let slot = rt.slot("py").unwrap();
    assert_eq!(
        slot.connects(),
        1,
        "the runtime reconnected; the transport should have opened the new session itself"
    );
    assert_eq!(slot.breaker.failures(), 0);
    // The SDK logs this line as it answers 404 "Session not found", then the new session.
    let log = std::fs::read_to_string(&log2).unwrap();
    let rejected = log
        .find("Rejected request with unknown or expired session ID")
        .unwrap_or_else(|| {
            panic!("the restarted server never answered 404 for the old session; its log:\n{log}")
        });
    assert!(
        log[rejected..].contains("Created new transport with session ID"),
        "no new session after the 404; the server's log:\n{log}"
    );

    let calls = rt.ledger().calls(Some(job.id()), 10).unwrap();
    let seen: Vec<_> = calls
        .iter()
        .map(|c| (c.tool.as_str(), c.ok, c.args.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("echo", true, r#"{"message":"before"}"#),
            ("echo", true, r#"{"message":"after"}"#)
        ]
    );
    rt.shutdown().await;
}

// Multi-threaded, as the runtime runs in maljan: the HTTP client's tasks keep running while the
// test waits for the restarted server (and see the closed keep-alive connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_session_404_opens_a_new_session_sse_replies() {
    recovers(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_session_404_opens_a_new_session_json_replies() {
    recovers(&["--json-response"]).await;
}
