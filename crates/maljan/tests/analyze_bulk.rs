//! `maljan analyze DIR FILE --recursive --jobs N --index FILE` on a folder of more than 200 real
//! samples (programs from /usr/bin, text files) with duplicates: every unique sample (by sha256)
//! is one job and one report, a duplicate is listed with its first's report and never analysed
//! again, the tool-server processes are started once for the whole run and shared by the jobs,
//! and the index is written in each of its formats (md, json, csv, html).

mod common;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

use common::{maljan, run};
use sha2::{Digest, Sha256};

fn analyze(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    run(
        Command::new(maljan())
            .arg("analyze")
            .args(["--no-agent", "--format", "json"])
            .args(args)
            .current_dir(cwd)
            .env("MALJAN_HOME", home)
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_LLM_MODEL")
            .env("MALJAN_LOG", "warn")
            .stdin(Stdio::null()),
        Duration::from_secs(900),
    )
}

fn sha256_of(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// Up to `n` regular files of 1–100 KB from /usr/bin, in name order (real third-party programs
/// and scripts).
fn programs(n: usize) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir("/usr/bin")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_type().is_ok_and(|t| t.is_file())
                && e.metadata()
                    .is_ok_and(|m| (1024..=100 * 1024).contains(&m.len()))
        })
        .map(|e| e.path())
        .collect();
    all.sort();
    all.truncate(n);
    all
}

/// A folder of samples: `programs` copied, 30 text files, and in `dups/` 25 copies of earlier
/// files under other names. Returns the folder.
fn corpus(root: &Path) -> PathBuf {
    let dir = root.join("samples");
    std::fs::create_dir_all(dir.join("dups")).unwrap();
    let progs = programs(180);
    assert!(
        progs.len() >= 150,
        "too few programs in /usr/bin: {}",
        progs.len()
    );
    for p in &progs {
        std::fs::copy(p, dir.join(p.file_name().unwrap())).unwrap();
    }
    for i in 0..30 {
        std::fs::write(
            dir.join(format!("note-{i:02}.txt")),
            format!("note {i}: the meeting moved to room {}\n", 100 + i).repeat(i + 1),
        )
        .unwrap();
    }
    for (i, p) in progs.iter().step_by(9).take(20).enumerate() {
        std::fs::copy(p, dir.join("dups").join(format!("copy-{i}.bin"))).unwrap();
    }
    for i in 0..5 {
        std::fs::copy(
            dir.join(format!("note-{i:02}.txt")),
            dir.join("dups").join(format!("note-copy-{i}.txt")),
        )
        .unwrap();
    }
    dir
}

fn jobs_recorded(home: &Path) -> usize {
    let out = run(
        Command::new(maljan())
            .args(["jobs", "list", "--json", "--limit", "100000"])
            .env("MALJAN_HOME", home)
            .env_remove("MALJAN_CONFIG"),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().len()
}

#[test]
fn two_hundred_samples_with_duplicates_are_each_analysed_once_with_shared_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = corpus(tmp.path());
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    // The built-in analysis server and a stdio fixture that logs each start and each call.
    let log = tmp.path().join("echo.log");
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.analysis]\ncommand = {:?}\nargs = [\"serve\", \"analysis\"]\n\n\
             [servers.echo]\ncommand = {:?}\nenv = {{ FIXTURE_LOG = {:?} }}\n",
            maljan(),
            maljan_testkit::bin_path("fixture-echo"),
            log
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("triage.toml"),
        "[[extra_steps]]\nserver = \"echo\"\ntool = \"work\"\nargs = {}\n",
    )
    .unwrap();
    // One file given again beside its folder: a duplicate too.
    let again = dir.join("note-07.txt");
    let index = out_dir.join("index.json");
    let out = analyze(
        &home,
        tmp.path(),
        &[
            dir.to_str().unwrap(),
            again.to_str().unwrap(),
            "--recursive",
            "--jobs",
            "3",
            "--config",
            config.to_str().unwrap(),
            "--report",
            out_dir.to_str().unwrap(),
            "--index",
            index.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        index.display().to_string()
    );

    // What the test expects: every file found, in order, and its first occurrence by sha256.
    let mut given: Vec<PathBuf> = Vec::new();
    let mut top: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    top.sort();
    let mut dups: Vec<PathBuf> = std::fs::read_dir(dir.join("dups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dups.sort();
    given.extend(top);
    given.extend(dups);
    given.push(again.clone());
    assert!(given.len() >= 200, "{} samples", given.len());
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, p) in given.iter().enumerate() {
        first.entry(sha256_of(p)).or_insert(i);
    }
    let unique = first.len();
    assert!(given.len() - unique >= 25, "too few duplicates");

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    let rows = v["samples"].as_array().unwrap();
    assert_eq!(rows.len(), given.len(), "one row per sample");
    let mut reports: HashSet<String> = HashSet::new();
    for (i, (row, path)) in rows.iter().zip(&given).enumerate() {
        assert_eq!(row["sample"], path.to_str().unwrap(), "row {i} in order");
        let sha = sha256_of(path);
        assert_eq!(row["sha256"], sha.as_str(), "{row}");
        assert_eq!(row["size"], std::fs::metadata(path).unwrap().len());
        let report = row["report"].as_str().unwrap_or_else(|| panic!("{row}"));
        let j = first[&sha];
        if j == i {
            assert!(
                matches!(row["status"].as_str(), Some("complete" | "degraded")),
                "{row}"
            );
            assert!(row.get("duplicate_of").is_none(), "{row}");
            assert!(reports.insert(report.to_string()), "a report shared: {row}");
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
            assert_eq!(r["sample"]["sha256"], sha.as_str());
            assert_eq!(r["verdict"]["verdict"], row["verdict"]);
        } else {
            assert_eq!(row["status"], "duplicate", "{row}");
            assert_eq!(row["duplicate_of"], given[j].to_str().unwrap());
            assert_eq!(row["report"], rows[j]["report"]);
            assert_eq!(row["verdict"], rows[j]["verdict"]);
        }
        let kind = row["type"].as_str().unwrap_or_default();
        if path.extension().is_some_and(|e| e == "txt") {
            assert!(kind.contains("text"), "{row}");
        }
        assert!(row["verdict"].is_string(), "{row}");
    }
    // One report per unique sample, and nothing else beside them.
    let written: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("maljan-report-"))
        .collect();
    assert_eq!(written.len(), unique, "one report per unique sample");
    assert_eq!(reports.len(), unique);
    assert!(
        rows.iter()
            .any(|r| r["type"].as_str().is_some_and(|t| t.contains("ELF")))
    );
    // Each unique sample is one job, duplicates none.
    assert_eq!(jobs_recorded(&home), unique);
    // One server process for the whole run, called once per job.
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        log.lines().filter(|l| l.starts_with("start")).count(),
        1,
        "{log}"
    );
    assert_eq!(log.lines().filter(|l| *l == "call work").count(), unique);
    assert!(
        err.contains(&format!("{} samples, {unique} analysed", given.len())),
        "{err}"
    );
}

#[test]
fn the_index_is_written_in_each_format_beside_the_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = tmp.path().join("few");
    std::fs::create_dir(&dir).unwrap();
    let mut seen = HashSet::new();
    for p in programs(60)
        .into_iter()
        .filter(|p| seen.insert(sha256_of(p)))
        .take(4)
    {
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.join("a.txt"), "a|b [x](javascript:alert(1))\n").unwrap();
    std::fs::copy(dir.join("a.txt"), dir.join("zz-copy.txt")).unwrap();
    let n = 6;
    for ext in ["md", "csv", "html", "json"] {
        let idx_dir = tmp.path().join(format!("idx-{ext}"));
        std::fs::create_dir(&idx_dir).unwrap();
        let index = idx_dir.join(format!("index.{ext}"));
        let out = analyze(
            &home,
            tmp.path(),
            &[dir.to_str().unwrap(), "--index", index.to_str().unwrap()],
        );
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{}",
            common::text(&out)
        );
        let text = std::fs::read_to_string(&index).unwrap();
        // The reports go beside the index when --report is not given.
        let reports = std::fs::read_dir(&idx_dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("maljan-report-")
            })
            .count();
        assert_eq!(reports, n - 1, "{ext}");
        match ext {
            "md" => {
                let table: Vec<&str> = text.lines().filter(|l| l.starts_with("| ")).collect();
                assert_eq!(table.len(), n + 1, "{text}");
                assert!(table[0].starts_with("| Sample | Type | Size | SHA-256 | Verdict"));
                assert!(text.contains("duplicate of"), "{text}");
                assert!(!text.contains("](javascript"), "{text}");
            }
            "csv" => {
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines.len(), n + 1, "{text}");
                assert!(
                    lines[0].starts_with("sample,type,size,sha256,verdict,status,top_facts,report")
                );
                assert_eq!(
                    lines.iter().filter(|l| l.contains(",duplicate,")).count(),
                    1
                );
            }
            "html" => {
                assert!(text.starts_with("<!doctype html>"));
                assert_eq!(text.matches("<tr><td>").count(), n, "{text}");
                assert_eq!(text.matches("<a href=\"file://").count(), n, "{text}");
                assert!(!text.contains("<a href=\"javascript"));
            }
            _ => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(v["schema"], "maljan.analyze.index/v1");
                assert_eq!(v["samples"].as_array().unwrap().len(), n);
                let copy = v["samples"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["sample"].as_str().unwrap().ends_with("zz-copy.txt"))
                    .unwrap();
                assert_eq!(copy["status"], "duplicate");
                assert!(copy["duplicate_of"].as_str().unwrap().ends_with("a.txt"));
            }
        }
    }
}
