//! The job-level cases: an analysis server on "another host" over streamable HTTP, and a
//! configured server that hangs while everything else answers.

mod common;

use std::process::{Child, Command, Stdio};

use common::*;
use maljan_client::{BreakerConfig, JobSpec, ServerConfig};
use maljan_triage::{Plan, Status, StepStatus, TriageOptions, render, run_triage};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_remote_analysis_server_over_http_does_the_whole_triage() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path());
    let port = maljan_testkit::free_port();
    let _server = Killed(
        Command::new(maljan())
            .args([
                "serve",
                "analysis",
                "--http",
                &format!("127.0.0.1:{port}"),
                "--root",
            ])
            .arg(dir.path())
            .env("MALJAN_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    maljan_testkit::wait_answering(&format!("127.0.0.1:{port}"), "/mcp");

    // The server is called "remote": the default steps find their tools on it by name.
    let rt = runtime(
        dir.path(),
        vec![(
            "remote",
            http_server(format!("http://127.0.0.1:{port}/mcp")),
        )],
        BreakerConfig::default(),
    );
    let job = rt
        .new_job(JobSpec::for_sample(&corpus["sample.exe"]))
        .unwrap();
    let r = run_triage(&job, &TriageOptions::default()).await;
    rt.shutdown().await;

    let s = &r.servers[0];
    assert_eq!(
        (s.name.as_str(), s.transport.as_str(), s.via.as_deref()),
        ("remote", "streamable-http", Some("streamable-http"))
    );
    assert!(s.error.is_none() && s.manifest_declared && s.handover.is_some());
    for tool in [
        "identify_file",
        "hashes",
        "pe_info",
        "strings",
        "iocs_from_file",
    ] {
        let step = r.step(tool).unwrap();
        assert_eq!(
            (step.status, step.server.as_deref()),
            (StepStatus::Ok, Some("remote")),
            "{tool}: {:?}",
            step.error
        );
    }
    let bytes = std::fs::read(&corpus["sample.exe"]).unwrap();
    assert_eq!(
        r.sample.hashes.get("sha256"),
        Some(&sha256(&bytes)),
        "the remote server hashed the same bytes"
    );
    assert!(text_of(&r.step("iocs_from_file").unwrap().result).contains(IPV4));
    assert_eq!(
        r.status,
        Status::Complete,
        "{:?} {:?}",
        r.failures,
        r.degradations
    );
}

fn hang_server(log: &std::path::Path) -> ServerConfig {
    ServerConfig {
        command: maljan_testkit::package_bin("maljan-testkit", "fixture-hang")
            .to_string_lossy()
            .into_owned(),
        // The manifest gives `work` a 1 s timeout; the platform adds the margin below.
        env: [
            ("FIXTURE_TIMEOUT_S".to_string(), "1".to_string()),
            (
                "FIXTURE_LOG".to_string(),
                log.to_string_lossy().into_owned(),
            ),
        ]
        .into(),
        enabled: true,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_hanging_server_is_one_failure_line_with_its_remedy_and_the_rest_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path());
    let log = dir.path().join("hang.log");
    let breaker = BreakerConfig {
        timeout_margin_seconds: 0.3,
        call_timeout_seconds: 5.0,
        ..Default::default()
    };
    let rt = runtime(
        dir.path(),
        vec![
            ("analysis", stdio_analysis(dir.path())),
            ("stuck", hang_server(&log)),
        ],
        breaker,
    );
    let plan = Plan::from_toml(
        "[[extra_steps]]\nserver = \"stuck\"\ntool = \"work\"\nargs = {}\n\n\
         [[extra_steps]]\nserver = \"stuck\"\ntool = \"work\"\ntitle = \"Second try\"\nargs = {}\n",
        "test",
    )
    .unwrap();
    let job = rt
        .new_job(JobSpec::for_sample(&corpus["sample.exe"]))
        .unwrap();
    let started = std::time::Instant::now();
    let r = run_triage(
        &job,
        &TriageOptions {
            plan,
            servers: None,
            ..Default::default()
        },
    )
    .await;
    let took = started.elapsed();
    rt.shutdown().await;

    assert!(
        took.as_secs_f64() < 15.0,
        "two 1.3 s timeouts, not a hang: {took:?}"
    );
    assert_eq!(r.status, Status::Degraded);
    // Both calls reached the server (proved from its side) and both timed out: one line, count 2.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("call work")).count(),
        2,
        "{calls}"
    );
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    let f = &r.failures[0];
    assert_eq!(
        (
            f.code.as_str(),
            f.tool.as_str(),
            f.server.as_deref(),
            f.count
        ),
        ("timeout", "work", Some("stuck"), 2)
    );
    assert!(!f.remediation.is_empty());
    let hung: Vec<_> = r.steps.iter().filter(|s| s.tool == "work").collect();
    assert_eq!(hung.len(), 2);
    assert_eq!(
        f.evidence,
        hung.iter()
            .flat_map(|s| s.evidence.clone())
            .collect::<Vec<_>>()
    );

    // Everything else is whole.
    for tool in [
        "identify_file",
        "hashes",
        "pe_info",
        "strings",
        "iocs_from_file",
    ] {
        assert_eq!(r.step(tool).unwrap().status, StepStatus::Ok, "{tool}");
    }
    assert!(text_of(&r.step("iocs_from_file").unwrap().result).contains("evil-c2.example.com"));
    assert_eq!(r.sample.kind.as_deref(), Some("pe"));

    // The Markdown header shows the timeout once, with its remedy and count.
    let md = render::markdown(&r);
    let rows: Vec<&str> = md.lines().filter(|l| l.contains("| `timeout` |")).collect();
    assert_eq!(rows.len(), 1, "{md}");
    // The remedy is in its cell as Markdown text (its punctuation escaped).
    assert!(
        rows[0].starts_with("| 2× ") && rows[0].contains(&render::escape::md_text(&f.remediation))
    );
    let html = render::html(&r);
    assert_eq!(html.matches("<td class=\"count\">2×</td>").count(), 1);
}

#[tokio::test]
async fn an_unreachable_server_fails_the_run_but_the_report_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path());
    let broken = ServerConfig {
        command: dir
            .path()
            .join("no-such-binary")
            .to_string_lossy()
            .into_owned(),
        enabled: true,
        ..Default::default()
    };
    let rt = runtime(
        dir.path(),
        vec![("analysis", broken)],
        BreakerConfig {
            connect_timeout_seconds: 5.0,
            ..Default::default()
        },
    );
    let job = rt
        .new_job(JobSpec::for_sample(&corpus["notes.txt"]))
        .unwrap();
    let r = run_triage(&job, &TriageOptions::default()).await;
    rt.shutdown().await;
    assert_eq!(r.status, Status::Failed);
    assert!(
        r.degradations
            .iter()
            .any(|d| d.contains("mcp server 'analysis' unavailable")),
        "{:?}",
        r.degradations
    );
    assert!(r.servers[0].error.is_some());
    assert!(
        r.steps
            .iter()
            .all(|s| s.evidence.is_empty() && s.status != StepStatus::Ok)
    );
    // The server being down is one failure line, counted once per step that needed it.
    let failed = r
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Failed)
        .count();
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    assert_eq!(
        (r.failures[0].tool.as_str(), r.failures[0].count),
        ("(connecting)", failed)
    );
    assert!(failed >= 5 && r.failures[0].evidence.is_empty());
    assert!(render::markdown(&r).contains("[FAILED RUN]"));
}
