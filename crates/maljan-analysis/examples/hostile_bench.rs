//! The analysis server's time and peak memory on the files built to exhaust it (issue 18), for
//! bench/analysis_hostile.md.
//!
//! `hostile_bench corpus DIR` writes the hostile files (the tests build the same ones).
//! `hostile_bench one TOOL FILE` makes one call through the served registry, in-process, and
//! prints `{"tool","file","seconds","is_error","code","answer_bytes","max_rss_kib"}`: run in its
//! own process, its peak RSS is that call's (plus the process's own, see `baseline`).
//! `hostile_bench all DIR REPS` runs `one` REPS times per tool and file in fresh processes and
//! prints a Markdown table of the median time and the largest peak RSS.

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::{path::Path, process::Command, time::Instant};

use maljan_analysis::{AnalysisConfig, registry};
use maljan_server::{Roots, ToolServer};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

const TOOLS: &[&str] = &[
    "baseline",
    "identify_file",
    "hashes",
    "strings",
    "iocs_from_file",
    "entropy",
    "pe_info",
    "elf_info",
    "macho_info",
    "archive_list",
    "document_info",
    "carve_payloads",
    "search",
];

fn write_corpus(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, data) in [
        ("import_bomb.exe", corpus::import_bomb_pe(50_000, 50_000)),
        ("section_bomb.macho", corpus::section_bomb_macho(10_000)),
        ("bind_bomb.macho", corpus::bind_bomb_macho()),
        ("trie_loop.macho", corpus::trie_loop_macho()),
        ("inflation_bomb.docx", corpus::inflation_bomb_docx(64)),
        (
            "shared_modules.doc",
            corpus::shared_module_ole(1000, 1 << 20),
        ),
        ("sample.exe", corpus::pe()),
    ] {
        std::fs::write(dir.join(name), data).unwrap();
    }
}

/// Peak resident set of this process, KiB.
fn max_rss_kib() -> i64 {
    // SAFETY: getrusage writes into the struct it is given and nothing else.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage.ru_maxrss
    }
}

fn one(tool: &str, file: &Path) -> Value {
    let dir = file.parent().unwrap();
    let config = AnalysisConfig {
        roots: Roots::new([dir]).unwrap(),
        work_dir: maljan_analysis::WorkDir::private_under(
            &std::env::temp_dir().join("maljan-bench-work"),
        )
        .unwrap(),
        rules_dir: None,
        builtin_rules: true,
    };
    let server = ToolServer::new("analysis", "bench", registry(config));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut args = Map::new();
    args.insert("path".into(), file.display().to_string().into());
    if tool == "search" {
        args.insert("patterns".into(), json!(["A"]));
    }
    let start = Instant::now();
    let out = (tool != "baseline").then(|| {
        runtime
            .block_on(server.call(tool, args, CancellationToken::new(), None))
            .expect("tool exists")
    });
    let seconds = start.elapsed().as_secs_f64();
    json!({
        "tool": tool,
        "file": file.file_name().unwrap().to_string_lossy(),
        "seconds": seconds,
        "is_error": out.as_ref().map(|o| o.is_error),
        "code": out.as_ref().and_then(|o| o.value["error"]["code"].as_str().map(str::to_string)),
        "answer_bytes": out.as_ref().map(|o| o.value.to_string().len()),
        "max_rss_kib": max_rss_kib(),
    })
}

fn all(dir: &Path, reps: usize) {
    let me = std::env::current_exe().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    println!("| file | bytes | tool | median s | peak RSS MiB | answer bytes | answer |");
    println!("|---|---:|---|---:|---:|---:|---|");
    for file in &files {
        let bytes = std::fs::metadata(file).unwrap().len();
        for tool in TOOLS {
            let runs: Vec<Value> = (0..reps)
                .map(|_| {
                    let out = Command::new(&me)
                        .args(["one", tool, &file.display().to_string()])
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "{tool} on {}", file.display());
                    serde_json::from_slice(&out.stdout).unwrap()
                })
                .collect();
            let mut secs: Vec<f64> = runs
                .iter()
                .map(|r| r["seconds"].as_f64().unwrap())
                .collect();
            secs.sort_by(f64::total_cmp);
            let rss = runs
                .iter()
                .map(|r| r["max_rss_kib"].as_i64().unwrap())
                .max()
                .unwrap();
            let last = runs.last().unwrap();
            let answer = match (&last["is_error"], &last["code"]) {
                (Value::Bool(true), Value::String(code)) => code.clone(),
                (Value::Bool(false), _) => "ok".into(),
                _ => "-".into(),
            };
            println!(
                "| {} | {bytes} | {tool} | {:.3} | {:.1} | {} | {answer} |",
                last["file"].as_str().unwrap(),
                secs[secs.len() / 2],
                rss as f64 / 1024.0,
                last["answer_bytes"],
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("corpus") => write_corpus(Path::new(&args[2])),
        Some("one") => println!("{}", one(&args[2], Path::new(&args[3]))),
        Some("all") => all(Path::new(&args[2]), args[3].parse().unwrap()),
        _ => eprintln!("usage: hostile_bench corpus DIR | one TOOL FILE | all DIR REPS"),
    }
}
