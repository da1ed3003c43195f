//! The index of a `maljan analyze A B DIR…` run: one row per sample given or found (sample,
//! type, size, sha256, verdict, status, top facts, report), in Markdown, JSON, CSV or HTML by the
//! index file's extension. Every cell is sample or server text, so it goes through the reports'
//! own escaping (`maljan_triage::render::escape`): no link, image, HTML or formula the index did
//! not write itself.

use std::{
    fmt::Write,
    path::{Path, PathBuf},
};

use maljan_triage::{
    Report,
    render::{
        escape::{html, md_text},
        ordered_facts,
    },
};
use serde::Serialize;

/// How many facts a row names.
const TOP_FACTS: usize = 3;

/// An index format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexFormat {
    Markdown,
    Json,
    Csv,
    Html,
}

impl IndexFormat {
    pub fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "md" | "markdown" => Self::Markdown,
            "json" => Self::Json,
            "csv" => Self::Csv,
            "html" | "htm" => Self::Html,
            _ => return None,
        })
    }
}

/// `--index FILE`: its extension must name a format (else a bad command line, exit status 2).
pub fn parse_index_path(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    match IndexFormat::of(&path) {
        Some(_) => Ok(path),
        None => Err("the index's extension names its format: .md, .json, .csv or .html".into()),
    }
}

/// One sample's row.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// The path as given or found.
    pub sample: String,
    /// What identify_file called it ("ELF 64-bit shared object x86-64").
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub size: Option<u64>,
    pub sha256: Option<String>,
    /// malicious | suspicious | benign | unknown
    pub verdict: Option<String>,
    /// complete | degraded | failed | cancelled (the report's), or `duplicate`, `not analysed`.
    pub status: String,
    pub top_facts: Vec<String>,
    /// Where its report is (a duplicate's is the first one's).
    pub report: Option<String>,
    /// For a duplicate: the sample whose report it shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<String>,
    /// Why it was not analysed (unreadable, empty, not a regular file, the job could not start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Row {
    /// A sample that was not analysed, and why.
    pub fn not_analysed(sample: String, why: String) -> Self {
        Self {
            sample,
            status: "not analysed".into(),
            error: Some(why),
            ..Default::default()
        }
    }

    /// The row of an analysed sample, from its report.
    pub fn from_report(sample: String, report: &Report, report_path: &Path) -> Self {
        let s = &report.sample;
        Self {
            sample,
            kind: s
                .description
                .clone()
                .or_else(|| s.kind.clone())
                .or_else(|| s.mime.clone()),
            size: Some(s.size),
            sha256: Some(s.sha256.clone()),
            verdict: report
                .verdict
                .as_ref()
                .map(|v| v.verdict.as_str().to_string()),
            status: report.status.as_str().into(),
            top_facts: report
                .verdict
                .as_ref()
                .map(|v| {
                    ordered_facts(&v.facts)
                        .into_iter()
                        .take(TOP_FACTS)
                        .map(|f| f.name.clone())
                        .collect()
                })
                .unwrap_or_default(),
            report: Some(report_path.to_string_lossy().into_owned()),
            duplicate_of: None,
            error: None,
        }
    }

    /// The row of a duplicate of `first` (same sha256), found at `sample`.
    pub fn duplicate(sample: String, first: &Row) -> Self {
        Self {
            sample,
            status: "duplicate".into(),
            duplicate_of: Some(first.sample.clone()),
            error: None,
            ..first.clone()
        }
    }
}

/// The index of `rows` in `format`.
pub fn render(rows: &[Row], format: IndexFormat) -> String {
    match format {
        IndexFormat::Markdown => markdown(rows),
        IndexFormat::Json => json(rows),
        IndexFormat::Csv => csv(rows),
        IndexFormat::Html => html_page(rows),
    }
}

/// `complete 12 · duplicate 3 · …`: how many rows are in each status.
fn tally(rows: &[Row]) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for r in rows {
        match counts.iter_mut().find(|(s, _)| *s == r.status) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.status.clone(), 1)),
        }
    }
    counts
}

/// The "Notes" cell: a duplicate's first sample, or why a sample was not analysed.
fn note(r: &Row) -> Option<String> {
    match (&r.duplicate_of, &r.error) {
        (Some(first), _) => Some(format!("duplicate of {first}")),
        (None, Some(e)) => Some(e.clone()),
        _ => None,
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut o = String::from("# maljan analyze: index\n\n");
    let counts: Vec<String> = tally(rows)
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    let _ = writeln!(o, "{} samples: {}\n", rows.len(), counts.join(", "));
    o.push_str(
        "| Sample | Type | Size | SHA-256 | Verdict | Status | Top facts | Report | Notes |\n",
    );
    o.push_str("|---|---|---:|---|---|---|---|---|---|\n");
    for r in rows {
        let cell = |s: Option<&str>| s.map(md_text).unwrap_or_default();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            md_text(&r.sample),
            cell(r.kind.as_deref()),
            r.size.map(|n| n.to_string()).unwrap_or_default(),
            cell(r.sha256.as_deref()),
            cell(r.verdict.as_deref()),
            md_text(&r.status),
            r.top_facts
                .iter()
                .map(|f| md_text(f))
                .collect::<Vec<_>>()
                .join("; "),
            cell(r.report.as_deref()),
            cell(note(r).as_deref()),
        );
    }
    o
}

fn json(rows: &[Row]) -> String {
    let doc = serde_json::json!({
        "schema": "maljan.analyze.index/v1",
        "samples": rows,
    });
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

/// A CSV field: quoted when it holds a separator, a quote or a line break; a leading `=`, `+`,
/// `-`, `@`, tab or CR prefixed with `'` so a spreadsheet never reads it as a formula.
fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn csv(rows: &[Row]) -> String {
    let mut o = String::from(
        "sample,type,size,sha256,verdict,status,top_facts,report,duplicate_of,error\n",
    );
    for r in rows {
        let f = |s: Option<&str>| csv_field(s.unwrap_or_default());
        let line = [
            csv_field(&r.sample),
            f(r.kind.as_deref()),
            r.size.map(|n| n.to_string()).unwrap_or_default(),
            f(r.sha256.as_deref()),
            f(r.verdict.as_deref()),
            csv_field(&r.status),
            csv_field(&r.top_facts.join("; ")),
            f(r.report.as_deref()),
            f(r.duplicate_of.as_deref()),
            f(r.error.as_deref()),
        ]
        .join(",");
        o.push_str(&line);
        o.push('\n');
    }
    o
}

/// A `file:` link to a report, every byte outside `[A-Za-z0-9/._-]` percent-encoded.
fn file_href(path: &str) -> String {
    let mut o = String::from("file://");
    if !path.starts_with('/')
        && let Ok(cwd) = std::env::current_dir()
    {
        let _ = write!(o, "{}", encode_path(&cwd.to_string_lossy()));
        o.push('/');
    }
    o.push_str(&encode_path(path));
    o
}

fn encode_path(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-') {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

fn html_page(rows: &[Row]) -> String {
    let mut o = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>maljan analyze: index</title><style>\
         body{font-family:system-ui,sans-serif;margin:1.5rem}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}\
         td.n{text-align:right}code{font-size:.85em}</style></head><body>\n\
         <h1>maljan analyze: index</h1>\n",
    );
    let counts: Vec<String> = tally(rows)
        .iter()
        .map(|(s, n)| format!("{n} {}", html(s)))
        .collect();
    let _ = writeln!(o, "<p>{} samples: {}</p>", rows.len(), counts.join(", "));
    o.push_str(
        "<table><thead><tr><th>Sample</th><th>Type</th><th>Size</th><th>SHA-256</th>\
         <th>Verdict</th><th>Status</th><th>Top facts</th><th>Report</th><th>Notes</th></tr></thead><tbody>\n",
    );
    for r in rows {
        let cell = |s: Option<&str>| s.map(html).unwrap_or_default();
        let report = r
            .report
            .as_deref()
            .map(|p| format!("<a href=\"{}\">{}</a>", html(&file_href(p)), html(p)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td><code>{}</code></td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            html(&r.sample),
            cell(r.kind.as_deref()),
            r.size.map(|n| n.to_string()).unwrap_or_default(),
            cell(r.sha256.as_deref()),
            cell(r.verdict.as_deref()),
            html(&r.status),
            r.top_facts
                .iter()
                .map(|f| html(f))
                .collect::<Vec<_>>()
                .join("<br>"),
            report,
            cell(note(r).as_deref()),
        );
    }
    o.push_str("</tbody></table>\n</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hostile() -> Vec<Row> {
        let first = Row {
            sample: "[x](javascript:alert(1)).zip".into(),
            kind: Some("<img src=x onerror=alert(1)>".into()),
            size: Some(10),
            sha256: Some("ab".repeat(32)),
            verdict: Some("benign".into()),
            status: "complete".into(),
            top_facts: vec!["=cmd|' /C calc'!A0".into(), "a\x1b]0;t\x07b".into()],
            report: Some("out/maljan-report-x-abababababab.md".into()),
            duplicate_of: None,
            error: None,
        };
        vec![
            Row::duplicate("copy\u{202e}fdp.exe".into(), &first),
            first,
            Row::not_analysed("empty".into(), "empty is empty (0 bytes)".into()),
        ]
    }

    #[test]
    fn the_format_is_the_extension_and_anything_else_is_refused() {
        assert_eq!(IndexFormat::of(Path::new("i.CSV")), Some(IndexFormat::Csv));
        assert_eq!(
            IndexFormat::of(Path::new("a/b.htm")),
            Some(IndexFormat::Html)
        );
        assert!(parse_index_path("index.pdf").is_err());
        assert!(parse_index_path("index").is_err());
    }

    #[test]
    fn hostile_cells_open_no_link_image_html_or_formula() {
        let rows = hostile();
        let md = render(&rows, IndexFormat::Markdown);
        use pulldown_cmark::{Event, Options, Parser, Tag};
        let mut cells = 0;
        for ev in Parser::new_ext(&md, Options::ENABLE_TABLES | Options::ENABLE_GFM) {
            match ev {
                Event::Start(Tag::TableCell) => cells += 1,
                Event::Start(Tag::Link { .. } | Tag::Image { .. })
                | Event::Html(_)
                | Event::InlineHtml(_)
                | Event::Code(_) => panic!("{ev:?} in {md}"),
                _ => {}
            }
        }
        // The header and three rows, nine cells each: no cell split by a `|` of the text.
        assert_eq!(cells, 4 * 9, "{md}");
        assert!(!md.contains('\x1b') && !md.contains('\u{202e}'), "{md:?}");
        let page = render(&rows, IndexFormat::Html);
        assert!(!page.contains("<img") && page.contains("&lt;img"), "{page}");
        let csv = render(&rows, IndexFormat::Csv);
        assert!(!csv.contains(",=cmd") && !csv.contains("\"=cmd"), "{csv}");
        assert_eq!(csv.lines().count(), 4);
    }

    #[test]
    fn json_keeps_the_text_and_marks_the_duplicate() {
        let v: serde_json::Value =
            serde_json::from_str(&render(&hostile(), IndexFormat::Json)).unwrap();
        let s = v["samples"].as_array().unwrap();
        assert_eq!(s[0]["status"], "duplicate");
        assert_eq!(s[0]["duplicate_of"], "[x](javascript:alert(1)).zip");
        assert_eq!(s[0]["report"], s[1]["report"]);
        assert_eq!(s[1]["type"], "<img src=x onerror=alert(1)>");
        assert_eq!(s[2]["status"], "not analysed");
    }
}
