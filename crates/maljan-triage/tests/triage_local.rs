//! The triage job against the real analysis server over stdio, on a corpus written by the tests.

mod common;

use common::*;
use maljan_client::{BreakerConfig, JobSpec};
use maljan_triage::{Report, Status, StepStatus, TriageOptions, render, run_triage};

async fn triage(
    dir: &std::path::Path,
    sample: &std::path::Path,
) -> (Report, Vec<maljan_client::LedgerEntry>) {
    let rt = runtime(
        dir,
        vec![("analysis", stdio_analysis(dir))],
        BreakerConfig::default(),
    );
    let job = rt.new_job(JobSpec::for_sample(sample)).unwrap();
    let report = run_triage(&job, &TriageOptions::default()).await;
    let calls = rt.ledger().calls(Some(job.id()), 100).unwrap();
    drop(job);
    rt.shutdown().await;
    (report, calls)
}

#[tokio::test]
async fn a_pe_runs_every_default_step_in_order_with_evidence_in_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path());
    let bytes = std::fs::read(&corpus["sample.exe"]).unwrap();
    let (r, calls) = triage(dir.path(), &corpus["sample.exe"]).await;

    let tools: Vec<&str> = r.steps.iter().map(|s| s.tool.as_str()).collect();
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
    assert_eq!(r.sample.kind.as_deref(), Some("pe"));
    assert_eq!(r.sample.size, bytes.len() as u64);
    assert_eq!(r.sample.sha256, sha256(&bytes));
    assert_eq!(r.sample.hashes.get("sha256"), Some(&sha256(&bytes)));
    assert_eq!(r.sample.hashes.get("md5").map(String::len), Some(32));
    for tool in [
        "identify_file",
        "hashes",
        "pe_info",
        "strings",
        "iocs_from_file",
    ] {
        assert_eq!(
            r.step(tool).unwrap().status,
            StepStatus::Ok,
            "{tool}: {:?}",
            r.step(tool).unwrap().error
        );
    }
    assert!(
        text_of(&r.step("pe_info").unwrap().result).contains(".text"),
        "pe_info names the section"
    );
    assert!(text_of(&r.step("strings").unwrap().result).contains("evil-c2.example.com"));
    let iocs = text_of(&r.step("iocs_from_file").unwrap().result);
    assert!(
        iocs.contains("evil-c2.example.com") && iocs.contains(IPV4),
        "{iocs}"
    );

    // yara_scan: exactly what the manifest says — skipped with its reason, or run.
    let yara = r.step("yara_scan").unwrap();
    match yara.status {
        StepStatus::Skipped => {
            assert!(
                yara.evidence.is_empty(),
                "an unavailable tool is not called"
            );
            let u = r
                .unavailable
                .iter()
                .find(|u| u.tool == "yara_scan")
                .expect("listed as unavailable");
            assert!(!u.reason.is_empty() && yara.reason.as_deref().unwrap().contains(&u.reason));
        }
        StepStatus::Ok => assert!(r.unavailable.iter().all(|u| u.tool != "yara_scan")),
        other => panic!("yara_scan: {other:?} {:?}", yara.error),
    }

    // Evidence: ev_0001… in call order, one ledger entry each, nothing else in the ledger.
    let ev: Vec<&str> = r.evidence();
    let expected: Vec<String> = (1..=ev.len()).map(|i| format!("ev_{i:04}")).collect();
    assert_eq!(ev, expected.iter().map(String::as_str).collect::<Vec<_>>());
    let mut ledger_ids: Vec<&str> = calls.iter().map(|c| c.ev_id.as_str()).collect();
    ledger_ids.sort();
    assert_eq!(ledger_ids, ev);
    assert!(calls.iter().all(|c| c.ok));

    assert_eq!(
        r.status,
        Status::Complete,
        "failures {:?} degradations {:?}",
        r.failures,
        r.degradations
    );
    assert!(r.failures.is_empty() && r.degradations.is_empty());
    assert_eq!(r.servers.len(), 1);
    assert_eq!(
        (r.servers[0].via.as_deref(), r.servers[0].steps),
        (Some("stdio"), ev.len())
    );
    assert!(r.servers[0].manifest_declared);
}

#[tokio::test]
async fn the_format_tool_follows_the_type_and_text_gets_none() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path());

    let (elf, _) = triage(dir.path(), &corpus["sample.elf"]).await;
    assert_eq!(elf.sample.kind.as_deref(), Some("elf"));
    let step = &elf.steps[2];
    assert_eq!((step.tool.as_str(), step.evidence.len()), ("elf_info", 1));
    assert_eq!(step.status, StepStatus::Ok, "{:?}", step.error);
    assert!(
        text_of(&step.result).to_lowercase().contains("x86"),
        "{}",
        text_of(&step.result)
    );

    let (txt, _) = triage(dir.path(), &corpus["notes.txt"]).await;
    assert_eq!(txt.sample.kind.as_deref(), Some("text"));
    let step = &txt.steps[2];
    assert_eq!(step.status, StepStatus::NotApplicable);
    assert!(step.evidence.is_empty() && step.reason.as_deref().unwrap().contains("text"));
    let iocs = text_of(&txt.step("iocs_from_file").unwrap().result);
    assert!(iocs.contains(IPV4), "{iocs}");
    assert!(
        iocs.contains("backup.evil-c2.example.net"),
        "defanged domain refanged: {iocs}"
    );
    assert_ne!(txt.status, Status::Failed);
}

#[tokio::test]
async fn the_three_renderings_say_the_same_things() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path());
    let (r, _) = triage(dir.path(), &corpus["sample.exe"]).await;

    let md = render::markdown(&r);
    assert!(md.starts_with("# Triage report: sample.exe"));
    assert!(md.contains(&r.sample.sha256));
    // Read as CommonMark, each step is a heading holding its evidence anchor.
    let sections = headings(&md);
    let pe = sections
        .iter()
        .find(|(text, _)| text == "3. Format structure (pe_info)")
        .unwrap_or_else(|| panic!("no pe_info heading: {sections:?}"));
    assert_eq!(pe.1, format!("<a id=\"{}\"></a>", r.steps[2].evidence[0]));
    // Each evidence id has one anchor, at its step's section, where the verdict's claims link.
    for ev in r.evidence() {
        assert_eq!(
            md.matches(&format!("<a id=\"{ev}\"></a>")).count(),
            1,
            "{ev} has one anchor, at its step's section"
        );
    }
    // Triage alone gives no verdict (the agent crate adds it); where one is, its links resolve.
    for ev in r
        .verdict
        .iter()
        .flat_map(|v| &v.claims)
        .flat_map(|c| &c.evidence)
    {
        assert!(
            md.contains(&format!("(#{ev})")),
            "the claim's {ev} is a link"
        );
        assert!(
            r.evidence().contains(&ev.as_str()),
            "{ev} is this job's evidence"
        );
    }

    let json = render::json(&r);
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema"], "maljan.triage.report/v1");
    assert_eq!(v["steps"][0]["evidence"][0], "ev_0001");

    let html = render::html(&r);
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<style>"));
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href=\"http"));
    assert!(html.contains(&r.sample.sha256) && html.contains("id=\"step-6\""));
    // Hostile text from the sample is escaped, never markup.
    let mut evil = r.clone();
    evil.sample.name = "<img src=x onerror=alert(1)>.exe".into();
    assert!(!render::html(&evil).contains("<img"));
    let md = render::markdown(&evil);
    let html_in_md: Vec<String> =
        pulldown_cmark::Parser::new_ext(&md, pulldown_cmark::Options::ENABLE_TABLES)
            .filter_map(|e| match e {
                pulldown_cmark::Event::Html(h) | pulldown_cmark::Event::InlineHtml(h) => {
                    Some(h.to_string())
                }
                _ => None,
            })
            .collect();
    assert!(
        html_in_md
            .iter()
            .all(|h| h.starts_with("<a id=\"ev_") || h == "</a>"),
        "{html_in_md:?}"
    );
    assert_eq!(
        headings(&md)[0].0,
        "Triage report: <img src=x onerror=alert(1)>.exe"
    );
}

/// Each heading of a Markdown document as a CommonMark reader sees it: its text, and the raw
/// HTML inside it (the anchors).
fn headings(md: &str) -> Vec<(String, String)> {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for e in Parser::new(md) {
        match e {
            Event::Start(Tag::Heading { .. }) => current = Some(Default::default()),
            Event::End(TagEnd::Heading(_)) => out.extend(current.take()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(c) = current.as_mut() {
                    c.0.push_str(&t)
                }
            }
            Event::InlineHtml(h) => {
                if let Some(c) = current.as_mut() {
                    c.1.push_str(&h)
                }
            }
            _ => {}
        }
    }
    out
}
