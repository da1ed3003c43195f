//! Issue-22 benchmark of the semantic tools, side by side in one run with the same raw JSON-RPC
//! driver and the same arguments: `maljan serve files` and automation-file's own MCP server, each
//! given the same root and `--allow-write --allow-overwrite`. Figures are medians (p99) over N
//! sequential calls, the servers taken in turns of a few calls so a change in the machine's
//! state hits both alike.
//!
//! Usage: semantic-bench --maljan PATH --python PY [--calls N]

use std::{path::Path, time::Duration};

use maljan_bench::{Driver, median, p99};
use serde_json::{Value, json};

fn fmt(d: Duration) -> String {
    maljan_bench::shown(d)
}

/// The scratch tree: a 1 MiB text file, a 16 MiB file, 1000 small files and 200 text files.
fn fixtures(dir: &Path) -> anyhow::Result<()> {
    let line = "the quick brown fox jumps over the lazy dog 0123456789\n";
    std::fs::write(dir.join("text.txt"), line.repeat((1 << 20) / line.len()))?;
    let big: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    std::fs::write(dir.join("big.bin"), big)?;
    std::fs::create_dir_all(dir.join("many"))?;
    for i in 0..1000 {
        std::fs::write(dir.join(format!("many/f{i:04}.dat")), [i as u8; 64])?;
    }
    std::fs::create_dir_all(dir.join("docs"))?;
    for i in 0..200 {
        let body = line.repeat(70) + if i == 199 { "needle at the end\n" } else { "" };
        std::fs::write(dir.join(format!("docs/d{i:03}.txt")), body)?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let opt = maljan_bench::arg;
    let maljan = opt("--maljan").ok_or_else(|| anyhow::anyhow!("--maljan PATH is required"))?;
    let python = opt("--python").ok_or_else(|| anyhow::anyhow!("--python PY is required"))?;
    let calls: usize = opt("--calls")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100);
    let dir = std::env::temp_dir().join(format!("maljan-semantic-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let dir = std::fs::canonicalize(&dir)?;
    fixtures(&dir)?;
    let d = dir.to_string_lossy().to_string();
    let p = |rel: &str| dir.join(rel).to_string_lossy().to_string();
    let policy = ["--root", &d, "--allow-write", "--allow-overwrite"].map(String::from);
    let servers: Vec<(&str, Vec<String>)> = vec![
        (
            "maljan serve files",
            [maljan.clone(), "serve".into(), "files".into()]
                .into_iter()
                .chain(policy.clone())
                .chain(["--state-dir".into(), p("state")])
                .collect(),
        ),
        (
            "automation-file mcp",
            [python, "-m".into(), "automation_file".into(), "mcp".into()]
                .into_iter()
                .chain(policy)
                .collect(),
        ),
    ];
    let ops: Vec<(&str, &str, Value)> = vec![
        (
            "file_read 64 KiB at 512 KiB",
            "file_read",
            json!({"uri": p("text.txt"), "offset": 524288, "max_bytes": 65536}),
        ),
        (
            "file_read 64 KiB at 15 MiB, base64",
            "file_read",
            json!({"uri": p("big.bin"), "offset": 15 << 20, "max_bytes": 65536, "encoding": "base64"}),
        ),
        (
            "file_write 64 KiB",
            "file_write",
            json!({"uri": p("written.txt"), "content": "x".repeat(65536), "overwrite": true}),
        ),
        (
            "file_checksum 16 MiB",
            "file_checksum",
            json!({"uri": p("big.bin")}),
        ),
        (
            "file_copy 16 MiB, verify",
            "file_copy",
            json!({"source": p("big.bin"), "target": p("copy.bin"), "overwrite": true, "verify": true}),
        ),
        (
            "storage_list 1000 entries",
            "storage_list",
            json!({"uri": p("many")}),
        ),
        (
            "file_search content, 200 files",
            "file_search",
            json!({"uri": p("docs"), "content": "needle"}),
        ),
    ];
    let mut drivers = servers
        .iter()
        .map(|(_, argv)| Driver::start(argv).map(|(d, _)| d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!(
        "semantic-bench: {calls} sequential calls per figure, servers in turns of 5 calls; medians (p99)"
    );
    println!(
        "{:<34} {:>22} {:>22} {:>8}",
        "call", servers[0].0, servers[1].0, "ratio"
    );
    for (label, tool, args) in &ops {
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(), Vec::new()];
        for (i, d) in drivers.iter_mut().enumerate() {
            d.call(tool, args.clone())
                .map_err(|e| anyhow::anyhow!("{}: {e}", servers[i].0))?;
        }
        let mut done = 0;
        while done < calls {
            let run = 5.min(calls - done);
            for (i, d) in drivers.iter_mut().enumerate() {
                for _ in 0..run {
                    let start = std::time::Instant::now();
                    d.call(tool, args.clone())?;
                    times[i].push(start.elapsed());
                }
            }
            done += run;
        }
        for t in &mut times {
            t.sort();
        }
        let shown = |t: &[Duration]| format!("{} ({})", fmt(median(t)), fmt(p99(t)));
        println!(
            "{:<34} {:>22} {:>22} {:>7.1}x",
            label,
            shown(&times[0]),
            shown(&times[1]),
            median(&times[1]).as_secs_f64() / median(&times[0]).as_secs_f64()
        );
    }
    drop(drivers);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
