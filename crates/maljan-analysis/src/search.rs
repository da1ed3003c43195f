//! `search`: byte (hex, with `??` wildcards), text (ASCII and UTF-16LE) or regular-expression
//! patterns in the sample, with offsets and context. Quoted patterns are read unquoted and the
//! answer's `read_as` says what each was read as.

use std::sync::Arc;

use maljan_server::{Registry, ToolError, ToolMeta};
use regex::bytes::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    AnalysisConfig,
    common::{Page, ReadAs, check_cancel, hex_preview, on_sample, text_preview},
    strings::Encoding,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Literal text, in the encodings asked for.
    Text,
    /// Bytes in hex ("4D 5A 90 00", "4d5a??00"); `??` matches any byte.
    Hex,
    /// A regular expression over the raw bytes (Rust regex syntax, ASCII classes).
    Regex,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Hit {
    /// The pattern as read (after the quoted-argument rule).
    pub pattern: String,
    /// ascii / utf16le for text patterns; null for hex and regex.
    pub encoding: Option<Encoding>,
    pub offset: u64,
    pub length: usize,
    /// The bytes around the match, printable ASCII kept.
    pub context: String,
    pub hex: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct PatternCount {
    pub pattern: String,
    pub matches: usize,
}

/// Parses a hex pattern with `??` wildcards into a byte regex.
pub fn hex_regex(p: &str) -> Result<Regex, ToolError> {
    let digits: String = p.chars().filter(|c| !c.is_whitespace()).collect();
    let digits = digits.strip_prefix("0x").unwrap_or(&digits);
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return Err(ToolError::bad_argument(format!(
            "hex pattern '{p}' needs an even number of hex digits"
        )));
    }
    let mut re = String::from("(?s-u)");
    for pair in digits.as_bytes().chunks(2) {
        let pair = std::str::from_utf8(pair).unwrap_or("");
        if pair == "??" {
            re.push('.');
        } else {
            let v = u8::from_str_radix(pair, 16).map_err(|_| {
                ToolError::bad_argument(format!(
                    "'{pair}' in hex pattern '{p}' is not a hex byte or ??"
                ))
            })?;
            re.push_str(&format!("\\x{v:02X}"));
        }
    }
    Regex::new(&re).map_err(|e| ToolError::bad_argument(format!("hex pattern '{p}': {e}")))
}

fn text_regex(p: &str, utf16: bool, ignore_case: bool) -> Result<Regex, ToolError> {
    let bytes: Vec<u8> = if utf16 {
        p.encode_utf16().flat_map(u16::to_le_bytes).collect()
    } else {
        p.as_bytes().to_vec()
    };
    let re: String = bytes.iter().map(|b| format!("\\x{b:02X}")).collect();
    RegexBuilder::new(&format!("(?s-u){re}"))
        .case_insensitive(ignore_case)
        .size_limit(1 << 24)
        .build()
        .map_err(|e| ToolError::bad_argument(format!("pattern '{p}': {e}")))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// What to look for (at most 32). A pair of quotes around a whole pattern is not part of it.
    pub patterns: Vec<String>,
    /// How the patterns are read.
    #[serde(default = "default_mode")]
    #[schemars(default = "default_mode")]
    pub mode: Mode,
    /// Text mode: the encodings searched.
    #[serde(default = "default_encodings")]
    #[schemars(default = "default_encodings")]
    pub encodings: Vec<Encoding>,
    /// Text and regex modes: ignore ASCII case.
    #[serde(default)]
    pub ignore_case: bool,
    /// Bytes of context shown on each side of a match.
    #[serde(default = "default_context")]
    #[schemars(default = "default_context", range(max = 256))]
    pub context: usize,
    /// Most matches returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
    /// Index of the first match returned (paging).
    #[serde(default)]
    pub offset: usize,
}

fn default_mode() -> Mode {
    Mode::Text
}
fn default_encodings() -> Vec<Encoding> {
    vec![Encoding::Ascii, Encoding::Utf16le]
}
fn default_context() -> usize {
    16
}
fn default_limit() -> usize {
    200
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchOutput {
    /// The patterns the quoted-argument rule changed, as they were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_as: Option<std::collections::BTreeMap<String, Value>>,
    pub read_path: String,
    /// Matches per pattern (all of them, before paging).
    pub counts: Vec<PatternCount>,
    #[serde(flatten)]
    pub page: Page,
    /// Matches ordered by offset.
    pub matches: Vec<Hit>,
}

/// Most matches counted per pattern (beyond it the count says "at least").
pub const COUNT_CAP: usize = 1_000_000;

pub(crate) fn run(
    b: &[u8],
    a: SearchArgs,
    cancel: &dyn Fn() -> bool,
) -> Result<SearchOutput, ToolError> {
    if a.patterns.is_empty() || a.patterns.len() > 32 {
        return Err(ToolError::bad_argument(
            "patterns must hold 1 to 32 patterns",
        ));
    }
    let mut read_as = ReadAs::default();
    let patterns = read_as.read_list("patterns", &a.patterns);
    let mut compiled: Vec<(String, Option<Encoding>, Regex)> = Vec::new();
    for p in &patterns {
        if p.is_empty() {
            return Err(ToolError::bad_argument(
                "an empty pattern matches everywhere; give some text",
            ));
        }
        match a.mode {
            Mode::Hex => compiled.push((p.clone(), None, hex_regex(p)?)),
            Mode::Regex => {
                let re = RegexBuilder::new(p)
                    .unicode(false)
                    .case_insensitive(a.ignore_case)
                    .size_limit(1 << 24)
                    .build()
                    .map_err(|e| ToolError::bad_argument(format!("regex '{p}': {e}")))?;
                compiled.push((p.clone(), None, re));
            }
            Mode::Text => {
                for enc in &a.encodings {
                    let re = text_regex(p, *enc == Encoding::Utf16le, a.ignore_case)?;
                    compiled.push((p.clone(), Some(*enc), re));
                }
            }
        }
    }
    let window = a.offset.saturating_add(a.limit.max(1));
    let ctx = a.context.min(256);
    let mut hits: Vec<Hit> = Vec::new();
    let mut counts: Vec<PatternCount> = patterns
        .iter()
        .map(|p| PatternCount {
            pattern: p.clone(),
            matches: 0,
        })
        .collect();
    for (pattern, enc, re) in &compiled {
        let idx = patterns.iter().position(|p| p == pattern).unwrap_or(0);
        let mut kept = 0;
        for (n, m) in re.find_iter(b).enumerate() {
            if n % 65_536 == 0 && cancel() {
                break;
            }
            counts[idx].matches += 1;
            if counts[idx].matches >= COUNT_CAP {
                break;
            }
            if kept < window {
                kept += 1;
                let (s, e) = (m.start().saturating_sub(ctx), (m.end() + ctx).min(b.len()));
                hits.push(Hit {
                    pattern: pattern.clone(),
                    encoding: *enc,
                    offset: m.start() as u64,
                    length: m.len(),
                    context: text_preview(&b[s..e], 2 * ctx + m.len().min(256)),
                    hex: hex_preview(m.as_bytes(), 64),
                });
            }
        }
    }
    hits.sort_by_key(|h| h.offset);
    let total: usize = counts.iter().map(|c| c.matches).sum();
    let matches: Vec<Hit> = hits
        .into_iter()
        .skip(a.offset)
        .take(a.limit.max(1))
        .collect();
    let page = Page::new(total, a.offset, a.limit.max(1), matches.len());
    Ok(SearchOutput {
        read_as: read_as.into_option(),
        read_path: String::new(),
        counts,
        page,
        matches,
    })
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "search",
            "Finds text (ASCII and UTF-16LE), hex bytes (?? wildcards) or regular expressions in the sample, \
             with offsets and context; quoted patterns are read unquoted and `read_as` says so.",
        )
        .title("Search the sample")
        .timeout_s(120),
        move |ctx, a: SearchArgs| {
            let config = config.clone();
            async move {
                let (path, carved) = (a.path.clone(), a.carved_path.clone());
                on_sample(&config.roots, ctx, path, carved, move |s, ctx| {
                    let mut out = run(s.bytes(), a, &|| ctx.is_cancelled())?;
                    check_cancel(ctx)?;
                    out.read_path = s.read_path();
                    Ok(out)
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(patterns: &[&str], mode: Mode) -> SearchArgs {
        SearchArgs {
            path: String::new(),
            carved_path: String::new(),
            patterns: patterns.iter().map(|s| s.to_string()).collect(),
            mode,
            encodings: default_encodings(),
            ignore_case: false,
            context: 4,
            limit: 10,
            offset: 0,
        }
    }

    #[test]
    fn text_hex_and_quotes() {
        let mut b = b"xx CreateMutexW yy ".to_vec();
        b.extend("CreateMutexA".encode_utf16().flat_map(u16::to_le_bytes));
        let out = run(&b, args(&["\"CreateMutex\""], Mode::Text), &|| false).unwrap();
        assert_eq!(out.page.total, 2);
        assert_eq!(out.matches[0].offset, 3);
        assert_eq!(out.matches[1].encoding, Some(Encoding::Utf16le));
        assert_eq!(
            out.read_as.unwrap()["patterns"],
            serde_json::json!(["CreateMutex"])
        );
        let out = run(
            b"\0MZ\x90\0\x03",
            args(&["4D 5A ?? 00"], Mode::Hex),
            &|| false,
        )
        .unwrap();
        assert_eq!(out.matches[0].offset, 1);
        assert!(out.read_as.is_none());
        assert_eq!(
            run(b"", args(&["4D5"], Mode::Hex), &|| false)
                .unwrap_err()
                .code,
            maljan_server::ErrorCode::BadArgument
        );
    }
}
