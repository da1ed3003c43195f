//! The Rust side of the side-by-side benches (bench/analysis_identify.py, bench/analysis_peers.py):
//! reads file paths, one a line, on stdin and prints one JSON line per file with what this crate
//! says of it — identify_file's kind and description, pe_info's outcome (sections, imports,
//! anomalies or the error), detect_packer's findings and the capabilities' techniques.
//! `corpus_report write DIR` writes the self-built corpus of the tests (packed, installer,
//! compiler and malformed PEs) into DIR, so the peers read the same files.

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::io::{BufRead, Write};

use maljan_analysis::{budget::Budget, capabilities, identify, pe, toolchain};
use serde_json::json;

fn write_corpus(dir: &std::path::Path) {
    use corpus::{malformed, packed};
    std::fs::create_dir_all(dir).unwrap();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("upx.exe", packed::upx_pe()),
        (
            "aspack.exe",
            packed::sections_pe(
                &[b".text", b".aspack", b".adata"],
                &[0x60, 0xE8, 3, 0, 0, 0, 0xE9, 0xEB],
            ),
        ),
        (
            "mpress.exe",
            packed::sections_pe(
                &[b".text", b".MPRESS1", b".MPRESS2"],
                &[0x60, 0xE8, 0, 0, 0, 0, 0x58, 0x05],
            ),
        ),
        (
            "themida.exe",
            packed::sections_pe(&[b".text", b".themida", b".boot"], &[]),
        ),
        (
            "vmprotect.exe",
            packed::sections_pe(&[b".text", b".vmp0", b".vmp1"], &[]),
        ),
        (
            "petite.exe",
            packed::sections_pe(
                &[b".text", b".petite"],
                &[0xB8, 0, 0x10, 0x40, 0, 0x66, 0x9C, 0x60, 0x50],
            ),
        ),
        ("nsis.exe", packed::nsis_pe()),
        ("inno.exe", packed::inno_pe()),
        ("pyinstaller.exe", packed::pyinstaller_pe()),
        ("go.exe", packed::go_pe()),
        ("rust.exe", packed::rust_pe()),
        ("delphi.exe", packed::delphi_pe()),
        ("plain.exe", corpus::pe()),
        ("tiny.exe", malformed::tiny_pe()),
        ("truncated.exe", malformed::truncated_pe()),
        ("bad_directories.exe", malformed::bad_directories_pe()),
    ];
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("write") {
        write_corpus(std::path::Path::new(args.get(2).expect("write DIR")));
        return;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let path = line.unwrap();
        let Ok(b) = std::fs::read(&path) else {
            continue;
        };
        let budget = || Budget::for_file(b.len(), &|| false);
        let kind = identify(&b);
        let pe = if b.starts_with(b"MZ") {
            Some(match pe::pe_info(&b, pe::PeParts::default(), &budget()) {
                Ok(p) => json!({
                    "ok": true,
                    "sections": p.sections.as_ref().map(|s| s.iter().map(|s| s.name.clone()).collect::<Vec<_>>()),
                    "imports": p.imports.as_ref().map(|d| d.iter().map(|d| d.functions.len()).sum::<usize>()),
                    "dlls": p.imports.as_ref().map(|d| d.len()),
                    "anomalies": p.anomalies,
                }),
                Err(e) => json!({"ok": false, "error": e.message}),
            })
        } else {
            None
        };
        let packers = toolchain::detect(&b, &budget())
            .map(|f| {
                f.into_iter()
                    .map(|f| json!({"name": f.name, "category": f.category, "version": f.version}))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let caps = capabilities::capabilities(&b, &budget())
            .map(|c| {
                c.into_iter()
                    .map(|c| json!({"name": c.name, "technique": c.technique}))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let v = json!({
            "path": path,
            "kind": kind.kind,
            "description": kind.description,
            "details": kind.details,
            "pe": pe,
            "toolchain": packers,
            "capabilities": caps,
        });
        writeln!(out, "{v}").unwrap();
    }
}
