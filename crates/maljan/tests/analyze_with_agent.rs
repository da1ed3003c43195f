//! `maljan analyze` with and without a model, as a user runs it: with no LLM it works offline as
//! before and the report carries the heuristic verdict (saying so in one line); with the scripted
//! model configured through the environment the analyst calls a tool and the report's verdict
//! cites real evidence; the API key is sent to the model and printed nowhere. `maljan agent
//! tools` prints the catalog the model gets.

mod common;

use std::{path::Path, process::Command};

use common::maljan;
use maljan_testkit::ScriptedModel;
use maljan_triage::corpus;
use serde_json::{Value, json};

fn analyze(home: &Path, sample: &Path, report: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(maljan());
    cmd.arg("analyze")
        .arg(sample)
        .arg("--report")
        .arg(report)
        .env("MALJAN_HOME", home)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LOG", "warn");
    for k in [
        "MALJAN_LLM_PROVIDER",
        "MALJAN_LLM_BASE_URL",
        "MALJAN_LLM_MODEL",
        "MALJAN_LLM_API_KEY",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), common::text(&out))
}

fn every_evidence_id(report: &Value) -> Vec<String> {
    let mut ids: Vec<String> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["evidence"].as_array().unwrap().clone())
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for t in report["agent"]["conversation"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(ev) = t["evidence"].as_str() {
            ids.push(ev.to_string());
        }
    }
    ids
}

#[test]
fn without_a_model_the_report_carries_the_heuristic_verdict_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let report = tmp.path().join("r.json");
    let (code, text) = analyze(&tmp.path().join("home"), &files["notes.txt"], &report, &[]);
    assert!(matches!(code, 0 | 3), "{text}");
    assert_eq!(
        text.matches("no model configured").count(),
        1,
        "one line says so: {text}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["verdict"]["source"], "heuristic");
    assert!(r["agent"].is_null());
    let ids = every_evidence_id(&r);
    for c in r["verdict"]["claims"].as_array().unwrap() {
        for ev in c["evidence"].as_array().unwrap() {
            assert!(ids.contains(&ev.as_str().unwrap().to_string()));
        }
    }
}

#[test]
fn with_the_scripted_model_the_verdict_cites_real_evidence_and_the_key_stays_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let model = ScriptedModel::start(&json!({"turns": [
        {"tool_calls": [{"id": "c1", "name": "iocs_from_file", "arguments": "{\"limit\": 20}"}]},
        {"text": "The file lists a C2 relay and a Run key [ev_0006]."},
        {"text": json!({"verdict": "suspicious", "confidence": 0.7, "family": null,
            "summary": "indicators of a C2 relay",
            "claims": [{"text": "network indicators", "evidence": ["ev_0001", "ev_0003"]}],
            "techniques": [{"id": "T1547.001", "name": "Registry Run Keys", "evidence": ["ev_0003"]}]}).to_string()},
    ]}));
    let report = tmp.path().join("r.json");
    let key = "sk-test-very-secret-4242";
    let (code, text) = analyze(
        &tmp.path().join("home"),
        &files["notes.txt"],
        &report,
        &[
            ("MALJAN_LLM_PROVIDER", "openai"),
            ("MALJAN_LLM_BASE_URL", &model.url),
            ("MALJAN_LLM_MODEL", "scripted"),
            ("MALJAN_LLM_API_KEY", key),
        ],
    );
    assert!(matches!(code, 0 | 3), "{text}");
    let body = std::fs::read_to_string(&report).unwrap();
    let r: Value = serde_json::from_str(&body).unwrap();
    let v = &r["verdict"];
    assert_eq!(v["source"], "agent", "{v}");
    assert_eq!(v["verdict"], "suspicious");
    let ids = every_evidence_id(&r);
    for ev in ["ev_0001", "ev_0003"] {
        assert!(
            ids.contains(&ev.to_string()),
            "{ev} is real evidence of the run: {ids:?}"
        );
    }
    let agent = &r["agent"];
    assert_eq!(agent["stages"][0]["name"], "analyst");
    let analyst_call = agent["conversation"][1]["evidence"].as_str().unwrap();
    assert!(ids.contains(&analyst_call.to_string()));
    assert_eq!(agent["conversation"][1]["tool"], "iocs_from_file");
    assert!(!agent["usage"].as_array().unwrap().is_empty());
    // The key went to the model, and nowhere else.
    assert_eq!(model.requests()[0]["auth"], format!("Bearer {key}"));
    assert!(!text.contains(key) && !body.contains(key));
    // Markdown shows the verdict with links to its evidence.
    let md = tmp.path().join("r.md");
    let (_, _) = analyze(
        &tmp.path().join("home2"),
        &files["notes.txt"],
        &md,
        &[
            ("MALJAN_LLM_MODEL", "x"),
            ("MALJAN_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("## Verdict:"), "{md}");
    assert!(md.contains("heuristic"));
}

#[test]
fn agent_tools_prints_the_catalog_the_model_gets() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus::write_corpus(tmp.path());
    let out = Command::new(maljan())
        .args(["agent", "tools", "--servers", "analysis", "--json"])
        .arg(&files["sample.exe"])
        .env("MALJAN_HOME", tmp.path().join("home"))
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"hashes") && names.contains(&"strings"),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("put_sample") || *n == "capabilities")
    );
    let hashes = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "hashes")
        .unwrap();
    assert!(
        hashes["parameters"]["properties"].get("path").is_none(),
        "the sample path is pinned"
    );
}
