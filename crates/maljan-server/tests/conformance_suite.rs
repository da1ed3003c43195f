//! The official conformance suite's server scenarios (the 0.2 line's requirement sets, both legs:
//! 2025-11-25 and 2026-07-28) against the fixture server built on this framework
//! (examples/conformance_server/), over streamable HTTP on loopback. Every scored scenario must
//! pass; what the suite does not score is printed, not judged (see `maljan_testkit::conformance`),
//! except the tasks extension's scenarios (SEP-2663), which the framework implements: each of them
//! must pass too.

use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use maljan_testkit::conformance::{Leg, run_leg};

/// The suite's server scenarios of the tasks extension (`io.modelcontextprotocol/tasks`), run
/// unscored at 2026-07-28. Its tenth, `tasks-status-notifications`, is skipped by the suite itself
/// (its harness awaits the subscriptions/listen rewrite).
const TASK_SCENARIOS: [&str; 9] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// `cargo test` builds the package's examples next to the test binaries' directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} was not built (cargo test builds examples)",
        path.display()
    );
    path
}

struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the fixture server on a free port and waits until it answers a real request.
fn fixture_server() -> (Kill, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Kill(
        Command::new(example("conformance_server"))
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Started once it answers a real request: a port that accepts may not answer yet.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !answers_initialize(port) {
        assert!(
            Instant::now() < deadline,
            "the conformance server did not answer within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, port)
}

fn server_leg(revision: &str) -> Leg {
    let (_server, port) = fixture_server();
    let url = format!("http://127.0.0.1:{port}/mcp");
    run_leg("server", &["--url", &url], revision)
}

#[test]
fn every_scored_server_scenario_passes_at_2025_11_25() {
    server_leg("2025-11-25");
}

#[test]
fn every_scored_server_scenario_and_every_task_scenario_passes_at_2026_07_28() {
    let leg = server_leg("2026-07-28");
    for scenario in TASK_SCENARIOS {
        assert!(
            leg.unscored_passing.iter().any(|s| s == scenario),
            "{scenario} did not pass: failing {:?}, passing {:?}",
            leg.unscored_failing,
            leg.unscored_passing
        );
    }
}

/// Whether the server on `port` answers an initialize with 200.
fn answers_initialize(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut status = String::new();
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .is_ok()
        && stream.write_all(request.as_bytes()).is_ok()
        && BufReader::new(stream).read_line(&mut status).is_ok()
        && status.starts_with("HTTP/1.1 200")
}
