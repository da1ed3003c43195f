//! Renderers: Markdown, JSON, a self-contained HTML page, a STIX 2.1 bundle and the IOCs as CSV,
//! all from the same [`Report`].

pub mod blocks;
pub mod escape;
mod evidence;
mod facts;
mod html;
mod markdown;
mod stix;
mod tree;

use crate::report::{Failure, Report};

pub use facts::ordered as ordered_facts;
pub use html::html;
pub use markdown::markdown;
pub use stix::{iocs_csv, stix};

/// A report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
    Html,
    /// A STIX 2.1 bundle: malware-analysis, file and indicator objects.
    Stix,
    /// The indicators of compromise, one per line.
    Csv,
}

impl Format {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Self::Markdown,
            "json" => Self::Json,
            "html" | "htm" => Self::Html,
            "stix" => Self::Stix,
            "csv" => Self::Csv,
            _ => return None,
        })
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Markdown => "md",
            Self::Json => "json",
            Self::Html => "html",
            Self::Stix => "stix.json",
            Self::Csv => "csv",
        }
    }
}

/// The report in `format`.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Markdown => markdown(report),
        Format::Json => json(report),
        Format::Html => html(report),
        Format::Stix => stix(report),
        Format::Csv => iocs_csv(report),
    }
}

/// The JSON report (schema `maljan.triage.report/v1`, docs/report-schema.md), pretty-printed.
pub fn json(report: &Report) -> String {
    let mut s =
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

/// "5× timeout — yara_scan on analysis: …" — one line per distinct failure.
pub(crate) fn failure_where(f: &Failure) -> String {
    match &f.server {
        Some(s) => format!("{} on {s}", f.tool),
        None => f.tool.clone(),
    }
}

pub(crate) fn human_size(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit} ({n} bytes)")
}

pub(crate) fn ms(d: f64) -> String {
    if d >= 1000.0 {
        format!("{:.2} s", d / 1000.0)
    } else {
        format!("{d:.0} ms")
    }
}
