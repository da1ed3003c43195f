//! pe_info beside pefile (2024.8.26, the peers venv) on the crafted corpus scripts/pe_corpus.py
//! builds — one small program, then each layout trick alone and in every compatible pair
//! (unaligned raw pointers, raw sizes past the file or the aligned virtual size, overlapping
//! sections, sections past the end, tables in the headers or past the sections, an IAT-only import
//! table, bound and delay imports, TLS callbacks, NumberOfRvaAndSizes above and below 16, zero and
//! huge section counts, a short or cut optional header) and the 544-byte PE of issue 42.
//!
//! Every field both report is compared: sections (name, virtual address and size, raw pointer
//! and size), entry point, imports, delay imports, bound imports, exports (name, ordinal, RVA,
//! forwarder), TLS callbacks and the overlay's offset. A difference passes only where pefile
//! itself departs from the Windows loader, each named below with its reason.
//!
//! Needs the peers: `eval "$(scripts/peers.sh)"` (MALJAN_PY is the venv's python with pefile).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use maljan_analysis::{
    budget::Budget,
    pe::{PeParts, pe_info},
};
use serde_json::{Value, json};

/// The fields compared, in the order the report prints them.
const FIELDS: [&str; 8] = [
    "entry_point",
    "sections",
    "imports",
    "delay_imports",
    "bound_imports",
    "exports",
    "tls_callbacks",
    "overlay_offset",
];

fn python() -> String {
    std::env::var("MALJAN_PY").expect(
        "MALJAN_PY is not set: run `eval \"$(scripts/peers.sh)\"` first (pefile is in the peers venv)",
    )
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

fn run(args: &[&Path]) -> Vec<u8> {
    let out = Command::new(python())
        .args(args)
        .output()
        .expect("the peers' python runs");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// What pe_info reports, in the shape scripts/pefile_dump.py prints pefile's reading.
fn maljan_view(b: &[u8]) -> Value {
    // Every export listed (the tool lists 2,000 by default; Wine's msvcp71.dll has more).
    let parts = PeParts {
        limit: 1 << 16,
        ..PeParts::default()
    };
    let p = pe_info(b, parts, &Budget::for_file(b.len(), &|| false)).expect("pe_info reads it");
    // pefile lists the sections in address order (a stable sort of the table).
    let mut sections = p.sections.clone().unwrap_or_default();
    sections.sort_by_key(|s| s.virtual_address);
    let exports = p.exports.as_ref().map(|e| {
        json!({
            "dll_name": e.dll_name,
            "functions": e.functions.iter().map(|f| json!({
                "name": f.name, "ordinal": f.ordinal, "rva": f.rva, "forward": f.forward,
            })).collect::<Vec<_>>(),
        })
    });
    json!({
        "entry_point": p.entry_point,
        "sections": sections.iter().map(|s| json!({
            "name": s.name,
            "virtual_address": s.virtual_address,
            "virtual_size": s.virtual_size,
            "raw_offset": s.raw_offset,
            "raw_size": s.raw_size,
        })).collect::<Vec<_>>(),
        "imports": p.imports,
        "delay_imports": p.delay_imports,
        "bound_imports": p.bound_imports,
        "exports": exports,
        "tls_callbacks": p.tls_callback_addresses,
        "overlay_offset": p.overlay.as_ref().map(|o| o.offset),
    })
}

/// Why pefile's answer differs from the loader's, for the tricks where it does; None for a
/// difference nobody explained (a bug in pe_info, or one to explain here).
fn pefile_bug(file: &str, field: &str, pefile: &Value, maljan: &Value) -> Option<&'static str> {
    let tricks: Vec<&str> = file.trim_end_matches(".exe").split('+').collect();
    let has = |t: &str| tricks.contains(&t);
    let later_or_none = maljan.is_null() || maljan.as_u64() > pefile.as_u64();
    match field {
        "overlay_offset" if (has("raw_past_eof") || has("truncated_optional")) && later_or_none => {
            Some(
                "pefile leaves out a header or section whose raw data runs past the end of the \
                 file instead of clipping it to the file, so it calls bytes the loader maps \
                 (the section's own data, or the headers) overlay",
            )
        }
        "overlay_offset" if has("no_sections") && later_or_none => Some(
            "pefile ignores SizeOfHeaders: the loader maps the first SizeOfHeaders bytes as the \
             headers (here the import table and the code at the entry point), so they are not \
             overlay",
        ),
        "tls_callbacks"
            if has("raw_past_aligned_virtual") && has("tls") && maljan == &json!([]) =>
        {
            Some(
                "pefile maps a section's raw data past its VirtualSize rounded up to the \
                 SectionAlignment; the loader maps no more than that, so the callback array \
                 written there is not in the image and no callback runs",
            )
        }
        "exports"
            if has("export_ordinal_only") && has("exports_in_overlay") && pefile.is_null() =>
        {
            Some(
                "pefile fetches the AddressOfNames array even when NumberOfNames is 0, and drops \
                 the whole export directory when that unused address is the end of the file; \
                 the loader reads no name then",
            )
        }
        _ => None,
    }
}

/// The tricks are live: each file's tables read to what its generator wrote (so the parity is not
/// two parsers agreeing on nothing).
fn assert_live(file: &str, ours: &Value) {
    let tricks: Vec<&str> = file.trim_end_matches(".exe").split('+').collect();
    let has = |t: &str| tricks.contains(&t);
    // NumberOfRvaAndSizes = 2 leaves only the export and import directories.
    let all_dirs = !has("rva_count_short") && !has("short_optional");
    if file == "truncated_optional.exe" {
        assert_eq!(ours["sections"], json!([]), "{file}");
        return;
    }
    let imports = &ours["imports"];
    assert_eq!(
        imports[0]["dll"],
        if file.starts_with("issue42") {
            "KERNEL32.DLL"
        } else {
            "KERNEL32.dll"
        },
        "{file}: {imports}"
    );
    assert_eq!(
        imports[0]["functions"][0], "ExitProcess",
        "{file}: {imports}"
    );
    if has("ordinals") {
        assert_eq!(imports[2]["functions"], json!(["ord17", "ord25"]), "{file}");
    }
    if (has("delay") || has("delay_old")) && all_dirs {
        assert_eq!(
            ours["delay_imports"],
            json!([{"dll": "WININET.dll", "functions": ["InternetOpenA", "InternetOpenUrlA"]}]),
            "{file}"
        );
    }
    if has("bound") && all_dirs {
        assert_eq!(
            ours["bound_imports"][0]["forwarders"],
            json!(["NTDLL.DLL"]),
            "{file}"
        );
    }
    if has("tls") && all_dirs && !has("raw_past_aligned_virtual") {
        assert_eq!(
            ours["tls_callbacks"].as_array().map(Vec::len),
            Some(2),
            "{file}"
        );
    }
    if tricks.iter().any(|t| t.starts_with("export")) {
        let functions = ours["exports"]["functions"].as_array().expect(file);
        assert_eq!(
            functions.len(),
            if has("export_forwarders") { 6 } else { 4 },
            "{file}"
        );
    }
    if has("export_forwarders") {
        let forwards: Vec<&Value> = ours["exports"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| !f["forward"].is_null())
            .collect();
        assert_eq!(forwards.len(), 2, "{file}");
    }
}

/// The 544-byte PE of issue 42: its only section's PointerToRawData is 1, which the loader and
/// pefile round down to 0.
#[test]
fn the_issue_42_tiny_pe_reads_its_two_imports() {
    let dir = tempfile::tempdir().unwrap();
    run(&[&script("pe_corpus.py"), dir.path()]);
    let b = std::fs::read(dir.path().join("issue42_tiny.exe")).unwrap();
    assert_eq!(b.len(), 544);
    let p = pe_info(
        &b,
        PeParts::default(),
        &Budget::for_file(b.len(), &|| false),
    )
    .unwrap();
    let imports: Vec<(String, Vec<String>)> = p
        .imports
        .unwrap()
        .into_iter()
        .map(|d| (d.dll, d.functions))
        .collect();
    assert_eq!(
        imports,
        [
            ("KERNEL32.DLL".to_string(), vec!["ExitProcess".to_string()]),
            ("USER32.DLL".to_string(), vec!["MessageBoxA".to_string()]),
        ]
    );
    assert_eq!(p.entry_section.as_deref(), Some(".text"));
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.contains("unaligned raw pointer 0x1")),
        "{:?}",
        p.anomalies
    );
}

/// Compares pe_info with pefile's reading (`pefile`, keyed by path under `root`) field by field;
/// `explain` names pefile's departures from the loader, `check` asserts what each file must hold.
/// Prints the figures and fails on any unexplained difference.
fn compare(
    what: &str,
    root: &Path,
    pefile: &BTreeMap<String, Value>,
    explain: fn(&str, &str, &Value, &Value) -> Option<&'static str>,
    check: fn(&str, &Value),
) {
    let (mut compared, mut equal) = (0usize, 0usize);
    let mut explained: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut unexplained = Vec::new();
    for (file, theirs) in pefile {
        assert!(
            theirs.get("error").is_none(),
            "pefile cannot read {file}: {theirs}"
        );
        let b = std::fs::read(root.join(file)).unwrap();
        let ours = maljan_view(&b);
        check(file, &ours);
        for field in FIELDS {
            compared += 1;
            let (t, o) = (&theirs[field], &ours[field]);
            if t == o {
                equal += 1;
            } else if let Some(why) = explain(file, field, t, o) {
                explained
                    .entry(why)
                    .or_default()
                    .push(format!("{file} {field}"));
            } else {
                let short = |v: &Value| v.to_string().chars().take(800).collect::<String>();
                unexplained.push(format!(
                    "{file} {field}:\n  pefile {}\n  maljan {}",
                    short(t),
                    short(o)
                ));
            }
        }
    }
    let n_explained: usize = explained.values().map(Vec::len).sum();
    println!(
        "{} {what}, {compared} fields: {equal} equal ({:.2}%), {n_explained} pefile's own \
         departures from the loader, {} unexplained",
        pefile.len(),
        100.0 * equal as f64 / compared as f64,
        unexplained.len()
    );
    for (why, cases) in &explained {
        println!("- {} × {why}\n  e.g. {}", cases.len(), cases[0]);
    }
    assert!(
        unexplained.is_empty(),
        "{} unexplained differences:\n{}",
        unexplained.len(),
        unexplained.join("\n")
    );
    assert_eq!(equal + n_explained, compared);
}

#[test]
fn pe_info_reads_every_crafted_pe_as_pefile_does_where_pefile_reads_as_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    let count = run(&[&script("pe_corpus.py"), dir.path()]);
    let count: usize = String::from_utf8_lossy(&count).trim().parse().unwrap();
    let pefile: BTreeMap<String, Value> =
        serde_json::from_slice(&run(&[&script("pefile_dump.py"), dir.path()])).unwrap();
    assert_eq!(pefile.len(), count);
    assert!(count >= 60, "only {count} crafted PEs");
    compare("crafted PEs", dir.path(), &pefile, pefile_bug, assert_live);
}

/// The same comparison on the real programs of the labelled corpus (scripts/corpus.sh): MinGW
/// builds plain and UPX-packed, NSIS installers, Wine's DLLs and programs, the malicious set.
#[test]
fn pe_info_reads_the_corpus_programs_as_pefile_does() {
    let corpus = std::env::var("MALJAN_CORPUS").expect(
        "MALJAN_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"` first (it builds the corpus)",
    );
    let root = Path::new(&corpus).join("files");
    let folders = [
        "benign/mingw",
        "benign/mingw-upx",
        "benign/nsis",
        "benign/nsis-installers",
        "benign/wine",
        "malicious/exe",
        "malicious/upx",
    ];
    let dump = script("pefile_dump.py");
    let mut args: Vec<&Path> = vec![&dump, &root];
    args.extend(folders.iter().map(Path::new));
    let pefile: BTreeMap<String, Value> = serde_json::from_slice(&run(&args)).unwrap();
    assert!(pefile.len() >= 300, "only {} corpus PEs", pefile.len());
    compare(
        "corpus PEs",
        &root,
        &pefile,
        |_, _, _, _| None,
        |file, ours| {
            assert!(
                ours["sections"].as_array().is_some_and(|s| !s.is_empty()),
                "{file}"
            )
        },
    );
}
