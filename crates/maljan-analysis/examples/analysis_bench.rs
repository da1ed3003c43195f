//! The Rust side of bench/analysis_bench.py.
//!
//! `analysis_bench corpus DIR` writes the generated documents the benchmark also feeds to olefile.
//! `analysis_bench time OP FILE REPS` runs one analysis REPS times on a memory-mapped file and
//! prints `{"op","file","bytes","runs":[seconds…],"median_s","result"}` as one JSON line.
//! OPs: strings_ascii (GNU `strings -a` equivalent: ASCII, min 4), strings (ASCII + UTF-16LE, min 4),
//! sha256, hashes (MD5, SHA-1, SHA-256, SHA-512), hashes_fuzzy (+ ssdeep, TLSH), pe_info,
//! document_info, identify, iocs, carve, entropy.

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::{io::Write, time::Instant};

use maljan_analysis::{carve, document, entropy, hashes, identify, iocs, pe, strings};
use serde_json::{Value, json};

fn count_strings(b: &[u8], ascii: bool, utf16le: bool) -> usize {
    let q = strings::StringQuery {
        min_len: 4,
        ascii,
        utf16le,
        pattern: None,
        ignore_case: false,
        offset: 0,
        limit: 1,
    };
    strings::extract(b, &q, &|| false).1.total
}

fn run(op: &str, b: &[u8]) -> Value {
    match op {
        "strings_ascii" => json!(count_strings(b, true, false)),
        "strings" => json!(count_strings(b, true, true)),
        "sha256" => json!(hashes::sha256_hex(b)),
        "hashes" => json!(hashes::hash_bytes(b, false, &|| false).unwrap().sha256),
        "hashes_fuzzy" => {
            let h = hashes::hash_bytes(b, true, &|| false).unwrap();
            json!({"ssdeep": h.ssdeep, "tlsh": h.tlsh})
        }
        "ssdeep" => json!(hashes::ssdeep(b)),
        "tlsh" => json!(hashes::tlsh(b)),
        "md5" => json!(hashes::hash_bytes(&b[..0], false, &|| false).unwrap().md5),
        "pe_info" => match pe::pe_info(
            b,
            Default::default(),
            &maljan_analysis::budget::Budget::for_file(b.len(), &|| false),
        ) {
            Ok(i) => {
                json!({"imphash": i.imphash, "sections": i.sections.map(|s| s.len()), "imports": i.import_count})
            }
            Err(e) => json!({"error": e.message}),
        },
        "document_info" => match document::document_info(
            b,
            100_000,
            &maljan_analysis::budget::Budget::for_file(b.len(), &|| false),
        ) {
            Ok(d) => {
                json!({"format": d.format, "streams": d.ole.as_ref().map(|o| o.stream_count), "macros": d.macros})
            }
            Err(e) => json!({"error": e.message}),
        },
        "identify" => json!(identify(b).kind),
        "iocs" => json!(iocs::extract(&iocs::text_of(b, 4, &|| false), iocs::KINDS).len()),
        "carve" => json!(carve::carve(b, 100_000, &|| false).len()),
        "entropy" => json!(entropy::shannon(b)),
        other => panic!("unknown op {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("corpus") => {
            let dir = std::path::Path::new(&args[2]);
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("macro.doc"), corpus::ole_with_vba("Macros/", true)).unwrap();
            std::fs::write(dir.join("invoice.docm"), corpus::docm()).unwrap();
            std::fs::write(dir.join("doc.pdf"), corpus::pdf()).unwrap();
            std::fs::write(dir.join("sample.exe"), corpus::pe()).unwrap();
            // A larger OLE2 file: 400 streams of 16 KiB plus the VBA project.
            let mut cf = cfb::CompoundFile::create(std::io::Cursor::new(corpus::ole_with_vba(
                "Macros/", true,
            )))
            .unwrap();
            cf.create_storage("/Data").unwrap();
            for i in 0..400 {
                let mut s = cf.create_stream(format!("/Data/Stream{i:04}")).unwrap();
                s.write_all(&vec![(i % 251) as u8; 16 * 1024]).unwrap();
            }
            cf.flush().unwrap();
            std::fs::write(dir.join("big.doc"), cf.into_inner().into_inner()).unwrap();
        }
        Some("time") => {
            let (op, file, reps) = (&args[2], &args[3], args[4].parse::<usize>().unwrap());
            let f = std::fs::File::open(file).unwrap();
            // SAFETY: a benchmark input nobody modifies while it runs.
            let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
            let mut runs = Vec::new();
            let mut result = Value::Null;
            for _ in 0..reps {
                let t = Instant::now();
                result = run(op, &map);
                runs.push(t.elapsed().as_secs_f64());
            }
            let mut sorted = runs.clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            println!(
                "{}",
                json!({"op": op, "file": file, "bytes": map.len(), "runs": runs, "median_s": median, "result": result})
            );
        }
        _ => eprintln!("usage: analysis_bench corpus DIR | time OP FILE REPS"),
    }
}
