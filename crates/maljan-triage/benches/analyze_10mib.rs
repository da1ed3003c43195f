//! End-to-end benchmark: `maljan analyze` of a generated 10 MiB PE, release build, no config (the
//! built-in servers over stdio, as on first run). Prints the median of several runs and each
//! step's share of the median run. Target: under 1 s.
//!
//! `cargo bench -p maljan-triage --bench analyze_10mib` (set RUNS to change the run count).

use std::{process::Command, time::Instant};

fn main() {
    // cargo bench passes --bench; nothing else to parse.
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    let dir = tempfile::tempdir().expect("tempdir");
    let sample = dir.path().join("big.exe");
    let bytes = maljan_triage::corpus::pe_bytes(10 * 1024 * 1024 - 0x400);
    std::fs::write(&sample, &bytes).expect("write sample");
    let home = dir.path().join("home");

    let run = |i: usize| -> (f64, serde_json::Value) {
        let report = dir.path().join(format!("r{i}.json"));
        let t = Instant::now();
        let out = Command::new(&maljan)
            .arg("analyze")
            .arg(&sample)
            .args(["--format", "json", "--report"])
            .arg(&report)
            .current_dir(dir.path())
            .env("MALJAN_HOME", &home)
            .env_remove("MALJAN_CONFIG")
            .env("MALJAN_LOG", "warn")
            .output()
            .expect("run maljan analyze");
        let secs = t.elapsed().as_secs_f64();
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code == 0 || code == 3,
            "maljan analyze exited {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("json");
        (secs, v)
    };

    run(0); // warm-up: page cache, first ledger creation
    let mut results: Vec<(f64, serde_json::Value)> = (1..=runs).map(run).collect();
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (median, report) = &results[results.len() / 2];
    println!(
        "maljan analyze, {:.1} MiB PE, {runs} runs: median {:.3} s (min {:.3} s, max {:.3} s) — target < 1 s: {}",
        bytes.len() as f64 / (1024.0 * 1024.0),
        median,
        results[0].0,
        results[results.len() - 1].0,
        if *median < 1.0 { "met" } else { "NOT met" }
    );
    println!(
        "status {} · report duration {:.0} ms",
        report["status"],
        report["duration_ms"].as_f64().unwrap_or(0.0)
    );
    for s in report["steps"].as_array().into_iter().flatten() {
        println!(
            "  {:>3}. {:<16} {:<15} {:>8.1} ms",
            s["index"],
            s["tool"].as_str().unwrap_or(""),
            s["status"].as_str().unwrap_or(""),
            s["duration_ms"].as_f64().unwrap_or(0.0)
        );
    }
}
