//! Issue-2 benchmark, side by side in one run with the same raw JSON-RPC driver: cold start to the
//! initialize reply, tools/list, ping, a trivial call (FA_line_count of 1 KiB for both file servers,
//! a no-op for the null server) and FA_file_checksum of 1 KiB (median and p99 over
//! N sequential calls), idle RSS — for a null server (the floor), `maljan serve files` and
//! automation-file's MCP server.
//!
//! Usage: serve-bench --maljan PATH [--python PY] [--calls N] [--starts K]

use std::time::Duration;

use maljan_bench::{Driver, median, p99};
use serde_json::json;

struct Target {
    label: &'static str,
    argv: Vec<String>,
    trivial: (&'static str, serde_json::Value),
    checksum: Option<(&'static str, serde_json::Value)>,
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let maljan = opt("--maljan").ok_or_else(|| anyhow::anyhow!("--maljan PATH is required"))?;
    let python = opt("--python");
    let calls: usize = opt("--calls")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1000);
    let starts: usize = opt("--starts")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20);
    let null = std::env::current_exe()?.with_file_name("null-mcp-server");

    let dir = std::env::temp_dir().join(format!("maljan-serve-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kib = dir.join("one-kib.bin");
    std::fs::write(&kib, vec![0x5au8; 1024])?;
    let kib_s = kib.to_string_lossy().to_string();

    let mut targets = vec![
        Target {
            label: "null server",
            argv: vec![null.to_string_lossy().into()],
            trivial: ("noop", json!({})),
            checksum: None,
        },
        Target {
            label: "maljan serve files",
            argv: vec![
                maljan.clone(),
                "serve".into(),
                "files".into(),
                "--root".into(),
                dir.to_string_lossy().into(),
            ],
            trivial: ("FA_line_count", json!({"file_path": kib_s})),
            checksum: Some(("FA_file_checksum", json!({"path": kib_s}))),
        },
    ];
    if let Some(py) = python {
        targets.push(Target {
            label: "automation-file mcp",
            argv: vec![py, "-m".into(), "automation_file".into(), "mcp".into()],
            trivial: ("FA_line_count", json!({"file_path": kib_s})),
            checksum: Some(("FA_file_checksum", json!({"path": kib_s}))),
        });
    }

    println!(
        "serve-bench: {calls} sequential calls per figure, {starts} cold starts; medians (p99)"
    );
    println!(
        "{:<22} {:>12} {:>12} {:>12} {:>22} {:>22} {:>10}",
        "server", "cold start", "tools/list", "ping", "trivial call", "checksum 1 KiB", "idle RSS"
    );
    let mut rows = Vec::new();
    for t in &targets {
        let mut colds = Vec::new();
        for _ in 0..starts {
            let (_d, cold) = Driver::start(&t.argv)?;
            colds.push(cold);
        }
        colds.sort();
        let (mut d, _) = Driver::start(&t.argv)?;
        let lists = d.time_n(calls.min(200), |d| {
            d.request("tools/list", json!({})).map(drop)
        })?;
        // automation-file's server does not answer ping (-32601); its column shows "-".
        let pings = d
            .time_n(calls, |d| d.request("ping", json!({})).map(drop))
            .ok();
        let (tool, targs) = t.trivial.clone();
        let trivial = d.time_n(calls, |d| d.call(tool, targs.clone()).map(drop))?;
        let checksum = match &t.checksum {
            Some((tool, a)) => Some(d.time_n(calls, |d| d.call(tool, a.clone()).map(drop))?),
            None => None,
        };
        std::thread::sleep(Duration::from_millis(300));
        let rss = d.rss_kib().unwrap_or(0);
        println!(
            "{:<22} {:>12} {:>12} {:>12} {:>22} {:>22} {:>7.1} MB",
            t.label,
            fmt(median(&colds)),
            fmt(median(&lists)),
            pings.as_ref().map_or("-".into(), |p| fmt(median(p))),
            format!("{} ({})", fmt(median(&trivial)), fmt(p99(&trivial))),
            checksum
                .as_ref()
                .map(|c| format!("{} ({})", fmt(median(c)), fmt(p99(c))))
                .unwrap_or_else(|| "-".into()),
            rss as f64 / 1024.0
        );
        rows.push((
            t.label,
            pings.as_ref().map_or(Duration::ZERO, |p| median(p)),
            median(&colds),
            median(&trivial),
            checksum.map(|c| median(&c)),
            rss,
        ));
    }
    let find = |label: &str| rows.iter().find(|r| r.0 == label);
    if let (Some(null), Some(m)) = (find("null server"), find("maljan serve files")) {
        println!(
            "ratio: maljan ping / null-server ping = {:.2}x",
            m.1.as_secs_f64() / null.1.as_secs_f64()
        );
        println!(
            "ratio: maljan trivial call / null-server floor = {:.2}x",
            m.3.as_secs_f64() / null.3.as_secs_f64()
        );
        if let Some(a) = find("automation-file mcp") {
            println!(
                "ratio: automation-file cold start / maljan = {:.0}x",
                a.2.as_secs_f64() / m.2.as_secs_f64()
            );
            if let (Some(ac), Some(mc)) = (a.4, m.4) {
                println!(
                    "ratio: automation-file checksum call / maljan = {:.1}x",
                    ac.as_secs_f64() / mc.as_secs_f64()
                );
            }
            println!(
                "ratio: automation-file idle RSS / maljan = {:.1}x",
                a.5 as f64 / m.5.max(1) as f64
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
