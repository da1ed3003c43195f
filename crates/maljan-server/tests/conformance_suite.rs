//! The official conformance suite's server scenarios (the active suite) against the fixture server
//! built on this framework (examples/conformance_server.rs), over streamable HTTP on loopback.

use std::{
    net::TcpListener,
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
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the conformance server did not start"
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
    let total = text
        .lines()
        .rev()
        .find(|l| l.starts_with("Total:"))
        .unwrap_or_else(|| panic!("no Total line:\n{text}"));
    let failed: u32 = total
        .split(',')
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    let passed: u32 = total
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    let scenarios = text
        .lines()
        .filter(|l| l.starts_with('✓') || l.starts_with('✗'))
        .count();
    assert_eq!(failed, 0, "{text}");
    assert!(out.status.success(), "{text}");
    assert!(
        scenarios >= 30 && passed >= 30,
        "expected the 30 active scenarios, saw {scenarios}: {total}"
    );
}
