//! `carve_payloads`: files embedded in the sample — PE, ELF, ZIP, OLE2, PDF, CAB, 7z, RAR — found by
//! signature, validated, sized from their own headers where the format allows, and hashed. With
//! `extract: true` each sized payload is written (0o600, never overwriting) under the server's work
//! directory, `<work dir>/carved/<sha256 of the sample>/` — never beside the sample, whose folder
//! may be read-only evidence — where the other tools accept it as `carved_path`.

use std::{
    io::Write as _,
    path::Path,
    sync::{Arc, LazyLock},
};

use maljan_server::{Registry, Roots, ToolError, ToolMeta, Write};
use regex::bytes::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    common::{Page, check_cancel, le_u16, le_u32, le_u64, on_sample},
    hashes::sha256_hex,
    identify::{OLE_MAGIC, identify, pe_header_offset},
};

static SIGNATURES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u)MZ|PK\x03\x04|\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1|%PDF-|\x7FELF|MSCF\x00\x00\x00\x00|7z\xBC\xAF\x27\x1C|Rar!\x1A\x07")
        .unwrap()
});

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Payload {
    pub offset: u64,
    /// pe, elf, zip, ole2, pdf, cab, 7z, rar (identify_file's kinds; zip-based documents as ooxml, …).
    pub kind: String,
    pub description: String,
    /// Size from the payload's own headers; null when the format does not say (then it runs to the
    /// next payload or the end of the file, and is not hashed).
    pub size: Option<u64>,
    pub sha256: Option<String>,
    /// Where `extract` wrote it (use it as `carved_path`).
    pub carved_path: Option<String>,
}

pub fn find_zip_eocd(b: &[u8]) -> Option<usize> {
    let from = b.len().saturating_sub(65_557);
    memchr::memmem::rfind(&b[from..], b"PK\x05\x06").map(|p| p + from)
}

fn pe_size(b: &[u8]) -> Option<u64> {
    let pe = pe_header_offset(b)?;
    let nsec = usize::from(le_u16(b, pe + 6)?);
    let opt = usize::from(le_u16(b, pe + 20)?);
    let table = pe + 24 + opt;
    let headers = u64::from(le_u32(b, pe + 24 + 60).unwrap_or(0));
    let mut end = headers;
    for i in 0..nsec.min(96) {
        let s = table + i * 40;
        let (raw_size, raw_ptr) = (le_u32(b, s + 16)?, le_u32(b, s + 20)?);
        if raw_size > 0 {
            end = end.max(u64::from(raw_ptr) + u64::from(raw_size));
        }
    }
    // Authenticode signature (security directory: file offset, not RVA).
    let magic = le_u16(b, pe + 24)?;
    let dd = pe + 24 + if magic == 0x20b { 112 } else { 96 };
    if let (Some(cert_off), Some(cert_size)) = (le_u32(b, dd + 4 * 8), le_u32(b, dd + 4 * 8 + 4))
        && cert_off != 0
        && cert_size != 0
    {
        end = end.max(u64::from(cert_off) + u64::from(cert_size));
    }
    (end > 0).then_some(end)
}

fn elf_size(b: &[u8]) -> Option<u64> {
    let bits64 = *b.get(4)? == 2;
    if !matches!(b.get(4), Some(1 | 2)) || !matches!(b.get(5), Some(1 | 2)) || b.get(6) != Some(&1)
    {
        return None;
    }
    if b.get(5) == Some(&2) {
        return None; // big-endian: seen rarely embedded; not sized
    }
    let (shoff, shentsize, shnum) = if bits64 {
        (le_u64(b, 0x28)?, le_u16(b, 0x3A)?, le_u16(b, 0x3C)?)
    } else {
        (
            u64::from(le_u32(b, 0x20)?),
            le_u16(b, 0x2E)?,
            le_u16(b, 0x30)?,
        )
    };
    let end = shoff.checked_add(u64::from(shentsize) * u64::from(shnum))?;
    (shoff != 0).then_some(end)
}

fn zip_size(b: &[u8]) -> Option<u64> {
    // The first end-of-central-directory after the local header ends this archive.
    let eocd = memchr::memmem::find(b, b"PK\x05\x06")?;
    let comment = usize::from(le_u16(b, eocd + 20)?);
    Some((eocd + 22 + comment).min(b.len()) as u64)
}

fn pdf_size(b: &[u8]) -> Option<u64> {
    // To the last %%EOF before the next %PDF- (incremental updates add several %%EOF).
    let next = memchr::memmem::find(b.get(5..).unwrap_or_default(), b"%PDF-")
        .map(|p| p + 5)
        .unwrap_or(b.len());
    let eof = memchr::memmem::rfind(&b[..next], b"%%EOF")?;
    Some((eof + 5) as u64)
}

/// Finds embedded payloads (not the file itself at offset 0). `max` caps the scan's findings.
pub fn carve(b: &[u8], max: usize, cancel: &dyn Fn() -> bool) -> Vec<Payload> {
    let mut out: Vec<Payload> = Vec::new();
    let mut skip_until = 0usize;
    for (n, m) in SIGNATURES.find_iter(b).enumerate() {
        if n % 4096 == 0 && cancel() {
            break;
        }
        let off = m.start();
        if off == 0 || off < skip_until {
            continue;
        }
        let rest = &b[off..];
        let (kind, size) = match m.as_bytes() {
            b"MZ" => match pe_header_offset(rest) {
                Some(_) => ("pe", pe_size(rest)),
                None => continue,
            },
            b"PK\x03\x04" => ("zip", zip_size(rest)),
            s if s == OLE_MAGIC => ("ole2", None),
            b"%PDF-" => ("pdf", pdf_size(rest)),
            b"\x7FELF" => {
                if !matches!(rest.get(4), Some(1 | 2)) || rest.get(6) != Some(&1) {
                    continue;
                }
                ("elf", elf_size(rest))
            }
            b"MSCF\0\0\0\0" => ("cab", le_u32(rest, 8).map(u64::from)),
            s if s.starts_with(b"7z") => (
                "7z",
                le_u64(rest, 12)
                    .zip(le_u64(rest, 20))
                    .map(|(o, l)| 32 + o + l),
            ),
            _ => ("rar", None),
        };
        let size = size.filter(|s| *s > 0 && (*s as usize) <= rest.len());
        let head = &rest[..rest
            .len()
            .min(size.unwrap_or(u64::MAX) as usize)
            .min(1 << 20)];
        let id = identify(head);
        let kind = if id.kind == "data" || id.kind == "text" {
            kind.to_string()
        } else {
            id.kind.clone()
        };
        // A zip's later local headers, a PE's inner bytes: not payloads of their own.
        if let Some(s) = size
            && (kind == "zip"
                || kind == "ooxml"
                || kind == "jar"
                || kind == "apk"
                || kind == "cab"
                || kind == "7z")
        {
            skip_until = off + s as usize;
        }
        out.push(Payload {
            offset: off as u64,
            kind,
            description: id.description,
            size,
            sha256: size.map(|s| sha256_hex(&rest[..s as usize])),
            carved_path: None,
        });
        if out.len() >= max {
            break;
        }
    }
    out
}

fn extension(kind: &str) -> &'static str {
    match kind {
        "pe" => "exe",
        "elf" => "elf",
        "zip" | "jar" | "apk" => "zip",
        "ooxml" => "ooxml",
        "ole2" => "ole",
        "pdf" => "pdf",
        "cab" => "cab",
        "7z" => "7z",
        _ => "bin",
    }
}

/// Writes each sized payload under `<work dir>/carved/<sha256 of sample>/`, the directory
/// made (0o700) and every file created (0o600, never overwriting) from the roots' handles, so a
/// link swapped in on the way is refused rather than written through.
fn extract(
    roots: &Roots,
    work: &Path,
    b: &[u8],
    payloads: &mut [Payload],
) -> Result<(), ToolError> {
    let dir = work.join("carved").join(sha256_hex(b));
    let handle = roots.create_dir_all_mode(&dir, "carved directory", 0o700)?;
    for p in payloads.iter_mut() {
        let Some(size) = p.size else { continue };
        let name = format!("{:08x}.{}", p.offset, extension(&p.kind));
        let data = &b[p.offset as usize..(p.offset + size) as usize];
        match handle.open_write(Path::new(&name), Write::New { mode: 0o600 }) {
            Ok(mut f) => f
                .write_all(data)
                .map_err(|e| ToolError::io("carved payload", e))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(maljan_server::roots::io_error("carved payload", e)),
        }
        p.carved_path = Some(dir.join(&name).display().to_string());
    }
    Ok(())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CarveArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Write each sized payload under the server's `<work dir>/carved/<sha256 of the sample>/` and
    /// return its path.
    #[serde(default)]
    pub extract: bool,
    /// Most payloads returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
    /// Index of the first payload returned (paging).
    #[serde(default)]
    pub offset: usize,
}

fn default_limit() -> usize {
    200
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CarveOutput {
    pub read_path: String,
    pub size: u64,
    #[serde(flatten)]
    pub page: Page,
    pub payloads: Vec<Payload>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "carve_payloads",
            "Files embedded in the sample (PE, ELF, ZIP/OOXML, OLE2, PDF, CAB, 7z, RAR) by offset, with size and \
             SHA-256 where the format gives its size; `extract` writes them where carved_path accepts them.",
        )
        .title("Carve payloads")
        .writes()
        .timeout_s(120),
        move |ctx, a: CarveArgs| {
            let config = config.clone();
            async move {
                let roots = config.roots.clone();
                let work = config.work_dir.path().to_path_buf();
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    let all = carve(b, 100_000, &|| ctx.is_cancelled());
                    check_cancel(ctx)?;
                    let (mut payloads, page) = crate::common::page(all, a.offset, a.limit.max(1));
                    if a.extract {
                        extract(&roots, &work, b, &mut payloads)?;
                    }
                    Ok(CarveOutput { read_path: s.read_path(), size: b.len() as u64, page, payloads })
                })
                .await
            }
        },
    );
}
