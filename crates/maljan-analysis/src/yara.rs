//! `yara_scan`: YARA rules (yara-x, pure Rust) over the sample or a text.
//!
//! A small curated rule set is built in (`rules/*.yar` of this crate: EICAR, packers and
//! installers, droppers and download cradles, suspicious API sets), so the tool works on a fresh
//! install. A configured rules directory adds to it: a ruleset is `<rules_dir>/<name>/` (all
//! `*.yar` / `*.yara` below it); "default" is the built-in set plus `<rules_dir>/default/` when it
//! exists, else plus the whole directory; "builtin" is the built-in set alone. With
//! `builtin_rules` off (`maljan serve analysis --no-builtin-rules`) the directory replaces the
//! built-in set. Rules are compiled once per ruleset and kept. With neither, the tool is
//! unavailable, and the manifest says why and how to fix it.
//!
//! Each match carries its rule's **purpose**: `identification` (packers, compilers, installers,
//! file kinds — identity, not malice), `detection` (known-bad content such as EICAR) or
//! `unclassified`. The built-in rules declare it in their `purpose` metadata (with `fact`, the
//! fact of maljan's facts table a detection shows, and `family` when it names one). A third-party
//! rule that declares none is `identification` when its category metadata, tags or name say it
//! identifies a packer, protector, compiler, installer or file type (the PEiD-style rule sets),
//! and `unclassified` otherwise; maljan's verdict counts an unclassified match as a detection
//! that names no family (unless the rule's `family` / `malware_family` metadata gives one).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use maljan_server::{Probe, Registry, ToolError, ToolMeta, Unavailable};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::AnalysisConfig;
#[cfg(feature = "yara")]
use crate::common::open_sample;

/// The ceiling on a scan's timeout (the manifest's timeout_s).
pub const TIMEOUT_S: u64 = 60;

/// Words in a third-party rule's category, tags or name that mark it as identification.
const IDENTIFICATION_WORDS: &[&str] = &[
    "packer",
    "protector",
    "compiler",
    "installer",
    "peid",
    "filetype",
    "file_type",
    "linker",
];

/// A rule's purpose: its `purpose` metadata when it is one of the words, else identification
/// when its category, tags or name say so, else unclassified.
pub fn purpose(
    rule: &str,
    tags: &[String],
    metadata: &serde_json::Map<String, serde_json::Value>,
) -> &'static str {
    match metadata.get("purpose").and_then(|v| v.as_str()) {
        Some("identification") => return "identification",
        Some("detection") => return "detection",
        _ => {}
    }
    let category = metadata
        .get("category")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let identifies = |s: &str| {
        let s = s.to_ascii_lowercase();
        IDENTIFICATION_WORDS.iter().any(|w| s.contains(w))
    };
    if identifies(category) || tags.iter().any(|t| identifies(t)) || identifies(rule) {
        "identification"
    } else {
        "unclassified"
    }
}

/// The built-in rule files, by name (their namespace is `builtin_<name>`).
pub const BUILTIN_RULES: &[(&str, &str)] = &[
    ("test_files", include_str!("../rules/test_files.yar")),
    ("packers", include_str!("../rules/packers.yar")),
    ("droppers", include_str!("../rules/droppers.yar")),
    (
        "suspicious_apis",
        include_str!("../rules/suspicious_apis.yar"),
    ),
];

const REMEDY: &str = "put YARA rules (*.yar, *.yara) in a directory and start the server with it as its rules \
                      directory (maljan serve analysis --rules-dir DIR, or MALJAN_YARA_RULES=DIR)";

/// The rule files below `dir` (symlinks not followed, depth ≤ 8), sorted.
pub fn rule_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let p = e.path();
            if ft.is_dir() && depth < 8 {
                walk(&p, depth + 1, out);
            } else if ft.is_file()
                && p.extension().and_then(|x| x.to_str()).is_some_and(|x| {
                    x.eq_ignore_ascii_case("yar") || x.eq_ignore_ascii_case("yara")
                })
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out);
    out.sort();
    out
}

/// Where a ruleset's rules come from: the built-in set, a directory, or both.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RulesetSource {
    pub builtin: bool,
    pub dir: Option<PathBuf>,
}

/// The rules of `ruleset`, given the configured directory and whether the built-in set is on.
pub fn ruleset_source(
    rules_dir: Option<&Path>,
    builtin: bool,
    ruleset: &str,
) -> Result<RulesetSource, ToolError> {
    match ruleset {
        "builtin" if builtin => Ok(RulesetSource { builtin, dir: None }),
        "builtin" => Err(ToolError::bad_argument(
            "the built-in rule set is switched off on this server (--no-builtin-rules)",
        )
        .with_remediation(
            "use ruleset \"default\", or start the server without --no-builtin-rules",
        )),
        "default" => {
            let dir = rules_dir
                .filter(|d| d.is_dir() && !rule_files(d).is_empty())
                .map(|d| ruleset_dir(d, "default"))
                .transpose()?;
            if !builtin && dir.is_none() {
                return Err(ToolError::not_configured(
                    "no YARA rules: the built-in set is off and no rules directory holds rules",
                )
                .with_remediation(REMEDY));
            }
            Ok(RulesetSource { builtin, dir })
        }
        name => {
            let Some(d) = rules_dir else {
                return Err(ToolError::bad_argument(format!(
                    "no ruleset '{name}': no rules directory is configured"
                ))
                .with_remediation("use ruleset \"default\" or \"builtin\"; or configure a rules directory with one sub-directory per ruleset"));
            };
            Ok(RulesetSource {
                builtin: false,
                dir: Some(ruleset_dir(d, name)?),
            })
        }
    }
}

/// The directory of a ruleset.
pub fn ruleset_dir(rules_dir: &Path, ruleset: &str) -> Result<PathBuf, ToolError> {
    if ruleset == "default" {
        let d = rules_dir.join("default");
        return Ok(if d.is_dir() {
            d
        } else {
            rules_dir.to_path_buf()
        });
    }
    if ruleset.is_empty()
        || !ruleset
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.')
        || ruleset.starts_with('.')
    {
        return Err(ToolError::bad_argument(format!(
            "ruleset '{ruleset}' is not a plain name"
        )));
    }
    let d = rules_dir.join(ruleset);
    if !d.is_dir() {
        return Err(ToolError::bad_argument(format!("no ruleset '{ruleset}' in the rules directory"))
            .with_remediation("use ruleset \"default\", or create a sub-directory of that name in the rules directory"));
    }
    Ok(d)
}

fn probe(rules_dir: Option<PathBuf>, builtin: bool) -> Probe {
    Probe::custom("yara rules", move || {
        if !cfg!(feature = "yara") {
            return Err(Unavailable {
                reason: "this build of maljan was compiled without the `yara` feature".into(),
                remediation: "rebuild maljan with `--features yara` (on by default)".into(),
                without: None,
            });
        }
        if builtin {
            return Ok(());
        }
        let Some(dir) = &rules_dir else {
            return Err(Unavailable {
                reason: "no YARA rules directory is configured".into(),
                remediation: REMEDY.into(),
                without: None,
            });
        };
        if !dir.is_dir() {
            return Err(Unavailable {
                reason: format!(
                    "the YARA rules directory {} does not exist or is not readable",
                    dir.display()
                ),
                remediation: REMEDY.into(),
                without: None,
            });
        }
        if rule_files(dir).is_empty() {
            return Err(Unavailable {
                reason: format!(
                    "the YARA rules directory {} holds no *.yar or *.yara files",
                    dir.display()
                ),
                remediation: REMEDY.into(),
                without: None,
            });
        }
        Ok(())
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct YaraScanArgs {
    /// The sample file (inside the server's roots); or give `text`.
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Scan this text instead of a file.
    #[serde(default)]
    pub text: String,
    /// The ruleset: "default" (the built-in rules plus the rules directory's), "builtin" (the
    /// built-in rules alone) or the name of a sub-directory of the rules directory.
    #[serde(default = "default_ruleset")]
    #[schemars(default = "default_ruleset")]
    pub ruleset: String,
    /// Seconds the scan may take; at most 60 (the manifest's value), less is honoured.
    #[serde(default = "default_timeout")]
    #[schemars(default = "default_timeout", range(min = 1, max = 60))]
    pub timeout_s: u64,
}

fn default_ruleset() -> String {
    "default".into()
}
fn default_timeout() -> u64 {
    TIMEOUT_S
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct YaraString {
    pub identifier: String,
    pub offset: u64,
    pub length: usize,
    /// The matched bytes (up to 64), printable ASCII kept.
    pub data: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct YaraMatch {
    pub rule: String,
    pub namespace: String,
    /// identification (packers, compilers, installers, file kinds: identity), detection
    /// (known-bad content) or unclassified (a third-party rule that says neither).
    pub purpose: String,
    pub tags: Vec<String>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub strings: Vec<YaraString>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct YaraScanOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_path: Option<String>,
    pub ruleset: String,
    /// Rule files compiled from the rules directory.
    pub rule_files: usize,
    /// Built-in rule files compiled in (0 when the ruleset does not use the built-in set).
    pub builtin_rule_files: usize,
    /// Rule files that did not compile (skipped), with the compiler's message.
    pub compile_errors: Vec<String>,
    pub match_count: usize,
    pub matches: Vec<YaraMatch>,
}

#[cfg(feature = "yara")]
mod engine {
    use std::{
        collections::HashMap,
        path::Path,
        sync::{Arc, Mutex},
        time::Duration,
    };

    use maljan_server::ToolError;

    use super::{BUILTIN_RULES, RulesetSource, YaraMatch, YaraString, rule_files};

    pub struct Compiled {
        pub rules: yara_x::Rules,
        pub files: usize,
        pub builtin_files: usize,
        pub errors: Vec<String>,
    }

    #[derive(Default)]
    pub struct Cache(Mutex<HashMap<RulesetSource, Arc<Compiled>>>);

    impl Cache {
        pub fn get(&self, source: &RulesetSource) -> Result<Arc<Compiled>, ToolError> {
            if let Some(c) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(source) {
                return Ok(c.clone());
            }
            let compiled = Arc::new(compile(source)?);
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(source.clone(), compiled.clone());
            Ok(compiled)
        }
    }

    pub fn compile(source: &RulesetSource) -> Result<Compiled, ToolError> {
        let mut compiler = yara_x::Compiler::new();
        let mut errors = Vec::new();
        let mut builtin_files = 0;
        if source.builtin {
            for (name, src) in BUILTIN_RULES {
                compiler.new_namespace(&format!("builtin_{name}"));
                match compiler.add_source(
                    yara_x::SourceCode::from(*src).with_origin(format!("builtin:{name}.yar")),
                ) {
                    Ok(_) => builtin_files += 1,
                    Err(e) => errors.push(format!(
                        "builtin:{name}.yar: {}",
                        e.to_string().lines().next().unwrap_or("")
                    )),
                }
            }
        }
        let Some(dir) = source.dir.as_deref() else {
            return Ok(Compiled {
                rules: compiler.build(),
                files: 0,
                builtin_files,
                errors,
            });
        };
        let (files, ok) = add_dir(&mut compiler, dir, &mut errors);
        if ok == 0 && builtin_files == 0 {
            return Err(ToolError::not_configured(format!(
                "no rule file in {} compiled ({} files, {} errors)",
                dir.display(),
                files,
                errors.len()
            ))
            .with_remediation(
                errors
                    .first()
                    .cloned()
                    .unwrap_or_else(|| super::REMEDY.to_string()),
            ));
        }
        Ok(Compiled {
            rules: compiler.build(),
            files,
            builtin_files,
            errors,
        })
    }

    /// Adds every rule file below `dir`: (files found, files compiled).
    fn add_dir(
        compiler: &mut yara_x::Compiler<'_>,
        dir: &Path,
        errors: &mut Vec<String>,
    ) -> (usize, usize) {
        let files = rule_files(dir);
        let mut ok = 0;
        for f in &files {
            let src = match std::fs::read_to_string(f) {
                Ok(s) => s,
                Err(e) => {
                    errors.push(format!("{}: {e}", f.display()));
                    continue;
                }
            };
            let ns = f
                .strip_prefix(dir)
                .unwrap_or(f)
                .with_extension("")
                .to_string_lossy()
                .replace(['/', '\\', '.', '-', ' '], "_");
            compiler.new_namespace(&ns);
            let origin = f.display().to_string();
            match compiler.add_source(yara_x::SourceCode::from(src.as_str()).with_origin(origin)) {
                Ok(_) => ok += 1,
                Err(e) => errors.push(format!(
                    "{}: {}",
                    f.display(),
                    e.to_string().lines().next().unwrap_or("")
                )),
            }
        }
        (files.len(), ok)
    }

    pub fn scan(c: &Compiled, data: &[u8], timeout: Duration) -> Result<Vec<YaraMatch>, ToolError> {
        let mut scanner = yara_x::Scanner::new(&c.rules);
        scanner.set_timeout(timeout);
        scanner.max_matches_per_pattern(100);
        let results = scanner.scan(data).map_err(|e| match e {
            yara_x::errors::ScanError::Timeout => ToolError::timeout(format!(
                "the YARA scan took longer than {} s",
                timeout.as_secs()
            ))
            .with_remediation("raise timeout_s (up to 60), or scan with a smaller ruleset"),
            other => ToolError::tool_failed(format!("the YARA scan failed: {other}")),
        })?;
        let mut out = Vec::new();
        for rule in results.matching_rules() {
            let mut metadata = serde_json::Map::new();
            for (k, v) in rule.metadata() {
                let v = match v {
                    yara_x::MetaValue::Integer(i) => serde_json::Value::from(i),
                    yara_x::MetaValue::Float(f) => serde_json::Value::from(f),
                    yara_x::MetaValue::Bool(b) => serde_json::Value::from(b),
                    yara_x::MetaValue::String(s) => serde_json::Value::from(s),
                    yara_x::MetaValue::Bytes(b) => {
                        serde_json::Value::from(String::from_utf8_lossy(b.as_ref()).into_owned())
                    }
                };
                metadata.insert(k.to_string(), v);
            }
            let mut strings = Vec::new();
            for p in rule.patterns() {
                for m in p.matches().take(20) {
                    let r = m.range();
                    strings.push(YaraString {
                        identifier: p.identifier().to_string(),
                        offset: r.start as u64,
                        length: r.len(),
                        data: crate::common::text_preview(m.data(), 64),
                    });
                }
            }
            let tags: Vec<String> = rule.tags().map(|t| t.identifier().to_string()).collect();
            out.push(YaraMatch {
                rule: rule.identifier().to_string(),
                namespace: rule.namespace().to_string(),
                purpose: super::purpose(rule.identifier(), &tags, &metadata).to_string(),
                tags,
                metadata,
                strings,
            });
        }
        Ok(out)
    }
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    #[cfg(feature = "yara")]
    let cache = Arc::new(engine::Cache::default());
    registry.add(
        ToolMeta::new(
            "yara_scan",
            "Scans the sample (or a text) with YARA rules (yara-x): the built-in set (EICAR, packers, installers, \
             droppers, suspicious API sets) plus the server's rules directory, or one ruleset of it; each match \
             with its rule, namespace, purpose (identification: packers, compilers, file kinds; detection: \
             known-bad content; or unclassified), tags, metadata and matched strings.",
        )
        .title("YARA scan")
        .timeout_s(TIMEOUT_S)
        .probe(probe(config.rules_dir.clone(), config.builtin_rules)),
        move |ctx, a: YaraScanArgs| {
            let config = config.clone();
            #[cfg(feature = "yara")]
            let cache = cache.clone();
            async move {
                if a.path.is_empty() && a.carved_path.is_empty() && a.text.is_empty() {
                    return Err(ToolError::bad_argument("give `path` (or `carved_path`) or `text` to scan"));
                }
                // Two seconds under the ceiling, so the scan answers its own timeout before the server's.
                let timeout = a.timeout_s.clamp(1, TIMEOUT_S - 2);
                let source = ruleset_source(config.rules_dir.as_deref(), config.builtin_rules, &a.ruleset)?;
                let roots = config.roots.clone();
                #[cfg(not(feature = "yara"))]
                {
                    let _ = (ctx, roots, source, timeout);
                    Err::<YaraScanOutput, _>(ToolError::missing_dependency("built without the `yara` feature"))
                }
                #[cfg(feature = "yara")]
                maljan_server::blocking(move || {
                    let compiled = cache.get(&source)?;
                    let timeout = std::time::Duration::from_secs(timeout);
                    let (read_path, matches) = if a.path.is_empty() && a.carved_path.is_empty() {
                        (None, engine::scan(&compiled, a.text.as_bytes(), timeout)?)
                    } else {
                        let s = open_sample(&roots, &a.path, &a.carved_path)?;
                        (Some(s.read_path()), engine::scan(&compiled, s.bytes(), timeout)?)
                    };
                    crate::common::check_cancel(&ctx)?;
                    Ok(YaraScanOutput {
                        read_path,
                        ruleset: a.ruleset,
                        rule_files: compiled.files,
                        builtin_rule_files: compiled.builtin_files,
                        compile_errors: compiled.errors.clone(),
                        match_count: matches.len(),
                        matches,
                    })
                })
                .await
            }
        },
    );
}
