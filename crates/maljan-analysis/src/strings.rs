//! `strings`: printable ASCII and UTF-16LE runs with their offsets, filtered and paged.
//!
//! The scan is a single table-driven pass per encoding over the memory-mapped sample; only the
//! requested page is kept in memory, however many strings the file holds.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    AnalysisConfig,
    common::{Page, ReadAs, check_cancel, on_sample},
};

/// Bytes that count as printable: space to `~`, and tab (as GNU strings).
const fn printable_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0x20;
    while i < 0x7f {
        t[i] = true;
        i += 1;
    }
    t[b'\t' as usize] = true;
    t
}
static PRINTABLE: [bool; 256] = printable_table();

/// A string's encoding in the sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    Ascii,
    Utf16le,
}

/// One string found in the sample.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct FoundString {
    pub offset: u64,
    pub encoding: Encoding,
    pub value: String,
}

/// Longest value returned for one string (longer ones are cut and marked with `…`).
pub const MAX_VALUE_CHARS: usize = 4096;

/// How many bytes a scan reads between looks at the call's cancellation.
const CANCEL_EVERY: usize = 1 << 20;

/// Calls `f(offset, bytes)` for every ASCII run of at least `min_len` bytes. Returns early when
/// `f` returns false or `cancel` answers true (asked about once a MiB, hits or not).
pub fn scan_ascii(
    b: &[u8],
    min_len: usize,
    cancel: &dyn Fn() -> bool,
    mut f: impl FnMut(usize, &[u8]) -> bool,
) {
    let min_len = min_len.max(1);
    let mut i = 0;
    let n = b.len();
    let mut next_check = 0;
    while i < n {
        if i >= next_check {
            if cancel() {
                return;
            }
            next_check = i + CANCEL_EVERY;
        }
        // Skip non-printable bytes fast (up to the next look at the cancellation).
        let skip_end = n.min(next_check);
        while i < skip_end && !PRINTABLE[b[i] as usize] {
            i += 1;
        }
        let start = i;
        while i < n && PRINTABLE[b[i] as usize] {
            i += 1;
        }
        if i - start >= min_len && !f(start, &b[start..i]) {
            return;
        }
    }
}

/// Calls `f(offset, text)` for every UTF-16LE run (printable ASCII code units) of at least
/// `min_len` characters, at any alignment; stops like [`scan_ascii`].
pub fn scan_utf16le(
    b: &[u8],
    min_len: usize,
    cancel: &dyn Fn() -> bool,
    mut f: impl FnMut(usize, String) -> bool,
) {
    let min_len = min_len.max(1);
    let n = b.len();
    let mut i = 0;
    let mut next_check = 0;
    while i + 1 < n {
        if i >= next_check {
            if cancel() {
                return;
            }
            next_check = i + CANCEL_EVERY;
        }
        // Fast skip: a run needs a printable byte followed by a zero byte.
        if b[i + 1] != 0 || !PRINTABLE[b[i] as usize] {
            i += 1;
            continue;
        }
        let start = i;
        while i + 1 < n && b[i + 1] == 0 && PRINTABLE[b[i] as usize] {
            i += 2;
        }
        let chars = (i - start) / 2;
        if chars >= min_len {
            let s: String = b[start..i].iter().step_by(2).map(|&c| c as char).collect();
            if !f(start, s) {
                return;
            }
        } else {
            // A short run: resume one byte later so a run at the other alignment is not missed.
            i = start + 1;
        }
    }
}

/// What to look for.
#[derive(Debug, Clone)]
pub struct StringQuery {
    pub min_len: usize,
    pub ascii: bool,
    pub utf16le: bool,
    /// Substring every returned string must contain.
    pub pattern: Option<String>,
    pub ignore_case: bool,
    pub offset: usize,
    pub limit: usize,
}

/// The strings of `b` matching `q`: the requested page and the total count. Results are ordered by
/// offset, ASCII before UTF-16LE at equal offsets.
pub fn extract(b: &[u8], q: &StringQuery, cancel: &dyn Fn() -> bool) -> (Vec<FoundString>, Page) {
    let pattern = q.pattern.as_ref().map(|p| {
        if q.ignore_case {
            p.to_ascii_lowercase()
        } else {
            p.clone()
        }
    });
    let matches = |s: &str| match &pattern {
        None => true,
        Some(p) if q.ignore_case => s.to_ascii_lowercase().contains(p.as_str()),
        Some(p) => s.contains(p.as_str()),
    };
    let mut found: Vec<FoundString> = Vec::new();
    let mut total = 0usize;
    let window = q.offset.saturating_add(q.limit);
    // Keep the first `offset + limit` strings by offset, across both encodings: collect up to that
    // many of each, merge, then cut. Counting continues to the end for `total`.
    let keep =
        |enc: Encoding, off: usize, s: &str, kept: &mut Vec<FoundString>, count: &mut usize| {
            if matches(s) {
                *count += 1;
                if kept.len() < window {
                    kept.push(FoundString {
                        offset: off as u64,
                        encoding: enc,
                        value: cut(s),
                    });
                }
            }
        };
    let mut ascii = Vec::new();
    if q.ascii {
        scan_ascii(b, q.min_len, cancel, |off, run| {
            // SAFETY-free: printable bytes are ASCII, so this is valid UTF-8.
            let s = std::str::from_utf8(run).unwrap_or_default();
            keep(Encoding::Ascii, off, s, &mut ascii, &mut total);
            true
        });
    }
    let mut wide = Vec::new();
    if q.utf16le {
        scan_utf16le(b, q.min_len, cancel, |off, s| {
            keep(Encoding::Utf16le, off, &s, &mut wide, &mut total);
            true
        });
    }
    found.reserve(ascii.len() + wide.len());
    let (mut a, mut w) = (ascii.into_iter().peekable(), wide.into_iter().peekable());
    while found.len() < window {
        let take_a = match (a.peek(), w.peek()) {
            (Some(x), Some(y)) => x.offset <= y.offset,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        found.push(if take_a { a.next() } else { w.next() }.expect("peeked"));
    }
    let out: Vec<FoundString> = found.into_iter().skip(q.offset).take(q.limit).collect();
    let page = Page::new(total, q.offset, q.limit, out.len());
    (out, page)
}

fn cut(s: &str) -> String {
    if s.len() <= MAX_VALUE_CHARS {
        s.to_string()
    } else {
        let mut end = MAX_VALUE_CHARS;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StringsArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Shortest string returned, in characters.
    #[serde(default = "default_min_len")]
    #[schemars(default = "default_min_len", range(min = 1, max = 4096))]
    pub min_len: usize,
    /// Encodings to look for: "ascii", "utf16le".
    #[serde(default = "default_encodings")]
    #[schemars(default = "default_encodings")]
    pub encodings: Vec<Encoding>,
    /// Most strings returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit", range(min = 1, max = 100000))]
    pub limit: usize,
    /// Index of the first string returned (paging).
    #[serde(default)]
    pub offset: usize,
    /// Only strings containing this text. Quotes around the whole pattern are not part of it
    /// (`"CreateMutex"` finds CreateMutexW); `read_as` says what was searched for.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Match `pattern` regardless of ASCII case.
    #[serde(default)]
    pub ignore_case: bool,
}

fn default_min_len() -> usize {
    6
}
fn default_encodings() -> Vec<Encoding> {
    vec![Encoding::Ascii, Encoding::Utf16le]
}
fn default_limit() -> usize {
    2000
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct StringsOutput {
    /// The search arguments the quoted-argument rule changed, as they were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_as: Option<std::collections::BTreeMap<String, Value>>,
    /// The file that was read.
    pub read_path: String,
    pub min_len: usize,
    pub encodings: Vec<Encoding>,
    #[serde(flatten)]
    pub page: Page,
    pub strings: Vec<FoundString>,
}

pub(crate) fn run(b: &[u8], a: StringsArgs, ctx: &ToolContext) -> Result<StringsOutput, ToolError> {
    if a.min_len == 0 || a.min_len > 4096 {
        return Err(ToolError::bad_argument(
            "min_len must be between 1 and 4096",
        ));
    }
    if a.limit == 0 || a.limit > 100_000 {
        return Err(ToolError::bad_argument(
            "limit must be between 1 and 100000",
        ));
    }
    if a.encodings.is_empty() {
        return Err(ToolError::bad_argument(
            "encodings is empty: give \"ascii\", \"utf16le\" or both",
        ));
    }
    let mut read_as = ReadAs::default();
    let pattern = a
        .pattern
        .as_deref()
        .map(|p| read_as.read("pattern", p))
        .filter(|p| !p.is_empty());
    let q = StringQuery {
        min_len: a.min_len,
        ascii: a.encodings.contains(&Encoding::Ascii),
        utf16le: a.encodings.contains(&Encoding::Utf16le),
        pattern,
        ignore_case: a.ignore_case,
        offset: a.offset,
        limit: a.limit,
    };
    let (strings, page) = extract(b, &q, &|| ctx.is_cancelled());
    check_cancel(ctx)?;
    Ok(StringsOutput {
        read_as: read_as.into_option(),
        read_path: String::new(),
        min_len: a.min_len,
        encodings: a.encodings,
        page,
        strings,
    })
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "strings",
            "Printable ASCII and UTF-16LE strings of the sample with their file offsets, optionally \
             only those containing `pattern`; paged with offset/limit (`total`, `next_offset`).",
        )
        .title("Strings")
        .timeout_s(120),
        move |ctx, a: StringsArgs| {
            let config = config.clone();
            async move {
                let (path, carved) = (a.path.clone(), a.carved_path.clone());
                on_sample(&config.roots, ctx, path, carved, move |s, ctx| {
                    let mut out = run(s.bytes(), a, ctx)?;
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

    fn q() -> StringQuery {
        StringQuery {
            min_len: 4,
            ascii: true,
            utf16le: true,
            pattern: None,
            ignore_case: false,
            offset: 0,
            limit: 100,
        }
    }

    #[test]
    fn finds_both_encodings_in_offset_order() {
        let mut b = b"\x00\x01hello world\x00\xff".to_vec();
        b.extend("Wide\u{0}".encode_utf16().flat_map(u16::to_le_bytes));
        b.push(0x90);
        b.extend("Odd!".encode_utf16().flat_map(u16::to_le_bytes));
        let (s, p) = extract(&b, &q(), &|| false);
        assert_eq!(p.total, 3, "{s:?}");
        assert_eq!(s[0].value, "hello world");
        assert_eq!(s[0].offset, 2);
        assert_eq!(s[1].value, "Wide");
        assert_eq!(s[1].encoding, Encoding::Utf16le);
        assert_eq!(s[1].offset, 15, "odd alignment is found too");
        assert_eq!((s[2].value.as_str(), s[2].offset), ("Odd!", 26));
    }

    #[test]
    fn pattern_and_paging() {
        let b = b"CreateMutexW\0abcdefg\0CreateMutexA\0xyzxyz\0";
        let mut query = q();
        query.pattern = Some("CreateMutex".into());
        query.limit = 1;
        let (s, p) = extract(b, &query, &|| false);
        assert_eq!((p.total, p.next_offset), (2, Some(1)));
        assert_eq!(s[0].value, "CreateMutexW");
        query.offset = 1;
        let (s, p) = extract(b, &query, &|| false);
        assert_eq!((s[0].value.as_str(), p.next_offset), ("CreateMutexA", None));
    }
}
