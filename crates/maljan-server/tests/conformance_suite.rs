//! The official conformance suite's server scenarios (the active suite) against the fixture server
//! built on this framework (examples/conformance_server/), over streamable HTTP on loopback.

use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

fn peer(var: &str) -> String {
    std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: run the tests through scripts/test.sh"))
}

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

#[test]
fn active_server_scenarios_all_pass() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Kill(
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
    let out = Command::new(peer("MALJAN_NODE"))
        .arg(peer("MALJAN_CONFORMANCE"))
        .args([
            "server",
            "--url",
            &format!("http://127.0.0.1:{port}/mcp"),
            "--suite",
            "active",
        ])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let scenarios = verdict(&text).unwrap_or_else(|why| panic!("{why}:\n{text}"));
    assert!(out.status.success(), "the suite failed:\n{text}");
    assert!(
        scenarios >= 30,
        "expected the 30 active scenarios, saw {scenarios}:\n{text}"
    );
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

/// The number of scenarios the suite's summary says passed, or why the run proves nothing: no
/// `Total:` line, nothing passed, or anything failed.
fn verdict(output: &str) -> Result<usize, String> {
    let total = output
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("Total:"))
        .ok_or("no Total line")?;
    let count = |what: &str| {
        total
            .split(',')
            .find_map(|part| part.trim().strip_suffix(what))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .ok_or(format!("no '{what}' count in 'Total:{total}'"))
    };
    let (passed, failed) = (count("passed")?, count("failed")?);
    if passed == 0 {
        return Err("0 checks passed".into());
    }
    let scenarios: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('✓') || l.starts_with('✗'))
        .collect();
    let failing: Vec<&&str> = scenarios
        .iter()
        .filter(|l| l.starts_with('✗') || !l.ends_with(" 0 failed"))
        .collect();
    if failed > 0 || !failing.is_empty() {
        return Err(format!("{failed} checks failed: {failing:?}"));
    }
    if scenarios.is_empty() {
        return Err("no scenario was reported".into());
    }
    Ok(scenarios.len())
}

#[test]
fn a_run_that_proves_nothing_is_not_a_pass() {
    let good = "✓ ping: 1 passed, 0 failed\n✓ tools-list: 2 passed, 0 failed\n\nTotal: 3 passed, 0 failed\n";
    assert_eq!(verdict(good), Ok(2));
    for (output, why) in [
        ("", "no Total line"),
        ("✓ ping: 1 passed, 0 failed\n", "no Total line"),
        ("Total: 0 passed, 0 failed\n", "0 checks passed"),
        (
            "✓ ping: 0 passed, 0 failed\nTotal: 0 passed, 0 failed",
            "0 checks passed",
        ),
        (
            "✓ a: 1 passed, 0 failed\n✗ b: 0 passed, 1 failed\nTotal: 1 passed, 1 failed",
            "1 checks failed",
        ),
        (
            "✗ b: 1 passed, 0 failed\nTotal: 1 passed, 0 failed",
            "0 checks failed",
        ),
        (
            "✓ b: 1 passed, 2 failed\nTotal: 1 passed, 0 failed",
            "0 checks failed",
        ),
        ("Total: 5 passed, 0 failed", "no scenario was reported"),
        ("Total: many passed", "no 'passed' count"),
    ] {
        let refused = verdict(output).expect_err(output);
        assert!(refused.starts_with(why), "{output:?}: {refused}");
    }
}
