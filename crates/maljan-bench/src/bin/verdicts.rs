//! The verdicts bench (issue 40): runs the real `maljan analyze --no-agent --format json` over every
//! file of the labelled corpora (scripts/corpus.sh's manifest), two at a time, and writes
//! bench/verdicts.md: the confusion matrix per corpus, source and carrier, the figures of the
//! issue's target table, the run time, one line per misclassified file with the facts the verdict
//! rested on, and — with `--capa N` — the ATT&CK techniques capa and maljan find on N programs.
//!
//! Usage: verdicts [--manifest FILE] [--maljan BIN] [--out FILE] [--jobs N] [--reports DIR]
//!                 [--reuse] [--only SUBSTRING] [--capa N]
//!
//! The maljan binary: --maljan, else MALJAN_BIN, else $CARGO_TARGET_DIR/debug/maljan, else
//! target/debug/maljan. The manifest: --manifest, else $MALJAN_CORPUS/manifest.jsonl. Each run
//! gets a private MALJAN_HOME, so no user configuration (or model) changes a verdict, and the
//! directory of MALJAN_UPX in front of its PATH, so UPX-packed programs are unpacked. With
//! --reuse, a report already in --reports is read instead of running the file again.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::Value;

#[path = "verdicts/capa.rs"]
mod capa;
#[path = "verdicts/render.rs"]
mod render;

/// One manifest line (scripts/corpus/gen.py documents the fields).
#[derive(Clone)]
pub struct Entry {
    pub path: String,
    pub abs: PathBuf,
    pub label: String,
    pub corpus: String,
    pub source: String,
    pub kind: String,
    pub container: String,
    pub carries: Option<String>,
    pub packed: bool,
    pub size: u64,
    pub sha256: String,
}

/// What one `maljan analyze` run gave.
pub struct Outcome {
    pub entry: Entry,
    /// malicious | suspicious | benign | unknown, or `error` when no report was written.
    pub verdict: String,
    pub basis: bool,
    pub facts: Vec<String>,
    /// The facts' ids that lean malicious (for the tally of what drives false positives).
    pub accusing: Vec<String>,
    pub claims: Vec<String>,
    pub summary: String,
    pub status: String,
    pub iocs_all: u64,
    pub iocs_scored: u64,
    pub techniques: BTreeSet<String>,
    pub seconds: f64,
    pub error: Option<String>,
}

pub struct Options {
    manifest: PathBuf,
    maljan: PathBuf,
    out: PathBuf,
    jobs: usize,
    reports: PathBuf,
    reuse: bool,
    only: Option<String>,
    capa: usize,
}

fn options() -> anyhow::Result<Options> {
    let mut it = std::env::args().skip(1);
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let mut manifest = env("MALJAN_CORPUS").map(|c| PathBuf::from(c).join("manifest.jsonl"));
    let mut maljan = env("MALJAN_BIN").map(PathBuf::from).or_else(|| {
        let dir = env("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
        Some(dir.join("debug/maljan"))
    });
    let mut o = Options {
        manifest: PathBuf::new(),
        maljan: PathBuf::new(),
        out: PathBuf::from("bench/verdicts.md"),
        jobs: 2,
        reports: std::env::temp_dir().join("maljan-verdicts-reports"),
        reuse: false,
        only: None,
        capa: 0,
    };
    while let Some(a) = it.next() {
        let mut val = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--manifest" => manifest = Some(val()?.into()),
            "--maljan" => maljan = Some(val()?.into()),
            "--out" => o.out = val()?.into(),
            "--jobs" => o.jobs = val()?.parse()?,
            "--reports" => o.reports = val()?.into(),
            "--reuse" => o.reuse = true,
            "--only" => o.only = Some(val()?),
            "--capa" => o.capa = val()?.parse()?,
            _ => bail!("unknown argument {a} (see the file's header for the usage)"),
        }
    }
    o.manifest = manifest.context(
        "no manifest: set MALJAN_CORPUS (eval \"$(scripts/peers.sh)\") or pass --manifest",
    )?;
    o.maljan = maljan.context("no maljan binary")?;
    if !o.maljan.is_file() {
        bail!(
            "{} is not built: cargo build -p maljan (or set MALJAN_BIN)",
            o.maljan.display()
        );
    }
    Ok(o)
}

fn read_manifest(path: &Path) -> anyhow::Result<Vec<Entry>> {
    let root = path.parent().unwrap_or(Path::new("."));
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("manifest line {}", i + 1))?;
        let s = |k: &str| {
            v[k].as_str()
                .map(str::to_owned)
                .with_context(|| format!("line {}: no {k}", i + 1))
        };
        let rel = s("path")?;
        out.push(Entry {
            abs: root.join(&rel),
            path: rel,
            label: s("label")?,
            corpus: s("corpus")?,
            source: s("source")?,
            kind: s("kind")?,
            container: s("container")?,
            carries: v["carries"].as_str().map(str::to_owned),
            packed: v["packed"].as_bool().unwrap_or(false),
            size: v["size"].as_u64().unwrap_or(0),
            sha256: s("sha256")?,
        });
    }
    Ok(out)
}

/// The report file of one entry: named by the manifest path, so --reuse finds it again.
fn report_path(reports: &Path, e: &Entry) -> PathBuf {
    reports.join(format!("{}.json", e.path.replace('/', "__")))
}

fn run_one(o: &Options, e: &Entry, home: &Path) -> Outcome {
    let report = report_path(&o.reports, e);
    let started = Instant::now();
    let mut error = None;
    if !(o.reuse && report.is_file()) {
        let _ = std::fs::remove_file(&report);
        match run_analyze(&o.maljan, &e.abs, &report, home) {
            Ok(()) => {}
            Err(err) => error = Some(format!("{err:#}")),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let parsed = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    match parsed {
        Some(v) => outcome_from_report(e.clone(), &v, seconds, error),
        None => Outcome {
            entry: e.clone(),
            verdict: "error".into(),
            basis: false,
            facts: vec![],
            accusing: vec![],
            claims: vec![],
            summary: String::new(),
            status: "no report".into(),
            iocs_all: 0,
            iocs_scored: 0,
            techniques: BTreeSet::new(),
            seconds,
            error: error.or_else(|| Some("no report written".into())),
        },
    }
}

/// PATH with the directory of the corpus's upx (MALJAN_UPX, which scripts/corpus.sh exports) in
/// front, so the analysis server that `maljan analyze` starts (it passes PATH on, not MALJAN_UPX)
/// can unpack; None when MALJAN_UPX is not set.
fn upx_path() -> Option<std::ffi::OsString> {
    let upx = PathBuf::from(std::env::var_os("MALJAN_UPX")?);
    let dir = upx.parent()?.to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest))).ok()
}

/// One `maljan analyze` with a 15-minute limit (a 50 MiB random file in a debug build is slow).
fn run_analyze(maljan: &Path, sample: &Path, report: &Path, home: &Path) -> anyhow::Result<()> {
    let mut cmd = Command::new(maljan);
    cmd.args(["analyze", "--no-agent", "--format", "json", "--report"])
        .arg(report)
        .arg(sample)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MALJAN_LLM_") {
            cmd.env_remove(k);
        }
    }
    if let Some(path) = upx_path() {
        cmd.env("PATH", path);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("spawn {}", maljan.display()))?;
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if let Some(status) = child.try_wait()? {
            if report.is_file() {
                return Ok(());
            }
            let mut err = String::new();
            if let Some(mut s) = child.stderr.take() {
                use std::io::Read;
                let _ = s.read_to_string(&mut err);
            }
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            bail!("exit {status}: {last}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("timed out after 900 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads the verdict, its facts and claims, the IOC counts and the ATT&CK techniques from a
/// report (and from its children's reports, which carry their own steps).
pub fn outcome_from_report(
    entry: Entry,
    v: &Value,
    seconds: f64,
    error: Option<String>,
) -> Outcome {
    let verdict = &v["verdict"];
    let word = verdict["verdict"].as_str().unwrap_or("unknown").to_owned();
    let facts_v = verdict["facts"].as_array().cloned().unwrap_or_default();
    let basis = facts_v.iter().any(|f| f["leaning"] == "benign");
    let accusing = facts_v
        .iter()
        .filter(|f| f["leaning"] == "malicious")
        .filter_map(|f| f["id"].as_str().map(str::to_owned))
        .collect();
    let mut facts: Vec<(u64, String)> = facts_v
        .iter()
        .map(|f| {
            let w = f["weight"].as_u64().unwrap_or(0);
            let strong = if f["strong"].as_bool().unwrap_or(false) {
                ", strong"
            } else {
                ""
            };
            let child = f["child"]
                .as_str()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default();
            let obs = f["observations"]
                .as_array()
                .and_then(|o| o.first())
                .and_then(Value::as_str)
                .map(|o| format!(": {o}"))
                .unwrap_or_default();
            let leaning = f["leaning"].as_str().unwrap_or("?");
            let id = f["id"].as_str().unwrap_or("?");
            (w, format!("{id} ({leaning} {w}{strong}){child}{obs}"))
        })
        .collect();
    facts.sort_by_key(|f| std::cmp::Reverse(f.0));
    let claims = verdict["claims"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let (mut iocs_all, mut iocs_scored, mut techniques) = (0, 0, BTreeSet::new());
    steps_of(v, &mut iocs_all, &mut iocs_scored, &mut techniques);
    Outcome {
        entry,
        verdict: word,
        basis,
        facts: facts.into_iter().map(|f| f.1).collect(),
        accusing,
        claims,
        summary: verdict["summary"].as_str().unwrap_or("").to_owned(),
        status: v["status"].as_str().unwrap_or("?").to_owned(),
        iocs_all,
        iocs_scored,
        techniques,
        seconds,
        error,
    }
}

/// Walks a report's steps and its children's: sums iocs_from_file's `counts` (every indicator) and
/// the indicators it scores (`scored: true`, else a confidence of `high`/≥ 0.7 where the tool
/// gives one, else every indicator), and collects code_capabilities' techniques.
fn steps_of(v: &Value, all: &mut u64, scored: &mut u64, techniques: &mut BTreeSet<String>) {
    for step in v["steps"].as_array().into_iter().flatten() {
        let r = &step["result"];
        match step["tool"].as_str() {
            Some("iocs_from_file") => {
                let total: u64 = r["counts"]
                    .as_object()
                    .map_or(0, |c| c.values().filter_map(Value::as_u64).sum());
                *all += total;
                *scored += match r["indicators"].as_array() {
                    Some(list) if list.iter().any(|i| i.get("scored").is_some()) => {
                        list.iter()
                            .filter(|i| i["scored"].as_bool() == Some(true))
                            .count() as u64
                    }
                    Some(list) if list.iter().any(|i| i.get("confidence").is_some()) => {
                        list.iter().filter(|i| confident(&i["confidence"])).count() as u64
                    }
                    _ => total,
                };
            }
            Some("code_capabilities") => {
                for t in r["techniques"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    techniques.insert(t.to_owned());
                }
                for c in r["capabilities"].as_array().into_iter().flatten() {
                    if let Some(t) = c["technique"].as_str() {
                        techniques.insert(t.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    for child in v["children"].as_array().into_iter().flatten() {
        let report = if child["report"].is_object() {
            &child["report"]
        } else {
            child
        };
        steps_of(report, all, scored, techniques);
    }
}

fn confident(c: &Value) -> bool {
    match c {
        Value::String(s) => s == "high",
        Value::Number(n) => n.as_f64().unwrap_or(0.0) >= 0.7,
        _ => false,
    }
}

fn git_head(dir: &Path) -> String {
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let head = run(&["log", "-1", "--format=%h %cI %s"]);
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]);
    if dirty.is_empty() {
        head
    } else {
        format!("{head} (with uncommitted changes in the checkout)")
    }
}

fn main() -> anyhow::Result<()> {
    let o = options()?;
    let mut entries = read_manifest(&o.manifest)?;
    if let Some(only) = &o.only {
        entries.retain(|e| e.path.contains(only.as_str()));
    }
    std::fs::create_dir_all(&o.reports)?;
    let homes = tempfile_dir("maljan-verdicts-home")?;
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(entries.len()));
    std::thread::scope(|s| {
        for w in 0..o.jobs.max(1) {
            let (o, entries, next, done, homes) = (&o, &entries, &next, &done, &homes);
            s.spawn(move || {
                let home = homes.join(format!("w{w}"));
                let _ = std::fs::create_dir_all(&home);
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(e) = entries.get(i) else { break };
                    let out = run_one(o, e, &home);
                    eprintln!(
                        "[{}/{}] {:10} {:6.1}s {}",
                        i + 1,
                        entries.len(),
                        out.verdict,
                        out.seconds,
                        e.path
                    );
                    done.lock().unwrap_or_else(|p| p.into_inner()).push(out);
                }
            });
        }
    });
    let wall = started.elapsed();
    let _ = std::fs::remove_dir_all(&homes);
    let mut outcomes = done.into_inner().unwrap_or_else(|p| p.into_inner());
    outcomes.sort_by(|a, b| a.entry.path.cmp(&b.entry.path));
    let capa = if o.capa > 0 {
        Some(capa::compare(&outcomes, o.capa, &o.reports))
    } else {
        None
    };
    let repo = std::env::current_dir()?;
    let md = render::markdown(&render::Run {
        outcomes: &outcomes,
        wall,
        jobs: o.jobs,
        commit: git_head(&repo),
        maljan: &o.maljan,
        manifest: &o.manifest,
        reused: o.reuse,
        capa,
    });
    if let Some(dir) = o.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&o.out, md)?;
    eprintln!(
        "wrote {} ({} files, {:.0} s)",
        o.out.display(),
        outcomes.len(),
        wall.as_secs_f64()
    );
    Ok(())
}

/// A fresh private directory under the temp dir (removed at the end of the run).
fn tempfile_dir(prefix: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Counts per verdict word, in the report's order.
pub fn tally<'a>(it: impl Iterator<Item = &'a Outcome>) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for o in it {
        let k = match o.verdict.as_str() {
            "malicious" => "malicious",
            "suspicious" => "suspicious",
            "benign" => "benign",
            "unknown" => "unknown",
            _ => "error",
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}
