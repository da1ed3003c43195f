//! identify_file beside libmagic on the registries' corpus scripts/identify_corpus.py builds
//! (Debian packages' files, PyPI wheels and sdists; ≥ 2,000 files, libmagic's `file --brief`
//! recorded with each): the two must name the same family (bench/identify_families.tsv) for at
//! least 97% of the files. Every disagreement is printed; bench/analysis_identify.md lists them
//! with the reason (bench/identify_bench.py prints the same table with a live `file` run).

use std::{collections::BTreeMap, path::PathBuf};

use maljan_analysis::{FileKind, identify};
use regex::Regex;
use serde_json::Value;

/// bench/identify_families.tsv, parsed.
struct Families {
    libmagic: Vec<(Regex, String)>,
    equivalent: Vec<(String, String)>,
}

impl Families {
    fn load() -> Self {
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/identify_families.tsv");
        let text = std::fs::read_to_string(&path).expect("bench/identify_families.tsv");
        let mut f = Families {
            libmagic: vec![],
            equivalent: vec![],
        };
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let cols: Vec<&str> = line.split('\t').filter(|c| !c.is_empty()).collect();
            match cols.as_slice() {
                ["libmagic", re, fam] => f
                    .libmagic
                    .push((Regex::new(re).expect("family regex"), fam.to_string())),
                ["equivalent", a, b] => f.equivalent.push((a.to_string(), b.to_string())),
                _ => panic!("bad line in {}: {line:?}", path.display()),
            }
        }
        f
    }

    fn of_libmagic(&self, description: &str) -> String {
        self.libmagic
            .iter()
            .find(|(re, _)| re.is_match(description))
            .map(|(_, fam)| fam.clone())
            .unwrap_or_else(|| format!("other:{}", description.split(',').next().unwrap_or("")))
    }

    fn agree(&self, theirs: &str, ours: &str) -> bool {
        theirs == ours
            || self
                .equivalent
                .iter()
                .any(|(a, b)| a == theirs && b == ours)
    }
}

fn our_family(k: &FileKind) -> String {
    let detail = |key: &str| k.details.get(key).and_then(Value::as_str).unwrap_or("");
    match k.kind.as_str() {
        "script" => format!("script:{}", detail("language")),
        "xml" if detail("format") == "svg" => "svg".into(),
        other => other.into(),
    }
}

#[test]
fn identify_agrees_with_libmagic_on_the_registries_corpus() {
    let root = PathBuf::from(std::env::var("MALJAN_IDENTIFY_CORPUS").expect(
        "MALJAN_IDENTIFY_CORPUS is unset: run `eval \"$(scripts/peers.sh)\"` (it builds the corpus \
         with scripts/identify_corpus.py)",
    ));
    let manifest = std::fs::read_to_string(root.join("manifest.jsonl"))
        .expect("the corpus manifest (scripts/identify_corpus.py writes it)");
    let families = Families::load();
    let mut lines = manifest.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header")).unwrap();
    let (mut total, mut agreed) = (0usize, 0usize);
    let mut by_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut disagreements: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for line in lines {
        let e: Value = serde_json::from_str(line).unwrap();
        let rel = e["path"].as_str().unwrap();
        let bytes = std::fs::read(root.join(rel)).unwrap_or_else(|err| panic!("{rel}: {err}"));
        let theirs = families.of_libmagic(e["libmagic"].as_str().unwrap());
        let ours = our_family(&identify(&bytes));
        let ok = families.agree(&theirs, &ours);
        total += 1;
        agreed += ok as usize;
        let slot = by_family.entry(theirs.clone()).or_default();
        slot.0 += 1;
        slot.1 += ok as usize;
        if !ok {
            disagreements
                .entry((theirs, ours))
                .or_default()
                .push(format!(
                    "{rel} — libmagic: {}",
                    e["libmagic"].as_str().unwrap()
                ));
        }
    }
    assert!(
        total >= 2000,
        "the corpus holds {total} files, fewer than 2,000"
    );
    println!("{header}: {agreed}/{total} agree");
    for (fam, (n, a)) in &by_family {
        println!("  {fam}: {a}/{n}");
    }
    for ((theirs, ours), files) in &disagreements {
        println!("libmagic {theirs} / identify_file {ours}: {}", files.len());
        for f in files.iter().take(5) {
            println!("    {f}");
        }
    }
    let share = agreed as f64 / total as f64;
    assert!(
        share >= 0.97,
        "identify_file agrees with libmagic on {agreed}/{total} files ({:.1}%), under 97%",
        share * 100.0
    );
}
