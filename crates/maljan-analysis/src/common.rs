//! What every tool shares: opening the sample (path / carved_path under the roots, memory-mapped),
//! paging, the quoted-argument rule, and containing a parser's panic.

use std::{
    collections::BTreeMap,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Component, Path, PathBuf},
};

use maljan_server::{Roots, ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// The sample a tool reads: the resolved path and its bytes (memory-mapped, never copied).
pub struct Sample {
    pub path: PathBuf,
    map: Option<memmap2::Mmap>,
    /// The descriptor that was opened and checked: what an external program is handed.
    file: std::fs::File,
}

impl Sample {
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
    /// The path that was read, as the answer's `read_path` names it.
    pub fn read_path(&self) -> String {
        self.path.display().to_string()
    }
    /// The open file itself, for a reader that must not open the path again by name.
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }
    /// Maps a file already resolved under the roots. It is opened from its root's handle
    /// (never through a link swapped in since it was resolved), without waiting (a FIFO is
    /// refused at once: only a regular file is kept), and the descriptor that was opened and
    /// checked is the one mapped.
    pub fn map_file(roots: &Roots, path: &Path, shown: &str) -> Result<Self, ToolError> {
        let file = roots.open_file(path, shown)?;
        let len = file.metadata().map_err(|e| ToolError::io(shown, e))?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the sample is a staged, read-only file; the map is only ever read.
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| ToolError::io(shown, e))?)
        };
        Ok(Self {
            path: path.to_path_buf(),
            map,
            file,
        })
    }
}

/// Resolves `path` or, when given, `carved_path`, and maps it.
///
/// `carved_path` is held tighter than `path`: a regular file under the roots that lies in a
/// `carved/<sha256>/` directory; when `path` is given too, `<sha256>` must be the sample's SHA-256
/// (the layout `<staging>/job-<id>/carved/<sha256 of the sample>/`).
pub fn open_sample(roots: &Roots, path: &str, carved_path: &str) -> Result<Sample, ToolError> {
    if carved_path.is_empty() {
        if path.is_empty() {
            return Err(ToolError::bad_argument("`path` is required"));
        }
        let resolved = roots.existing(path)?;
        return Sample::map_file(roots, &resolved, path);
    }
    let resolved = roots.existing(carved_path)?;
    let carved = Sample::map_file(roots, &resolved, carved_path)?;
    let digest = carved_dir_digest(&resolved).ok_or_else(|| {
        ToolError::bad_argument(
            "carved_path must lie under a carved/<sha256 of the sample>/ directory",
        )
        .with_remediation(
            "pass a file that carve_payloads or the job wrote under the job's carved/ directory",
        )
    })?;
    if !path.is_empty() {
        let sample = Sample::map_file(roots, &roots.existing(path)?, path)?;
        let sha = crate::hashes::sha256_hex(sample.bytes());
        if !sha.eq_ignore_ascii_case(&digest) {
            return Err(ToolError::bad_argument(
                "carved_path does not belong to this sample (its carved/<sha256>/ directory names another sample)",
            ));
        }
    }
    Ok(carved)
}

/// The `<sha256>` of the nearest `carved/<sha256>/` ancestor, if any.
fn carved_dir_digest(path: &Path) -> Option<String> {
    let parts: Vec<&std::ffi::OsStr> = path
        .parent()?
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect();
    parts.windows(2).rev().find_map(|w| {
        let hex = w[1].to_str()?;
        (w[0] == "carved" && hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| hex.to_ascii_lowercase())
    })
}

/// Where a page of a long answer starts and ends.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Page {
    /// How many items there are in all (after filtering).
    pub total: usize,
    /// The index of the first item returned.
    pub offset: usize,
    /// The most items one answer returns.
    pub limit: usize,
    /// How many items this answer holds.
    pub returned: usize,
    /// The `offset` that asks for the next page; null on the last page.
    pub next_offset: Option<usize>,
}

impl Page {
    pub fn new(total: usize, offset: usize, limit: usize, returned: usize) -> Self {
        let end = offset.saturating_add(returned);
        Self {
            total,
            offset,
            limit,
            returned,
            next_offset: (end < total).then_some(end),
        }
    }
}

/// Cuts a list to one page.
pub fn page<T>(items: Vec<T>, offset: usize, limit: usize) -> (Vec<T>, Page) {
    let total = items.len();
    let out: Vec<T> = items.into_iter().skip(offset).take(limit).collect();
    let page = Page::new(total, offset, limit, out.len());
    (out, page)
}

/// The quoted-argument rule (runtime facts §7): after trimming, a value of at least two characters
/// that starts and ends with the same quote (`"`, `'` or a backtick), which does not occur inside,
/// is read as its inner text (no unescaping). Anything else is kept exactly, untrimmed.
pub fn unquote(value: &str) -> Option<&str> {
    let t = value.trim();
    let mut chars = t.chars();
    let (first, last) = (chars.next()?, chars.next_back()?);
    if !matches!(first, '"' | '\'' | '`') || first != last {
        return None;
    }
    let inner = &t[first.len_utf8()..t.len() - last.len_utf8()];
    (!inner.contains(first)).then_some(inner)
}

/// What each search argument was read as; only arguments the quoted rule changed are listed.
#[derive(Debug, Default)]
pub struct ReadAs(BTreeMap<String, Value>);

impl ReadAs {
    /// Applies the rule to one argument and remembers it when it changed.
    pub fn read(&mut self, name: &str, value: &str) -> String {
        match unquote(value) {
            Some(inner) => {
                self.0
                    .insert(name.to_string(), Value::String(inner.to_string()));
                inner.to_string()
            }
            None => value.to_string(),
        }
    }
    /// The rule element by element over a list; the list is recorded when any element changed.
    pub fn read_list(&mut self, name: &str, values: &[String]) -> Vec<String> {
        let read: Vec<String> = values
            .iter()
            .map(|v| unquote(v).map(str::to_string).unwrap_or_else(|| v.clone()))
            .collect();
        if read.iter().zip(values).any(|(a, b)| a != b) {
            self.0.insert(name.to_string(), Value::from(read.clone()));
        }
        read
    }
    pub fn into_option(self) -> Option<BTreeMap<String, Value>> {
        (!self.0.is_empty()).then_some(self.0)
    }
}

static CONTAINED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many parser panics `contain` has caught in this process (the proptests watch it).
pub fn contained_panics() -> usize {
    CONTAINED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs a parser, turning a panic (a library bug on hostile input) into `tool_failed`.
pub fn contain<T>(what: &str, f: impl FnOnce() -> Result<T, ToolError>) -> Result<T, ToolError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            CONTAINED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(
                parser = what,
                "a parser panicked on its input; answered tool_failed"
            );
            Err(ToolError::tool_failed(format!(
                "the {what} parser failed on this input (malformed or hostile file)"
            ))
            .with_remediation(
                "the file is malformed; try identify_file, strings or carve_payloads instead",
            ))
        }
    }
}

/// Fails with `tool_failed` once the call is cancelled or its timeout has passed.
pub fn check_cancel(ctx: &ToolContext) -> Result<(), ToolError> {
    if ctx.is_cancelled() {
        Err(crate::budget::cancelled())
    } else {
        Ok(())
    }
}

/// Hex dump of at most `max` bytes (for previews).
pub fn hex_preview(bytes: &[u8], max: usize) -> String {
    hex::encode(&bytes[..bytes.len().min(max)])
}

/// Text preview: printable ASCII kept, everything else as `.`.
pub fn text_preview(bytes: &[u8], max: usize) -> String {
    bytes[..bytes.len().min(max)]
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '.'
            }
        })
        .collect()
}

/// Reads a little-endian integer without panicking on short input.
pub fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
pub fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
pub fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A Unix timestamp as ISO 8601 UTC (no time-zone crate needed).
pub fn iso8601(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Opens the sample on the blocking pool and runs `work` on it.
pub async fn on_sample<O, F>(
    roots: &Roots,
    ctx: ToolContext,
    path: String,
    carved_path: String,
    work: F,
) -> Result<O, ToolError>
where
    O: Send + 'static,
    F: FnOnce(&Sample, &ToolContext) -> Result<O, ToolError> + Send + 'static,
{
    let roots = roots.clone();
    maljan_server::blocking(move || {
        let sample = open_sample(&roots, &path, &carved_path)?;
        work(&sample, &ctx)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_rule() {
        assert_eq!(unquote("\"CreateMutex\""), Some("CreateMutex"));
        assert_eq!(unquote("  'a b'  "), Some("a b"));
        assert_eq!(unquote("`x`"), Some("x"));
        assert_eq!(unquote("\"a\"b\""), None);
        assert_eq!(unquote("\"x'"), None);
        assert_eq!(unquote("\""), None);
        assert_eq!(unquote("plain"), None);
        assert_eq!(unquote("\"\""), Some(""));
        let mut r = ReadAs::default();
        assert_eq!(r.read("pattern", " spaced "), " spaced ");
        assert!(r.into_option().is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn carved_layout() {
        let sha = "a".repeat(64);
        let p = PathBuf::from(format!("/s/job-1/carved/{sha}/x/payload.bin"));
        assert_eq!(carved_dir_digest(&p), Some(sha));
        assert_eq!(carved_dir_digest(Path::new("/s/job-1/payload.bin")), None);
    }

    #[test]
    fn pages() {
        let (v, p) = page((0..10).collect::<Vec<_>>(), 8, 5);
        assert_eq!(v, vec![8, 9]);
        assert_eq!(p.next_offset, None);
        let (_, p) = page((0..10).collect::<Vec<_>>(), 0, 5);
        assert_eq!(p.next_offset, Some(5));
    }
}
