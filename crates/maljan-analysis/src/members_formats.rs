//! The container readers of `extract_members`: each feeds the members it finds to the
//! [`Collector`], which holds the limits. Chosen by identify_file's kind of the sample.

use std::io::{Cursor, Read};

use crate::{
    identify::identify,
    members::{Collector, USUAL_PASSWORDS},
};

/// The magic number of an LZ4 frame.
const LZ4_FRAME: &[u8] = &[0x04, 0x22, 0x4D, 0x18];

/// Reads the containers `b` is; returns the format name ("" when it is none of them).
pub(crate) fn read(b: &[u8], c: &mut Collector) -> String {
    let kind = identify(b).kind;
    match kind.as_str() {
        "zip" | "jar" | "apk" => crate::members_zip::zip(b, c, false),
        "ooxml" | "odf" => crate::members_zip::zip(b, c, true),
        "tar" => {
            tar(Cursor::new(b), c, "tar");
            "tar".into()
        }
        "gzip" => stream(b, c, flate2::read::MultiGzDecoder::new(b), "gzip"),
        "bzip2" => stream(b, c, bzip2::read::MultiBzDecoder::new(b), "bzip2"),
        "xz" => stream(b, c, lzma_rust2::XzReader::new(b, true), "xz"),
        "zstd" => match zstd::stream::read::Decoder::with_buffer(b) {
            Ok(r) => stream(b, c, r, "zstd"),
            Err(e) => {
                c.skip("(content)", format!("not a readable zstd stream: {e}"));
                "zstd".into()
            }
        },
        "lzip" => stream(b, c, lzma_rust2::LzipReader::new(b), "lzip"),
        "lzma" => match lzma_rust2::LzmaReader::new_mem_limit(b, 256 * 1024, None) {
            Ok(r) => stream(b, c, r, "lzma"),
            Err(e) => {
                c.skip("(content)", format!("not a readable lzma stream: {e}"));
                "lzma".into()
            }
        },
        "7z" => sevenz(b, c),
        "rar" => crate::members_rar::rar(b, c),
        "cab" => cab(b, c),
        "cpio" => {
            crate::members_mail::cpio(b, c);
            "cpio".into()
        }
        "email" | "mbox" => crate::members_mail::mail(b, c, &kind),
        "chm" => {
            crate::members_chm::chm(b, c);
            "chm".into()
        }
        "iso9660" => {
            crate::members_iso::iso(b, c);
            "iso9660".into()
        }
        "tnef" => {
            crate::members_tnef::tnef(b, c);
            "tnef".into()
        }
        "binhex" => {
            crate::members_tnef::binhex(b, c);
            "binhex".into()
        }
        "uuencode" => {
            crate::members_mail::uuencoded(b, c);
            "uuencode".into()
        }
        "rtf" => {
            crate::members_mail::rtf_objects(b, c);
            "rtf".into()
        }
        "pdf" => {
            if crate::members_mail::pdf_files(b, c) {
                "pdf".into()
            } else if carve(b, c) {
                "carved".into()
            } else {
                String::new()
            }
        }
        "ole2" => {
            crate::members_mail::ole_objects(b, c);
            carve(b, c);
            "ole2".into()
        }
        // HTML smuggling: a program in a data: URI or a base64 string a script decodes.
        "html" | "xml" | "script" => {
            // A page full of script identifies as a script; it is still a page when it has tags.
            let page = kind != "script" || crate::members_html::looks_like_page(b);
            let source = if page { "html" } else { "script" };
            if crate::members_html::html_payloads(b, c, source) {
                source.into()
            } else {
                String::new()
            }
        }
        "text" | "empty" | "base64" | "hex" => String::new(),
        // An LZ4 frame (identify_file calls it data).
        _ if b.starts_with(LZ4_FRAME) => stream(b, c, lz4_flex::frame::FrameDecoder::new(b), "lz4"),
        _ => {
            if carve(b, c) {
                "carved".into()
            } else {
                String::new()
            }
        }
    }
}

/// Payloads embedded in the file (overlays, droppers): the sized ones become members.
fn carve(b: &[u8], c: &mut Collector) -> bool {
    let payloads = crate::carve::carve(b, 1000, &|| c.done());
    let mut any = false;
    for p in payloads {
        let Some(size) = p.size else { continue };
        let (start, end) = (p.offset as usize, (p.offset + size) as usize);
        let Some(slice) = b.get(start..end) else {
            continue;
        };
        any = true;
        if !c.add_bytes(&format!("{}@0x{:x}", p.kind, p.offset), "carved", slice) {
            break;
        }
    }
    any
}

fn tar<R: Read>(reader: R, c: &mut Collector, source: &str) {
    let mut ar = tar::Archive::new(reader);
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            c.skip("(archive)", format!("not a readable tar archive: {e}"));
            return;
        }
    };
    for item in entries {
        if c.done() {
            break;
        }
        let mut t = match item {
            Ok(t) => t,
            Err(e) => {
                c.skip("(archive)", format!("the archive stops early: {e}"));
                break;
            }
        };
        let name = String::from_utf8_lossy(&t.path_bytes()).into_owned();
        let kind = t.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            c.skip(&name, "not a regular file (link or device): not followed");
            continue;
        }
        if !c.add(&name, source, None, &mut t, None) {
            break;
        }
    }
}

/// Stops a decompressing reader once it has given `left` bytes, and remembers that it did.
struct Guard<R> {
    inner: R,
    left: u64,
    tripped: bool,
}

impl<R: Read> Read for Guard<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            self.tripped = true;
            return Err(std::io::Error::other("expansion limit reached"));
        }
        let want = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// A compressed stream: one member, or the members of the tar it holds (`tar.gz`, …).
fn stream<R: Read>(b: &[u8], c: &mut Collector, decoder: R, format: &str) -> String {
    let packed = b.len() as u64;
    // One byte past the collector's own cap, so that a single member meets the collector's
    // ratio check first; a tar inside meets this guard.
    let mut guard = Guard {
        inner: decoder,
        left: c.ratio_limit(packed).saturating_add(1),
        tripped: false,
    };
    let mut head = Vec::new();
    if let Err(e) = (&mut guard).take(1024).read_to_end(&mut head) {
        c.skip("(content)", format!("the {format} stream is damaged: {e}"));
        return format.into();
    }
    if head.get(257..262) == Some(b"ustar") {
        tar(
            Cursor::new(head).chain(&mut guard),
            c,
            &format!("{format}+tar"),
        );
        if guard.tripped {
            c.ratio_hit(format, packed);
        }
        return format!("tar.{}", short(format));
    }
    let name = match format {
        "gzip" => gzip_name(b).unwrap_or_else(|| "(gzip content)".into()),
        other => format!("({other} content)"),
    };
    c.add(
        &name,
        format,
        Some(packed),
        &mut Cursor::new(head).chain(&mut guard),
        None,
    );
    format.into()
}

fn short(format: &str) -> &str {
    match format {
        "gzip" => "gz",
        "bzip2" => "bz2",
        "zstd" => "zst",
        other => other,
    }
}

/// The original file name a gzip header carries (FNAME), if any.
fn gzip_name(b: &[u8]) -> Option<String> {
    let flags = *b.get(3)?;
    if flags & 0x08 == 0 {
        return None;
    }
    let mut at = 10;
    if flags & 0x04 != 0 {
        at += 2 + usize::from(crate::common::le_u16(b, 10)?);
    }
    let rest = b.get(at..)?;
    let end = rest.iter().take(1024).position(|&c| c == 0)?;
    let name = String::from_utf8_lossy(&rest[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

fn sevenz(b: &[u8], c: &mut Collector) -> String {
    let mut last_error = None;
    for pw in std::iter::once("").chain(USUAL_PASSWORDS.iter().copied()) {
        let password = if pw.is_empty() {
            sevenz_rust2::Password::empty()
        } else {
            sevenz_rust2::Password::from(pw)
        };
        let mut reader = match sevenz_rust2::ArchiveReader::new_with_memory_limit(
            Cursor::new(b),
            password,
            256 * 1024,
        ) {
            Ok(r) => r,
            Err(e) => {
                last_error = Some(e.to_string());
                continue;
            }
        };
        let before = c.out.members.len();
        let used = (!pw.is_empty()).then_some(pw);
        let packed = b.len() as u64;
        let result = reader.for_each_entries(|entry, r| {
            if entry.is_directory() || !entry.has_stream() {
                return Ok(true);
            }
            Ok(c.add(entry.name(), "7z", Some(packed), r, used))
        });
        match result {
            Ok(()) => return "7z".into(),
            Err(e) if c.out.members.len() == before => last_error = Some(e.to_string()),
            Err(e) => {
                c.skip("(archive)", format!("the 7z archive stops early: {e}"));
                return "7z".into();
            }
        }
    }
    c.skip(
        "(archive)",
        format!(
            "the 7z archive cannot be opened (with no password, nor {}): {}",
            USUAL_PASSWORDS.join(", "),
            last_error.unwrap_or_default()
        ),
    );
    "7z".into()
}

fn cab(b: &[u8], c: &mut Collector) -> String {
    let mut cabinet = match cab::Cabinet::new(Cursor::new(b)) {
        Ok(cb) => cb,
        Err(e) => {
            c.skip("(archive)", format!("not a readable cabinet: {e}"));
            return "cab".into();
        }
    };
    let names: Vec<String> = cabinet
        .folder_entries()
        .flat_map(|f| {
            f.file_entries()
                .map(|e| e.name().to_string())
                .collect::<Vec<_>>()
        })
        .take(100_000)
        .collect();
    for name in names {
        if c.done() {
            break;
        }
        match cabinet.read_file(&name) {
            Ok(mut r) => {
                if !c.add(&name, "cab", Some(b.len() as u64), &mut r, None) {
                    break;
                }
            }
            Err(e) => c.skip(&name, format!("cannot be read: {e}")),
        }
    }
    "cab".into()
}
