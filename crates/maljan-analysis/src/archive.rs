//! `archive_list`: the entries of zip (and zip-based: JAR, APK, OOXML), tar, gzip (and tar.gz),
//! and cab archives, with the names an extractor would refuse (traversal, absolute paths) and
//! double extensions flagged. 7z, RAR, bzip2, xz and zstd are recognised; their listing needs a
//! decoder this build does not carry, and the answer's `without` says so.

use std::{
    io::{Cursor, Read},
    sync::Arc,
};

use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{Page, contain, iso8601, le_u16, le_u32, le_u64, on_sample},
    identify::identify,
};

/// Most bytes a gzip stream is decompressed to while listing (a decompression bomb stops here).
pub const GZIP_CAP: u64 = 4 << 30;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub compressed_size: Option<u64>,
    pub method: Option<String>,
    pub is_dir: bool,
    /// A symbolic link (zip: unix mode 0o120000 in the external attributes; tar: a symlink
    /// entry): extracting it can point later members outside the target directory.
    pub is_symlink: bool,
    /// Where a symbolic or hard link points.
    pub link_target: Option<String>,
    pub encrypted: bool,
    pub modified: Option<String>,
    /// Why an analyst should look twice: path traversal, absolute path, double extension,
    /// executable, symlink, compression ratio over 1000, and compressed_over_100x_declared_size
    /// (the declared size understates what the member holds: its size cannot be trusted).
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Listing {
    /// zip, tar, gzip, tar.gz, cab, 7z, rar, bzip2, xz, zstd.
    pub format: String,
    /// Entries in all (before paging).
    pub entry_count: usize,
    pub total_size: u64,
    pub encrypted_entries: usize,
    pub comment: Option<String>,
    /// Format facts (gzip original name, 7z version, …).
    pub details: serde_json::Map<String, serde_json::Value>,
    /// What this answer lacks and why.
    pub without: Vec<String>,
    pub entries: Vec<Entry>,
}

const EXECUTABLE_EXT: &[&str] = &[
    "exe", "dll", "scr", "com", "pif", "bat", "cmd", "vbs", "vbe", "js", "jse", "wsf", "wsh",
    "hta", "ps1", "msi", "lnk", "jar", "cpl", "sys", "iso", "img", "vhd",
];
const DOC_EXT: &[&str] = &[
    "pdf", "doc", "docx", "xls", "xlsx", "ppt", "txt", "jpg", "png", "rtf", "zip",
];

pub fn name_flags(name: &str) -> Vec<String> {
    let mut flags = Vec::new();
    let norm = name.replace('\\', "/");
    if norm.split('/').any(|c| c == "..") {
        flags.push("path_traversal".to_string());
    }
    if norm.starts_with('/') || norm.get(1..3) == Some(":/") {
        flags.push("absolute_path".to_string());
    }
    let base = norm.rsplit('/').next().unwrap_or("").to_ascii_lowercase();
    let parts: Vec<&str> = base.split('.').collect();
    if let [.., prev, last] = parts.as_slice()
        && EXECUTABLE_EXT.contains(last)
    {
        flags.push("executable".to_string());
        if parts.len() >= 3 && DOC_EXT.contains(prev) {
            flags.push("double_extension".to_string());
        }
    }
    if base.contains('\u{202e}') {
        flags.push("right_to_left_override".to_string());
    }
    flags
}

fn entry(name: String, size: u64) -> Entry {
    Entry {
        flags: name_flags(&name),
        is_dir: name.ends_with('/'),
        is_symlink: false,
        link_target: None,
        name,
        size,
        compressed_size: None,
        method: None,
        encrypted: false,
        modified: None,
    }
}

fn listing(format: &str, entries: Vec<Entry>) -> Listing {
    Listing {
        format: format.into(),
        entry_count: entries.len(),
        total_size: entries.iter().map(|e| e.size).sum(),
        encrypted_entries: entries.iter().filter(|e| e.encrypted).count(),
        comment: None,
        details: Default::default(),
        without: vec![],
        entries,
    }
}

/// A member is flagged when its compressed size exceeds this many times its declared size, plus
/// [`SIZE_SLACK`] bytes (an empty file deflated or encrypted still takes a few bytes).
const COMPRESSED_OVER_DECLARED: u64 = 100;
const SIZE_SLACK: u64 = 1024;
/// Longest symlink target read from a zip member.
const MAX_LINK_TARGET: u64 = 4096;

/// Whether a member's compressed size is far larger than the size it declares.
fn understates_size(declared: u64, compressed: u64) -> bool {
    compressed
        > declared
            .saturating_mul(COMPRESSED_OVER_DECLARED)
            .saturating_add(SIZE_SLACK)
}

/// A zip symlink member's target: its content, at most [`MAX_LINK_TARGET`] bytes.
fn zip_link_target(z: &mut zip::ZipArchive<Cursor<&[u8]>>, i: usize) -> Option<String> {
    let mut target = Vec::new();
    z.by_index(i)
        .ok()?
        .take(MAX_LINK_TARGET)
        .read_to_end(&mut target)
        .ok()?;
    Some(String::from_utf8_lossy(&target).into_owned())
}

pub fn list_zip(b: &[u8], max: usize, budget: &Budget) -> Result<Listing, ToolError> {
    let mut z = zip::ZipArchive::new(Cursor::new(b))
        .map_err(|e| ToolError::unsupported_format(format!("not a readable zip archive: {e}")))?;
    let mut entries = Vec::new();
    for i in 0..z.len().min(max) {
        budget.items(1, "zip entries")?;
        let Ok(f) = z.by_index_raw(i) else { continue };
        let name = f
            .name()
            .map(|n| n.into_owned())
            .unwrap_or_else(|_| format!("<entry {i}: undecodable name>"));
        let mut e = entry(name, f.size());
        if f.enclosed_name().is_none()
            && !e
                .flags
                .iter()
                .any(|f| f == "path_traversal" || f == "absolute_path")
        {
            e.flags.push("unsafe_path".to_string());
        }
        e.is_dir = f.is_dir();
        e.compressed_size = Some(f.compressed_size());
        e.method = Some(format!("{:?}", f.compression()).to_ascii_lowercase());
        e.encrypted = f.encrypted();
        e.modified = f.last_modified().map(|d| d.to_string());
        if f.compressed_size() > 0 && f.size() / f.compressed_size() > 1000 {
            e.flags.push("compression_ratio_over_1000".to_string());
        }
        if understates_size(f.size(), f.compressed_size()) {
            e.flags
                .push("compressed_over_100x_declared_size".to_string());
        }
        let symlink = f.is_symlink() && !f.encrypted();
        drop(f);
        if symlink {
            budget.scan(MAX_LINK_TARGET as usize, "zip symlink targets")?;
            e.is_symlink = true;
            e.link_target = zip_link_target(&mut z, i);
            e.flags.push("symlink".to_string());
        }
        entries.push(e);
    }
    let total = z.len();
    let mut l = listing("zip", entries);
    l.entry_count = total;
    let comment = String::from_utf8_lossy(z.comment()).into_owned();
    l.comment = (!comment.is_empty()).then_some(comment);
    Ok(l)
}

fn list_tar<R: Read>(
    reader: R,
    max: usize,
    format: &str,
    budget: &Budget,
) -> Result<Listing, ToolError> {
    let mut ar = tar::Archive::new(reader);
    let mut entries = Vec::new();
    let mut count = 0usize;
    let iter = ar
        .entries()
        .map_err(|e| ToolError::unsupported_format(format!("not a readable tar archive: {e}")))?;
    let mut error = None;
    for item in iter {
        match item {
            Ok(t) => {
                budget.items(1, "tar entries")?;
                count += 1;
                if entries.len() < max {
                    let name = String::from_utf8_lossy(&t.path_bytes()).into_owned();
                    let h = t.header();
                    let mut e = entry(name, t.size());
                    e.is_dir = h.entry_type().is_dir();
                    e.modified = h.mtime().ok().map(|m| iso8601(m as i64));
                    if h.entry_type().is_symlink() || h.entry_type().is_hard_link() {
                        let target = t
                            .link_name_bytes()
                            .map(|l| String::from_utf8_lossy(&l).into_owned())
                            .unwrap_or_default();
                        e.flags.push(format!("link_to:{target}"));
                        e.link_target = Some(target);
                    }
                    if h.entry_type().is_symlink() {
                        e.is_symlink = true;
                        e.flags.push("symlink".to_string());
                    }
                    entries.push(e);
                }
            }
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let mut l = listing(format, entries);
    l.entry_count = count;
    if let Some(e) = error {
        l.without.push(format!("listing stopped early: {e}"));
    }
    Ok(l)
}

/// A reader that fails once the call is cancelled: inflating up to [`GZIP_CAP`] is seconds of
/// work, and tar skips a member's data by reading it.
struct Cancellable<'a, 'b, R> {
    inner: R,
    budget: &'a Budget<'b>,
}

impl<R: Read> Read for Cancellable<'_, '_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.budget
            .check_cancel()
            .map_err(|e| std::io::Error::other(e.message))?;
        self.inner.read(buf)
    }
}

fn list_gzip(b: &[u8], max: usize, budget: &Budget) -> Result<Listing, ToolError> {
    let flags = *b.get(3).unwrap_or(&0);
    let mut details = serde_json::Map::new();
    if let Some(mtime) = le_u32(b, 4).filter(|m| *m != 0) {
        details.insert("mtime".into(), iso8601(i64::from(mtime)).into());
    }
    if flags & 0x08 != 0 {
        let mut at = 10;
        if flags & 0x04 != 0 {
            at += 2 + usize::from(le_u16(b, 10).unwrap_or(0));
        }
        if let Some(rest) = b.get(at..) {
            let end = rest
                .iter()
                .position(|&c| c == 0)
                .unwrap_or(rest.len().min(1024));
            details.insert(
                "original_name".into(),
                String::from_utf8_lossy(&rest[..end]).into_owned().into(),
            );
        }
    }
    // Look at what the stream holds: tar.gz is listed, anything else is one entry.
    let mut head = Vec::new();
    let _ = flate2::read::GzDecoder::new(b)
        .take(64 * 1024)
        .read_to_end(&mut head);
    if head.get(257..262) == Some(b"ustar") {
        let decoder = Cancellable {
            inner: flate2::read::GzDecoder::new(b).take(GZIP_CAP),
            budget,
        };
        let mut l = list_tar(decoder, max, "tar.gz", budget)?;
        l.details.extend(details);
        return Ok(l);
    }
    let mut size = 0u64;
    let mut decoder = flate2::read::GzDecoder::new(b).take(GZIP_CAP);
    let mut buf = vec![0u8; 1 << 16];
    let mut error = None;
    loop {
        budget.check_cancel()?;
        match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => size += n as u64,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let name = details
        .get("original_name")
        .and_then(|v| v.as_str())
        .unwrap_or("(content)")
        .to_string();
    let mut e = entry(name, size);
    e.compressed_size = Some(b.len() as u64);
    e.method = Some("deflate".into());
    details.insert("content_kind".into(), identify(&head).kind.into());
    let mut l = listing("gzip", vec![e]);
    l.details = details;
    if let Some(err) = error {
        l.without.push(format!(
            "the stream is damaged, size counted up to the damage: {err}"
        ));
    }
    if size >= GZIP_CAP {
        l.without
            .push(format!("decompression stopped at {GZIP_CAP} bytes"));
    }
    Ok(l)
}

fn list_cab(b: &[u8], max: usize, budget: &Budget) -> Result<Listing, ToolError> {
    let bad = || ToolError::unsupported_format("a damaged cabinet header");
    let first = le_u32(b, 16).ok_or_else(bad)? as usize;
    let files = le_u16(b, 28).ok_or_else(bad)?;
    let mut at = first;
    let mut entries = Vec::new();
    for _ in 0..files {
        budget.items(1, "cab entries")?;
        let (Some(size), Some(_date), Some(attribs)) =
            (le_u32(b, at), le_u16(b, at + 10), le_u16(b, at + 14))
        else {
            break;
        };
        let Some(rest) = b.get(at + 16..) else { break };
        let Some(end) = rest.iter().take(1024).position(|&c| c == 0) else {
            break;
        };
        let name = String::from_utf8_lossy(&rest[..end]).into_owned();
        if entries.len() < max {
            let mut e = entry(name, u64::from(size));
            e.method = Some("cab".into());
            if attribs & 0x40 != 0 {
                e.flags.push("run_after_extraction".into());
            }
            entries.push(e);
        }
        at += 16 + end + 1;
    }
    let mut l = listing("cab", entries);
    l.entry_count = usize::from(files);
    Ok(l)
}

/// A 7z archive's entries, from its header (nothing is decoded). An encrypted header needs the
/// password: extract_members tries the usual ones.
fn list_7z(b: &[u8], max: usize, budget: &Budget) -> Result<Listing, ToolError> {
    let archive = match sevenz_rust2::Archive::read_with_memory_limit(
        &mut Cursor::new(b),
        &sevenz_rust2::Password::empty(),
        256 * 1024,
    ) {
        Ok(a) => a,
        Err(e) => {
            return Ok(undecoded(
                "7z",
                b,
                &format!("its header cannot be read: {e}"),
            ));
        }
    };
    let mut entries = Vec::new();
    for f in archive.files.iter().take(max) {
        budget.items(1, "7z entries")?;
        let mut e = entry(f.name.clone(), f.size);
        e.is_dir |= f.is_directory;
        e.compressed_size = (f.compressed_size > 0).then_some(f.compressed_size);
        e.method = Some("7z".into());
        entries.push(e);
    }
    let mut l = listing("7z", entries);
    l.entry_count = archive.files.len();
    l.details.insert("solid".into(), archive.is_solid.into());
    Ok(l)
}

fn list_rar(b: &[u8], max: usize) -> Listing {
    match crate::members_rar::headers(b, max) {
        Ok(headers) => {
            let entries = headers
                .into_iter()
                .map(|h| {
                    let mut e = entry(h.name, h.size);
                    e.is_dir |= h.is_dir;
                    e.encrypted = h.encrypted;
                    e.method = Some("rar".into());
                    e
                })
                .collect();
            listing("rar", entries)
        }
        Err(why) => undecoded("rar", b, &why),
    }
}

fn undecoded(format: &str, b: &[u8], why: &str) -> Listing {
    let mut l = listing(format, vec![]);
    if format == "7z" {
        if let (Some(major), Some(minor)) = (b.get(6), b.get(7)) {
            l.details
                .insert("version".into(), format!("{major}.{minor}").into());
        }
        let next_offset = le_u64(b, 12).unwrap_or(0);
        let header_at = 32u64.saturating_add(next_offset) as usize;
        if let Some(&id) = b.get(header_at) {
            let enc = match id {
                0x01 => "plain",
                0x17 => "encoded (compressed or encrypted header)",
                _ => "unknown",
            };
            l.details.insert("header".into(), enc.into());
        }
    }
    l.without
        .push(format!("{format} entries are not listed: {why}"));
    l
}

/// Lists an archive by its content, within `budget`.
pub fn list(b: &[u8], max: usize, budget: &Budget) -> Result<Listing, ToolError> {
    contain("archive", || {
        let kind = identify(b);
        match kind.kind.as_str() {
            "zip" | "ooxml" | "jar" | "apk" | "odf" => {
                let mut l = list_zip(b, max, budget)?;
                if kind.kind != "zip" {
                    l.details.insert("package".into(), kind.kind.into());
                }
                Ok(l)
            }
            "tar" => list_tar(Cursor::new(b), max, "tar", budget),
            "gzip" => list_gzip(b, max, budget),
            "cab" => list_cab(b, max, budget),
            "7z" => list_7z(b, max, budget),
            "rar" => Ok(list_rar(b, max)),
            "bzip2" | "xz" => Ok(undecoded(
                &kind.kind,
                b,
                "a single compressed stream has no entries; extract_members decompresses it",
            )),
            "zstd" => Ok(undecoded(
                "zstd",
                b,
                "this build has no zstd decoder (the format is recognised)",
            )),
            _ if b.starts_with(b"PK") || crate::carve::find_zip_eocd(b).is_some() => {
                list_zip(b, max, budget)
            }
            other => Err(ToolError::unsupported_format(format!(
                "not an archive: {other} ({})",
                kind.description
            ))),
        }
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveListArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Most entries returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
    /// Index of the first entry returned (paging).
    #[serde(default)]
    pub offset: usize,
}

fn default_limit() -> usize {
    500
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ArchiveListOutput {
    pub read_path: String,
    #[serde(flatten)]
    pub page: Page,
    #[serde(flatten)]
    pub listing: Listing,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "archive_list",
            "Entries of a zip (JAR, APK, OOXML), tar, gzip / tar.gz or cab archive: names, sizes, methods, \
             encryption, dates, and dangerous names (traversal, double extensions). 7z and RAR are recognised.",
        )
        .title("Archive listing")
        .timeout_s(120),
        move |ctx, a: ArchiveListArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let limit = a.limit.max(1);
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(s.bytes().len(), &cancel);
                    let mut listing = list(s.bytes(), a.offset.saturating_add(limit).min(1_000_000), &budget)?;
                    let entries: Vec<Entry> = std::mem::take(&mut listing.entries).into_iter().skip(a.offset).take(limit).collect();
                    let page = Page::new(listing.entry_count, a.offset, limit, entries.len());
                    listing.entries = entries;
                    Ok(ArchiveListOutput { read_path: s.read_path(), page, listing })
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
    fn dangerous_names() {
        assert!(name_flags("../../etc/passwd").contains(&"path_traversal".to_string()));
        assert!(name_flags("invoice.pdf.exe").contains(&"double_extension".to_string()));
        assert!(name_flags("/abs/x").contains(&"absolute_path".to_string()));
        assert!(name_flags("readme.txt").is_empty());
    }

    #[test]
    fn declared_sizes_far_below_the_compressed_size_are_flagged() {
        assert!(understates_size(10, 10_000));
        assert!(understates_size(0, 2000));
        assert!(
            !understates_size(0, 2),
            "an empty member deflated takes two bytes"
        );
        assert!(!understates_size(1000, 900));
        assert!(!understates_size(u64::MAX, u64::MAX));
    }
}
