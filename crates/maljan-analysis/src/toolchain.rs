//! `detect_packer`: the packers, protectors, installers, obfuscators and compilers that made a
//! sample, each with the evidence that proves it (section names, entry-point bytes, overlay
//! headers, marker strings with their offsets, the linker version, the Rich header).
//!
//! The signatures are the marks each tool's stub or runtime is known to leave (as Detect It Easy
//! and PEiD read them), kept as data in [`SIGNATURES`]; version numbers are read where the tool
//! writes one. All marker strings are found in one Aho-Corasick pass over the file, so the work is
//! one read of the file whatever the number of signatures; PE structure comes from pe_info's
//! lenient parse.

use std::{collections::BTreeMap, sync::Arc};

use aho_corasick::AhoCorasick;
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
    pe::{PeInfo, PeParts, pe_info},
};

#[path = "toolchain_signatures.rs"]
mod signatures;
use signatures::{FILE_START, SIGNATURES};

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Packer,
    Protector,
    Installer,
    Obfuscator,
    Compiler,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// One fact behind a finding.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Evidence {
    /// section_name, entry_point, header (the file's first bytes), string, overlay,
    /// linker_version, rich_header, clr_header, entropy.
    pub kind: String,
    /// What was seen ("section UPX0", the string found, the bytes at the entry point, …).
    pub detail: String,
    /// Where in the file, when it is one place.
    pub offset: Option<u64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Finding {
    pub category: Category,
    pub name: String,
    pub version: Option<String>,
    /// high: two independent marks or one structural one; medium: one mark; low: a heuristic.
    pub confidence: Confidence,
    pub evidence: Vec<Evidence>,
}

use Category::*;

/// What the sample is made with.
pub fn detect(b: &[u8], budget: &Budget) -> Result<Vec<Finding>, ToolError> {
    contain("toolchain", || {
        // Executables only: a document or script that names a packer is not packed.
        if !matches!(
            crate::identify::identify(&b[..b.len().min(1 << 16)])
                .kind
                .as_str(),
            "pe" | "dos" | "elf" | "macho"
        ) {
            return Ok(Vec::new());
        }
        budget.scan(b.len(), "the marker search")?;
        let pe = if crate::identify::pe_header_offset(b).is_some() || b.starts_with(b"MZ") {
            let parts = PeParts {
                resources: false,
                exports: false,
                limit: 1,
                ..PeParts::default()
            };
            pe_info(b, parts, budget).ok()
        } else {
            None
        };
        let hits = strings_found(b, budget)?;
        let entry = pe.as_ref().and_then(|p| entry_bytes(b, p));
        // Stubs share prologues (`60 E8 00 00 00 00 5D 81 ED` opens ASPack's, yoda's and
        // Enigma's): only the longest entry-point pattern that matches speaks, as the most
        // specific description of the stub.
        let longest_entry = entry.as_ref().map_or(0, |(_, bytes)| {
            SIGNATURES
                .iter()
                .flat_map(|s| s.entry.iter())
                .filter(|pat| pattern_matches(pat, bytes))
                .map(|pat| pattern_len(pat))
                .max()
                .unwrap_or(0)
        });
        let mut findings = Vec::new();
        for s in SIGNATURES {
            let mut evidence = Vec::new();
            if let Some(p) = &pe {
                for sec in p.sections.iter().flatten() {
                    if s.sections.contains(&sec.name.as_str()) {
                        evidence.push(ev("section_name", format!("section {}", sec.name), None));
                    }
                }
            }
            if let Some((at, bytes)) = &entry {
                for pat in s.entry {
                    if pattern_len(pat) == longest_entry && pattern_matches(pat, bytes) {
                        evidence.push(ev(
                            "entry_point",
                            format!("entry point bytes {pat}"),
                            Some(*at),
                        ));
                    }
                }
            }
            for (_, pat) in FILE_START.iter().filter(|(name, _)| *name == s.name) {
                if pattern_matches(pat, b) {
                    evidence.push(ev("header", format!("file starts {pat}"), Some(0)));
                }
            }
            for text in s.strings {
                if let Some(&at) = hits.get(*text) {
                    evidence.push(ev(
                        "string",
                        format!("{:?}", text.trim_end_matches('\0')),
                        Some(at),
                    ));
                }
            }
            // A GCC banner in a MinGW binary is MinGW's.
            if s.name == "GCC" && findings.iter().any(|f: &Finding| f.name == "MinGW GCC") {
                continue;
            }
            if evidence.len() >= s.min {
                let structural = evidence.iter().any(|e| e.kind != "string");
                let confidence = if evidence.len() >= 2 || (structural && s.min == 1) {
                    Confidence::High
                } else {
                    Confidence::Medium
                };
                findings.push(Finding {
                    category: s.category,
                    name: s.name.to_string(),
                    version: version(s.name, b, &hits),
                    confidence,
                    evidence,
                });
            }
        }
        if let Some(p) = &pe {
            pe_findings(p, &mut findings);
        }
        Ok(findings)
    })
}

fn ev(kind: &str, detail: String, offset: Option<u64>) -> Evidence {
    Evidence {
        kind: kind.into(),
        detail,
        offset,
    }
}

/// The first offset of every signature string in `b`, in one pass.
fn strings_found(b: &[u8], budget: &Budget) -> Result<BTreeMap<&'static str, u64>, ToolError> {
    let patterns: Vec<&'static str> = SIGNATURES
        .iter()
        .flat_map(|s| s.strings.iter().copied())
        .collect();
    let bytes: Vec<Vec<u8>> = patterns.iter().map(|p| latin1(p)).collect();
    let ac = AhoCorasick::new(&bytes)
        .map_err(|e| ToolError::tool_failed(format!("marker search: {e}")))?;
    budget.check_cancel()?;
    let mut found = BTreeMap::new();
    for m in ac.find_overlapping_iter(b) {
        found
            .entry(patterns[m.pattern().as_usize()])
            .or_insert(m.start() as u64);
        if found.len() == patterns.len() {
            break;
        }
    }
    Ok(found)
}

/// A signature string's bytes: chars below 256 as one byte each (so `\u{ff}` is 0xFF).
fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

/// The file offset of the entry point and the 32 bytes there.
fn entry_bytes<'b>(b: &'b [u8], p: &PeInfo) -> Option<(u64, &'b [u8])> {
    let s = p.sections.iter().flatten().find(|s| {
        p.entry_point >= s.virtual_address && p.entry_point - s.virtual_address < s.raw_size.max(1)
    })?;
    let at = (p.entry_point - s.virtual_address) as usize + s.raw_offset as usize;
    let bytes = b.get(at..)?;
    Some((at as u64, &bytes[..bytes.len().min(32)]))
}

/// How many bytes `pat` spans.
fn pattern_len(pat: &str) -> usize {
    pat.split_whitespace().count()
}

/// `pat` (hex bytes, `??` any) against the start of `bytes`.
fn pattern_matches(pat: &str, bytes: &[u8]) -> bool {
    let mut n = 0;
    for (i, tok) in pat.split_whitespace().enumerate() {
        n += 1;
        let Some(&b) = bytes.get(i) else { return false };
        if tok != "??" && u8::from_str_radix(tok, 16).ok() != Some(b) {
            return false;
        }
    }
    n > 0
}

/// The version the tool wrote, where it writes one.
fn version(name: &str, b: &[u8], hits: &BTreeMap<&'static str, u64>) -> Option<String> {
    let after = |marker: &str, skip: usize, max: usize| -> Option<String> {
        let at = *hits.get(marker)? as usize + marker.len() + skip;
        let tail = b.get(at..)?;
        let v: String = tail
            .iter()
            .take(max)
            .take_while(|c| c.is_ascii_digit() || **c == b'.')
            .map(|&c| c as char)
            .collect();
        (!v.is_empty() && v.contains('.')).then_some(v)
    };
    match name {
        // "4.22\0UPX!": the version is written just before the UPX! block.
        "UPX" => {
            let at = *hits.get("UPX!")? as usize;
            let head = b.get(at.checked_sub(5)?..at)?;
            let v: String = head
                .iter()
                .take_while(|c| c.is_ascii_digit() || **c == b'.')
                .map(|&c| c as char)
                .collect();
            (v.len() >= 3).then_some(v)
        }
        "NSIS" => after("Nullsoft Install System", 2, 8),
        "Inno Setup" => after("Inno Setup Setup Data", 2, 10),
        "ConfuserEx" => after("ConfuserEx v", 0, 10),
        "PyInstaller" => {
            // The CArchive cookie: magic, length, TOC offset, TOC length, Python version (BE).
            let at = *hits.get("MEI\x0c\x0b\x0a\x0b\x0e")? as usize + 20;
            let v = u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?);
            (v >= 200).then(|| format!("Python {}.{}", v / 100, v % 100))
        }
        "Go" => {
            let at = *hits.get("\u{ff} Go buildinf:")? as usize;
            let tail = b.get(at..at.saturating_add(64).min(b.len()))?;
            let p = memchr::memmem::find(tail, b"go1.")?;
            let v: String = tail[p..]
                .iter()
                .take(12)
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'.')
                .map(|&c| c as char)
                .collect();
            Some(v)
        }
        "Rust" => {
            let at = *hits.get("/rustc/")? as usize + 7;
            let hash = b.get(at..at + 40)?;
            hash.iter()
                .all(u8::is_ascii_hexdigit)
                .then(|| format!("rustc commit {}", String::from_utf8_lossy(hash)))
        }
        "GCC" | "MinGW GCC" => {
            let at = *hits.get("GCC: (")? as usize;
            let tail = b.get(at..at.saturating_add(80).min(b.len()))?;
            let end = memchr::memchr(0, tail).unwrap_or(tail.len());
            Some(String::from_utf8_lossy(&tail[5..end]).trim().to_string())
        }
        _ => None,
    }
}

/// Findings only PE structure gives: Delphi's linker, MSVC's Rich header, .NET, and a packed
/// image no signature names.
fn pe_findings(p: &PeInfo, findings: &mut Vec<Finding>) {
    if p.linker_version == "2.25"
        && let Some(d) = findings.iter_mut().find(|f| f.name == "Delphi")
    {
        d.evidence
            .push(ev("linker_version", "linker 2.25 (Borland)".into(), None));
        d.confidence = Confidence::High;
    }
    if let Some(rich) = p.rich_header.as_ref().filter(|r| !r.is_empty()) {
        findings.push(Finding {
            category: Compiler,
            name: "Microsoft Visual C/C++".into(),
            version: Some(format!("linker {}", p.linker_version)),
            confidence: Confidence::High,
            evidence: vec![ev(
                "rich_header",
                format!("Rich header with {} tool entries", rich.len()),
                None,
            )],
        });
    }
    if p.is_dotnet {
        findings.push(Finding {
            category: Compiler,
            name: ".NET".into(),
            version: None,
            confidence: Confidence::High,
            evidence: vec![ev("clr_header", "CLR runtime header present".into(), None)],
        });
    }
    let packed = findings
        .iter()
        .any(|f| matches!(f.category, Packer | Protector));
    if !packed
        && let Some(s) = p
            .sections
            .iter()
            .flatten()
            .find(|s| Some(&s.name) == p.entry_section.as_ref())
        && s.entropy >= 7.0
        && s.raw_size >= 1024
        && p.import_count < 20
    {
        findings.push(Finding {
            category: Packer,
            name: "unknown packer".into(),
            version: None,
            confidence: Confidence::Low,
            evidence: vec![ev(
                "entropy",
                format!(
                    "entry section {} has entropy {:.2} and the image imports {} functions",
                    s.name, s.entropy, p.import_count
                ),
                Some(u64::from(s.raw_offset)),
            )],
        });
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DetectPackerArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DetectPackerOutput {
    pub read_path: String,
    /// A packer or protector was found (the code on disk is not the code that runs).
    pub packed: bool,
    pub packers: Vec<String>,
    pub installers: Vec<String>,
    pub compilers: Vec<String>,
    pub findings: Vec<Finding>,
    /// A PE's Authenticode signature, checked (see [`crate::authenticode`]); null when it
    /// carries none.
    pub signature: Option<crate::authenticode::Signature>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "detect_packer",
            "Packers, protectors, installers, .NET obfuscators and compilers (UPX, ASPack, Themida, VMProtect, \
             NSIS, Inno Setup, ConfuserEx, PyInstaller, Go, Rust, Delphi, MSVC, …), each with the evidence \
             that proves it: section names, entry-point bytes, marker strings and their offsets, the linker; \
             and a PE's Authenticode signature checked (digest, signer's signature, chain structure).",
        )
        .title("Packer and compiler detection")
        .timeout_s(60),
        move |ctx, a: DetectPackerArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, |s, ctx| {
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(s.bytes().len(), &cancel);
                    let findings = detect(s.bytes(), &budget)?;
                    let names = |cats: &[Category]| -> Vec<String> {
                        findings.iter().filter(|f| cats.contains(&f.category)).map(|f| f.name.clone()).collect()
                    };
                    Ok(DetectPackerOutput {
                        read_path: s.read_path(),
                        packed: findings.iter().any(|f| matches!(f.category, Packer | Protector)),
                        packers: names(&[Packer, Protector, Obfuscator]),
                        installers: names(&[Installer]),
                        compilers: names(&[Compiler]),
                        findings,
                        signature: crate::common::contain("the signature check", || {
                            Ok(crate::authenticode::check(s.bytes()))
                        })
                        .ok()
                        .flatten(),
                    })
                })
                .await
            }
        },
    );
}
