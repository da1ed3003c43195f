//! Issue-2 benchmark, side by side in one run with the same raw JSON-RPC driver: cold start to the
//! initialize reply, tools/list, ping, a trivial call (FA_integrity_status with no argument for
//! both file servers, which touches no file; a no-op for the null server), FA_line_count and
//! FA_file_checksum of 1 KiB (median and p99 over N sequential calls), idle RSS — for a null
//! server (the floor), `maljan serve files` and automation-file's MCP server.
//!
//! `--null-work-us N` adds a null server that spins N µs of CPU before answering each call: the
//! floor for a server that does that much work.
//!
//! `--baseline PATH` adds a second maljan binary (an earlier build), taken in the same turns, so a
//! change is measured before and after side by side in one run.
//!
//! Usage: serve-bench --maljan PATH [--baseline PATH] [--python PY] [--calls N] [--starts K]
//!                    [--null-work-us N] [--block B]   (B calls to a server before the next one's; 10)

use std::time::Duration;

use maljan_bench::{Driver, median, p99};
use serde_json::json;

struct Target {
    label: &'static str,
    argv: Vec<String>,
    trivial: (&'static str, serde_json::Value),
    line_count: Option<(&'static str, serde_json::Value)>,
    checksum: Option<(&'static str, serde_json::Value)>,
}

fn fmt(d: Duration) -> String {
    maljan_bench::shown(d)
}

/// `maljan serve files` from the binary at `exe`, rooted at the bench's scratch directory.
fn maljan_target(label: &'static str, exe: &str, dir: &std::path::Path, kib: &str) -> Target {
    Target {
        label,
        argv: vec![
            exe.to_string(),
            "serve".into(),
            "files".into(),
            "--root".into(),
            dir.to_string_lossy().into(),
        ],
        // The trivial call does nothing but be a call: FA_integrity_status with no argument lists
        // the running watches (none), so it touches no file and what it measures is the server's
        // own work per call (read, dispatch, validate, answer).
        trivial: ("FA_integrity_status", json!({})),
        line_count: Some(("FA_line_count", json!({"file_path": kib}))),
        checksum: Some(("FA_file_checksum", json!({"path": kib}))),
    }
}

fn main() -> anyhow::Result<()> {
    let opt = maljan_bench::arg;
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
    let block: usize = opt("--block")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10)
        .max(1);
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
            line_count: None,
            checksum: None,
        },
        maljan_target("maljan serve files", &maljan, &dir, &kib_s),
    ];
    if let Some(baseline) = opt("--baseline") {
        targets.push(maljan_target("maljan (baseline)", &baseline, &dir, &kib_s));
    }
    if let Some(work) = opt("--null-work-us") {
        targets.push(Target {
            label: "null server, worked",
            argv: vec![null.to_string_lossy().into(), "--work-us".into(), work],
            trivial: ("noop", json!({})),
            line_count: None,
            checksum: None,
        });
    }
    if let Some(py) = python {
        targets.push(Target {
            label: "automation-file mcp",
            argv: vec![py, "-m".into(), "automation_file".into(), "mcp".into()],
            trivial: ("FA_integrity_status", json!({})),
            line_count: Some(("FA_line_count", json!({"file_path": kib_s}))),
            checksum: Some(("FA_file_checksum", json!({"path": kib_s}))),
        });
    }

    println!(
        "serve-bench: {calls} sequential calls per figure, {starts} cold starts, servers taken in turns of {block} calls; medians (p99)"
    );
    println!(
        "{:<22} {:>12} {:>12} {:>12} {:>22} {:>22} {:>22} {:>10}",
        "server",
        "cold start",
        "tools/list",
        "ping",
        "trivial call",
        "line count 1 KiB",
        "checksum 1 KiB",
        "idle RSS"
    );
    // Every figure is taken in turns: `block` sequential calls to one server, then the same to
    // the next, and round again, so a change in the machine's state (this VM's wake-up latency
    // swings between ~10 and ~80 µs) hits all alike. Within a block each server is called back
    // to back, as a client working through a task calls it; `--block 1` alternates call by call,
    // which makes every call follow another server's (bench/serve_bench.md).
    let round_robin = |drivers: &mut [Driver],
                       n: usize,
                       op: &dyn Fn(usize, &mut Driver) -> anyhow::Result<()>|
     -> Vec<Option<Vec<Duration>>> {
        let mut times: Vec<Option<Vec<Duration>>> = drivers
            .iter()
            .map(|_| Some(Vec::with_capacity(n)))
            .collect();
        let mut done = 0;
        while done < n {
            let run = block.min(n - done);
            for (i, d) in drivers.iter_mut().enumerate() {
                for _ in 0..run {
                    let Some(t) = times[i].as_mut() else { break };
                    let start = std::time::Instant::now();
                    match op(i, d) {
                        Ok(()) => t.push(start.elapsed()),
                        // automation-file's server does not answer ping (-32601): shown as "-".
                        Err(_) => times[i] = None,
                    }
                }
            }
            done += run;
        }
        for t in times.iter_mut().flatten() {
            t.sort();
        }
        times
    };
    let mut colds: Vec<Vec<Duration>> = targets.iter().map(|_| Vec::new()).collect();
    for _ in 0..starts {
        for (i, t) in targets.iter().enumerate() {
            let (_d, cold) = Driver::start(&t.argv)?;
            colds[i].push(cold);
        }
    }
    let mut drivers = targets
        .iter()
        .map(|t| Driver::start(&t.argv).map(|(d, _)| d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let lists = round_robin(&mut drivers, calls.min(200), &|_, d| {
        d.request("tools/list", json!({})).map(drop)
    });
    let pings = round_robin(&mut drivers, calls, &|_, d| {
        d.request("ping", json!({})).map(drop)
    });
    let trivial = round_robin(&mut drivers, calls, &|i, d| {
        let (tool, args) = &targets[i].trivial;
        d.call(tool, args.clone()).map(drop)
    });
    // A server without the tool fails its first call and is shown as "-".
    let call_if = |d: &mut Driver, call: &Option<(&str, serde_json::Value)>| match call {
        Some((tool, args)) => d.call(tool, args.clone()).map(drop),
        None => anyhow::bail!("the server has no such tool"),
    };
    let line_count = round_robin(&mut drivers, calls, &|i, d| {
        call_if(d, &targets[i].line_count)
    });
    let checksum = round_robin(&mut drivers, calls, &|i, d| {
        call_if(d, &targets[i].checksum)
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut rows = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        colds[i].sort();
        let rss = drivers[i].rss_kib().unwrap_or(0);
        let med = |v: &Option<Vec<Duration>>| v.as_ref().map(|v| median(v));
        let with_p99 = |v: &Option<Vec<Duration>>| {
            v.as_ref()
                .map(|v| format!("{} ({})", fmt(median(v)), fmt(p99(v))))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<22} {:>12} {:>12} {:>12} {:>22} {:>22} {:>22} {:>7.1} MB",
            t.label,
            fmt(median(&colds[i])),
            med(&lists[i]).map_or("-".into(), fmt),
            med(&pings[i]).map_or("-".into(), fmt),
            with_p99(&trivial[i]),
            with_p99(&line_count[i]),
            with_p99(&checksum[i]),
            rss as f64 / 1024.0
        );
        rows.push((
            t.label,
            med(&pings[i]).unwrap_or_default(),
            median(&colds[i]),
            med(&trivial[i]).unwrap_or_default(),
            med(&checksum[i]),
            rss,
            med(&line_count[i]),
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
        if let Some(lc) = m.6 {
            println!(
                "ratio: maljan line count (1 KiB, file I/O) / null-server floor = {:.2}x",
                lc.as_secs_f64() / null.3.as_secs_f64()
            );
        }
        if let Some(w) = find("null server, worked") {
            println!(
                "ratio: maljan trivial call / worked null server's call = {:.2}x",
                m.3.as_secs_f64() / w.3.as_secs_f64()
            );
        }
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
        if let Some(b) = find("maljan (baseline)") {
            println!(
                "ratio: this build / baseline: cold start {:.2}x, trivial call {:.2}x, checksum {:.2}x, idle RSS {:.2}x",
                m.2.as_secs_f64() / b.2.as_secs_f64(),
                m.3.as_secs_f64() / b.3.as_secs_f64(),
                m.4.zip(b.4)
                    .map_or(f64::NAN, |(mc, bc)| mc.as_secs_f64() / bc.as_secs_f64()),
                m.5 as f64 / b.5.max(1) as f64
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
