//! Issue 25 item 2: the client speaks 2026-07-28 where the server does (`server/discover` first)
//! and falls back to the `initialize` handshake for an older server. Real peers: the Python SDK
//! server (tests/peers/py_2026_server.py) in its 2026-07-28 mode and with discovery removed
//! (a 2025-11-25 server), and `maljan serve files`, each over stdio.

mod common;

use maljan_client::{JobSpec, ServerConfig, TransportKind};
use serde_json::json;

/// The view's negotiated version, and what the server says it served a request at.
async fn versions(cfg: ServerConfig, probe: Option<&str>) -> (String, Option<String>) {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("peer", cfg)], b);
    let job = rt.new_job(JobSpec::labelled("versions")).unwrap();
    let h = job.server("peer").unwrap();
    let view = h
        .view()
        .await
        .unwrap_or_else(|e| panic!("view: {} / {}", e.message, e.remediation));
    let served = match probe {
        Some(tool) => {
            let rec = h.call(tool, json!({})).await;
            assert!(rec.ok, "{:?}", rec.error);
            Some(rec.text())
        }
        None => None,
    };
    rt.shutdown().await;
    (view.protocol_version.clone(), served)
}

#[tokio::test]
async fn a_2026_server_is_reached_by_discovery() {
    let (negotiated, served) = versions(common::py_2026_stdio(&[]), Some("protocol")).await;
    assert_eq!(negotiated, "2026-07-28");
    assert_eq!(served.as_deref(), Some("2026-07-28"));
}

#[tokio::test]
async fn an_older_server_gets_the_initialize_handshake() {
    let (negotiated, served) =
        versions(common::py_2026_stdio(&["--legacy"]), Some("protocol")).await;
    assert_eq!(negotiated, "2025-11-25");
    assert_eq!(served.as_deref(), Some("2025-11-25"));
}

#[tokio::test]
async fn maljan_serve_files_is_reached_by_discovery() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig {
        transport: TransportKind::Stdio,
        command: maljan_testkit::package_bin("maljan", "maljan")
            .display()
            .to_string(),
        args: vec![
            "serve".into(),
            "files".into(),
            "--root".into(),
            dir.path().display().to_string(),
        ],
        enabled: true,
        ..Default::default()
    };
    let (negotiated, _) = versions(cfg, None).await;
    assert_eq!(negotiated, "2026-07-28");
}
