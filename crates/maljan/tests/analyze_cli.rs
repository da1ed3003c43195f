//! `maljan analyze` end to end, as a user runs it: no config at all (offline, built-in servers),
//! a remote analysis server over streamable HTTP from a TOML config, and a configured server that
//! hangs (exit status 3, the timeout once with its remedy, the rest whole).

mod common;

use std::{
    path::Path,
    process::{Command, Output, Stdio},
};

use common::{Running, free_port, maljan, spawn, wait_answering};
use maljan_triage::corpus;

fn analyze(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(maljan())
        .arg("analyze")
        .args(args)
        .current_dir(cwd)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap()
}

/// `maljan analyze SAMPLE --config CONFIG --report REPORT` with a fresh home under `dir`, which
/// must exit with `code`.
fn analyze_with_config(
    dir: &Path,
    sample: &Path,
    config: &Path,
    report: &Path,
    code: i32,
) -> Output {
    let out = analyze(
        &dir.join("home"),
        dir,
        &[
            sample.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn report_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn first_run_with_no_config_writes_a_useful_report_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, cwd, samples) = (
        tmp.path().join("home"),
        tmp.path().join("work"),
        tmp.path().join("samples"),
    );
    for d in [&cwd, &samples] {
        std::fs::create_dir_all(d).unwrap();
    }
    // The sample lies outside the working directory: the built-in server must still read it.
    let files = corpus::write_corpus(&samples);
    let out = analyze(
        &home,
        &cwd,
        &[
            files["sample.exe"].to_str().unwrap(),
            "--format",
            "json",
            "--report",
            "r.json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "r.json",
        "the report path is printed"
    );
    let r = report_json(&cwd.join("r.json"));
    assert_eq!(r["schema"], "maljan.triage.report/v1");
    assert_eq!(r["status"], "complete");
    assert_eq!(r["sample"]["kind"], "pe");
    assert_eq!(
        r["sample"]["hashes"]["sha256"], r["sample"]["sha256"],
        "server and runtime hashed the same bytes"
    );
    let tools: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "identify_file",
            "hashes",
            "pe_info",
            "detect_packer",
            "code_capabilities",
            "strings",
            "iocs_from_file",
            "yara_scan"
        ]
    );
    assert!(r["steps"][6]["result"].to_string().contains(corpus::IPV4));

    // Without --report: a default name in the working directory, Markdown, printed at the end.
    let out = analyze(&home, &cwd, &[files["notes.txt"].to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        printed.starts_with("maljan-report-notes.txt-") && printed.ends_with(".md"),
        "{printed}"
    );
    let md = std::fs::read_to_string(cwd.join(&printed)).unwrap();
    assert!(md.contains("# Triage report: notes.txt") && md.contains(corpus::IPV4));
}

#[test]
fn a_remote_analysis_server_from_a_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let port = free_port();
    let _server: Running = spawn(
        Command::new(maljan())
            .args([
                "serve",
                "analysis",
                "--http",
                &format!("127.0.0.1:{port}"),
                "--root",
            ])
            .arg(tmp.path())
            .env("MALJAN_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_answering(port);
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[servers.lab]\ntransport = \"streamable-http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
    )
    .unwrap();
    let report = tmp.path().join("out.html");
    analyze_with_config(tmp.path(), &files["sample.exe"], &config, &report, 0);
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "format follows the report's extension"
    );
    assert!(html.contains("<b>lab</b>") && html.contains("streamable-http"));
    assert!(html.contains("Format structure (pe_info)") && html.contains(corpus::IPV4));
}

#[test]
fn a_hanging_server_degrades_the_run_exit_3_and_the_timeout_shows_once() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let hang = maljan_testkit::bin_path("fixture-hang");
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[core.mcp.breaker]\ntimeout_margin_seconds = 0.3\n\n\
             [servers.analysis]\ncommand = {:?}\nargs = [\"serve\", \"analysis\", \"--root\", {:?}]\n\n\
             [servers.stuck]\ncommand = {:?}\nenv = {{ FIXTURE_TIMEOUT_S = \"1\" }}\n",
            maljan(),
            tmp.path(),
            hang
        ),
    )
    .unwrap();
    // The extra steps live in triage.toml beside the config file.
    std::fs::write(
        tmp.path().join("triage.toml"),
        "[[extra_steps]]\nserver = \"stuck\"\ntool = \"work\"\nargs = {}\n\n\
         [[extra_steps]]\nserver = \"stuck\"\ntool = \"work\"\ntitle = \"work again\"\nargs = {}\n",
    )
    .unwrap();
    let report = tmp.path().join("r.md");
    let out = analyze_with_config(tmp.path(), &files["sample.exe"], &config, &report, 3);
    let md = std::fs::read_to_string(&report).unwrap();
    // The header's failures table lists the timeout once (each failed step also names its code).
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("`timeout`"))
        .collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(
        rows[0].starts_with("| 2× | `timeout` | work on stuck |"),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains("raise the tool's timeout")
            || rows[0]
                .split('|')
                .nth(4)
                .is_some_and(|r| !r.trim().is_empty())
    );
    assert!(md.contains("[DEGRADED RUN]"));
    // Each step is an ATX heading: `## `, its evidence anchors, its number and its title as
    // Markdown text (punctuation escaped).
    let md_text = maljan_triage::render::escape::md_text;
    for (n, title) in [
        (1, "File type"),
        (3, "Format structure (pe_info)"),
        (7, "Indicators of compromise"),
        (10, "work again"),
    ] {
        let tail = format!("{n}. {}", md_text(title));
        let heading = md
            .lines()
            .find(|l| l.starts_with("## ") && l.ends_with(&tail))
            .unwrap_or_else(|| panic!("{tail} missing"));
        let anchors = &heading[3..heading.len() - tail.len()];
        assert!(
            anchors.is_empty() || (anchors.starts_with("<a id=\"ev_") && anchors.ends_with("</a>")),
            "{heading}"
        );
    }
    assert!(md.contains(corpus::IPV4), "the indicators section is whole");
    assert!(String::from_utf8_lossy(&out.stderr).contains("2× timeout work"));
}

#[test]
fn help_documents_the_exit_statuses_and_bad_servers_are_refused() {
    let out = Command::new(maljan())
        .args(["analyze", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for line in ["0  complete", "3  degraded", "4  failed"] {
        assert!(help.contains(line), "{help}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let out = analyze(
        &tmp.path().join("home"),
        tmp.path(),
        &[files["notes.txt"].to_str().unwrap(), "--servers", "nope"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no server named 'nope'"));
    let out = analyze(&tmp.path().join("home"), tmp.path(), &["/no/such/sample"]);
    assert_eq!(out.status.code(), Some(1));
}
