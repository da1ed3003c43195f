//! Which fact each tool's finding establishes (the facts table is in [`crate::facts`]). One
//! function per tool; each adds observations, with the step's evidence ids, to the sample's facts.

use maljan_triage::{StepReport, report::Technique};
use serde_json::Value;

use crate::{
    facts::{Carrier, FactDef, Facts, carries_executable, lookup, technique_fact},
    heuristic::{ORDINARY_IMPORTS, list, network_counts, ok, text},
};
use maljan_triage::report::Leaning;

/// A YARA match's purpose: `identification` (packers, compilers, installers, file kinds: identity,
/// never strong), `detection` (known-bad content) or `unclassified` (a third-party rule that says
/// neither). yara_scan reports it per match; an older answer without it falls back on the
/// built-in rules' `category` metadata.
fn purpose(m: &Value) -> &str {
    let meta = m.get("metadata");
    let declared = m
        .get("purpose")
        .and_then(Value::as_str)
        .or_else(|| meta.and_then(|x| x.get("purpose")).and_then(Value::as_str));
    if let Some(p) = declared {
        return p;
    }
    match meta.map(|x| text(x, "category")).unwrap_or("") {
        "packer" | "protector" | "installer" | "compiler" => "identification",
        "test" => "detection",
        _ => "unclassified",
    }
}

/// yara_scan: detection rules establish their `fact` (or `known_bad_signature`) and may name a
/// family; identification rules establish identity facts (packed, installer layout, identified
/// as …), never a strong one. An unclassified third-party rule counts as a detection that names
/// no family unless its metadata gives one (`family` or `malware_family`): a rules directory is
/// configured to detect, and a rule that is only identity says so with `purpose = "identification"`.
pub fn yara(steps: &[StepReport], kind: Option<&str>, facts: &mut Facts) {
    let Some(step) = ok(steps, "yara_scan") else {
        return;
    };
    for m in list(step.result.as_ref(), "matches") {
        let rule = text(m, "rule");
        let meta = m.get("metadata").cloned().unwrap_or(Value::Null);
        let category = text(&meta, "category");
        let purpose = purpose(m);
        let observation = format!(
            "yara_scan: rule {rule} ({purpose}{})",
            match text(&meta, "description") {
                "" => String::new(),
                d => format!(": {d}"),
            }
        );
        let named = lookup(text(&meta, "fact")).copied();
        let def: FactDef = if purpose == "identification" {
            let def = match (named, category) {
                (Some(d), _) if d.id == "carries_executable" => {
                    carries_executable(Carrier::of(kind, ""))
                }
                (Some(d), _) => d,
                (None, "packer" | "protector" | "obfuscator") => *lookup("packed").expect("table"),
                (None, "installer") => *lookup("installer_layout").expect("table"),
                (None, _) => *lookup("identified_as").expect("table"),
            };
            // Identity is never strong: the strong form of a fact needs another tool's finding.
            FactDef {
                strong: false,
                weight: if def.strong {
                    def.weight.min(2)
                } else {
                    def.weight
                },
                ..def
            }
        } else {
            let family = text(&meta, "family");
            let family = if family.is_empty() {
                text(&meta, "malware_family")
            } else {
                family
            };
            if !family.is_empty() && facts.family.is_none() {
                facts.family = Some(family.to_string());
            }
            match named {
                Some(d) if d.leaning == Leaning::Malicious => d,
                _ => *lookup("known_bad_signature").expect("table"),
            }
        };
        facts.add_def(def, None, observation, &step.evidence);
    }
}

/// document_info: auto-executing content, macros, or (for a benign reading) none of it.
pub fn document(steps: &[StepReport], facts: &mut Facts) {
    let Some(step) = ok(steps, "document_info") else {
        return;
    };
    let Some(r) = &step.result else { return };
    let flag = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
    let any = |section: &str, keys: &[&str]| {
        r.get(section).is_some_and(|s| {
            keys.iter().any(|k| match s.get(*k) {
                Some(Value::Array(a)) => !a.is_empty(),
                Some(Value::Bool(b)) => *b,
                Some(Value::Number(n)) => n.as_u64().unwrap_or(0) > 0,
                _ => false,
            })
        })
    };
    if flag("auto_exec") {
        facts.add(
            "auto_exec_macro",
            "document_info: content runs when the document opens (auto-exec macro, OpenAction, DDEAUTO)",
            &step.evidence,
        );
    } else if flag("macros") {
        facts.add(
            "macros",
            "document_info: the document carries macros",
            &step.evidence,
        );
    }
    let active = flag("macros")
        || flag("auto_exec")
        || any(
            "pdf",
            &["javascript", "launch_actions", "embedded_files", "has_xfa"],
        )
        || any(
            "ooxml",
            &[
                "has_vba_project",
                "remote_template",
                "embedded_objects",
                "activex",
                "dde",
                "xlm_macrosheets",
            ],
        )
        || any("rtf", &["objects", "objdata"]);
    if !active {
        facts.add(
            "no_active_content",
            format!(
                "document_info: a {} without macros, scripts, actions or embedded objects",
                text(r, "format")
            ),
            &step.evidence,
        );
    }
}

/// detect_packer: packers and protectors are `packed` (neutral), installers a benign layout,
/// compilers identity; a valid Authenticode signature speaks for a benign reading, one that does
/// not match the file (or does not verify) leans malicious. A signature this check could not
/// verify either way (an unknown algorithm, a missing issuer) is neither.
pub fn packer(steps: &[StepReport], facts: &mut Facts) {
    let Some(step) = ok(steps, "detect_packer") else {
        return;
    };
    if let Some(sig) = step.result.as_ref().and_then(|r| r.get("signature"))
        && sig.is_object()
    {
        let flag = |k: &str| sig.get(k).and_then(Value::as_bool);
        let signer = text(sig, "signer");
        let chain = list(Some(sig), "chain").len();
        if flag("valid") == Some(true) {
            facts.add(
                "valid_signature",
                format!(
                    "detect_packer: Authenticode signature valid — signed by {signer} ({} digest matches the image, signer's signature and a chain of {chain} verified)",
                    text(sig, "digest_algorithm")
                ),
                &step.evidence,
            );
        } else if flag("digest_matches") == Some(false)
            || flag("signer_signature_verified") == Some(false)
            || list(Some(sig), "chain")
                .iter()
                .any(|l| l.get("verified").and_then(Value::as_bool) == Some(false))
        {
            let problems: Vec<&str> = list(Some(sig), "problems")
                .into_iter()
                .filter_map(Value::as_str)
                .take(3)
                .collect();
            facts.add(
                "signature_mismatch",
                format!(
                    "detect_packer: the signature does not match the file (signer {signer}): {}",
                    problems.join("; ")
                ),
                &step.evidence,
            );
        }
    }
    for finding in list(step.result.as_ref(), "findings") {
        let category = text(finding, "category");
        let name = text(finding, "name");
        let id = match category {
            "packer" | "protector" | "obfuscator" => "packed",
            "installer" => "installer_layout",
            _ => "identified_as",
        };
        facts.add(
            id,
            format!("detect_packer: {name} ({category})"),
            &step.evidence,
        );
    }
}

/// code_capabilities: a discriminating capability establishes its fact (and its technique is the
/// verdict's); the others are described, never scored. An older answer without the
/// `discriminating` field counts only the techniques ordinary software seldom needs.
pub fn capabilities(steps: &[StepReport], facts: &mut Facts, techniques: &mut Vec<Technique>) {
    let Some(step) = ok(steps, "code_capabilities") else {
        return;
    };
    let caps = list(step.result.as_ref(), "capabilities");
    let network_code = caps
        .iter()
        .any(|c| matches!(text(c, "technique"), "T1095" | "T1071.001"));
    for cap in caps {
        let id = text(cap, "technique");
        let name = text(cap, "name");
        let evidence: Vec<&str> = list(Some(cap), "evidence")
            .into_iter()
            .map(|e| text(e, "detail"))
            .filter(|d| !d.is_empty())
            .take(6)
            .collect();
        let observation = format!(
            "code_capabilities: {name} ({id}){}",
            if evidence.is_empty() {
                String::new()
            } else {
                format!(": {}", evidence.join(", "))
            }
        );
        let discriminating = cap
            .get("discriminating")
            .and_then(Value::as_bool)
            .unwrap_or_else(|| {
                let base = id.split('.').next().unwrap_or(id);
                ["T1055", "T1056", "T1003", "T1555"].contains(&base)
            });
        match technique_fact(id) {
            Some(fact) if fact == "packed" || discriminating => {
                facts.add(fact, observation, &step.evidence);
                if !techniques.iter().any(|t| t.id == id) {
                    techniques.push(Technique {
                        id: id.to_string(),
                        name: text(cap, "technique_name").to_string(),
                        evidence: step.evidence.clone(),
                    });
                }
            }
            _ => facts.add("described_capabilities", observation, &step.evidence),
        }
    }
    // A hard-coded IP address and the code to talk to it.
    if network_code
        && let Some((iocs, found)) = network_counts(steps)
        && let Some((kind, n)) = found.iter().find(|(k, _)| k == "ipv4" || k == "ipv6")
    {
        let evidence = [step.evidence.clone(), iocs.evidence.clone()].concat();
        facts.add(
            "beaconing",
            format!(
                "iocs_from_file: {n} {kind} address(es), and code_capabilities: socket or HTTP code"
            ),
            &evidence,
        );
    }
}

/// Anomalies of pe_info / elf_info / macho_info: the marks packing leaves go to `packed`, the
/// ones ordinary builds leave to `format_note`, the rest to `format_anomaly`.
pub fn format(steps: &[StepReport], facts: &mut Facts) {
    for tool in ["pe_info", "elf_info", "macho_info"] {
        let Some(step) = ok(steps, tool) else {
            continue;
        };
        for a in list(step.result.as_ref(), "anomalies")
            .into_iter()
            .filter_map(Value::as_str)
        {
            let lower = a.to_ascii_lowercase();
            let id = if [
                "writable and executable",
                "high entropy",
                "empty on disk",
                "no imports",
                "upx",
                "no section headers",
            ]
            .iter()
            .any(|k| lower.contains(k))
            {
                "packed"
            } else if ["timestamp is zero", "overlay after the last section"]
                .iter()
                .any(|k| lower.contains(k))
            {
                "format_note"
            } else {
                "format_anomaly"
            };
            facts.add(id, format!("{tool}: {a}"), &step.evidence);
        }
    }
}

/// iocs_from_file: confident network indicators (the tool counts only those) describe the file.
pub fn iocs(steps: &[StepReport], facts: &mut Facts) {
    let Some((step, found)) = network_counts(steps) else {
        return;
    };
    if !found.is_empty() {
        let found: Vec<String> = found.iter().map(|(k, n)| format!("{n} {k}")).collect();
        facts.add(
            "network_indicators",
            format!("iocs_from_file: {}", found.join(", ")),
            &step.evidence,
        );
    }
}

/// What the C runtime's start-up and an ordinary program's imports show: resolving API at run
/// time, enumerating files, reading the system's version, the CRT's debugger check.
const RUNTIME_TYPICAL: &[&str] = &["T1129", "T1083", "T1082", "T1622"];

/// An ordinary program's import table: many functions from several libraries (a packer's stub
/// imports a handful), and nothing described beyond what the C runtime does (a program that
/// encrypts, captures, starts processes or makes memory executable has no such basis, even when
/// nothing accuses it).
pub fn ordinary_imports(steps: &[StepReport], facts: &mut Facts) {
    let beyond_runtime = ok(steps, "code_capabilities").is_some_and(|s| {
        list(s.result.as_ref(), "capabilities")
            .iter()
            .any(|c| !RUNTIME_TYPICAL.contains(&text(c, "technique")))
    });
    if beyond_runtime {
        return;
    }
    if let Some(step) = ok(steps, "pe_info")
        && let Some(r) = &step.result
    {
        let count = r.get("import_count").and_then(Value::as_u64).unwrap_or(0);
        let dlls: Vec<&str> = list(Some(r), "imports")
            .into_iter()
            .map(|d| text(d, "dll"))
            .collect();
        let dotnet = r.get("is_dotnet").and_then(Value::as_bool).unwrap_or(false);
        if count >= ORDINARY_IMPORTS && dlls.len() >= 2 && !dotnet {
            facts.add(
                "runtime_typical_imports",
                format!(
                    "pe_info: {count} imports from {} libraries ({}), nothing beyond the C runtime's",
                    dlls.len(),
                    dlls.iter().take(6).copied().collect::<Vec<_>>().join(", ")
                ),
                &step.evidence,
            );
        }
    }
    if let Some(step) = ok(steps, "elf_info")
        && let Some(r) = &step.result
    {
        let count = r.get("imported_count").and_then(Value::as_u64).unwrap_or(0);
        let needed: Vec<&str> = list(Some(r), "needed")
            .into_iter()
            .filter_map(Value::as_str)
            .collect();
        if count >= ORDINARY_IMPORTS && !needed.is_empty() {
            facts.add(
                "runtime_typical_imports",
                format!(
                    "elf_info: {count} imported symbols from {}, nothing beyond the C runtime's",
                    needed.join(", ")
                ),
                &step.evidence,
            );
        }
    }
}
