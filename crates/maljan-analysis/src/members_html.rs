//! Files an HTML or SVG page carries as base64: `data:…;base64,…` URIs (a download link's
//! `href`, an `src`) and long base64 string literals in scripts, which HTML smuggling decodes
//! with `atob` into a Blob and "downloads". Only long blobs that decode cleanly are taken, so a
//! page's icons and tokens stay out; images and fonts in `data:` URIs are skipped.

use std::collections::HashSet;

use base64::Engine as _;

use crate::{hashes::sha256_hex, members::Collector, members_mail::plain_file_name};

/// The fewest base64 characters a quoted literal must have to be taken as a blob (about 300
/// decoded bytes): shorter ones are icons, hashes and tokens, not programs.
pub const MIN_BASE64_CHARS: usize = 400;
/// A `data:…;base64,` URI declares that it carries a file, so its size is no evidence either way:
/// a 68-byte EICAR download is as much a payload as a program. Only an empty one is nothing.
const DATA_URI_MIN_CHARS: usize = 4;
/// Candidates looked at per page, so that a page of millions of quotes ends quickly.
const MAX_CANDIDATES: usize = 10_000;

/// Padding optional, as browsers' `atob` and `data:` decoders accept.
const LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Reads the base64 payloads of an HTML / SVG page (or a script) into `c` as `source` members.
/// Returns whether any was found.
pub(crate) fn html_payloads(b: &[u8], c: &mut Collector, source: &str) -> bool {
    let lower = b.to_ascii_lowercase();
    let downloads = download_names(b, &lower);
    let mut seen = HashSet::new();
    let mut taken: Vec<std::ops::Range<usize>> = Vec::new();
    let mut any = false;
    let (mut n_uri, mut n_script, mut candidates) = (0, 0, 0);

    // data: URIs.
    for p in memchr::memmem::find_iter(&lower, b"data:") {
        candidates += 1;
        if candidates > MAX_CANDIDATES || c.done() {
            return any;
        }
        let Some(comma) = lower[p..].iter().take(200).position(|&ch| ch == b',') else {
            continue;
        };
        let header = &lower[p + 5..p + comma];
        if !header.ends_with(b";base64") || skipped_media(header) {
            continue;
        }
        let start = p + comma + 1;
        let end = blob_end(b, start);
        let Some(data) = decode(&b[start..end], Declared::DataUri) else {
            continue;
        };
        taken.push(p..end);
        if !seen.insert(sha256_hex(&data)) {
            continue;
        }
        n_uri += 1;
        any = true;
        let name =
            tag_download(b, &lower, p, end).unwrap_or_else(|| format!("data-uri-{n_uri}.bin"));
        if !c.add_bytes(&name, source, &data) {
            return any;
        }
    }

    // Quoted base64 literals (scripts, attributes): the smuggling variant. Each quote is tried
    // as an opening one (a base64 run right after it, closed by the same quote), so that an
    // apostrophe in the page's prose cannot pair the quotes wrongly and hide a blob.
    let mut at = 0;
    while at < b.len() {
        let Some(q) = memchr::memchr3(b'"', b'\'', b'`', &b[at..]) else {
            break;
        };
        let open = at + q;
        let start = open + 1;
        let end = blob_end(b, start);
        at = start;
        if end - start < MIN_BASE64_CHARS || b.get(end) != Some(&b[open]) {
            continue;
        }
        at = end + 1;
        if taken.iter().any(|r| r.contains(&start)) {
            continue;
        }
        candidates += 1;
        if candidates > MAX_CANDIDATES || c.done() {
            break;
        }
        let Some(data) = decode(&b[start..end], Declared::Guessed) else {
            continue;
        };
        if !seen.insert(sha256_hex(&data)) {
            continue;
        }
        n_script += 1;
        any = true;
        let name = downloads
            .get(n_script - 1)
            .cloned()
            .unwrap_or_else(|| format!("base64-blob-{n_script}.bin"));
        if !c.add_bytes(&name, source, &data) {
            break;
        }
    }
    any
}

/// Whether a text with script in it is a web page (HTML or SVG tags in its first 64 KiB).
pub(crate) fn looks_like_page(b: &[u8]) -> bool {
    let head = b[..b.len().min(64 * 1024)].to_ascii_lowercase();
    [
        &b"<html"[..],
        b"<body",
        b"<script",
        b"<svg",
        b"<!doctype html",
    ]
    .iter()
    .any(|tag| memchr::memmem::find(&head, tag).is_some())
}

/// Media types whose `data:` URIs are page furniture, not payloads.
fn skipped_media(header: &[u8]) -> bool {
    let media = header.split(|&ch| ch == b';').next().unwrap_or(b"");
    (media.starts_with(b"image/") && media != b"image/svg+xml")
        || media.starts_with(b"font/")
        || media.starts_with(b"application/font")
        || media.starts_with(b"audio/")
        || media.starts_with(b"video/")
}

/// Where the base64 run that starts at `start` ends (base64 characters, padding and whitespace).
fn blob_end(b: &[u8], start: usize) -> usize {
    start
        + b[start..]
            .iter()
            .position(|&ch| {
                !(ch.is_ascii_alphanumeric() || b"+/=".contains(&ch) || ch.is_ascii_whitespace())
            })
            .unwrap_or(b.len() - start)
}

/// How a base64 run came to be read: declared by a `data:` URI, or guessed from a quoted literal.
#[derive(Clone, Copy, PartialEq)]
enum Declared {
    DataUri,
    Guessed,
}

/// The bytes of a base64 run, when it decodes cleanly (and, when only guessed at, is long and not
/// a hex string).
fn decode(run: &[u8], how: Declared) -> Option<Vec<u8>> {
    let clean: Vec<u8> = run
        .iter()
        .copied()
        .filter(|ch| !ch.is_ascii_whitespace())
        .collect();
    let too_short = match how {
        Declared::DataUri => clean.len() < DATA_URI_MIN_CHARS,
        Declared::Guessed => {
            clean.len() < MIN_BASE64_CHARS || clean.iter().all(u8::is_ascii_hexdigit)
        }
    };
    if too_short {
        return None;
    }
    // Wrapped base64 has long lines; prose of letters and spaces has short words.
    let mut tokens: Vec<&[u8]> = run
        .split(u8::is_ascii_whitespace)
        .filter(|t| !t.is_empty())
        .collect();
    tokens.pop();
    if tokens.iter().any(|t| t.len() < 16) {
        return None;
    }
    LENIENT.decode(&clean).ok().filter(|d| !d.is_empty())
}

/// The `download="…"` attribute of the tag holding `[from, to)`, sanitized.
fn tag_download(b: &[u8], lower: &[u8], from: usize, to: usize) -> Option<String> {
    let open = memchr::memrchr(b'<', &lower[from.saturating_sub(4096)..from])
        .map(|i| from.saturating_sub(4096) + i)?;
    let close = memchr::memchr(b'>', &lower[to..]).map(|i| to + i)?;
    [(open, from), (to, close)]
        .into_iter()
        .find_map(|(s, e)| attribute(&b[s..e], &lower[s..e], b"download"))
}

/// File names a page gives its downloads, in order: `download="x"` attributes and
/// `.download = "x"` script assignments.
fn download_names(b: &[u8], lower: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for p in memchr::memmem::find_iter(lower, b"download").take(1000) {
        if let Some(name) = attribute(&b[p..], &lower[p..], b"download") {
            out.push(name);
        }
    }
    out
}

/// The quoted value after the first `key =` / `key:` in `region`, as a plain file name.
fn attribute(region: &[u8], lower: &[u8], key: &[u8]) -> Option<String> {
    let p = memchr::memmem::find(lower, key)?;
    let rest = &region[p + key.len()..];
    let skip = rest
        .iter()
        .take(8)
        .position(|&ch| ch == b'"' || ch == b'\'')?;
    if !rest[..skip]
        .iter()
        .all(|&ch| ch == b'=' || ch == b':' || ch.is_ascii_whitespace())
        || !rest[..skip].iter().any(|&ch| ch == b'=' || ch == b':')
    {
        return None;
    }
    let quote = rest[skip];
    let value = &rest[skip + 1..];
    let len = value.iter().take(300).position(|&ch| ch == quote)?;
    plain_file_name(&String::from_utf8_lossy(&value[..len]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_assignments_name_downloads() {
        let page =
            br#"<a download="in.exe" href="x">x</a><script>a.download = 'b/c.exe';</script>"#;
        let lower = page.to_ascii_lowercase();
        assert_eq!(download_names(page, &lower), ["in.exe", "c.exe"]);
    }

    #[test]
    fn short_or_broken_base64_is_not_a_blob() {
        let guessed = |run: &[u8]| decode(run, Declared::Guessed);
        assert_eq!(guessed(b"TVqQ"), None);
        assert_eq!(guessed(&b"0123456789abcdef".repeat(40)), None);
        assert_eq!(guessed(&b"just some words ".repeat(40)), None);
        assert_eq!(guessed(&[b'!'; 500]), None);
        assert!(guessed(&b"QUJD".repeat(120)).is_some());
        assert!(skipped_media(b"image/png;base64"));
        assert!(!skipped_media(b"application/octet-stream;base64"));
    }

    #[test]
    fn a_data_uri_declares_its_file_whatever_its_size() {
        // EICAR's 68 bytes as a download link: short, but declared as a file.
        let eicar = b"WDVPIVAlQEFQWzRcUFpYNTQoUF4pN0NDKTd9JEVJQ0FSLVNUQU5EQVJELUFOVElWSVJVUy1URVNULUZJTEUhJEgrSCo=";
        let data = decode(eicar, Declared::DataUri).expect("a declared payload");
        assert!(data.starts_with(b"X5O!P%@AP"));
        assert_eq!(decode(eicar, Declared::Guessed), None);
        assert_eq!(decode(b"", Declared::DataUri), None);
        assert_eq!(decode(b"!!!!!!!!", Declared::DataUri), None);
    }
}
