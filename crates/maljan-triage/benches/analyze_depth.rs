//! End-to-end benchmark of recursive analysis: `maljan analyze` (release build, no config: the
//! built-in servers over stdio, as on first run) of a generated 10 MiB PE and of a zip of 200
//! members (100 small PEs, 100 text files with indicators), each member analysed as a child
//! sample. Prints the median of several runs, the calls made, the children analysed and each
//! top-level step's time in the median run. Target: under 1 s each.
//!
//! `cargo bench -p maljan-triage --bench analyze_depth` (RUNS changes the run count); the figures
//! are written up in bench/analysis_depth.md.

use std::{io::Write, path::Path, process::Command, time::Instant};

fn zip_of_200() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for i in 0..100 {
        let mut pe = maljan_triage::corpus::pe_bytes(2048);
        pe.extend_from_slice(format!("member {i} http://host{i}.example.net/x").as_bytes());
        w.start_file(format!("bin/tool{i:03}.exe"), o).unwrap();
        w.write_all(&pe).unwrap();
        w.start_file(format!("doc/note{i:03}.txt"), o).unwrap();
        w.write_all(
            format!(
                "note {i}: contact 10.0.{}.{} or x{i}@example.org\n",
                i / 10,
                i % 10
            )
            .as_bytes(),
        )
        .unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn bench(maljan: &Path, dir: &Path, name: &str, bytes: &[u8], runs: usize) {
    let sample = dir.join(name);
    std::fs::write(&sample, bytes).expect("write sample");
    let home = dir.join("home");
    let run = |i: usize| -> (f64, serde_json::Value) {
        let report = dir.join(format!("{name}-{i}.json"));
        let t = Instant::now();
        let out = Command::new(maljan)
            .arg("analyze")
            .arg(&sample)
            .args(["--no-agent", "--format", "json", "--report"])
            .arg(&report)
            .current_dir(dir)
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
    run(0); // warm-up: page cache, the first ledger
    let mut results: Vec<(f64, serde_json::Value)> = (1..=runs).map(run).collect();
    results.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (median, report) = &results[results.len() / 2];
    let children = report["recursion"]["children"].as_u64().unwrap_or(0);
    let calls = count_evidence(report);
    println!(
        "{name} ({:.1} MiB): median {:.3} s (min {:.3}, max {:.3}) over {runs} runs · {children} children · {calls} calls · verdict {} — target < 1 s: {}",
        bytes.len() as f64 / (1024.0 * 1024.0),
        median,
        results[0].0,
        results[results.len() - 1].0,
        report["verdict"]["verdict"],
        if *median < 1.0 { "met" } else { "NOT met" }
    );
    for s in report["steps"].as_array().into_iter().flatten() {
        println!(
            "  {:>3}. {:<18} {:<14} {:>8.1} ms",
            s["index"],
            s["tool"].as_str().unwrap_or(""),
            s["status"].as_str().unwrap_or(""),
            s["duration_ms"].as_f64().unwrap_or(0.0)
        );
    }
}

fn count_evidence(r: &serde_json::Value) -> usize {
    fn steps(v: &serde_json::Value) -> usize {
        let own: usize = v["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s["evidence"].as_array().map_or(0, Vec::len))
            .sum();
        own + v["children"]
            .as_array()
            .into_iter()
            .flatten()
            .map(steps)
            .sum::<usize>()
    }
    steps(r) + r["recursion"]["evidence"].as_array().map_or(0, Vec::len)
}

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let maljan = maljan_testkit::package_bin("maljan", "maljan");
    let dir = tempfile::tempdir().expect("tempdir");
    let pe = maljan_triage::corpus::pe_bytes(10 * 1024 * 1024 - 0x400);
    bench(&maljan, dir.path(), "big.exe", &pe, runs);
    bench(&maljan, dir.path(), "200-members.zip", &zip_of_200(), runs);
}
