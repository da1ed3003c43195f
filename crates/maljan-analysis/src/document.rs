//! `document_info`: Office and PDF documents.
//!
//! - OLE2 (.doc/.xls/.ppt/.msi, cfb): streams, VBA modules with their source, auto-exec and
//!   suspicious keywords, embedded objects.
//! - OOXML (.docx/.xlsx/.pptx, zip): parts, vbaProject.bin (read as OLE2 for its VBA), external
//!   relationships (remote templates, links), embedded objects, ActiveX, DDE fields, XLM sheets.
//! - PDF (lopdf, default features off): pages, JavaScript, OpenAction, additional actions, Launch,
//!   embedded files, URIs, plus pdfid-style keyword counts that need no parser.
//! - RTF: embedded objects (`\object`, `\objdata`), which the structure parsers do not cover.
//!
//! A part that could not be read is named in `without`, and the rest of the answer stands.

use std::{
    io::{Cursor, Read},
    sync::{Arc, LazyLock},
};

use maljan_server::{ErrorCode, Registry, ToolError, ToolMeta};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
    identify::identify,
    iocs::{self, Indicator},
    ole::{self, OleReport},
    pdf::{self, PdfReport},
};

/// Most bytes one OOXML part is decompressed to while reading it.
const PART_CAP: u64 = 64 << 20;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Part {
    pub name: String,
    pub size: u64,
    pub compressed_size: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Relationship {
    /// The .rels part it was found in.
    pub part: String,
    /// The relationship type's last path segment (attachedTemplate, oleObject, hyperlink, …).
    pub r#type: String,
    pub target: String,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct OoxmlReport {
    pub parts: Vec<Part>,
    pub part_count: usize,
    pub has_vba_project: bool,
    /// Relationships with TargetMode="External".
    pub external_relationships: Vec<Relationship>,
    /// An external attachedTemplate or frame (remote template injection).
    pub remote_template: bool,
    pub embedded_objects: Vec<String>,
    pub activex: bool,
    /// DDE / DDEAUTO field instructions.
    pub dde: Vec<String>,
    /// Excel 4.0 (XLM) macro sheets.
    pub xlm_macrosheets: Vec<String>,
    /// The VBA project inside vbaProject.bin.
    pub vba: Option<OleReport>,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct RtfReport {
    pub objects: usize,
    pub objdata: usize,
    /// `\objupdate`: the object is loaded without a click.
    pub objupdate: usize,
    /// OLE class names of embedded objects (Equation.3, Package, …).
    pub object_classes: Vec<String>,
}

/// What document_info found.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct DocumentReport {
    /// ole2, ooxml, pdf, rtf or lnk.
    pub format: String,
    pub description: String,
    /// Macros present (VBA in OLE2 or vbaProject.bin; XLM sheets).
    pub macros: bool,
    /// Something runs when the document opens (auto-exec macro, OpenAction JavaScript, DDEAUTO…).
    pub auto_exec: bool,
    pub ole: Option<OleReport>,
    pub ooxml: Option<OoxmlReport>,
    pub pdf: Option<PdfReport>,
    pub rtf: Option<RtfReport>,
    /// A Windows shortcut's target, arguments, working directory and icon.
    pub shortcut: Option<crate::document_lnk::Shortcut>,
    /// URLs, domains and IPs found in macro source, JavaScript, external targets and a
    /// shortcut's arguments.
    pub indicators: Vec<Indicator>,
    /// What a short read leaves out ("the PDF structure could not be parsed", …).
    pub without: Vec<String>,
}

static REL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"(?s)<Relationship\b[^>]*>"#).unwrap());
static ATTR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"(\w+)\s*=\s*"([^"]*)""#).unwrap());
static DDE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)(DDEAUTO|\bDDE\b)[^<]{0,512}"#).unwrap());
static RTF_CLASS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\\objclass\s+([^}\\]{1,128})"#).unwrap());

/// A part's data (at most [`PART_CAP`] bytes), charged to `budget` as inflated: entries may share
/// their compressed data, so each read is paid for.
fn read_part<R: Read + std::io::Seek>(
    z: &mut zip::ZipArchive<R>,
    name: &str,
    budget: &Budget,
) -> Result<Option<Vec<u8>>, ToolError> {
    budget.check_cancel()?;
    let Ok(f) = z.by_name(name) else {
        return Ok(None);
    };
    let mut buf = Vec::new();
    let read = f.take(PART_CAP).read_to_end(&mut buf);
    budget.inflate(buf.len(), "OOXML parts")?;
    Ok(read.ok().map(|_| buf))
}

fn xml_unescape(s: &str) -> String {
    s.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
}

pub fn ooxml(
    b: &[u8],
    max_parts: usize,
    without: &mut Vec<String>,
    budget: &Budget,
) -> Result<OoxmlReport, ToolError> {
    let mut z = zip::ZipArchive::new(Cursor::new(b)).map_err(|e| {
        ToolError::unsupported_format(format!("not a readable OOXML (zip) package: {e}"))
    })?;
    let mut r = OoxmlReport {
        part_count: z.len(),
        ..Default::default()
    };
    let mut names = Vec::new();
    for i in 0..z.len() {
        budget.items(1, "OOXML parts")?;
        if let Ok(f) = z.by_index_raw(i) {
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            if r.parts.len() < max_parts {
                r.parts.push(Part {
                    name: name.clone(),
                    size: f.size(),
                    compressed_size: f.compressed_size(),
                });
            }
            names.push(name);
        }
    }
    for name in &names {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with("vbaproject.bin") {
            r.has_vba_project = true;
            match read_part(&mut z, name, budget)?.map(|d| ole::analyze(&d, 200, budget)) {
                Some(Ok(vba)) => r.vba = Some(vba),
                Some(Err(e)) if e.code == ErrorCode::UnsupportedFormat => {
                    without.push(format!("{name}: {}", e.message))
                }
                Some(Err(e)) => return Err(e),
                None => without.push(format!("{name} could not be decompressed")),
            }
        }
        if lower.contains("/embeddings/") {
            r.embedded_objects.push(name.clone());
        }
        if lower.contains("/activex/") {
            r.activex = true;
        }
        if lower.starts_with("xl/macrosheets/") && lower.ends_with(".xml") {
            r.xlm_macrosheets.push(name.clone());
        }
        if lower.ends_with(".rels") {
            let Some(xml) = read_part(&mut z, name, budget)? else {
                without.push(format!("{name} could not be read"));
                continue;
            };
            let xml = String::from_utf8_lossy(&xml);
            for rel in REL.find_iter(&xml) {
                let mut target = String::new();
                let mut kind = String::new();
                let mut external = false;
                for a in ATTR.captures_iter(rel.as_str()) {
                    match &a[1] {
                        "Target" => target = xml_unescape(&a[2]),
                        "Type" => kind = a[2].rsplit('/').next().unwrap_or("").to_string(),
                        "TargetMode" => external = a[2].eq_ignore_ascii_case("External"),
                        _ => {}
                    }
                }
                if external {
                    if matches!(kind.as_str(), "attachedTemplate" | "frame" | "subDocument") {
                        r.remote_template = true;
                    }
                    r.external_relationships.push(Relationship {
                        part: name.clone(),
                        r#type: kind,
                        target,
                    });
                }
            }
        }
        if (matches!(
            lower.as_str(),
            "word/document.xml" | "word/footnotes.xml" | "word/header1.xml"
        ) || (lower.starts_with("xl/") && lower.contains("externallink")))
            && let Some(xml) = read_part(&mut z, name, budget)?
        {
            let xml = String::from_utf8_lossy(&xml);
            for m in DDE.find_iter(&xml).take(20) {
                r.dde.push(m.as_str().trim().to_string());
            }
        }
    }
    Ok(r)
}

pub fn rtf(b: &[u8]) -> RtfReport {
    let text = String::from_utf8_lossy(&b[..b.len().min(64 << 20)]);
    let count = |needle: &str| text.matches(needle).count();
    RtfReport {
        objects: count("\\object"),
        objdata: count("\\objdata"),
        objupdate: count("\\objupdate"),
        object_classes: RTF_CLASS
            .captures_iter(&text)
            .map(|c| c[1].trim().to_string())
            .take(100)
            .collect(),
    }
}

fn macro_indicators(r: &DocumentReport) -> Vec<Indicator> {
    let mut text = String::new();
    let mut add_ole = |o: &OleReport| {
        for m in &o.vba_modules {
            text.push_str(&m.source);
            text.push('\n');
        }
    };
    if let Some(o) = &r.ole {
        add_ole(o);
    }
    if let Some(x) = &r.ooxml {
        if let Some(o) = &x.vba {
            add_ole(o);
        }
        for rel in &x.external_relationships {
            text.push_str(&rel.target);
            text.push('\n');
        }
    }
    if let Some(p) = &r.pdf {
        for js in &p.javascript {
            text.push_str(js);
            text.push('\n');
        }
        for u in &p.uris {
            text.push_str(u);
            text.push('\n');
        }
    }
    if let Some(lnk) = &r.shortcut {
        for t in [&lnk.arguments, &lnk.target].into_iter().flatten() {
            text.push_str(t);
            text.push('\n');
        }
    }
    iocs::extract(&text, &["url", "domain", "ipv4", "ipv6", "email"])
}

fn ole_auto_exec(o: &OleReport) -> bool {
    o.vba_modules.iter().any(|m| !m.auto_exec.is_empty())
}

/// Reads a document by its content, within `budget`.
pub fn document_info(
    b: &[u8],
    max_items: usize,
    budget: &Budget,
) -> Result<DocumentReport, ToolError> {
    contain("document", || {
        let kind = identify(b);
        let mut r = DocumentReport {
            description: kind.description.clone(),
            ..Default::default()
        };
        match kind.kind.as_str() {
            "ole2" => {
                r.format = "ole2".into();
                let o = ole::analyze(b, max_items, budget)?;
                r.macros = o.has_vba;
                r.auto_exec = ole_auto_exec(&o);
                r.without.extend(o.errors.iter().cloned());
                r.ole = Some(o);
            }
            "ooxml" => {
                r.format = "ooxml".into();
                let x = ooxml(b, max_items, &mut r.without, budget)?;
                r.macros = x.has_vba_project || !x.xlm_macrosheets.is_empty();
                r.auto_exec = x.vba.as_ref().is_some_and(ole_auto_exec)
                    || x.dde
                        .iter()
                        .any(|d| d.to_ascii_uppercase().starts_with("DDEAUTO"))
                    || x.remote_template;
                r.ooxml = Some(x);
            }
            "pdf" => {
                r.format = "pdf".into();
                let mut p = PdfReport::default();
                pdf::scan_raw(b, &mut p);
                if let Err(e) = contain("PDF", || {
                    pdf::parse_structure(b, &mut p, budget).map_err(ToolError::tool_failed)
                }) {
                    r.without.push(e.message);
                    // Fall back on the raw counts for what the structure would have said.
                    if p.keywords.get("/JS").copied().unwrap_or(0)
                        + p.keywords.get("/JavaScript").copied().unwrap_or(0)
                        > 0
                    {
                        r.without.push(
                            "JavaScript is present (raw keyword count) but was not extracted"
                                .into(),
                        );
                    }
                }
                r.auto_exec = p.open_action.is_some() || !p.additional_actions.is_empty();
                r.macros = !p.javascript.is_empty()
                    || p.keywords.get("/JavaScript").copied().unwrap_or(0) > 0;
                r.pdf = Some(p);
            }
            "rtf" => {
                r.format = "rtf".into();
                let x = rtf(b);
                r.auto_exec = x.objupdate > 0;
                r.rtf = Some(x);
                r.without.push("RTF embedded objects are counted, not decoded; carve_payloads finds OLE/PE inside hex-decoded objdata only when it is stored in binary".into());
            }
            "lnk" => {
                r.format = "lnk".into();
                // Described, not judged: every shortcut runs its target when opened, so
                // auto_exec (a macro's word) stays false; the target and arguments are the facts.
                r.shortcut = crate::document_lnk::shortcut(b);
                if r.shortcut.is_none() {
                    r.without.push("the shortcut's header is damaged".into());
                }
            }
            other => {
                return Err(ToolError::unsupported_format(format!(
                    "not a document document_info reads: {other} ({})",
                    kind.description
                ))
                .with_remediation("document_info reads OLE2 (.doc/.xls/.ppt), OOXML (.docx/.xlsx/.pptx), PDF, RTF and Windows shortcuts (.lnk); identify_file names the tool for this file"));
            }
        }
        r.indicators = macro_indicators(&r);
        Ok(r)
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentInfoArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Most streams / parts listed.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
}

fn default_limit() -> usize {
    500
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DocumentInfoOutput {
    pub read_path: String,
    pub size: u64,
    #[serde(flatten)]
    pub report: DocumentReport,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "document_info",
            "Office and PDF documents: OLE2 streams and VBA macros (with source), OOXML parts, vbaProject.bin \
             and external relationships (remote templates), DDE; PDF pages, JavaScript, OpenAction, Launch, \
             embedded files, URIs; RTF embedded objects; a Windows shortcut's (.lnk) target and arguments.",
        )
        .title("Document structure")
        .timeout_s(120),
        move |ctx, a: DocumentInfoArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    let cancel = || ctx.is_cancelled();
                    let report = document_info(b, a.limit.max(1), &Budget::for_file(b.len(), &cancel))?;
                    Ok(DocumentInfoOutput { read_path: s.read_path(), size: b.len() as u64, report })
                })
                .await
            }
        },
    );
}
