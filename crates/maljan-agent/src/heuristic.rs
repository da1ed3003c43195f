//! The deterministic verdict, computed from the triage findings alone. It stands when no model is
//! configured, and when the judge's answer cannot be used. The same scoring gives each child
//! sample (archive member, attachment, embedded object) its own verdict, and a child's verdict
//! counts for its parent.
//!
//! Scoring (each signal is one claim citing the evidence ids of the step that found it):
//!
//! | signal | points | strong |
//! |---|---|---|
//! | a YARA rule matched (each, at most 2 counted) | 3 | yes |
//! | a document with auto-executing macros or actions | 3 | yes |
//! | a document with macros or scripts (not auto-executing) | 1 | |
//! | detect_packer: a packer or protector (UPX, Themida, …) or a .NET obfuscator | 2 | |
//! | code_capabilities: an ATT&CK technique (each, at most 4 counted) | 1 | |
//! | … process injection (T1055), input capture (T1056), credential theft (T1003, T1555) | 2 | yes |
//! | a format anomaly from pe_info / elf_info / macho_info (each, at most 3) | 1 | |
//! | network indicators (URLs, domains, IP addresses, e-mail) in the file | 1 | |
//! | a member judged malicious | 5 | yes |
//! | a member judged suspicious | 2 | |
//! | a member that expands past the ratio limit (a decompression bomb) | 2 | |
//! | a member encrypted with a malware-exchange password (infected, malware, virus) | 1 | |
//! | a member with a deceptive name (double extension, right-to-left override) | 1 | |
//!
//! Verdict: **malicious** at 5 points or more when a strong signal is among them; **suspicious**
//! at 2 or more (so a container is at least as bad as its worst member: a malicious member makes it
//! malicious, a suspicious one suspicious, through every level of nesting); **benign** only
//! with 0 points when the evidence is thick (for the sample: identify_file, the format's own tool,
//! strings, iocs and a YARA scan with rules all answered; for a child: iocs and a YARA scan with
//! rules); **unknown** otherwise (thin evidence). A claim whose evidence ids are not in the job's
//! ledger is dropped, and a verdict left without the claims it needs falls back to unknown: never
//! malicious without cited evidence that exists. The techniques of the verdict are
//! code_capabilities' ATT&CK ids, each with the evidence id of the call that found it.

use std::collections::BTreeSet;

use maljan_triage::{
    ChildReport, Report, StepReport, StepStatus,
    report::{Claim, Technique, Verdict, VerdictSource, VerdictWord},
    tree::walk_mut,
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
/// Techniques that ordinary software seldom needs: strong signals.
const STRONG_TECHNIQUES: &[&str] = &["T1055", "T1056", "T1003", "T1555"];
const DECEPTIVE_FLAGS: &[&str] = &["double_extension", "right_to_left_override"];

struct Signal {
    points: u32,
    strong: bool,
    claim: Claim,
}

/// What one sample (the job's, or a child) offers the scoring.
struct Findings<'a> {
    steps: &'a [StepReport],
    children: &'a [ChildReport],
    /// Extraction limits met while opening this sample: (limit, member, evidence).
    limits: Vec<(String, Option<String>, Vec<String>)>,
    is_child: bool,
}

/// The heuristic verdict for `report`'s findings; `ledger_ids` are the evidence ids of the job.
/// Children without a verdict yet are scored on the way (see [`fill_children`]).
pub fn verdict(report: &Report, ledger_ids: &BTreeSet<String>) -> Verdict {
    let mut children = report.children.clone();
    fill(&mut children, report, ledger_ids);
    let limits = report
        .recursion
        .as_ref()
        .map(|r| {
            r.findings
                .iter()
                .filter(|f| f.parent_sha256 == report.sample.sha256)
                .map(|f| (f.limit.clone(), f.member.clone(), f.evidence.clone()))
                .collect()
        })
        .unwrap_or_default();
    score(
        &Findings {
            steps: &report.steps,
            children: &children,
            limits,
            is_child: false,
        },
        ledger_ids,
    )
}

/// Gives every child sample of `report` its own heuristic verdict (deepest first, so that a
/// member's verdict counts for its container).
pub fn fill_children(report: &mut Report, ledger_ids: &BTreeSet<String>) {
    let mut children = std::mem::take(&mut report.children);
    fill(&mut children, report, ledger_ids);
    report.children = children;
}

fn fill(children: &mut [ChildReport], report: &Report, ledger_ids: &BTreeSet<String>) {
    walk_mut(children, &mut |c: &mut ChildReport| {
        if c.verdict.is_some() {
            return;
        }
        let limits = report
            .recursion
            .as_ref()
            .map(|r| {
                r.findings
                    .iter()
                    .filter(|f| f.parent_sha256 == c.sha256)
                    .map(|f| (f.limit.clone(), f.member.clone(), f.evidence.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let v = score(
            &Findings {
                steps: &c.steps,
                children: &c.children,
                limits,
                is_child: true,
            },
            ledger_ids,
        );
        c.verdict = Some(v);
    });
}

fn list<'a>(v: Option<&'a Value>, key: &str) -> Vec<&'a Value> {
    v.and_then(|r| r.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn score(f: &Findings, ledger_ids: &BTreeSet<String>) -> Verdict {
    let mut signals = Vec::new();
    let mut techniques: Vec<Technique> = Vec::new();
    let ok = |tool: &str| {
        f.steps
            .iter()
            .find(|s| s.tool == tool && s.status == StepStatus::Ok && s.result.is_some())
    };
    let claim = |text: String, step: &StepReport| Claim {
        text,
        evidence: step.evidence.clone(),
    };

    if let Some(step) = ok("yara_scan") {
        for m in list(step.result.as_ref(), "matches").into_iter().take(2) {
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
    if let Some(step) = ok("detect_packer") {
        for finding in list(step.result.as_ref(), "findings") {
            let category = finding
                .get("category")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = finding.get("name").and_then(Value::as_str).unwrap_or("?");
            if matches!(category, "packer" | "protector" | "obfuscator") {
                signals.push(Signal {
                    points: 2,
                    strong: false,
                    claim: claim(
                        format!("detect_packer: packed or protected with {name} ({category})"),
                        step,
                    ),
                });
            }
        }
    }
    if let Some(step) = ok("code_capabilities") {
        let mut counted = 0;
        for cap in list(step.result.as_ref(), "capabilities") {
            let id = cap.get("technique").and_then(Value::as_str).unwrap_or("");
            let name = cap
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("a capability");
            let technique_name = cap
                .get("technique_name")
                .and_then(Value::as_str)
                .unwrap_or(name);
            if !id.is_empty() && !techniques.iter().any(|t| t.id == id) {
                techniques.push(Technique {
                    id: id.to_string(),
                    name: technique_name.to_string(),
                    evidence: step.evidence.clone(),
                });
            }
            let base = id.split('.').next().unwrap_or(id);
            let strong = STRONG_TECHNIQUES.contains(&base);
            if counted < 4 || strong {
                counted += 1;
                signals.push(Signal {
                    points: if strong { 2 } else { 1 },
                    strong,
                    claim: claim(format!("code_capabilities: {name} ({id})"), step),
                });
            }
        }
    }
    for tool in ["pe_info", "elf_info", "macho_info"] {
        let Some(step) = ok(tool) else { continue };
        for a in list(step.result.as_ref(), "anomalies")
            .into_iter()
            .filter_map(Value::as_str)
            .take(3)
        {
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
    children_signals(f, &mut signals, &mut techniques);

    // Only claims whose every cited id is in this job's ledger count.
    signals.retain(|s| {
        !s.claim.evidence.is_empty() && s.claim.evidence.iter().all(|e| ledger_ids.contains(e))
    });
    techniques
        .retain(|t| !t.evidence.is_empty() && t.evidence.iter().all(|e| ledger_ids.contains(e)));
    let score: u32 = signals.iter().map(|s| s.points).sum();
    let strong = signals.iter().any(|s| s.strong);
    let yara_with_rules = ok("yara_scan")
        .and_then(|s| s.result.as_ref())
        .and_then(|r| r.get("rule_files"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
        > 0;
    let thick = if f.is_child {
        ok("iocs_from_file").is_some() && yara_with_rules
    } else {
        ["identify_file", "strings", "iocs_from_file", "yara_scan"]
            .iter()
            .all(|t| ok(t).is_some())
            && FORMAT_TOOLS.iter().any(|t| ok(t).is_some())
            && yara_with_rules
    };
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
        techniques,
        source: VerdictSource::Heuristic,
        model: None,
        degradation: None,
        facts: Vec::new(),
        disagreement: None,
    }
}

/// What the members of a sample say about it.
fn children_signals(f: &Findings, signals: &mut Vec<Signal>, techniques: &mut Vec<Technique>) {
    for c in f.children {
        let Some(v) = &c.verdict else { continue };
        // The member's own cited evidence carries over: its claims rest on its calls.
        let evidence: Vec<String> = v
            .claims
            .iter()
            .flat_map(|cl| cl.evidence.iter().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let (points, strong, word) = match v.verdict {
            VerdictWord::Malicious => (5, true, "malicious"),
            VerdictWord::Suspicious => (2, false, "suspicious"),
            _ => (0, false, ""),
        };
        if points > 0 && !evidence.is_empty() {
            signals.push(Signal {
                points,
                strong,
                claim: Claim {
                    text: format!("member {} ({}) is {word}: {}", c.name, c.kind, v.summary),
                    evidence,
                },
            });
            for t in &v.techniques {
                if !techniques.iter().any(|x| x.id == t.id) {
                    techniques.push(t.clone());
                }
            }
        }
        if c.password.is_some() {
            signals.push(Signal {
                points: 1,
                strong: false,
                claim: Claim {
                    text: format!(
                        "member {} is encrypted with the malware-exchange password \"{}\"",
                        c.name,
                        c.password.as_deref().unwrap_or_default()
                    ),
                    evidence: c.extracted_by.clone(),
                },
            });
        }
        if let Some(flag) = c
            .flags
            .iter()
            .find(|fl| DECEPTIVE_FLAGS.contains(&fl.as_str()))
        {
            signals.push(Signal {
                points: 1,
                strong: false,
                claim: Claim {
                    text: format!("member {} has a deceptive name ({flag})", c.name),
                    evidence: c.extracted_by.clone(),
                },
            });
        }
    }
    for (limit, member, evidence) in &f.limits {
        if limit == "ratio" {
            signals.push(Signal {
                points: 2,
                strong: false,
                claim: Claim {
                    text: format!(
                        "{} expands past the ratio limit: a decompression bomb",
                        member.as_deref().unwrap_or("a member")
                    ),
                    evidence: evidence.clone(),
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(tool: &str, ev: &str, result: Value) -> Value {
        json!({"index": 1, "title": tool, "tool": tool, "server": "analysis", "status": "ok",
               "evidence": [ev], "duration_ms": 1.0, "error": null, "reason": null,
               "remediation": null, "result": result})
    }

    fn child(id: &str, name: &str, steps: Vec<Value>, children: Vec<Value>) -> Value {
        json!({"id": id, "name": name, "parent_sha256": "p", "depth": id.split('.').count(),
               "size": 10, "sha256": format!("sha-{id}"), "sha1": "", "md5": "", "kind": "pe",
               "description": "", "source": "zip", "encrypted": false, "password": null,
               "flags": [], "extracted_by": ["ev_0100"], "steps": steps, "verdict": null,
               "children": children})
    }

    fn report(steps: Vec<Value>, children: Vec<Value>, findings: Vec<Value>) -> Report {
        serde_json::from_value(json!({
            "schema": "maljan.triage.report/v1", "verdict": null, "job_id": "j",
            "generated_at": "2026-01-01T00:00:00.000Z", "maljan_version": "0", "status": "complete",
            "duration_ms": 1.0,
            "sample": {"name": "s", "path": "/s", "size": 1, "sha256": "root", "hashes": {},
                       "kind": null, "description": null, "mime": null},
            "servers": [], "degradations": [], "failures": [], "unavailable": [],
            "steps": steps, "agent": null, "children": children,
            "recursion": {"limits": null, "children": children.len(), "total_bytes": 0, "depth": 1,
                          "findings": findings, "skipped": []}
        }))
        .unwrap()
    }

    fn ids(n: usize) -> BTreeSet<String> {
        (1..=n).map(|i| format!("ev_{i:04}")).collect()
    }

    #[test]
    fn capabilities_and_packers_score_with_their_techniques_cited() {
        let r = report(
            vec![
                step(
                    "detect_packer",
                    "ev_0001",
                    json!({"findings": [{"category": "packer", "name": "UPX"}]}),
                ),
                step(
                    "code_capabilities",
                    "ev_0002",
                    json!({"capabilities": [
                    {"name": "injects code into another process", "technique": "T1055", "technique_name": "Process Injection"},
                    {"name": "persists via Run keys", "technique": "T1547.001", "technique_name": "Registry Run Keys"}]}),
                ),
            ],
            vec![],
            vec![],
        );
        let v = verdict(&r, &ids(2));
        // UPX 2 + injection 2 (strong) + Run keys 1 = 5 with a strong signal.
        assert_eq!(v.verdict, VerdictWord::Malicious, "{v:?}");
        assert!(v.claims.iter().all(|c| !c.evidence.is_empty()));
        let t: Vec<(&str, &[String])> = v
            .techniques
            .iter()
            .map(|t| (t.id.as_str(), &t.evidence[..]))
            .collect();
        assert_eq!(
            t,
            [
                ("T1055", &["ev_0002".to_string()][..]),
                ("T1547.001", &["ev_0002".to_string()][..])
            ]
        );
        // The same findings cited from a call the ledger does not hold are worth nothing.
        let v = verdict(&r, &BTreeSet::new());
        assert_eq!(v.verdict, VerdictWord::Unknown);
        assert!(v.claims.is_empty() && v.techniques.is_empty());
    }

    #[test]
    fn a_malicious_member_makes_every_container_above_it_malicious() {
        let yara = |ev: &str| {
            step(
                "yara_scan",
                ev,
                json!({"matches": [{"rule": "EICAR"}, {"rule": "Dropper"}], "rule_files": 1}),
            )
        };
        let exe = child("1.1", "a.exe", vec![yara("ev_0003")], vec![]);
        let zip = child("1", "a.zip", vec![], vec![exe]);
        let mut r = report(vec![], vec![zip], vec![]);
        let v = verdict(&r, &ids(3));
        assert_eq!(v.verdict, VerdictWord::Malicious, "{v:?}");
        assert_eq!(v.claims[0].evidence, ["ev_0003"]);
        assert!(v.claims[0].text.contains("a.zip"));
        fill_children(&mut r, &ids(3));
        let zip = &r.children[0];
        assert_eq!(
            zip.verdict.as_ref().unwrap().verdict,
            VerdictWord::Malicious
        );
        assert_eq!(
            zip.children[0].verdict.as_ref().unwrap().verdict,
            VerdictWord::Malicious
        );
    }

    #[test]
    fn a_bomb_is_suspicious_and_thin_evidence_is_unknown() {
        let bomb = json!({"limit": "ratio", "parent_sha256": "root", "member": "zeros.img",
                          "detail": "x", "evidence": ["ev_0001"]});
        let v = verdict(&report(vec![], vec![], vec![bomb]), &ids(1));
        assert_eq!(v.verdict, VerdictWord::Suspicious);
        assert!(v.claims[0].text.contains("decompression bomb"));
        let v = verdict(&report(vec![], vec![], vec![]), &ids(1));
        assert_eq!(v.verdict, VerdictWord::Unknown);
        // A member with nothing on it but a clean scan is benign; without a scan, unknown.
        let clean = child(
            "1",
            "readme.txt",
            vec![
                step("iocs_from_file", "ev_0001", json!({"counts": {}})),
                step(
                    "yara_scan",
                    "ev_0002",
                    json!({"matches": [], "rule_files": 1}),
                ),
            ],
            vec![],
        );
        let mut r = report(
            vec![],
            vec![clean, child("2", "x.bin", vec![], vec![])],
            vec![],
        );
        fill_children(&mut r, &ids(2));
        assert_eq!(
            r.children[0].verdict.as_ref().unwrap().verdict,
            VerdictWord::Benign
        );
        assert_eq!(
            r.children[1].verdict.as_ref().unwrap().verdict,
            VerdictWord::Unknown
        );
    }
}
