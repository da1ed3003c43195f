//! The official conformance suite's client scenarios (initialize, tools_call, sse-retry) against
//! `maljan-conformance-client`, a small client built on this runtime. Needs MALJAN_NODE and
//! MALJAN_CONFORMANCE (from `scripts/peers.sh`).

use std::process::Command;

use maljan_testkit::{bin_path, peer_env};

fn run_scenario(scenario: &str) {
    let client = bin_path("maljan-conformance-client");
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(peer_env("MALJAN_NODE"))
        .arg(peer_env("MALJAN_CONFORMANCE"))
        .args(["client", "--command"])
        .arg(client)
        .args(["--scenario", scenario, "-o"])
        .arg(out_dir.path())
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let total = stdout
        .lines()
        .chain(stderr.lines())
        .rev()
        .find(|l| l.contains("Total:") || l.contains("Passed:"))
        .unwrap_or("")
        .to_string();
    assert!(
        out.status.success() && (total.contains(" 0 failed") || total.contains(", 0 failed")),
        "scenario {scenario}: {total}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    eprintln!("{scenario}: {total}");
}

#[test]
fn initialize() {
    run_scenario("initialize");
}

#[test]
fn tools_call() {
    run_scenario("tools_call");
}

#[test]
fn sse_retry() {
    run_scenario("sse-retry");
}
