//! `code_capabilities`: what the code can do — injects into processes, persists through Run keys or
//! services, downloads, keylogs, checks for debuggers, encrypts, … — each with its MITRE ATT&CK
//! technique id and the evidence: the imports (by DLL) and strings (with offsets) that prove it,
//! and structure (a packer found by [`crate::toolchain`]).
//!
//! A capability is [`Rule`]s of feature groups: every group must be met, a group by `min` of its
//! features. Features are API names (matched against the PE import table, A/W/Ex variants
//! included, and as strings, which also catches API resolved by name at run time) and marker
//! strings (ASCII and UTF-16LE, optionally case-insensitive), found in one Aho-Corasick pass.
//! It reads imports and strings, and the code only where an import alone says too little
//! ([`crate::capabilities_code`]: SetWindowsHookEx called with WH_KEYBOARD_LL; VirtualAlloc or
//! VirtualProtect asked for PAGE_EXECUTE_READWRITE with a thread started, or a call made, into it
//! just after — a shellcode loader, where RWX alone is what JITs do too). capa, which
//! follows the code, remains the deeper look (see bench/analysis_capabilities.md).
//!
//! Capabilities **describe**, as capa's do; each rule also says whether it is *discriminating*:
//! a combination of imports, strings and constants that separates programs doing it on purpose
//! (OpenProcess + VirtualAllocEx + WriteProcessMemory + CreateRemoteThread; a Run-key path with
//! RegSetValueEx; a low-level keyboard hook; a credential store's path with its reader). Only
//! discriminating findings accuse (maljan's verdict turns them into facts); resolving API at run
//! time (T1129), enumerating files (T1083), a debugger check the C runtime makes (T1622) or a
//! socket import alone are descriptions, never scored. An API name found as a string in a DLL's
//! own export table is not a use of it (a system DLL exports these names), so it does not count.
//! Nor does a combination of native system calls in a layer that forwards the whole native API
//! (wow64.dll; [`native`]): it is described, with that basis as its first evidence.

use std::{collections::BTreeMap, sync::Arc};

use aho_corasick::AhoCorasickBuilder;
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
    pe::{PeParts, pe_info},
    toolchain::Evidence,
    toolchain::{self, Category},
};

#[path = "capabilities_native.rs"]
mod native;
#[path = "capabilities_rules.rs"]
mod rules;
use F::{Api, NoCase, Str};
use rules::{F, RULES};

/// One capability the sample has, with its technique and evidence.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct CapabilityFinding {
    pub name: String,
    /// The ATT&CK technique id (T1055, T1547.001, …).
    pub technique: String,
    pub technique_name: String,
    pub tactic: String,
    /// Whether it separates programs that do it on purpose: only these accuse (maljan's verdict
    /// counts them as facts); the others describe what ordinary programs also do.
    pub discriminating: bool,
    /// import (detail "DLL!Function"), string (with its offset), code (a call site), or packer.
    pub evidence: Vec<Evidence>,
}

/// The capabilities of `b`, each with its evidence.
pub fn capabilities(b: &[u8], budget: &Budget) -> Result<Vec<CapabilityFinding>, ToolError> {
    contain("capabilities", || {
        budget.scan(b.len(), "the capability search")?;
        let (imports, exports, is_dll): (Vec<(String, String)>, Vec<String>, bool) =
            if b.starts_with(b"MZ") {
                let parts = PeParts {
                    resources: false,
                    exports: true,
                    sections: false,
                    limit: 100_000,
                    ..PeParts::default()
                };
                let info = pe_info(b, parts, budget).ok();
                let exports = info
                    .as_ref()
                    .and_then(|p| p.exports.as_ref())
                    .map(|e| e.functions.iter().filter_map(|f| f.name.clone()).collect())
                    .unwrap_or_default();
                let is_dll = info.as_ref().is_some_and(|p| p.is_dll);
                let imports = info
                    .and_then(|p| p.imports)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|d| d.functions.into_iter().map(move |f| (d.dll.clone(), f)))
                    .collect();
                (imports, exports, is_dll)
            } else {
                (Vec::new(), Vec::new(), false)
            };
        let layer = native::native_layer(is_dll, &imports, &exports);
        let mut strings = Strings::find(b, budget)?;
        strings.forget_exports(&exports);
        let mut out = Vec::new();
        for r in RULES {
            let mut evidence = Vec::new();
            let met = r.groups.iter().all(|(min, feats)| {
                let hits: Vec<Evidence> = feats
                    .iter()
                    .filter_map(|f| feature(f, &imports, &strings))
                    .collect();
                let ok = hits.len() >= *min;
                if ok {
                    evidence.extend(hits);
                }
                ok
            });
            if met {
                evidence.dedup_by(|a, b| a.detail == b.detail);
                // A library exporting the capability's own API (kernelbase, a binding)
                // provides it to others: a description of what it offers, not a use. So does a
                // layer over the native API (wow64) whose combination is all forwarded calls.
                let forwarded = layer
                    .as_ref()
                    .filter(|l| r.discriminating && only_forwarded(r, &imports, &evidence, l));
                if let Some(l) = forwarded {
                    evidence.insert(
                        0,
                        Evidence {
                            kind: "structure".into(),
                            detail: l.basis.clone(),
                            offset: None,
                        },
                    );
                }
                out.push(CapabilityFinding {
                    name: r.name.into(),
                    technique: r.technique.into(),
                    technique_name: r.technique_name.into(),
                    tactic: r.tactic.into(),
                    discriminating: r.discriminating
                        && !implements(r, &exports)
                        && forwarded.is_none(),
                    evidence,
                });
            }
        }
        let loader = crate::capabilities_code::shellcode_runs(b, budget)?;
        let rwx = crate::capabilities_code::rwx_memory(b, budget)?;
        if !loader.is_empty() {
            // RWX memory and code started in it at once: what a shellcode loader does. A
            // library exporting those very calls (kernelbase) offers them: a description.
            let offers = ["VirtualAlloc", "VirtualProtect", "CreateThread"]
                .iter()
                .any(|api| exports.iter().any(|e| e == api));
            out.push(CapabilityFinding {
                name: "run code in memory it made writable and executable (a shellcode loader)"
                    .into(),
                technique: "T1620".into(),
                technique_name: "Reflective Code Loading".into(),
                tactic: "defense-evasion".into(),
                discriminating: !offers,
                evidence: loader,
            });
        } else if !rwx.is_empty() {
            // A description: shellcode loaders do it, and so do JIT compilers.
            out.push(CapabilityFinding {
                name: "make memory writable and executable (RWX)".into(),
                technique: "T1620".into(),
                technique_name: "Reflective Code Loading".into(),
                tactic: "defense-evasion".into(),
                discriminating: false,
                evidence: rwx,
            });
        }
        let hooks = crate::capabilities_code::keyboard_hooks(b, budget)?;
        if !hooks.is_empty() {
            out.push(CapabilityFinding {
                name: "capture keystrokes with a low-level keyboard hook".into(),
                technique: "T1056.001".into(),
                technique_name: "Keylogging".into(),
                tactic: "collection".into(),
                discriminating: true,
                evidence: hooks,
            });
        }
        for f in toolchain::detect(b, budget)? {
            if matches!(f.category, Category::Packer | Category::Protector) {
                out.push(CapabilityFinding {
                    name: format!("packed with {}", f.name),
                    technique: "T1027.002".into(),
                    technique_name: "Software Packing".into(),
                    tactic: "defense-evasion".into(),
                    // Packing is identity (installers and ordinary programs are packed too).
                    discriminating: false,
                    evidence: f.evidence,
                });
            }
        }
        Ok(out)
    })
}

/// Whether `exports` holds one of the API names `r` looks for (A/W/Ex variants included).
fn implements(r: &rules::Rule, exports: &[String]) -> bool {
    r.groups
        .iter()
        .flat_map(|(_, feats)| feats.iter())
        .any(|f| match *f {
            Api(name) => exports.iter().any(|e| {
                e.strip_prefix(name)
                    .is_some_and(|rest| matches!(rest, "" | "A" | "W" | "Ex" | "ExA" | "ExW"))
            }),
            _ => false,
        })
}

/// Whether every group of `r` is met by native functions `layer` forwards, and none of the imports
/// `evidence` names is another (an injector DLL importing WriteProcessMemory beside stays one).
fn only_forwarded(
    r: &rules::Rule,
    imports: &[(String, String)],
    evidence: &[Evidence],
    layer: &native::NativeLayer,
) -> bool {
    let forwarded: Vec<(String, String)> = imports
        .iter()
        .filter(|(dll, f)| layer.forwards(dll, f))
        .cloned()
        .collect();
    let no_strings = Strings(BTreeMap::new());
    let groups_met = r.groups.iter().all(|(min, feats)| {
        feats
            .iter()
            .filter(|f| feature(f, &forwarded, &no_strings).is_some())
            .count()
            >= *min
    });
    let other_imports = evidence.iter().any(|e| {
        e.kind == "import"
            && e.detail
                .split_once('!')
                .is_none_or(|(dll, f)| !layer.forwards(dll, f))
    });
    groups_met && !other_imports
}

/// An API is met by an import (name, or name + A/W/Ex/ExA/ExW) or, failing that, by its name as
/// a string; a string by its first occurrence.
fn feature(f: &F, imports: &[(String, String)], strings: &Strings) -> Option<Evidence> {
    let found = |s: &str| {
        strings.at(s).map(|at| Evidence {
            kind: "string".into(),
            detail: format!("{s:?}"),
            offset: Some(at),
        })
    };
    match *f {
        Api(name) => imports
            .iter()
            .find(|(_, func)| {
                func.strip_prefix(name)
                    .is_some_and(|rest| matches!(rest, "" | "A" | "W" | "Ex" | "ExA" | "ExW"))
            })
            .map(|(dll, func)| Evidence {
                kind: "import".into(),
                detail: format!("{dll}!{func}"),
                offset: None,
            })
            .or_else(|| found(name)),
        Str(s) | NoCase(s) => found(s),
    }
}

/// Where each feature string first occurs, ASCII or UTF-16LE.
struct Strings(BTreeMap<&'static str, u64>);

/// API names shorter than this (send, connect, system) are matched as strings only whole, between
/// NULs as in a symbol table: inside other words they mean nothing.
const WHOLE_WORD_BELOW: usize = 8;

impl Strings {
    fn find(b: &[u8], budget: &Budget) -> Result<Self, ToolError> {
        // (name, pattern, case-insensitive)
        let mut patterns: Vec<(&'static str, Vec<u8>, bool)> = Vec::new();
        for r in RULES {
            for (_, feats) in r.groups {
                for f in *feats {
                    let (s, nocase) = match *f {
                        Api(s) if s.len() < WHOLE_WORD_BELOW => {
                            patterns.push((s, [&b"\0"[..], s.as_bytes(), b"\0"].concat(), false));
                            continue;
                        }
                        Api(s) | Str(s) => (s, false),
                        NoCase(s) => (s, true),
                    };
                    patterns.push((s, s.as_bytes().to_vec(), nocase));
                    patterns.push((
                        s,
                        s.encode_utf16().flat_map(u16::to_le_bytes).collect(),
                        nocase,
                    ));
                }
            }
        }
        patterns.sort();
        patterns.dedup();
        let mut found = BTreeMap::new();
        for case_insensitive in [false, true] {
            let set: Vec<&(&'static str, Vec<u8>, bool)> = patterns
                .iter()
                .filter(|p| p.2 == case_insensitive)
                .collect();
            let ac = AhoCorasickBuilder::new()
                .ascii_case_insensitive(case_insensitive)
                .build(set.iter().map(|p| &p.1))
                .map_err(|e| ToolError::tool_failed(format!("capability search: {e}")))?;
            for m in ac.find_overlapping_iter(b) {
                let (name, pat, _) = set[m.pattern().as_usize()];
                let at = m.start() as u64 + u64::from(pat.first() == Some(&0));
                found
                    .entry(*name)
                    .and_modify(|v: &mut u64| *v = (*v).min(at))
                    .or_insert(at);
            }
            budget.check_cancel()?;
        }
        Ok(Self(found))
    }

    fn at(&self, s: &str) -> Option<u64> {
        self.0.get(s).copied()
    }

    /// A DLL's own export names are not uses of those APIs: they stop counting as strings
    /// (A/W/Ex variants of a feature included).
    fn forget_exports(&mut self, exports: &[String]) {
        if exports.is_empty() {
            return;
        }
        let exported: std::collections::HashSet<&str> =
            exports.iter().map(String::as_str).collect();
        self.0.retain(|name, _| {
            !["", "A", "W", "Ex", "ExA", "ExW"]
                .iter()
                .any(|suffix| exported.contains(format!("{name}{suffix}").as_str()))
        });
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CapabilitiesOutput {
    pub read_path: String,
    pub capabilities: Vec<CapabilityFinding>,
    /// The distinct technique ids, sorted.
    pub techniques: Vec<String>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "code_capabilities",
            "What the sample's code can do, from its imports, strings and structure: process injection, \
             persistence (Run keys, services, tasks, cron), downloads, C2, keylogging, anti-debug, crypto, \
             discovery, …; each with its ATT&CK technique id and the imports and strings that prove it.",
        )
        .title("Capabilities (ATT&CK)")
        .timeout_s(60),
        move |ctx, a: CapabilitiesArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, |s, ctx| {
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(s.bytes().len(), &cancel);
                    let capabilities = capabilities(s.bytes(), &budget)?;
                    let mut techniques: Vec<String> = capabilities.iter().map(|c| c.technique.clone()).collect();
                    techniques.sort();
                    techniques.dedup();
                    Ok(CapabilitiesOutput { read_path: s.read_path(), capabilities, techniques })
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_exporting_the_api_implements_it_rather_than_using_it() {
        let inject = RULES
            .iter()
            .find(|r| r.technique == "T1055" && r.discriminating)
            .unwrap();
        let kernelbase: Vec<String> = ["CreateRemoteThreadEx", "VirtualAllocEx", "GetVersion"]
            .map(String::from)
            .into();
        assert!(implements(inject, &kernelbase));
        assert!(!implements(inject, &["PyInit_win32api".to_string()]));
    }

    #[test]
    fn a_dll_s_own_export_names_are_not_strings_it_uses() {
        let b = b"\0OpenProcess\0VirtualAllocEx\0";
        let mut s = Strings::find(b, &Budget::for_file(b.len(), &|| false)).unwrap();
        assert!(s.at("VirtualAllocEx").is_some());
        s.forget_exports(&["VirtualAllocEx".to_string(), "OpenProcessToken".to_string()]);
        assert!(s.at("VirtualAllocEx").is_none());
        // OpenProcessToken is another function: OpenProcess stays.
        assert!(s.at("OpenProcess").is_some());
    }
}
