//! PDF analysis for document_info: pages, JavaScript, OpenAction / additional actions, Launch,
//! embedded files, URIs, forms, encryption — through lopdf when the file parses, and always a
//! pdfid-style keyword count over the raw bytes (names with `#xx` escapes decoded), so a file lopdf
//! refuses still gets an answer.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::LazyLock,
};

use lopdf::{Dictionary, Document, Object};
use regex::bytes::Regex;
use schemars::JsonSchema;
use serde::Serialize;

use crate::budget::Budget;

#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct PdfReport {
    pub version: Option<String>,
    /// Page count (null when the structure could not be parsed).
    pub pages: Option<usize>,
    pub encrypted: bool,
    /// JavaScript found in actions and name trees (each cut at 16 KiB).
    pub javascript: Vec<String>,
    /// What the catalog's /OpenAction does ("javascript", "uri: …", "goto", "launch: …").
    pub open_action: Option<String>,
    /// Additional actions (/AA) on the catalog or pages.
    pub additional_actions: Vec<String>,
    pub launch_actions: Vec<String>,
    pub embedded_files: Vec<String>,
    pub uris: Vec<String>,
    pub has_acroform: bool,
    pub has_xfa: bool,
    /// pdfid-style counts of the keywords that matter (/JS, /JavaScript, /OpenAction, /AA, …).
    pub keywords: BTreeMap<String, usize>,
    /// Names written with `#xx` escapes (a common way to hide /JavaScript from scanners).
    pub obfuscated_names: bool,
    /// Bytes after the last %%EOF.
    pub trailing_bytes: u64,
}

const KEYWORDS: &[&str] = &[
    "/Page",
    "/Encrypt",
    "/ObjStm",
    "/JS",
    "/JavaScript",
    "/AA",
    "/OpenAction",
    "/AcroForm",
    "/JBIG2Decode",
    "/RichMedia",
    "/Launch",
    "/EmbeddedFile",
    "/XFA",
    "/URI",
    "/SubmitForm",
    "/GoToR",
];

static NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"/[A-Za-z0-9#_.+-]{1,64}").unwrap());
static URI: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"/URI\s*\(([^)]{1,2048})\)").unwrap());

fn decode_name(raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(raw.len());
    let mut escaped = false;
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'#'
            && i + 2 < raw.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&raw[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            escaped = true;
            i += 3;
            continue;
        }
        out.push(raw[i]);
        i += 1;
    }
    (out, escaped)
}

/// Raw keyword counts, URIs and the trailing-bytes measure; works on any bytes.
pub fn scan_raw(b: &[u8], r: &mut PdfReport) {
    for k in KEYWORDS {
        r.keywords.insert(k.to_string(), 0);
    }
    for m in NAME.find_iter(b) {
        let (name, escaped) = decode_name(m.as_bytes());
        let name = String::from_utf8_lossy(&name).into_owned();
        if let Some(count) = r.keywords.get_mut(&name) {
            *count += 1;
            r.obfuscated_names |= escaped;
        }
    }
    for c in URI.captures_iter(b) {
        let u = String::from_utf8_lossy(&c[1]).into_owned();
        if !r.uris.contains(&u) && r.uris.len() < 1000 {
            r.uris.push(u);
        }
    }
    if let Some(p) = memrfind(b, b"%%EOF") {
        let tail = &b[p + 5..];
        let rest = tail.iter().skip_while(|c| c.is_ascii_whitespace()).count();
        r.trailing_bytes = rest as u64;
    }
    if let Some(p) = b.windows(5).take(1024).position(|w| w == b"%PDF-") {
        r.version = b
            .get(p + 5..p + 8)
            .map(|v| String::from_utf8_lossy(v).into_owned());
    }
}

fn memrfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(hay, needle)
}

fn text_of(doc: &Document, o: &Object) -> Option<String> {
    let (_, o) = doc.dereference(o).ok()?;
    match o {
        Object::String(s, _) => Some(pdf_string(s)),
        Object::Stream(s) => {
            let data = s
                .decompressed_content_with_limit(16 << 20)
                .unwrap_or_else(|_| s.content.clone());
            Some(String::from_utf8_lossy(&data).into_owned())
        }
        Object::Name(n) => Some(String::from_utf8_lossy(n).into_owned()),
        _ => None,
    }
}

fn pdf_string(s: &[u8]) -> String {
    if s.starts_with(&[0xFE, 0xFF]) {
        let units: Vec<u16> = s[2..]
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(s).into_owned()
    }
}

fn cut(s: String) -> String {
    const MAX: usize = 16 * 1024;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Describes an action dictionary (or reference to one).
fn describe_action(doc: &Document, o: &Object, r: &mut PdfReport) -> String {
    let Ok((_, o)) = doc.dereference(o) else {
        return "unresolvable".into();
    };
    let dict = match o {
        Object::Dictionary(d) => d,
        Object::Stream(s) => &s.dict,
        Object::Array(_) => return "goto (destination)".into(),
        _ => return "other".into(),
    };
    action_of(doc, dict, r)
}

fn action_of(doc: &Document, dict: &Dictionary, r: &mut PdfReport) -> String {
    let s = dict
        .get(b"S")
        .ok()
        .and_then(|o| o.as_name().ok())
        .map(|n| String::from_utf8_lossy(n).into_owned());
    match s.as_deref() {
        Some("JavaScript") => {
            if let Some(js) = dict.get(b"JS").ok().and_then(|o| text_of(doc, o)) {
                let js = cut(js);
                if r.javascript.len() < MAX_JAVASCRIPT && !r.javascript.contains(&js) {
                    r.javascript.push(js);
                }
            }
            "javascript".into()
        }
        Some("URI") => {
            let u = dict
                .get(b"URI")
                .ok()
                .and_then(|o| text_of(doc, o))
                .unwrap_or_default();
            if !u.is_empty() && !r.uris.contains(&u) {
                r.uris.push(u.clone());
            }
            format!("uri: {u}")
        }
        Some("Launch") => {
            let target = dict
                .get(b"F")
                .ok()
                .and_then(|o| text_of(doc, o))
                .or_else(|| {
                    dict.get(b"Win")
                        .ok()
                        .and_then(|w| doc.dereference(w).ok())
                        .and_then(|(_, w)| w.as_dict().ok())
                        .and_then(|w| w.get(b"F").ok())
                        .and_then(|o| text_of(doc, o))
                });
            let t = target.unwrap_or_default();
            r.launch_actions.push(t.clone());
            format!("launch: {t}")
        }
        Some(other) => other.to_ascii_lowercase(),
        None => "other".into(),
    }
}

/// Most distinct JavaScript texts listed (each is compared with those kept: the list must stay
/// short; the raw /JS count says how many there were).
const MAX_JAVASCRIPT: usize = 1000;

/// Parses the structure with lopdf within `budget`; the raw scan has already filled what it can.
pub fn parse_structure(b: &[u8], r: &mut PdfReport, budget: &Budget) -> Result<(), String> {
    // lopdf inflates object and cross-reference streams while loading: hold each to what this
    // file may still inflate (lopdf's own default is 256 MiB per stream).
    let limit = budget
        .inflate_left()
        .min(lopdf::DEFAULT_MAX_DECOMPRESSED_SIZE as u64);
    let options = lopdf::LoadOptions::with_max_decompressed_size(limit as usize);
    let doc = Document::load_mem_with_options(b, options).map_err(|e| {
        format!("the PDF structure could not be parsed ({e}); raw keyword counts only")
    })?;
    r.encrypted = doc.is_encrypted() || doc.trailer.get(b"Encrypt").is_ok();
    r.pages = Some(doc.get_pages().len());
    if let Ok(catalog) = doc.catalog() {
        if let Ok(oa) = catalog.get(b"OpenAction") {
            r.open_action = Some(describe_action(&doc, oa, r));
        }
        if let Ok(aa) = catalog
            .get(b"AA")
            .and_then(|o| doc.dereference(o))
            .and_then(|(_, o)| o.as_dict().cloned())
        {
            for (k, v) in aa.iter() {
                let what = describe_action(&doc, v, r);
                r.additional_actions
                    .push(format!("catalog {}: {what}", String::from_utf8_lossy(k)));
            }
        }
        if let Ok(form) = catalog
            .get(b"AcroForm")
            .and_then(|o| doc.dereference(o))
            .and_then(|(_, o)| o.as_dict())
        {
            r.has_acroform = true;
            r.has_xfa = form.get(b"XFA").is_ok();
        }
    }
    let mut files = BTreeSet::new();
    let mut streams = Vec::new();
    for (id, obj) in doc.objects.iter() {
        budget.items(1, "PDF objects").map_err(|e| e.message)?;
        let dict = match obj {
            Object::Dictionary(d) => d,
            Object::Stream(s) => &s.dict,
            _ => continue,
        };
        // Actions anywhere (annotations, name trees, pages).
        if dict.get(b"S").is_ok()
            && (dict.get(b"JS").is_ok() || dict.get(b"URI").is_ok() || dict.get(b"F").is_ok())
        {
            let _ = action_of(&doc, dict, r);
        } else if let Ok(js) = dict.get(b"JS")
            && let Some(js) = text_of(&doc, js)
        {
            let js = cut(js);
            if r.javascript.len() < MAX_JAVASCRIPT && !r.javascript.contains(&js) {
                r.javascript.push(js);
            }
        }
        if dict.get(b"Type").ok().and_then(|t| t.as_name().ok()) == Some(b"Page".as_slice())
            && let Ok(aa) = dict
                .get(b"AA")
                .and_then(|o| doc.dereference(o))
                .and_then(|(_, o)| o.as_dict().cloned())
        {
            for (k, v) in aa.iter() {
                let what = describe_action(&doc, v, r);
                r.additional_actions.push(format!(
                    "page {} {}: {what}",
                    id.0,
                    String::from_utf8_lossy(k)
                ));
            }
        }
        let is_filespec =
            dict.get(b"Type").ok().and_then(|t| t.as_name().ok()) == Some(b"Filespec".as_slice());
        if is_filespec && dict.get(b"EF").is_ok() {
            let name = dict
                .get(b"UF")
                .or_else(|_| dict.get(b"F"))
                .ok()
                .and_then(|o| text_of(&doc, o))
                .unwrap_or_else(|| format!("object {} {}", id.0, id.1));
            files.insert(name);
        }
        if dict.get(b"Type").ok().and_then(|t| t.as_name().ok()) == Some(b"EmbeddedFile".as_slice())
        {
            streams.push(format!("object {} {}", id.0, id.1));
        }
    }
    // EmbeddedFile streams no file specification names are listed by object number.
    if files.is_empty() {
        files.extend(streams);
    }
    r.embedded_files = files.into_iter().take(1000).collect();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_names_count_and_are_flagged() {
        let mut r = PdfReport::default();
        scan_raw(b"%PDF-1.7\n1 0 obj << /S /Java#53cript /JS (app.alert(1)) /URI (http://x.test/a) >> endobj %%EOF", &mut r);
        assert_eq!(r.keywords["/JavaScript"], 1);
        assert_eq!(r.keywords["/JS"], 1);
        assert!(r.obfuscated_names);
        assert_eq!(r.uris, vec!["http://x.test/a"]);
        assert_eq!(r.version.as_deref(), Some("1.7"));
    }
}
