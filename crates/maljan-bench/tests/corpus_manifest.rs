//! The labelled corpora that scripts/corpus.sh builds (issue 40) are what they claim to be: the
//! manifest is well-formed and matches the files, the benign corpus has its 500 files from five
//! sources, every malicious-like program comes bare, packed and in every carrier kind (EICAR
//! too), and each malicious-like program really imports the API calls its C source says it makes
//! (read back with pefile). These tests need the corpus: without it they fail, they do not skip
//! (scripts/peers.sh builds it; `eval "$(scripts/peers.sh)"` sets MALJAN_CORPUS).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;
use sha2::{Digest, Sha256};

fn corpus() -> PathBuf {
    let dir = std::env::var_os("MALJAN_CORPUS").map(PathBuf::from).expect(
        "MALJAN_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"` (it builds the corpora with scripts/corpus.sh)",
    );
    assert!(
        dir.join("manifest.jsonl").is_file(),
        "{} has no manifest.jsonl: run scripts/corpus.sh",
        dir.display()
    );
    dir
}

fn manifest(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("manifest.jsonl")).expect("read the manifest");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("manifest line {}: {e}", i + 1))
        })
        .collect()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `// imports:` claims of each C source under scripts/corpus/malicious, by program name.
fn claimed_imports() -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(repo().join("scripts/corpus/malicious"))
        .expect("the malicious-like sources")
    {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "c") {
            let text = std::fs::read_to_string(&path).expect("read a source");
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("// imports:"))
                .unwrap_or_else(|| panic!("{} has no `// imports:` line", path.display()));
            let stem = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .into_owned();
            out.insert(stem, line.split_whitespace().map(str::to_owned).collect());
        }
    }
    out
}

#[test]
fn manifest_is_well_formed_and_matches_the_files() {
    let dir = corpus();
    let entries = manifest(&dir);
    let mut digests = BTreeSet::new();
    for e in &entries {
        let path = e["path"].as_str().expect("path");
        assert!(
            !path.starts_with('/') && !path.contains(".."),
            "{path}: paths are relative to the corpus"
        );
        for key in ["label", "corpus", "source", "kind", "container", "sha256"] {
            assert!(e[key].is_string(), "{path}: `{key}` must be a string");
        }
        assert!(
            matches!(e["label"].as_str(), Some("benign" | "malicious")),
            "{path}: label"
        );
        assert!(
            matches!(
                e["corpus"].as_str(),
                Some("benign" | "malicious" | "random")
            ),
            "{path}: corpus"
        );
        assert!(
            matches!(
                e["container"].as_str(),
                Some("none" | "zip" | "7z" | "tar.gz" | "mail" | "pdf" | "doc" | "rtf" | "html")
            ),
            "{path}: container {}",
            e["container"]
        );
        assert!(e["packed"].is_boolean(), "{path}: packed");
        let bytes = std::fs::read(dir.join(path)).unwrap_or_else(|err| panic!("{path}: {err}"));
        assert_eq!(Some(bytes.len() as u64), e["size"].as_u64(), "{path}: size");
        let sha = hex::encode(Sha256::digest(&bytes));
        assert_eq!(Some(sha.as_str()), e["sha256"].as_str(), "{path}: sha256");
        assert!(
            digests.insert(sha),
            "{path}: the same bytes are listed twice"
        );
    }
}

#[test]
fn benign_corpus_has_500_files_from_5_sources() {
    let entries = manifest(&corpus());
    let benign: Vec<&Value> = entries.iter().filter(|e| e["corpus"] == "benign").collect();
    let sources: BTreeSet<&str> = benign.iter().filter_map(|e| e["source"].as_str()).collect();
    assert!(benign.len() >= 500, "{} benign files", benign.len());
    assert!(sources.len() >= 5, "benign sources: {sources:?}");
    for needed in [
        "wine",
        "pypi",
        "nsis",
        "mingw",
        "mingw-upx",
        "elf",
        "documents",
        "mail",
        "archives",
    ] {
        assert!(
            sources.contains(needed),
            "no benign file from {needed}: {sources:?}"
        );
    }
    let packed = benign.iter().filter(|e| e["packed"] == true).count();
    assert!(packed >= 10, "{packed} UPX-packed benign programs");
    let random: Vec<&Value> = entries.iter().filter(|e| e["corpus"] == "random").collect();
    let biggest = random
        .iter()
        .filter_map(|e| e["size"].as_u64())
        .max()
        .unwrap_or(0);
    assert!(
        biggest >= 50 << 20,
        "the random set reaches 50 MiB (largest {biggest})"
    );
    assert!(
        random.iter().any(|e| e["size"].as_u64() == Some(1024)),
        "the random set starts at 1 KiB"
    );
}

#[test]
fn every_malicious_program_comes_bare_packed_and_in_every_carrier() {
    let entries = manifest(&corpus());
    let claims = claimed_imports();
    assert!(
        claims.len() >= 7,
        "{} malicious-like programs",
        claims.len()
    );
    let carriers = ["zip", "7z", "mail", "pdf", "doc", "rtf", "html"];
    for program in claims.keys().map(String::as_str).chain(["eicar"]) {
        let of: Vec<&Value> = entries
            .iter()
            .filter(|e| e["corpus"] == "malicious" && e["program"] == program)
            .collect();
        for c in carriers {
            assert!(
                of.iter()
                    .any(|e| e["container"] == c && e["carries"].is_string()),
                "{program}: not carried in a {c}"
            );
        }
        assert!(
            of.iter()
                .any(|e| e["container"] == "none" && e["packed"] == false),
            "{program}: no bare file"
        );
        if program != "eicar" {
            assert!(
                of.iter().any(|e| e["packed"] == true),
                "{program}: no UPX-packed copy"
            );
        }
        assert!(
            of.iter().all(|e| e["label"] == "malicious"),
            "{program}: labelled malicious"
        );
    }
}

#[test]
fn malicious_programs_import_what_their_sources_claim() {
    let dir = corpus();
    let entries = manifest(&dir);
    let py = std::env::var_os("MALJAN_PY")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("MALJAN_PEERS").map(|p| PathBuf::from(p).join("venv/bin/python"))
        })
        .expect("MALJAN_PY is not set: run `eval \"$(scripts/peers.sh)\"` (pefile is in its venv)");
    for (program, claims) in claimed_imports() {
        let entry = entries
            .iter()
            .find(|e| e["program"] == program.as_str() && e["source"] == "mingw" && e["kind"] == "pe")
            .unwrap_or_else(|| panic!("{program}: no compiled program in the manifest (rebuild: scripts/corpus.sh --force)"));
        let manifest_claims: Vec<&str> = entry["imports"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            manifest_claims, claims,
            "{program}: the corpus was built from another version of the source"
        );
        let exe = dir.join(entry["path"].as_str().expect("path"));
        let out = Command::new(&py)
            .args([
                "-c",
                "import pefile,sys\n\
                 pe=pefile.PE(sys.argv[1])\n\
                 for d in pe.DIRECTORY_ENTRY_IMPORT:\n\
                 \x20   for i in d.imports:\n\
                 \x20       print(d.dll.decode().lower()+'!'+(i.name or b'').decode())",
            ])
            .arg(&exe)
            .output()
            .expect("run pefile");
        assert!(
            out.status.success(),
            "pefile on {}: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let imports: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        for claim in &claims {
            let (dll, func) = claim.split_once('!').expect("dll!function");
            let want = format!("{}!{func}", dll.to_lowercase());
            assert!(
                imports.contains(&want),
                "{program} does not import {claim} (imports: {imports:?})"
            );
        }
    }
}
