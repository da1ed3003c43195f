//! detect_packer names what Detect It Easy names, side by side on the packer corpus
//! (scripts/packer_corpus.py: our own mingw-w64 and Go programs, packed with Debian's UPX at
//! several levels and options, NSIS installers from Debian's makensis, and the labelled corpora's
//! PE files). DIE is asked live, through the same script (its `--die` mode holds the family
//! mapping), so a DIE upgrade shows here. Where DIE names a packer, protector, installer or
//! compiler, detect_packer must name the same family on at least 95% of the files.
//! Needs `eval "$(scripts/peers.sh)"` (MALJAN_PACKER_CORPUS and MALJAN_PY with die-python); without
//! them the test fails, it does not skip.

use std::{
    collections::BTreeSet,
    io::Write,
    path::PathBuf,
    process::{Command, Stdio},
};

use maljan_analysis::{budget::Budget, toolchain::detect};
use serde_json::Value;

fn corpus() -> (PathBuf, Vec<PathBuf>) {
    let dir = PathBuf::from(std::env::var("MALJAN_PACKER_CORPUS").expect(
        "MALJAN_PACKER_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"` (it builds the packer corpus)",
    ));
    let manifest = std::fs::read_to_string(dir.join("manifest.jsonl"))
        .unwrap_or_else(|e| panic!("{}/manifest.jsonl: {e}", dir.display()));
    let files: Vec<PathBuf> = manifest
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            PathBuf::from(v["path"].as_str().unwrap())
        })
        .collect();
    (dir, files)
}

/// DIE's families for each file, from `scripts/packer_corpus.py --die` under the peers' Python.
fn die_families(files: &[PathBuf]) -> Vec<BTreeSet<String>> {
    let py = std::env::var("MALJAN_PY").expect(
        "MALJAN_PY is not set: run `eval \"$(scripts/peers.sh)\"` (die-python lives there)",
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/packer_corpus.py");
    let mut child = Command::new(py)
        .arg(script)
        .arg("--die")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the peers' Python");
    let mut stdin = child.stdin.take().unwrap();
    let list: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
    let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "Detect It Easy failed: is die-python installed in MALJAN_PY?"
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), files.len(), "DIE answered for every file");
    lines
        .iter()
        .map(|v| {
            v["families"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn detect_packer_names_what_detect_it_easy_names_on_95_percent_of_the_packer_corpus() {
    let (dir, files) = corpus();
    assert!(
        files.len() >= 300,
        "{} files in {}",
        files.len(),
        dir.display()
    );
    let die = die_families(&files);
    let (mut named, mut agreed) = (0usize, 0usize);
    let mut families_seen = BTreeSet::new();
    let mut disagreements = Vec::new();
    for (path, theirs) in files.iter().zip(&die) {
        if theirs.is_empty() {
            continue;
        }
        named += 1;
        let b = std::fs::read(path).unwrap();
        let ours: BTreeSet<String> = detect(&b, &Budget::for_file(b.len(), &|| false))
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        families_seen.extend(theirs.iter().cloned());
        if theirs.is_subset(&ours) {
            agreed += 1;
        } else {
            disagreements.push(format!(
                "{}: DIE {theirs:?}, maljan {ours:?}",
                path.display()
            ));
        }
    }
    let share = agreed as f64 / named as f64;
    eprintln!(
        "agreement {agreed}/{named} = {:.1}% on {:?}\n{}",
        share * 100.0,
        families_seen,
        disagreements.join("\n")
    );
    // The corpus holds what it says: packed, installer and compiled files DIE names.
    for family in ["UPX", "NSIS", "Go", "Microsoft Visual C/C++"] {
        assert!(families_seen.contains(family), "DIE named no {family}");
    }
    assert!(named >= 200, "DIE named only {named} files");
    assert!(
        share >= 0.95,
        "agreement {agreed}/{named}: {disagreements:#?}"
    );
}
