//! The deterministic verdict, computed from the triage findings alone. It stands when no model is
//! configured, and when the judge's answer cannot be used.
//!
//! Scoring (each signal is one claim citing the evidence id of the step that found it):
//!
//! | signal | points |
//! |---|---|
//! | a YARA rule matched (each, at most 2 counted) | 3 |
//! | a document with auto-executing macros or actions | 3 |
//! | a document with macros or scripts (not auto-executing) | 1 |
//! | a format anomaly from pe_info / elf_info / macho_info (each, at most 3) | 1 |
//! | network indicators (URLs, domains, IP addresses, e-mail) in the file | 1 |
//!
//! Verdict: **malicious** at 5 points or more when a strong signal (a YARA match or auto-executing
//! content) is among them; **suspicious** at 2 or more; **benign** only with 0 points when the
//! evidence is thick (identify_file, the format's own tool, strings, iocs and a YARA scan with
//! rules all answered); **unknown** otherwise (thin evidence). A claim whose evidence ids are not
//! in the job's ledger is dropped, and a verdict left without the claims it needs falls back to
//! unknown: never malicious without cited evidence that exists.

use std::collections::BTreeSet;

use maljan_triage::{
    Report, StepReport, StepStatus,
    report::{Claim, Verdict, VerdictSource, VerdictWord},
};
use serde_json::Value;

const FORMAT_TOOLS: &[&str] = &[
    "pe_info",
    "elf_info",
    "macho_info",
    "document_info",
    "archive_list",
];
const NETWORK_KINDS: &[&str] = &["url", "domain", "ipv4", "ipv6", "email"];

struct Signal {
    points: u32,
    strong: bool,
    claim: Claim,
}

/// The heuristic verdict for `report`'s findings; `ledger_ids` are the evidence ids of the job.
pub fn verdict(report: &Report, ledger_ids: &BTreeSet<String>) -> Verdict {
    let mut signals = Vec::new();
    let ok = |tool: &str| {
        report
            .steps
            .iter()
            .find(|s| s.tool == tool && s.status == StepStatus::Ok && s.result.is_some())
    };
    let claim = |text: String, step: &StepReport| Claim {
        text,
        evidence: step.evidence.clone(),
    };

    if let Some(step) = ok("yara_scan") {
        let matches = step
            .result
            .as_ref()
            .and_then(|r| r.get("matches"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for m in matches.iter().take(2) {
            let rule = m.get("rule").and_then(Value::as_str).unwrap_or("a rule");
            signals.push(Signal {
                points: 3,
                strong: true,
                claim: claim(format!("YARA rule {rule} matched the sample"), step),
            });
        }
    }
    if let Some(step) = ok("document_info")
        && let Some(r) = &step.result
    {
        let flag = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
        if flag("auto_exec") {
            signals.push(Signal {
                points: 3,
                strong: true,
                claim: claim(
                    "the document runs content automatically when opened (auto-exec macros or actions)".into(),
                    step,
                ),
            });
        } else if flag("macros") {
            signals.push(Signal {
                points: 1,
                strong: false,
                claim: claim("the document carries macros or scripts".into(), step),
            });
        }
    }
    for tool in ["pe_info", "elf_info", "macho_info"] {
        let Some(step) = ok(tool) else { continue };
        let anomalies = step
            .result
            .as_ref()
            .and_then(|r| r.get("anomalies"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for a in anomalies.iter().filter_map(Value::as_str).take(3) {
            signals.push(Signal {
                points: 1,
                strong: false,
                claim: claim(format!("{tool}: {a}"), step),
            });
        }
    }
    if let Some(step) = ok("iocs_from_file")
        && let Some(Value::Object(counts)) = step.result.as_ref().and_then(|r| r.get("counts"))
    {
        let found: Vec<String> = NETWORK_KINDS
            .iter()
            .filter_map(|k| {
                let n = counts.get(*k).and_then(Value::as_u64).unwrap_or(0);
                (n > 0).then(|| format!("{n} {k}"))
            })
            .collect();
        if !found.is_empty() {
            signals.push(Signal {
                points: 1,
                strong: false,
                claim: claim(
                    format!("network indicators in the file: {}", found.join(", ")),
                    step,
                ),
            });
        }
    }

    // Only claims whose every cited id is in this job's ledger count.
    signals.retain(|s| {
        !s.claim.evidence.is_empty() && s.claim.evidence.iter().all(|e| ledger_ids.contains(e))
    });
    let score: u32 = signals.iter().map(|s| s.points).sum();
    let strong = signals.iter().any(|s| s.strong);
    let thick = ["identify_file", "strings", "iocs_from_file", "yara_scan"]
        .iter()
        .all(|t| ok(t).is_some())
        && FORMAT_TOOLS.iter().any(|t| ok(t).is_some())
        && ok("yara_scan")
            .and_then(|s| s.result.as_ref())
            .and_then(|r| r.get("rule_files"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
            > 0;
    let (word, confidence) = if score >= 5 && strong {
        (
            VerdictWord::Malicious,
            (0.6 + 0.05 * f64::from(score - 5)).min(0.85),
        )
    } else if score >= 2 {
        (
            VerdictWord::Suspicious,
            (0.4 + 0.05 * f64::from(score - 2)).min(0.6),
        )
    } else if score == 0 && thick {
        (VerdictWord::Benign, 0.3)
    } else {
        (VerdictWord::Unknown, 0.0)
    };
    let summary = match word {
        VerdictWord::Unknown if signals.is_empty() => {
            "The triage findings are too thin for a verdict: nothing scored, and not every check could run.".to_string()
        }
        VerdictWord::Benign => {
            "Nothing in the triage findings scored: no rule matched and nothing stood out. A heuristic cannot prove a file harmless.".to_string()
        }
        _ => format!(
            "{} triage finding{} scored {score} point{} (see the claims).",
            signals.len(),
            if signals.len() == 1 { "" } else { "s" },
            if score == 1 { "" } else { "s" }
        ),
    };
    Verdict {
        verdict: word,
        confidence,
        family: None,
        summary,
        claims: signals.into_iter().map(|s| s.claim).collect(),
        techniques: vec![],
        source: VerdictSource::Heuristic,
        model: None,
        degradation: None,
    }
}
