//! ISO 9660 disc images for `extract_members` (the mail-borne carrier that hides a shortcut and
//! a DLL from Mark-of-the-Web). Hand-written: the one maintained reader, `cdfs`, is a FUSE driver
//! whose library build requires libfuse; this walks the directory tree of the Joliet volume when
//! there is one (long Unicode names) else of the primary volume, by ECMA-119 §9. Bounded (entries,
//! depth, each extent read once: a directory that points at itself ends) and property-tested
//! (tests/hostile_members.rs).

use std::{collections::HashSet, ops::Range};

use crate::{common::le_u32, members::Collector};

const SECTOR: usize = 2048;
const MAX_ENTRIES: usize = 100_000;
const MAX_DEPTH: usize = 32;

/// One file of an image: its path (directories joined by `/`, the `;1` version cut) and where
/// its bytes lie in the image (clipped to the image).
#[derive(Debug, Clone, PartialEq)]
pub struct IsoFile {
    pub path: String,
    pub data: Range<usize>,
}

/// The root directory record of the volume whose names to use: Joliet's (a supplementary volume
/// descriptor with a UCS-2 escape sequence) when present, else the primary's. (record, joliet)
fn root_record(b: &[u8]) -> Option<(&[u8], bool)> {
    let mut primary = None;
    for n in 16..16 + 64 {
        let d = b.get(n * SECTOR..(n + 1) * SECTOR)?;
        if &d[1..6] != b"CD001" {
            return primary.map(|r| (r, false));
        }
        match d[0] {
            1 if primary.is_none() => primary = Some(&d[156..190]),
            2 if d[88..90] == *b"%/" && matches!(d[90], b'@' | b'C' | b'E') => {
                return Some((&d[156..190], true));
            }
            255 => break,
            _ => {}
        }
    }
    primary.map(|r| (r, false))
}

/// The files of an ISO 9660 image, at most `max`.
pub fn iso_files(b: &[u8], max: usize) -> Vec<IsoFile> {
    let mut out = Vec::new();
    let Some((root, joliet)) = root_record(b) else {
        return out;
    };
    let Some(root) = extent(b, root) else {
        return out;
    };
    let mut seen = HashSet::new();
    let mut pending = vec![(String::new(), root, 0usize)];
    let mut entries = 0usize;
    while let Some((prefix, dir, depth)) = pending.pop() {
        if !seen.insert(dir.start) || depth > MAX_DEPTH {
            continue;
        }
        let mut at = dir.start;
        while at < dir.end && entries < MAX_ENTRIES && out.len() < max {
            let len = usize::from(b[at]);
            if len == 0 {
                // Records never straddle sectors: the rest of this one is padding.
                at = (at / SECTOR + 1) * SECTOR;
                continue;
            }
            let Some(record) = b.get(at..at + len).filter(|_| at + len <= dir.end) else {
                break;
            };
            at += len;
            entries += 1;
            let name_len = usize::from(*record.get(32).unwrap_or(&0));
            let Some(raw) = record.get(33..33 + name_len) else {
                continue;
            };
            if raw == [0] || raw == [1] {
                continue; // "." and ".."
            }
            let name = file_name(raw, joliet);
            let path = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let Some(data) = extent(b, record) else {
                continue;
            };
            if record.get(25).is_some_and(|f| f & 0x02 != 0) {
                pending.push((path, data, depth + 1));
            } else {
                out.push(IsoFile { path, data });
            }
        }
    }
    out
}

/// Where a directory record's extent lies, clipped to the image; None when it starts past it.
fn extent(b: &[u8], record: &[u8]) -> Option<Range<usize>> {
    let lba = le_u32(record, 2)? as usize;
    let len = le_u32(record, 10)? as usize;
    let start = lba.checked_mul(SECTOR).filter(|s| *s <= b.len())?;
    Some(start..start.saturating_add(len).min(b.len()))
}

fn file_name(raw: &[u8], joliet: bool) -> String {
    let name = if joliet {
        let units: Vec<u16> = raw
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(raw).into_owned()
    };
    let name = match name.rsplit_once(';') {
        Some((base, version)) if version.bytes().all(|c| c.is_ascii_digit()) => base.to_string(),
        _ => name,
    };
    // A primary-volume name with no extension keeps a trailing dot.
    name.strip_suffix('.').map(str::to_string).unwrap_or(name)
}

pub(crate) fn iso(b: &[u8], c: &mut Collector) {
    let files = iso_files(b, MAX_ENTRIES);
    if files.is_empty() {
        c.skip("(image)", "no readable ISO 9660 directory tree");
    }
    for f in files {
        if !c.add_bytes(&f.path, "iso9660", &b[f.data]) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_version_and_joliet_names_are_ucs2() {
        assert_eq!(file_name(b"SETUP.EXE;1", false), "SETUP.EXE");
        assert_eq!(file_name(b"README.;1", false), "README");
        let joliet: Vec<u8> = "Invoice.pdf.lnk"
            .encode_utf16()
            .flat_map(|u| u.to_be_bytes())
            .collect();
        assert_eq!(file_name(&joliet, true), "Invoice.pdf.lnk");
    }

    #[test]
    fn not_an_image_has_no_files() {
        assert!(iso_files(&[0u8; 40_000], 10).is_empty());
        assert!(iso_files(b"CD001", 10).is_empty());
    }
}
