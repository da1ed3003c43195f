//! elf_info beside binutils' readelf on the crafted corpus scripts/elf_corpus.py builds from a
//! seed program (/bin/true): section headers absent, past the end of the file, cut by it, counted
//! 65,520, with a lying string-table index or entry size, sections whose offset or size lie, the
//! .dynsym section pointing nowhere, the table zeroed — alone and in every pair. The kernel and
//! ld.so read only the program headers, and so does `readelf -D`: entry point, segments,
//! interpreter, needed libraries, soname and the dynamic symbols must read the same from every
//! file, whatever its sections say.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use maljan_analysis::{budget::Budget, elf::elf_info};
use serde_json::{Value, json};

const FIELDS: [&str; 7] = [
    "entry_point",
    "segments",
    "interpreter",
    "needed",
    "soname",
    "imported_symbols",
    "exported_symbols",
];

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

fn python(args: &[&Path]) -> Vec<u8> {
    let out = Command::new("python3")
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn maljan_view(b: &[u8]) -> Value {
    let e = elf_info(b, 1 << 16, &Budget::for_file(b.len(), &|| false)).expect("elf_info reads it");
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    json!({
        "entry_point": e.entry_point,
        "segments": e.segments.iter().map(|s| json!({
            "type": s.r#type, "offset": s.offset, "vaddr": s.vaddr,
            "file_size": s.file_size, "mem_size": s.mem_size, "flags": s.flags,
        })).collect::<Vec<_>>(),
        "interpreter": e.interpreter,
        "needed": e.needed,
        "soname": e.soname,
        "imported_symbols": sorted(&e.imported_symbols),
        "exported_symbols": sorted(&e.exported_symbols),
    })
}

#[test]
fn elf_info_reads_every_crafted_elf_as_readelf_does_from_the_program_headers() {
    assert!(
        Command::new("readelf").arg("--version").output().is_ok(),
        "readelf (binutils) is not on PATH"
    );
    let seed = Path::new("/bin/true");
    let dir = tempfile::tempdir().unwrap();
    let count = python(&[&script("elf_corpus.py"), seed, dir.path()]);
    let count: usize = String::from_utf8_lossy(&count).trim().parse().unwrap();
    assert!(count >= 50, "only {count} crafted ELFs");
    let readelf: BTreeMap<String, Value> =
        serde_json::from_slice(&python(&[&script("readelf_dump.py"), dir.path()])).unwrap();
    assert_eq!(readelf.len(), count);
    let plain = &readelf["plain.elf"];
    assert!(
        plain["needed"].as_array().is_some_and(|n| !n.is_empty())
            && plain["imported_symbols"]
                .as_array()
                .is_some_and(|s| s.len() > 10),
        "the seed is a dynamic program: {plain}"
    );
    let (mut compared, mut equal) = (0usize, 0usize);
    let mut differences = Vec::new();
    for (file, theirs) in &readelf {
        let b = std::fs::read(dir.path().join(file)).unwrap();
        let ours = maljan_view(&b);
        for field in FIELDS {
            compared += 1;
            if theirs[field] == ours[field] {
                equal += 1;
            } else {
                let short = |v: &Value| v.to_string().chars().take(400).collect::<String>();
                differences.push(format!(
                    "{file} {field}:\n  readelf {}\n  maljan  {}",
                    short(&theirs[field]),
                    short(&ours[field])
                ));
            }
        }
    }
    // The lies are live: goblin refuses these section tables, and elf_info says it read the
    // file from its program headers instead.
    let mut refused = Vec::new();
    for file in readelf.keys() {
        let b = std::fs::read(dir.path().join(file)).unwrap();
        let e = elf_info(&b, 10, &Budget::for_file(b.len(), &|| false)).unwrap();
        if e.anomalies
            .iter()
            .any(|a| a.contains("section headers unreadable"))
        {
            refused.push(file.as_str());
        }
    }
    for file in ["shoff_past_eof.elf", "shnum_huge.elf", "table_cut.elf"] {
        assert!(refused.contains(&file), "{file} read whole: {refused:?}");
    }
    println!(
        "{count} crafted ELFs, {compared} fields: {equal} equal ({:.2}%); {} read from the \
         program headers alone",
        100.0 * equal as f64 / compared as f64,
        refused.len()
    );
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
