//! The side-by-side with capa (flare-capa, in the peers venv; its rules in ../shared/capa-rules or
//! MALJAN_CAPA_RULES): on a sample of the corpora's programs, the ATT&CK techniques both find, only
//! capa finds and only maljan finds (maljan's from the report's code_capabilities step). Compared
//! at the technique level (T1055.001 counts as T1055): the two name sub-techniques differently.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::Outcome;

pub struct FileRow {
    pub path: String,
    pub corpus: String,
    pub capa: Result<BTreeSet<String>, String>,
    pub maljan: BTreeSet<String>,
    pub seconds: f64,
}

pub struct Comparison {
    pub rows: Vec<FileRow>,
    pub note: Option<String>,
}

fn parent(t: &str) -> String {
    t.split('.').next().unwrap_or(t).trim().to_owned()
}

fn capa_bin() -> Option<PathBuf> {
    let peers = std::env::var_os("MALJAN_PEERS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/maljan-peers"))
        })?;
    Some(peers.join("venv/bin/capa")).filter(|p| p.is_file())
}

fn rules_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("MALJAN_CAPA_RULES").map(PathBuf::from),
        Some(PathBuf::from("../shared/capa-rules")),
        Some(PathBuf::from("/work/shared/capa-rules")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_dir())
}

/// Unpacked programs only (capa declines packed ones): the malicious-like programs first, then
/// benign ones spread over their sources, `n` in all.
fn sample(outcomes: &[Outcome], n: usize) -> Vec<&Outcome> {
    let pe = |o: &&Outcome| o.entry.kind == "pe" && !o.entry.packed && o.entry.size < (8 << 20);
    let mal: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.entry.corpus == "malicious")
        .filter(pe)
        .collect();
    let ben: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.entry.corpus == "benign")
        .filter(pe)
        .collect();
    let want_mal = (n / 2).min(mal.len());
    let want_ben = n.saturating_sub(want_mal).min(ben.len());
    let mut out: Vec<&Outcome> = mal
        .iter()
        .step_by((mal.len() / want_mal.max(1)).max(1))
        .take(want_mal)
        .copied()
        .collect();
    out.extend(
        ben.iter()
            .step_by((ben.len() / want_ben.max(1)).max(1))
            .take(want_ben)
            .copied(),
    );
    out
}

fn run_capa(
    capa: &Path,
    rules: &Path,
    sigs: &Path,
    file: &Path,
) -> Result<BTreeSet<String>, String> {
    let mut child = Command::new(capa)
        .args(["-q", "-j", "-r"])
        .arg(rules)
        .arg("-s")
        .arg(sigs)
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn capa: {e}"))?;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut s) = stdout {
            use std::io::Read;
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("capa timed out after 600 s".into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let out = reader.join().unwrap_or_default();
    let v: Value =
        serde_json::from_slice(&out).map_err(|_| format!("capa exit {status}, no JSON"))?;
    let mut found = BTreeSet::new();
    for rule in v["rules"].as_object().into_iter().flat_map(|m| m.values()) {
        for a in rule["meta"]["attack"].as_array().into_iter().flatten() {
            if let Some(id) = a["id"].as_str() {
                found.insert(parent(id));
            }
        }
    }
    Ok(found)
}

/// capa's answer for one file, kept in the reports folder by content (capa, its version and its
/// rules do not change between runs, and a file takes it ~30 s).
fn cached_capa(
    capa: &Path,
    rules: &Path,
    sigs: &Path,
    o: &Outcome,
    cache: &Path,
) -> Result<BTreeSet<String>, String> {
    let path = cache.join(format!("capa-{}.txt", o.entry.sha256));
    if let Ok(text) = std::fs::read_to_string(&path) {
        return Ok(text.split_whitespace().map(str::to_owned).collect());
    }
    let found = run_capa(capa, rules, sigs, &o.entry.abs)?;
    let _ = std::fs::write(&path, found.iter().cloned().collect::<Vec<_>>().join(" "));
    Ok(found)
}

pub fn compare(outcomes: &[Outcome], n: usize, cache: &Path) -> Comparison {
    let (Some(capa), Some(rules)) = (capa_bin(), rules_dir()) else {
        return Comparison {
            rows: vec![],
            note: Some("capa or its rules are missing (scripts/peers.sh installs flare-capa; rules: ../shared/capa-rules or MALJAN_CAPA_RULES)".into()),
        };
    };
    let sigs = std::env::temp_dir().join(format!("maljan-capa-empty-sigs-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&sigs);
    let picked = sample(outcomes, n);
    let next = AtomicUsize::new(0);
    let rows = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(o) = picked.get(i) else { break };
                    let started = Instant::now();
                    let found = cached_capa(&capa, &rules, &sigs, o, cache);
                    let seconds = started.elapsed().as_secs_f64();
                    eprintln!(
                        "capa [{}/{}] {:.0}s {}",
                        i + 1,
                        picked.len(),
                        seconds,
                        o.entry.path
                    );
                    rows.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(FileRow {
                            path: o.entry.path.clone(),
                            corpus: o.entry.corpus.clone(),
                            capa: found,
                            maljan: o.techniques.iter().map(|t| parent(t)).collect(),
                            seconds,
                        });
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&sigs);
    let mut rows = rows.into_inner().unwrap_or_else(|p| p.into_inner());
    rows.sort_by(|a, b| a.path.cmp(&b.path));
    Comparison { rows, note: None }
}

pub fn render(s: &mut String, c: &Comparison) {
    let _ = writeln!(s, "## ATT&CK techniques: capa beside maljan\n");
    if let Some(note) = &c.note {
        let _ = writeln!(s, "Not run: {note}.\n");
        return;
    }
    let _ = writeln!(
        s,
        "capa ({} files, `capa -j -r ../shared/capa-rules -s EMPTY_DIR`, no FLIRT signatures) and maljan's \
         code_capabilities step, compared per technique (sub-techniques folded into their technique). \
         A technique counts for a corpus when a tool reports it on at least one of its sampled files; the \
         numbers are files.\n",
        c.rows.len()
    );
    for corpus in ["malicious", "benign"] {
        let rows: Vec<&FileRow> = c
            .rows
            .iter()
            .filter(|r| r.corpus == corpus && r.capa.is_ok())
            .collect();
        let mut per: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
        for r in &rows {
            let capa = r.capa.clone().unwrap_or_default();
            for t in capa.union(&r.maljan) {
                let e = per.entry(t.clone()).or_default();
                match (capa.contains(t), r.maljan.contains(t)) {
                    (true, true) => e.0 += 1,
                    (true, false) => e.1 += 1,
                    _ => e.2 += 1,
                }
            }
        }
        let both: Vec<&String> = per
            .iter()
            .filter(|(_, v)| v.0 > 0)
            .map(|(k, _)| k)
            .collect();
        let _ = writeln!(s, "### {corpus} ({} files)\n", rows.len());
        let _ = writeln!(s, "| technique | files both | only capa | only maljan |");
        let _ = writeln!(s, "|---|---:|---:|---:|");
        for (t, (b, cp, m)) in &per {
            let _ = writeln!(s, "| {t} | {b} | {cp} | {m} |");
        }
        let _ = writeln!(
            s,
            "\nTechniques both found on the same file: {}.\n",
            if both.is_empty() {
                "none".into()
            } else {
                both.iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    let _ = writeln!(s, "| file | capa | maljan | capa s |");
    let _ = writeln!(s, "|---|---|---|---:|");
    for r in &c.rows {
        let capa = match &r.capa {
            Ok(t) => t.iter().cloned().collect::<Vec<_>>().join(" "),
            Err(e) => format!("error: {e}"),
        };
        let m = r.maljan.iter().cloned().collect::<Vec<_>>().join(" ");
        let _ = writeln!(s, "| `{}` | {} | {} | {:.0} |", r.path, capa, m, r.seconds);
    }
    s.push('\n');
}
