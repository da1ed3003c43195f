//! A report built by hand, the way maljan-agent and the triage run fill one in: steps with
//! answers, failures, a verdict resting on facts (one carried up from a child, a model's
//! disagreement), a tree of children (zip → doc → exe) each with its own steps and verdict, and
//! an agent conversation. Every free-text slot a sample, a server or a model writes holds the
//! text the caller gives, so a test can put a hostile string in all of them at once.
#![allow(dead_code)]

use maljan_triage::{
    ChildReport, Recursion, Report, Status, StepReport, StepStatus,
    report::{
        AgentReport, Claim, Disagreement, ErrorInfo, Fact, Failure, Leaning, SampleInfo,
        ServerInfo, StageReport, Technique, TokenUsage, Turn, TurnCall, Unavailable, Verdict,
        VerdictSource, VerdictWord, WithheldTool,
    },
    tree::{RecursionFinding, SkippedMember},
};
use serde_json::json;

pub const SHA_ZIP: &str = "1111111111111111111111111111111111111111111111111111111111111111";
pub const SHA_DOC: &str = "2222222222222222222222222222222222222222222222222222222222222222";
pub const SHA_EXE: &str = "3333333333333333333333333333333333333333333333333333333333333333";
pub const SHA_TXT: &str = "4444444444444444444444444444444444444444444444444444444444444444";

fn ev(n: u32) -> String {
    format!("ev_{n:04}")
}

fn step(
    index: usize,
    title: &str,
    tool: &str,
    evidence: u32,
    result: serde_json::Value,
) -> StepReport {
    StepReport {
        index,
        title: title.into(),
        tool: tool.into(),
        server: Some("analysis".into()),
        status: StepStatus::Ok,
        evidence: vec![ev(evidence)],
        duration_ms: 12.0,
        error: None,
        reason: None,
        remediation: None,
        result: Some(result),
    }
}

fn fact(
    id: &str,
    name: &str,
    leaning: Leaning,
    weight: u32,
    strong: bool,
    s: &str,
    evidence: &[u32],
) -> Fact {
    Fact {
        id: id.into(),
        name: name.into(),
        leaning,
        weight,
        strong,
        observations: vec![
            format!("yara_scan: rule {s}"),
            format!("detect_packer: {s}"),
        ],
        evidence: evidence.iter().map(|n| ev(*n)).collect(),
        child: None,
    }
}

fn verdict(word: VerdictWord, s: &str, facts: Vec<Fact>) -> Verdict {
    Verdict {
        verdict: word,
        confidence: 0.7,
        family: None,
        summary: format!("summary {s}"),
        claims: vec![],
        techniques: vec![],
        source: VerdictSource::Heuristic,
        model: None,
        degradation: None,
        facts,
        disagreement: None,
    }
}

/// The SHA-256 each child of the tree has.
fn sha_of(id: &str) -> &'static str {
    match id {
        "1" => SHA_ZIP,
        "1.1" => SHA_DOC,
        "1.1.1" => SHA_EXE,
        _ => SHA_TXT,
    }
}

fn child(
    id: &str,
    name: &str,
    kind: &str,
    steps: Vec<StepReport>,
    verdict: Option<Verdict>,
    extracted_by: u32,
    children: Vec<ChildReport>,
) -> ChildReport {
    ChildReport {
        id: id.into(),
        name: name.into(),
        parent_sha256: String::new(),
        depth: id.split('.').count(),
        size: 4096,
        sha256: sha_of(id).into(),
        sha1: "da39a3ee5e6b4b0d3255bfef95601890afd80709".into(),
        md5: "d41d8cd98f00b204e9800998ecf8427e".into(),
        kind: kind.into(),
        description: format!("{kind} file"),
        source: "zip".into(),
        encrypted: false,
        password: None,
        flags: vec![],
        extracted_by: vec![ev(extracted_by)],
        steps,
        verdict,
        children,
    }
}

/// The report, with `s` in every slot a sample, a server or a model fills.
pub fn report(s: &str) -> Report {
    let exe = child(
        "1.1.1",
        &format!("payload {s}.exe"),
        "pe",
        vec![
            step(
                1,
                "Format structure (pe_info)",
                "pe_info",
                20,
                json!({
                    "entry_point": 4096, "image_base": 4194304u64, "size_of_image": 8192,
                    "version_info": {"ProductVersion": s, "CompanyName": s},
                    "sections": [{"name": s, "virtual_address": 4096, "raw_offset": 1024, "raw_size": 512}],
                }),
            ),
            step(
                2,
                "Indicators of compromise",
                "iocs_from_file",
                21,
                json!({
                    "indicators": [{"kind": "url", "value": s, "offset": 64}], "counts": {"url": 1}
                }),
            ),
        ],
        Some(verdict(
            VerdictWord::Malicious,
            s,
            vec![
                fact(
                    "process_injection",
                    "process injection",
                    Leaning::Malicious,
                    5,
                    true,
                    s,
                    &[20],
                ),
                fact(
                    "persistence",
                    "persistence",
                    Leaning::Malicious,
                    4,
                    true,
                    s,
                    &[20, 21],
                ),
                fact(
                    "packed",
                    "packed or protected",
                    Leaning::Neutral,
                    1,
                    false,
                    s,
                    &[20],
                ),
            ],
        )),
        11,
        vec![],
    );
    let doc = child(
        "1.1",
        &format!("invoice {s}.doc"),
        "ole",
        vec![step(
            1,
            "Document (document_info)",
            "document_info",
            12,
            json!({"title": s, "macros": [s]}),
        )],
        Some(verdict(
            VerdictWord::Suspicious,
            s,
            vec![fact(
                "carries_executable",
                "carries an executable",
                Leaning::Malicious,
                5,
                true,
                s,
                &[11],
            )],
        )),
        10,
        vec![exe],
    );
    let readme = child(
        "1.2",
        &format!("readme {s}.txt"),
        "text",
        vec![step(
            1,
            "Strings",
            "strings",
            13,
            json!({"strings": [s, "plain"]}),
        )],
        Some(verdict(VerdictWord::Benign, s, vec![])),
        10,
        vec![],
    );
    let zip = child(
        "1",
        &format!("inner {s}.zip"),
        "zip",
        vec![step(
            1,
            "File type",
            "identify_file",
            9,
            json!({"kind": "zip", "description": s}),
        )],
        None,
        8,
        vec![doc, readme],
    );

    let mut carried = fact(
        "carries_executable",
        "carries an executable",
        Leaning::Malicious,
        5,
        true,
        s,
        &[11],
    );
    carried.child = Some(format!("outer.zip → inner {s}.zip → invoice {s}.doc"));
    let signed = fact(
        "signed",
        "valid Authenticode signature",
        Leaning::Benign,
        3,
        true,
        s,
        &[2],
    );
    let failed = StepReport {
        index: 4,
        title: "YARA".into(),
        tool: "yara_scan".into(),
        server: Some("analysis".into()),
        status: StepStatus::Failed,
        evidence: vec![ev(4)],
        duration_ms: 30_000.0,
        error: Some(ErrorInfo {
            code: s.into(),
            message: s.into(),
            remediation: s.into(),
        }),
        reason: None,
        remediation: None,
        result: None,
    };
    let skipped = StepReport {
        index: 5,
        title: "Mach-O".into(),
        tool: "macho_info".into(),
        server: None,
        status: StepStatus::NotApplicable,
        evidence: vec![],
        duration_ms: 0.0,
        error: None,
        reason: Some(s.into()),
        remediation: Some(s.into()),
        result: None,
    };
    let mut hashes = std::collections::BTreeMap::new();
    hashes.insert("sha256".to_string(), SHA_ZIP.replace('1', "0"));
    hashes.insert("ssdeep".to_string(), s.to_string());

    Report {
        schema: maljan_triage::report::SCHEMA.into(),
        verdict: Some(Verdict {
            verdict: VerdictWord::Malicious,
            confidence: 0.9,
            family: Some(s.into()),
            summary: s.into(),
            claims: vec![Claim {
                text: s.into(),
                evidence: vec![ev(1), ev(20), ev(99)],
            }],
            techniques: vec![Technique {
                id: "T1055".into(),
                name: s.into(),
                evidence: vec![ev(20)],
            }],
            source: VerdictSource::Agent,
            model: Some("openai/scripted".into()),
            degradation: Some(s.into()),
            facts: vec![
                carried,
                signed,
                fact(
                    "packed",
                    "packed or protected",
                    Leaning::Neutral,
                    1,
                    false,
                    s,
                    &[3, 20],
                ),
            ],
            disagreement: Some(Disagreement {
                facts_verdict: VerdictWord::Suspicious,
                reason: s.into(),
            }),
        }),
        job_id: "job-1".into(),
        generated_at: "2026-12-07T04:00:00Z".into(),
        maljan_version: "0.1.0".into(),
        status: Status::Degraded,
        duration_ms: 1500.0,
        sample: SampleInfo {
            name: format!("outer {s}.zip"),
            path: format!("/samples/outer {s}.zip"),
            size: 10_000,
            sha256: SHA_ZIP.replace('1', "0"),
            hashes,
            kind: Some("zip".into()),
            description: Some(s.into()),
            mime: Some(s.into()),
        },
        servers: vec![ServerInfo {
            name: "analysis".into(),
            transport: "stdio".into(),
            via: Some("stdio".into()),
            server_name: Some(s.into()),
            server_version: Some(s.into()),
            protocol_version: Some("2025-06-18".into()),
            manifest_declared: true,
            tools: 14,
            tools_unavailable: 1,
            handover: Some("local".into()),
            steps: 5,
            error: Some(ErrorInfo {
                code: s.into(),
                message: s.into(),
                remediation: s.into(),
            }),
        }],
        degradations: vec![s.into()],
        failures: vec![Failure {
            code: s.into(),
            server: Some("analysis".into()),
            tool: s.into(),
            remediation: s.into(),
            message: s.into(),
            count: 2,
            evidence: vec![ev(4)],
        }],
        unavailable: vec![Unavailable {
            server: "analysis".into(),
            tool: s.into(),
            reason: s.into(),
            remediation: Some(s.into()),
            without: Some(s.into()),
        }],
        steps: vec![
            step(
                1,
                "File type",
                "identify_file",
                1,
                json!({"kind": "zip", "description": s}),
            ),
            step(
                2,
                "Format structure (pe_info)",
                "pe_info",
                2,
                json!({
                    "entry_point": 4096, "image_base": 4194304u64,
                    "version_info": {"ProductVersion": s, "FileDescription": s},
                }),
            ),
            step(
                3,
                "Members (archive_list)",
                "archive_list",
                3,
                json!({
                    "members": [{"name": s, "size": 4096, "offset": 30}]
                }),
            ),
            failed,
            skipped,
            step(6, "Strings", "strings", 6, json!(s)),
            step(
                7,
                "Indicators of compromise",
                "iocs_from_file",
                7,
                json!({
                    "indicators": [{"kind": "domain", "value": s, "offset": 100}, {"kind": "url", "value": s, "offset": 200}]
                }),
            ),
        ],
        agent: Some(AgentReport {
            model: "openai/scripted".into(),
            stages: vec![StageReport {
                name: "analyst".into(),
                status: "complete".into(),
                ended_because: Some(s.into()),
                requests: 2,
                tool_calls: 1,
                duration_ms: 100.0,
                input_tokens: 10,
                output_tokens: 5,
            }],
            conversation: vec![
                Turn {
                    stage: "analyst".into(),
                    role: "assistant".into(),
                    text: Some(s.into()),
                    tool_calls: vec![TurnCall {
                        id: "c1".into(),
                        name: s.into(),
                        arguments: s.into(),
                    }],
                    evidence: None,
                    tool: None,
                    notes: vec![],
                },
                Turn {
                    stage: "analyst".into(),
                    role: "tool".into(),
                    text: Some(s.into()),
                    tool_calls: vec![],
                    evidence: Some(ev(30)),
                    tool: Some(s.into()),
                    notes: vec![s.into()],
                },
                // A repeat answered from the ledger carries an earlier call's id.
                Turn {
                    stage: "analyst".into(),
                    role: "tool".into(),
                    text: Some(s.into()),
                    tool_calls: vec![],
                    evidence: Some(ev(7)),
                    tool: Some("iocs_from_file".into()),
                    notes: vec![],
                },
            ],
            usage: vec![TokenUsage {
                stage: "analyst".into(),
                model: "openai/scripted".into(),
                requests: 2,
                input_tokens: 10,
                output_tokens: 5,
            }],
            withheld: vec![WithheldTool {
                server: "files".into(),
                tool: s.into(),
                reason: s.into(),
            }],
            cancelled: false,
        }),
        children: vec![zip],
        recursion: Some(Recursion {
            limits: None,
            children: 4,
            total_bytes: 16384,
            depth: 3,
            findings: vec![RecursionFinding {
                limit: "ratio".into(),
                parent_sha256: SHA_ZIP.into(),
                member: Some(s.into()),
                detail: s.into(),
                evidence: vec![ev(8)],
            }],
            skipped: vec![SkippedMember {
                parent_sha256: SHA_ZIP.into(),
                name: s.into(),
                reason: s.into(),
                evidence: vec![ev(8)],
            }],
            evidence: vec![ev(8), ev(10), ev(11)],
        }),
    }
}
