//! The rules of the facts verdict: one test per fact and one per false-positive class.

use super::*;
use serde_json::json;

fn step(tool: &str, ev: &str, result: Value) -> Value {
    json!({"index": 1, "title": tool, "tool": tool, "server": "analysis", "status": "ok",
           "evidence": [ev], "duration_ms": 1.0, "error": null, "reason": null,
           "remediation": null, "result": result})
}

fn child(id: &str, name: &str, kind: &str, source: &str, steps: Vec<Value>) -> Value {
    json!({"id": id, "name": name, "parent_sha256": "p", "depth": id.split('.').count(),
           "size": 10, "sha256": format!("sha-{id}"), "sha1": "", "md5": "", "kind": kind,
           "description": "", "source": source, "encrypted": false, "password": null,
           "flags": [], "extracted_by": ["ev_0100"], "steps": steps, "verdict": null,
           "children": []})
}

fn with_children(mut c: Value, children: Vec<Value>) -> Value {
    c["children"] = json!(children);
    c
}

fn report_of(kind: &str, steps: Vec<Value>, children: Vec<Value>, findings: Vec<Value>) -> Report {
    serde_json::from_value(json!({
        "schema": "maljan.triage.report/v1", "verdict": null, "job_id": "j",
        "generated_at": "2026-01-01T00:00:00.000Z", "maljan_version": "0", "status": "complete",
        "duration_ms": 1.0,
        "sample": {"name": "s", "path": "/s", "size": 1, "sha256": "root", "hashes": {},
                   "kind": kind, "description": null, "mime": null},
        "servers": [], "degradations": [], "failures": [], "unavailable": [],
        "steps": steps, "agent": null, "children": children,
        "recursion": {"limits": null, "children": children.len(), "total_bytes": 0, "depth": 1,
                      "findings": findings, "skipped": []}
    }))
    .unwrap()
}

fn report(steps: Vec<Value>) -> Report {
    report_of("pe", steps, vec![], vec![])
}

fn ids() -> BTreeSet<String> {
    (1..=200).map(|i| format!("ev_{i:04}")).collect()
}

fn fact<'a>(v: &'a Verdict, id: &str) -> &'a Fact {
    v.facts
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no fact {id} in {:#?}", v.facts))
}

fn cap(technique: &str, name: &str, discriminating: bool) -> Value {
    json!({"name": name, "technique": technique, "technique_name": name, "tactic": "t",
           "discriminating": discriminating,
           "evidence": [{"kind": "import", "detail": format!("KERNEL32.dll!{name}"), "offset": null}]})
}

fn caps(ev: &str, list: Vec<Value>) -> Value {
    step("code_capabilities", ev, json!({"capabilities": list}))
}

fn yara(ev: &str, matches: Value) -> Value {
    step(
        "yara_scan",
        ev,
        json!({"matches": matches, "rule_files": 0, "builtin_rule_files": 4}),
    )
}

/// The steps of a thick triage of a PE: every core tool answered.
fn thick(mut extra: Vec<Value>) -> Vec<Value> {
    let mut steps = vec![
        step("identify_file", "ev_0001", json!({"kind": "pe"})),
        step("strings", "ev_0002", json!({"strings": []})),
        step("iocs_from_file", "ev_0003", json!({"counts": {}})),
    ];
    if !extra.iter().any(|s| s["tool"] == "yara_scan") {
        steps.push(yara("ev_0004", json!([])));
    }
    steps.append(&mut extra);
    steps
}

fn pe_info(ev: &str, imports: u64, anomalies: Value) -> Value {
    step(
        "pe_info",
        ev,
        json!({"import_count": imports, "anomalies": anomalies, "is_dotnet": false,
               "imports": [{"dll": "KERNEL32.dll", "functions": []}, {"dll": "msvcrt.dll", "functions": []}]}),
    )
}

#[test]
fn upx_alone_is_one_packed_fact_and_never_malicious() {
    let upx = |ev| {
        step(
            "detect_packer",
            ev,
            json!({"findings": [{"category": "packer", "name": "UPX"}]}),
        )
    };
    let r = report(thick(vec![
        yara(
            "ev_0010",
            json!([{"rule": "Packer_UPX", "purpose": "identification", "metadata": {"category": "packer"}}]),
        ),
        upx("ev_0011"),
        caps(
            "ev_0012",
            vec![
                cap("T1027.002", "packed with UPX", false),
                cap("T1129", "LoadLibraryA", false),
            ],
        ),
        pe_info(
            "ev_0013",
            6,
            json!([
                "section UPX0 is writable and executable",
                "section UPX1 is writable and executable"
            ]),
        ),
    ]));
    let v = verdict(&r, &ids());
    let packed: Vec<&Fact> = v.facts.iter().filter(|f| f.id == "packed").collect();
    assert_eq!(packed.len(), 1, "{:#?}", v.facts);
    assert_eq!(packed[0].leaning, Leaning::Neutral);
    assert!(
        packed[0].observations.len() >= 5,
        "{:?}",
        packed[0].observations
    );
    assert_eq!(
        packed[0].evidence,
        ["ev_0010", "ev_0011", "ev_0012", "ev_0013"]
    );
    // Packed only: nothing for or against, so unknown — never malicious, never suspicious.
    assert_eq!(v.verdict, VerdictWord::Unknown, "{}", v.summary);
    assert_eq!(v.techniques.len(), 1, "T1027.002 only: {:?}", v.techniques);
}

#[test]
fn crt_style_imports_are_described_not_scored_and_the_program_can_be_benign() {
    let r = report(thick(vec![
        caps(
            "ev_0010",
            vec![
                cap("T1129", "resolve API at run time", false),
                cap("T1083", "enumerate files", false),
                cap("T1622", "detect a debugger", false),
                cap("T1082", "gather system information", false),
            ],
        ),
        pe_info("ev_0011", 84, json!(["COFF timestamp is zero"])),
    ]));
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Benign, "{}", v.summary);
    assert_eq!(fact(&v, "described_capabilities").weight, 0);
    assert_eq!(fact(&v, "described_capabilities").observations.len(), 4);
    assert_eq!(fact(&v, "runtime_typical_imports").leaning, Leaning::Benign);
    assert!(v.summary.contains("basis"), "{}", v.summary);
    assert!(
        v.techniques.is_empty(),
        "descriptions are no techniques of the verdict"
    );
    // The same file with one check missing stays unknown: the basis is not enough alone.
    let mut thin = r.clone();
    thin.steps.retain(|s| s.tool != "strings");
    assert_eq!(verdict(&thin, &ids()).verdict, VerdictWord::Unknown);
    // A program that does more than the C runtime (encrypts, makes memory executable, talks over
    // a socket) is not accused for it, but its imports are no basis for benign either.
    for more in ["T1027", "T1620", "T1095"] {
        let r = report(thick(vec![
            caps(
                "ev_0010",
                vec![cap("T1129", "resolve", false), cap(more, "x", false)],
            ),
            pe_info("ev_0011", 84, json!([])),
        ]));
        let v = verdict(&r, &ids());
        assert_eq!(v.verdict, VerdictWord::Unknown, "{more}: {}", v.summary);
        assert!(
            v.facts.iter().all(|f| f.id != "runtime_typical_imports"),
            "{more}"
        );
    }
}

#[test]
fn eicar_is_malicious_with_its_family() {
    let r = report_of(
        "text",
        vec![yara(
            "ev_0001",
            json!([{"rule": "EICAR_test_file", "purpose": "detection",
                    "metadata": {"category": "test", "family": "EICAR-Test-File"}}]),
        )],
        vec![],
        vec![],
    );
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Malicious, "{}", v.summary);
    assert_eq!(v.family.as_deref(), Some("EICAR-Test-File"));
    assert!(fact(&v, "known_bad_signature").strong);
}

#[test]
fn a_third_party_rule_is_a_detection_naming_no_family_and_identification_is_never_strong() {
    let r = report(vec![yara(
        "ev_0001",
        json!([{"rule": "Some_Local_Rule", "metadata": {}},
               {"rule": "Compiler_MinGW", "purpose": "identification", "metadata": {"category": "compiler"}}]),
    )]);
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Suspicious, "{}", v.summary);
    assert_eq!(v.family, None);
    assert!(fact(&v, "known_bad_signature").strong);
    assert!(!fact(&v, "identified_as").strong);
    // An identification rule that names a strong fact gives only its weak form.
    let r = report_of(
        "ole2",
        vec![yara(
            "ev_0001",
            json!([{"rule": "Dropper_Embedded_PE", "purpose": "identification",
                    "metadata": {"fact": "carries_executable"}}]),
        )],
        vec![],
        vec![],
    );
    let v = verdict(&r, &ids());
    assert!(!fact(&v, "carries_executable").strong);
    assert_eq!(v.verdict, VerdictWord::Unknown, "{}", v.summary);
}

#[test]
fn injection_and_persistence_are_malicious_each_alone_suspicious() {
    let both = report(thick(vec![caps(
        "ev_0010",
        vec![
            cap("T1055", "inject code into another process", true),
            cap("T1547.001", "persist through a Run registry key", true),
        ],
    )]));
    let v = verdict(&both, &ids());
    assert_eq!(v.verdict, VerdictWord::Malicious, "{}", v.summary);
    assert!(
        v.summary.contains("2 independent strong facts"),
        "{}",
        v.summary
    );
    let t: Vec<&str> = v.techniques.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(t, ["T1055", "T1547.001"]);
    // Each strong fact alone — injection, persistence, keylogging, credential access, download
    // and execute, inhibit recovery, anti-analysis — is suspicious, with its fact named.
    for (technique, fact_id) in [
        ("T1055", "process_injection"),
        ("T1547.001", "persistence"),
        ("T1056.001", "keylogging"),
        ("T1003.001", "credential_access"),
        ("T1555", "credential_access"),
        ("T1105", "download_execute"),
        ("T1490", "inhibit_recovery"),
        ("T1486", "encrypts_for_ransom"),
        ("T1622", "anti_analysis"),
        ("T1497.001", "anti_analysis"),
    ] {
        let r = report(thick(vec![caps(
            "ev_0010",
            vec![cap(technique, "x", true)],
        )]));
        let v = verdict(&r, &ids());
        assert_eq!(
            v.verdict,
            VerdictWord::Suspicious,
            "{technique}: {}",
            v.summary
        );
        assert!(fact(&v, fact_id).strong, "{technique}");
    }
    // Two tools showing the same fact are still one fact: suspicious, not malicious.
    let r = report(thick(vec![
        caps("ev_0010", vec![cap("T1055", "inject", true)]),
        yara(
            "ev_0011",
            json!([{"rule": "API_Process_Injection", "purpose": "detection",
                    "metadata": {"fact": "process_injection"}}]),
        ),
    ]));
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Suspicious, "{}", v.summary);
    assert_eq!(
        fact(&v, "process_injection").evidence,
        ["ev_0010", "ev_0011"]
    );
}

#[test]
fn a_document_carrying_an_executable_is_suspicious_a_zip_is_not() {
    let exe = || child("1", "invoice.exe", "pe", "ole10native", vec![]);
    let doc = report_of("ole2", vec![], vec![exe()], vec![]);
    let v = verdict(&doc, &ids());
    assert_eq!(v.verdict, VerdictWord::Suspicious, "{}", v.summary);
    let f = fact(&v, "carries_executable");
    assert!(f.strong && f.evidence == ["ev_0100"]);
    for kind in ["pdf", "email", "rtf", "html", "chm", "tnef"] {
        let r = report_of(
            kind,
            vec![],
            vec![child("1", "a.exe", "pe", "x", vec![])],
            vec![],
        );
        assert_eq!(
            verdict(&r, &ids()).verdict,
            VerdictWord::Suspicious,
            "{kind}"
        );
    }
    // In a plain archive it is a fact of weight, not a verdict.
    let zip = report_of(
        "zip",
        vec![],
        vec![child("1", "setup.exe", "pe", "zip", vec![])],
        vec![],
    );
    let v = verdict(&zip, &ids());
    let f = fact(&v, "carries_executable");
    assert!(!f.strong && f.weight == 2);
    assert_eq!(v.verdict, VerdictWord::Unknown, "{}", v.summary);
    // … which counts with another weak fact: a deceptive name makes it suspicious.
    let mut exe = child("1", "invoice.pdf.exe", "pe", "zip", vec![]);
    exe["flags"] = json!(["double_extension"]);
    let v = verdict(&report_of("zip", vec![], vec![exe], vec![]), &ids());
    assert!(fact(&v, "deceptive_name").observations[0].contains("double_extension"));
    assert_eq!(v.verdict, VerdictWord::Suspicious, "{}", v.summary);
}

#[test]
fn a_child_s_verdict_and_facts_reach_the_top_with_its_path() {
    // zip → doc → exe, the exe injecting and persisting.
    let exe = child(
        "1.1.1",
        "a.exe",
        "pe",
        "ole10native",
        vec![caps(
            "ev_0003",
            vec![
                cap("T1055", "inject", true),
                cap("T1547.001", "run key", true),
            ],
        )],
    );
    let doc = with_children(child("1.1", "doc.doc", "ole2", "zip", vec![]), vec![exe]);
    let zip = with_children(child("1", "inner.zip", "zip", "zip", vec![]), vec![doc]);
    let mut r = report_of("zip", vec![], vec![zip], vec![]);
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Malicious, "{}", v.summary);
    let f = fact(&v, "child_malicious");
    assert_eq!(f.child.as_deref(), Some("inner.zip → doc.doc → a.exe"));
    assert!(
        f.observations.iter().any(|o| o.contains("inject")),
        "{:?}",
        f.observations
    );
    assert!(v.claims.iter().any(|c| c.text.contains("inner.zip")));
    fill_children(&mut r, &ids());
    let zip = &r.children[0];
    let doc = &zip.children[0];
    assert_eq!(
        doc.verdict.as_ref().unwrap().verdict,
        VerdictWord::Malicious
    );
    let doc_facts = &doc.verdict.as_ref().unwrap().facts;
    assert!(
        doc_facts
            .iter()
            .any(|f| f.id == "carries_executable" && f.strong)
    );
    assert_eq!(
        zip.children[0].children[0]
            .verdict
            .as_ref()
            .unwrap()
            .verdict,
        VerdictWord::Malicious
    );
}

#[test]
fn bombs_passwords_and_macros_are_their_facts() {
    let bomb = json!({"limit": "ratio", "parent_sha256": "root", "member": "zeros.img",
                      "detail": "x", "evidence": ["ev_0001"]});
    let v = verdict(&report_of("zip", vec![], vec![], vec![bomb]), &ids());
    assert_eq!(v.verdict, VerdictWord::Suspicious);
    assert!(v.claims[0].text.contains("decompression bomb"));

    let mut locked = child("1", "sample.bin", "data", "zip", vec![]);
    locked["password"] = json!("infected");
    let v = verdict(&report_of("zip", vec![], vec![locked], vec![]), &ids());
    assert!(fact(&v, "encrypted_member").observations[0].contains("infected"));
    assert_eq!(v.verdict, VerdictWord::Unknown, "2 of 4: {}", v.summary);

    let doc = |r: Value| {
        report_of(
            "ole2",
            vec![step("document_info", "ev_0001", r)],
            vec![],
            vec![],
        )
    };
    let v = verdict(
        &doc(json!({"format": "ole2", "macros": true, "auto_exec": true})),
        &ids(),
    );
    assert_eq!(v.verdict, VerdictWord::Suspicious);
    assert!(fact(&v, "auto_exec_macro").strong);
    let v = verdict(
        &doc(json!({"format": "ole2", "macros": true, "auto_exec": false})),
        &ids(),
    );
    assert_eq!(fact(&v, "macros").weight, 1);
    assert_eq!(v.verdict, VerdictWord::Unknown);
}

#[test]
fn a_plain_document_with_every_check_is_benign_with_its_basis() {
    let steps = vec![
        step("identify_file", "ev_0001", json!({"kind": "pdf"})),
        step("strings", "ev_0002", json!({})),
        step("iocs_from_file", "ev_0003", json!({"counts": {"url": 2}})),
        yara("ev_0004", json!([])),
        step(
            "document_info",
            "ev_0005",
            json!({"format": "pdf", "macros": false, "auto_exec": false,
                   "pdf": {"javascript": [], "launch_actions": [], "embedded_files": [], "has_xfa": false}}),
        ),
    ];
    let v = verdict(&report_of("pdf", steps, vec![], vec![]), &ids());
    assert_eq!(v.verdict, VerdictWord::Benign, "{}", v.summary);
    assert!(v.summary.contains("without macros"), "{}", v.summary);
    // URLs describe the file; they do not lean either way.
    assert_eq!(fact(&v, "network_indicators").leaning, Leaning::Neutral);
    // A PDF with JavaScript has no such basis.
    let steps = vec![step(
        "document_info",
        "ev_0005",
        json!({"format": "pdf", "macros": false, "auto_exec": false, "pdf": {"javascript": ["app.alert(1)"]}}),
    )];
    let v = verdict(&report_of("pdf", steps, vec![], vec![]), &ids());
    assert!(v.facts.iter().all(|f| f.id != "no_active_content"));
}

#[test]
fn an_installer_s_layout_is_a_basis_for_benign() {
    let r = report(thick(vec![
        step(
            "detect_packer",
            "ev_0010",
            json!({"findings": [{"category": "installer", "name": "NSIS"}]}),
        ),
        pe_info(
            "ev_0011",
            120,
            json!(["1024 bytes of overlay after the last section"]),
        ),
    ]));
    let v = verdict(&r, &ids());
    assert_eq!(v.verdict, VerdictWord::Benign, "{}", v.summary);
    assert_eq!(fact(&v, "installer_layout").leaning, Leaning::Benign);
    assert_eq!(fact(&v, "format_note").weight, 0);
}

#[test]
fn anomalies_and_beaconing_lean_malicious_without_deciding() {
    let r = report(thick(vec![
        pe_info(
            "ev_0010",
            40,
            json!(["entry point lies outside every section"]),
        ),
        caps(
            "ev_0011",
            vec![cap("T1095", "talk over a raw socket", false)],
        ),
        step("iocs_from_file", "ev_0012", json!({"counts": {"ipv4": 1}})),
    ]));
    let mut r2 = r.clone();
    // The thick() iocs step comes first; use the one with the address.
    r2.steps
        .retain(|s| !(s.tool == "iocs_from_file" && s.evidence == ["ev_0003"]));
    let v = verdict(&r2, &ids());
    assert_eq!(fact(&v, "format_anomaly").weight, 1);
    assert_eq!(fact(&v, "beaconing").weight, 2);
    assert!(v.facts.iter().all(|f| f.id != "runtime_typical_imports"));
    assert_eq!(v.verdict, VerdictWord::Unknown, "3 of 4: {}", v.summary);
}

#[test]
fn thin_evidence_is_unknown_and_facts_cited_from_nowhere_count_for_nothing() {
    let v = verdict(&report(vec![]), &ids());
    assert_eq!(v.verdict, VerdictWord::Unknown);
    assert!(v.summary.contains("too thin"), "{}", v.summary);
    let r = report(vec![caps(
        "ev_0010",
        vec![cap("T1055", "inject", true), cap("T1547.001", "run", true)],
    )]);
    let v = verdict(&r, &BTreeSet::new());
    assert_eq!(v.verdict, VerdictWord::Unknown);
    assert!(v.claims.is_empty() && v.techniques.is_empty() && v.facts.is_empty());
}

#[test]
fn claims_are_the_facts_one_each() {
    let r = report(thick(vec![caps(
        "ev_0010",
        vec![cap("T1055", "inject", true), cap("T1129", "resolve", false)],
    )]));
    let v = verdict(&r, &ids());
    assert_eq!(v.claims.len(), v.facts.len());
    for (c, f) in v.claims.iter().zip(&v.facts) {
        assert_eq!(c.evidence, f.evidence);
        assert!(c.text.starts_with(&f.name), "{}", c.text);
    }
    // The strong fact comes first.
    assert_eq!(v.facts[0].id, "process_injection");
}

#[test]
fn plain_text_is_inert_and_with_every_check_benign() {
    let steps = vec![
        step("identify_file", "ev_0001", json!({"kind": "text"})),
        step("strings", "ev_0002", json!({})),
        step("iocs_from_file", "ev_0003", json!({"counts": {}})),
        yara("ev_0004", json!([])),
    ];
    // No format tool answers for text: the sample itself stays unknown, its basis stated.
    let v = verdict(&report_of("text", steps, vec![], vec![]), &ids());
    assert_eq!(fact(&v, "inert_content").leaning, Leaning::Benign);
    // As a member (iocs and a YARA scan answered) it is benign, and an archive of such is too.
    let readme = child(
        "1",
        "README.txt",
        "text",
        "zip",
        vec![
            step("iocs_from_file", "ev_0005", json!({"counts": {}})),
            yara("ev_0006", json!([])),
        ],
    );
    let mut r = report_of("zip", vec![], vec![readme], vec![]);
    fill_children(&mut r, &ids());
    let v = r.children[0].verdict.as_ref().unwrap();
    assert_eq!(v.verdict, VerdictWord::Benign, "{}", v.summary);
    assert_eq!(fact(v, "inert_content").evidence, ["ev_0100"]);
    let v = verdict(&r, &ids());
    assert_eq!(fact(&v, "members_benign").leaning, Leaning::Benign);
}

#[path = "heuristic_tests_code.rs"]
mod code;
