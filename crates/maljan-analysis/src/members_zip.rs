//! Zip members for `extract_members`, through the zip crate: every method it decodes (stored,
//! Deflate, Deflate64, bzip2, LZMA, zstd, xz, PPMd and the legacy shrink / reduce / implode),
//! ZipCrypto and AES members opened with the usual malware-exchange passwords, and — because a
//! zip's central directory may lie (point at the wrong places, leave members out, or be missing
//! altogether) — every local file header the central directory did not account for, read on its
//! own as unzip's recovery modes and the Windows shell's reader do.

use std::{
    collections::BTreeSet,
    io::{Cursor, Read},
    ops::Range,
};

use crate::{
    common::{le_u16, le_u32},
    members::{Collector, USUAL_PASSWORDS},
};

const LOCAL_HEADER: &[u8; 4] = b"PK\x03\x04";
/// Local headers looked at past the central directory's (a zip of zips has many).
const MAX_LOCAL_HEADERS: usize = 100_000;

/// Parts of an Office / ODF package worth analysing on their own: embedded objects, macros,
/// ActiveX controls, anything that is not the package's XML.
fn package_part(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("embeddings/")
        || n.contains("activex/")
        || n.ends_with("vbaproject.bin")
        || n.starts_with("object")
        || !(n.ends_with(".xml")
            || n.ends_with(".rels")
            || n.ends_with(".png")
            || n.ends_with(".jpeg")
            || n.ends_with(".jpg")
            || n.ends_with(".emf")
            || n.ends_with(".wmf")
            || n == "mimetype"
            || n.ends_with(".rdf"))
}

/// The bytes a local header at `at` and the data after it span, as the header declares them
/// (for a member with a data descriptor, up to where the next record starts).
fn local_span(b: &[u8], at: usize) -> Option<Range<usize>> {
    let flags = le_u16(b, at + 6)?;
    let packed = le_u32(b, at + 18)? as usize;
    let name_len = usize::from(le_u16(b, at + 26)?);
    let extra_len = usize::from(le_u16(b, at + 28)?);
    let data = at.checked_add(30 + name_len + extra_len)?;
    if data > b.len() {
        return None;
    }
    let end = if flags & 0x08 != 0 && packed == 0 {
        data + descriptor_distance(&b[data..])?
    } else {
        data.checked_add(packed)?.min(b.len())
    };
    Some(at..end)
}

/// For a member whose sizes follow its data (a data descriptor): how far its data runs, to the
/// descriptor's signature or the next header.
fn descriptor_distance(rest: &[u8]) -> Option<usize> {
    [
        &b"PK\x07\x08"[..],
        LOCAL_HEADER,
        b"PK\x01\x02",
        b"PK\x05\x06",
    ]
    .iter()
    .filter_map(|sig| memchr::memmem::find(rest, sig))
    .min()
}

pub(crate) fn zip(b: &[u8], c: &mut Collector, package: bool) -> String {
    let mut covered: Vec<Range<usize>> = Vec::new();
    let mut read_any = false;
    match zip::ZipArchive::new(Cursor::new(b)) {
        Ok(mut z) => read_any = central_directory(&mut z, b, c, package, &mut covered),
        Err(e) => c.skip(
            "(central directory)",
            format!("not readable ({e}): the members are read from their local headers"),
        ),
    }
    if !c.done() {
        let found = local_headers(b, c, package, &covered);
        if found && read_any {
            c.skip(
                "(central directory)",
                "leaves out or misplaces members its local headers hold (a lying central directory)",
            );
        }
    }
    "zip".into()
}

/// The members the central directory lists; the spans of those it could read go to `covered`.
fn central_directory(
    z: &mut zip::ZipArchive<Cursor<&[u8]>>,
    b: &[u8],
    c: &mut Collector,
    package: bool,
    covered: &mut Vec<Range<usize>>,
) -> bool {
    let mut any = false;
    for i in 0..z.len() {
        if c.done() {
            break;
        }
        let Ok(raw) = z.by_index_raw(i) else { continue };
        let name = raw
            .name()
            .map(|n| n.into_owned())
            .unwrap_or_else(|_| format!("entry-{i}"));
        let (dir, link, encrypted, packed, header) = (
            raw.is_dir(),
            raw.is_symlink(),
            raw.encrypted(),
            raw.compressed_size(),
            raw.header_start() as usize,
        );
        drop(raw);
        // The member's local header really is where the directory says: its span is accounted.
        if b.get(header..header + 4) == Some(LOCAL_HEADER)
            && let Some(span) = local_span(b, header)
        {
            covered.push(span);
        }
        if dir {
            continue;
        }
        if link {
            c.skip(&name, "a symbolic link: not followed");
            continue;
        }
        if package && !package_part(&name) {
            continue;
        }
        any = true;
        if !encrypted {
            match z.by_index(i) {
                Ok(mut f) => {
                    if !c.add(&name, "zip", Some(packed), &mut f, None) {
                        break;
                    }
                }
                Err(e) => c.skip(&name, format!("cannot be read: {e}")),
            }
            continue;
        }
        match proven_password(z, i, packed) {
            Some(pw) => {
                let Ok(mut f) = z.by_index_decrypt(i, pw.as_bytes()) else {
                    continue;
                };
                if !c.add(&name, "zip", Some(packed), &mut f, Some(pw)) {
                    break;
                }
            }
            None => c.skip(&name, no_password()),
        }
    }
    any
}

/// The usual password that opens member `i`: a wrong ZipCrypto password passes its one-byte
/// check 1 time in 256, so the member is read to its end, where the CRC (or AES's HMAC) proves it.
fn proven_password(
    z: &mut zip::ZipArchive<Cursor<&[u8]>>,
    i: usize,
    packed: u64,
) -> Option<&'static str> {
    // Enough to reach the CRC of any ordinary member, bounded so that a bomb behind a password
    // is caught by the collector afterwards.
    let probe_limit = packed.saturating_mul(200).saturating_add(64 * 1024);
    USUAL_PASSWORDS.iter().copied().find(|pw| {
        z.by_index_decrypt(i, pw.as_bytes())
            .is_ok_and(|f| std::io::copy(&mut f.take(probe_limit), &mut std::io::sink()).is_ok())
    })
}

fn no_password() -> String {
    format!(
        "encrypted, and none of the usual passwords ({}) opens it",
        USUAL_PASSWORDS.join(", ")
    )
}

/// The members whose local headers lie outside every span in `covered`, each read from its own
/// header; returns whether any was found.
fn local_headers(b: &[u8], c: &mut Collector, package: bool, covered: &[Range<usize>]) -> bool {
    let mut taken: BTreeSet<(usize, usize)> = covered.iter().map(|r| (r.start, r.end)).collect();
    let inside = |taken: &BTreeSet<(usize, usize)>, at: usize| {
        taken.iter().any(|&(start, end)| start <= at && at < end)
    };
    let mut found = false;
    for at in memchr::memmem::find_iter(b, LOCAL_HEADER).take(MAX_LOCAL_HEADERS) {
        if c.done() {
            break;
        }
        // A header inside a member already read is that member's own content (a zip in a zip).
        if inside(&taken, at) {
            continue;
        }
        let Some(span) = local_span(b, at) else {
            continue;
        };
        taken.insert((span.start, span.end));
        found |= local_member(b, c, package, at, span);
    }
    found
}

/// One member read from its local header at `at`; false when it is not a member worth reading.
fn local_member(b: &[u8], c: &mut Collector, package: bool, at: usize, span: Range<usize>) -> bool {
    let flags = le_u16(b, at + 6).unwrap_or(0);
    let name_len = usize::from(le_u16(b, at + 26).unwrap_or(0));
    let raw_name = b.get(at + 30..at + 30 + name_len).unwrap_or_default();
    let name = String::from_utf8_lossy(raw_name).into_owned();
    if name.ends_with('/') || (package && !package_part(&name)) {
        return false;
    }
    let extra_len = usize::from(le_u16(b, at + 28).unwrap_or(0));
    let packed = (span.end - (at + 30 + name_len + extra_len)) as u64;
    // One byte past the collector's cap, so that a bomb meets the collector's ratio check.
    let cap = c.ratio_limit(packed).saturating_add(1);
    let open = |password: Option<&'static str>| {
        let mut options = zip::read::ZipReadOptions::new().password(password.map(|p| p.as_bytes()));
        if flags & 0x08 != 0 {
            // The sizes and CRC follow the data, in its descriptor (signature optional).
            options = options.override_compressed_size(packed);
            let d = span.end
                + if b.get(span.end..span.end + 4) == Some(b"PK\x07\x08") {
                    4
                } else {
                    0
                };
            if let (Some(crc), Some(size)) = (le_u32(b, d), le_u32(b, d + 8)) {
                options = options
                    .override_crc(crc)
                    .override_uncompressed_size(u64::from(size));
            }
        }
        let mut reader = Cursor::new(&b[at..]);
        let mut data = Vec::new();
        let file = zip::read::read_zipfile_from_stream_with_options(&mut reader, options);
        match file {
            Ok(Some(f)) => f
                .take(cap)
                .read_to_end(&mut data)
                .map(|_| data)
                .map_err(|e| e.to_string()),
            Ok(None) => Err("not a member".to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    let label = format!("{name} (local header @0x{at:x})");
    if flags & 0x01 == 0 {
        match open(None) {
            Ok(data) => {
                c.add(&name, "zip-local", Some(packed), &mut &data[..], None);
            }
            Err(e) => c.skip(&label, format!("cannot be read: {e}")),
        }
        return true;
    }
    let mut last_error = String::new();
    let opened = USUAL_PASSWORDS
        .iter()
        .copied()
        .find_map(|pw| match open(Some(pw)) {
            Ok(data) => Some((pw, data)),
            Err(e) => {
                last_error = e;
                None
            }
        });
    match opened {
        Some((pw, data)) => {
            c.add(&name, "zip-local", Some(packed), &mut &data[..], Some(pw));
        }
        None => c.skip(&label, format!("{} ({last_error})", no_password())),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_member_runs_to_the_next_record() {
        assert_eq!(descriptor_distance(b"abcPK\x07\x08...PK\x03\x04"), Some(3));
        assert_eq!(descriptor_distance(b"abcdef"), None);
    }

    #[test]
    fn package_parts_are_the_embedded_objects_not_the_xml() {
        assert!(package_part("word/embeddings/oleObject1.bin"));
        assert!(package_part("word/vbaProject.bin"));
        assert!(!package_part("word/document.xml"));
        assert!(!package_part("[Content_Types].xml"));
    }
}
