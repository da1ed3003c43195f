//! Issue 25 item 4: `maljan console --metrics` (on the console's own listener) and `maljan worker
//! --metrics-listen ADDR` answer `/metrics` in a text Prometheus's own parser (prometheus_client,
//! strictly OpenMetrics) reads, with the runtime's names: calls, errors by code, breaker rests,
//! upload bytes and queue depth. The worker's figures move: it runs a submitted job, and its
//! calls are counted.

mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::Command,
    time::Duration,
};

use common::*;
use serde_json::Value;

fn get(port: u16, path: &str) -> (String, String) {
    get_as(port, path, "")
}

/// `get` with these extra header lines (each ending in CRLF).
fn get_as(port: u16, path: &str, headers: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

fn parse(text: &str) -> Vec<Value> {
    match maljan_testkit::parse_openmetrics(text) {
        Value::Array(families) => families,
        other => panic!("not a list of families: {other}"),
    }
}

fn names(families: &[Value]) -> Vec<(String, String)> {
    families
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().into(),
                f["type"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// The families with a sample from the start (the by-server call counters appear with the first
/// call: a family without samples is not in the parser's output).
fn has_runtime_names(families: &[Value]) {
    let n = names(families);
    for (name, kind) in [
        ("maljan_breaker_rests", "gauge"),
        ("maljan_upload_bytes", "counter"),
        ("maljan_queue_depth", "gauge"),
    ] {
        assert!(
            n.contains(&(name.into(), kind.into())),
            "{name} ({kind}) missing: {n:?}"
        );
    }
}

fn maljan_in(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(maljan());
    cmd.args(args)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_DATABASE_URL")
        .env_remove("MALJAN_LLM_MODEL")
        .env("MALJAN_LOG", "warn")
        .current_dir(home);
    cmd
}

#[test]
fn console_metrics_on_its_own_listener() {
    let home = tempfile::tempdir().unwrap();
    let port = free_port();
    let _console = spawn(&mut maljan_in(
        home.path(),
        &[
            "console",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--metrics",
        ],
    ));
    // Every request to a console is authenticated: the owner's token is in the login URL it
    // keeps in its data directory once it listens.
    let mut answered = None;
    let login = home.path().join("console-login.url");
    for _ in 0..300 {
        if let Ok(url) = std::fs::read_to_string(&login)
            && TcpStream::connect(("127.0.0.1", port)).is_ok()
        {
            let token = url.trim().split("token=").nth(1).unwrap().to_string();
            answered = Some(get_as(
                port,
                "/metrics",
                &format!("Authorization: Bearer {token}\r\n"),
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (head, body) = answered.expect("the console never listened");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase().contains("application/openmetrics-text"),
        "{head}"
    );
    has_runtime_names(&parse(&body));
}

#[test]
fn worker_metrics_count_the_jobs_calls() {
    let home = tempfile::tempdir().unwrap();
    let sample = home.path().join("sample.bin");
    std::fs::write(&sample, b"MZ metrics sample http://evil.example.com/").unwrap();
    let submitted = maljan_in(home.path(), &["submit", sample.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );

    let port = free_port();
    let _worker = spawn(&mut maljan_in(
        home.path(),
        &["worker", "--metrics-listen", &format!("127.0.0.1:{port}")],
    ));
    let calls = |families: &[Value]| -> f64 {
        families
            .iter()
            .filter(|f| f["name"] == "maljan_runtime_calls")
            .flat_map(|f| f["samples"].as_array().unwrap().clone())
            .map(|s| s["value"].as_f64().unwrap())
            .sum()
    };
    let mut last = Vec::new();
    for _ in 0..600 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            let (head, body) = get(port, "/metrics");
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            last = parse(&body);
            has_runtime_names(&last);
            if calls(&last) > 0.0 {
                assert!(names(&last).contains(&("maljan_runtime_calls".into(), "counter".into())));
                let depth = last
                    .iter()
                    .find(|f| f["name"] == "maljan_queue_depth")
                    .unwrap();
                assert_eq!(
                    depth["samples"][0]["value"], 0.0,
                    "the one job is still queued"
                );
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the worker's metrics never counted a call: {last:?}");
}
