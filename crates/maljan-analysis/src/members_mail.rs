//! The text-borne and document-borne containers of `extract_members`: mail (MIME attachments in
//! base64 / quoted-printable and nested messages through mail-parser; uuencoded blocks, which
//! mail-parser leaves in the body, by hand; BinHex bodies through [`crate::members_tnef`]), mbox, cpio (newc / crc / odc), RTF `\objdata`
//! objects, OLE2 `Ole10Native` packages and PDF embedded files. The hand-written decoders are
//! small, bounded and property-tested (tests/hostile_members.rs).

use mail_parser::{MessageParser, MimeHeaders};

use crate::members::Collector;

/// Attachments and nested messages of a mail (or of every message of an mbox).
pub(crate) fn mail(b: &[u8], c: &mut Collector, kind: &str) -> String {
    if kind == "mbox" {
        let mut n = 0;
        for m in mail_parser::mailbox::mbox::MessageIterator::new(b).flatten() {
            n += 1;
            if !c.add_bytes(&format!("message-{n}.eml"), "mbox", m.contents()) {
                break;
            }
        }
        return "mbox".into();
    }
    let Some(msg) = MessageParser::default().parse(b) else {
        c.skip("(message)", "not a readable mail message");
        return "email".into();
    };
    for (i, part) in msg.attachments().enumerate() {
        if c.done() {
            break;
        }
        let name = match (part.attachment_name(), part.is_message()) {
            (Some(n), _) => n.to_string(),
            (None, true) => format!("message-{}.eml", i + 1),
            (None, false) => format!("attachment-{}", i + 1),
        };
        if !c.add_bytes(&name, "mime", part.contents()) {
            return "email".into();
        }
    }
    // Uuencoded files inside the text bodies (old mailers, some spam kits).
    for i in 0.. {
        let Some(body) = msg.body_text(i) else { break };
        uuencoded(body.as_bytes(), c);
        if body.contains("(This file must be converted with BinHex") {
            crate::members_tnef::binhex(body.as_bytes(), c);
        }
    }
    "email".into()
}

/// Every `begin MODE NAME` … `end` block of uuencoded text.
pub(crate) fn uuencoded(b: &[u8], c: &mut Collector) {
    for (name, data) in uudecode_all(b) {
        if !c.add_bytes(&name, "uuencode", &data) {
            break;
        }
    }
}

/// Decodes the uuencoded blocks of `b`: (file name, bytes). A line that is not uuencode ends its
/// block early (what was decoded is kept); at most 1000 blocks.
pub fn uudecode_all(b: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = b
        .split(|&c| c == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix(b"begin ") else {
            continue;
        };
        let text = String::from_utf8_lossy(rest);
        let mut parts = text.splitn(2, ' ');
        let (Some(mode), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        if mode.is_empty() || !mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            continue;
        }
        let mut data = Vec::new();
        for l in lines.by_ref() {
            if l == b"end" || l.is_empty() {
                break;
            }
            if !uudecode_line(l, &mut data) {
                break;
            }
        }
        out.push((name.trim().to_string(), data));
        if out.len() >= 1000 {
            break;
        }
    }
    out
}

/// One uuencoded line onto `out`; false when the line is not uuencode.
fn uudecode_line(l: &[u8], out: &mut Vec<u8>) -> bool {
    let sextet =
        |c: u8| -> Option<u8> { c.checked_sub(0x20).filter(|&s| s <= 0x40).map(|s| s & 0x3f) };
    let Some((&len_char, body)) = l.split_first() else {
        return false;
    };
    let Some(n) = sextet(len_char) else {
        return false;
    };
    let n = usize::from(n);
    if n == 0 {
        return true;
    }
    let mut got = Vec::with_capacity(n + 3);
    for chunk in body.chunks(4) {
        let mut v = [0u8; 4];
        for (i, &ch) in chunk.iter().enumerate() {
            match sextet(ch) {
                Some(s) => v[i] = s,
                None => return false,
            }
        }
        got.push((v[0] << 2) | (v[1] >> 4));
        got.push((v[1] << 4) | (v[2] >> 2));
        got.push((v[2] << 6) | v[3]);
    }
    if got.len() < n {
        return false;
    }
    out.extend_from_slice(&got[..n]);
    true
}

/// One cpio entry: its name and where its data lies in the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct CpioEntry {
    pub name: String,
    pub mode: u32,
    pub data: std::ops::Range<usize>,
}

fn hex_field(b: &[u8], at: usize, len: usize, radix: u32) -> Option<u64> {
    let s = std::str::from_utf8(b.get(at..at.checked_add(len)?)?).ok()?;
    u64::from_str_radix(s, radix).ok()
}

/// The entries of an ASCII cpio archive (newc, crc: "070701"/"070702"; odc: "070707"), up to the
/// trailer, the first damaged header or `max` entries.
pub fn cpio_entries(b: &[u8], max: usize) -> Vec<CpioEntry> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let align4 = |x: usize| x.checked_add(3).map(|v| v & !3);
    while out.len() < max {
        let Some(magic) = b.get(at..at + 6) else {
            break;
        };
        let (name_at, namesize, filesize, mode, newc) = match magic {
            b"070701" | b"070702" => {
                let f = |i: usize| hex_field(b, at + 6 + i * 8, 8, 16);
                let (Some(mode), Some(size), Some(ns)) = (f(1), f(6), f(11)) else {
                    break;
                };
                (at + 110, ns as usize, size as usize, mode as u32, true)
            }
            b"070707" => {
                let (Some(mode), Some(ns), Some(size)) = (
                    hex_field(b, at + 18, 6, 8),
                    hex_field(b, at + 59, 6, 8),
                    hex_field(b, at + 65, 11, 8),
                ) else {
                    break;
                };
                (at + 76, ns as usize, size as usize, mode as u32, false)
            }
            _ => break,
        };
        let Some(name_end) = name_at.checked_add(namesize) else {
            break;
        };
        let Some(raw_name) = b.get(name_at..name_end) else {
            break;
        };
        let name =
            String::from_utf8_lossy(raw_name.strip_suffix(&[0]).unwrap_or(raw_name)).into_owned();
        let data_at = if newc {
            align4(name_end)
        } else {
            Some(name_end)
        };
        let Some(data_at) = data_at else { break };
        let Some(data_end) = data_at.checked_add(filesize).filter(|e| *e <= b.len()) else {
            break;
        };
        if name == "TRAILER!!!" {
            break;
        }
        out.push(CpioEntry {
            name,
            mode,
            data: data_at..data_end,
        });
        let next = if newc {
            align4(data_end)
        } else {
            Some(data_end)
        };
        match next {
            Some(n) if n > at => at = n,
            _ => break,
        }
    }
    out
}

pub(crate) fn cpio(b: &[u8], c: &mut Collector) {
    for e in cpio_entries(b, 100_000) {
        // Regular files only (S_IFREG); links and devices are not followed.
        if e.mode & 0o170000 != 0o100000 {
            continue;
        }
        if !c.add_bytes(&e.name, "cpio", &b[e.data.clone()]) {
            break;
        }
    }
}

/// The hex of every `\objdata` group of an RTF document, decoded.
pub fn rtf_objdata(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = memchr::memmem::find(&b[from..], b"\\objdata") {
        let start = from + p + 8;
        let mut data = Vec::new();
        let mut nibble: Option<u8> = None;
        let mut end = start;
        for (i, &ch) in b[start..].iter().enumerate() {
            end = start + i;
            let v = match ch {
                b'0'..=b'9' => ch - b'0',
                b'a'..=b'f' => ch - b'a' + 10,
                b'A'..=b'F' => ch - b'A' + 10,
                b'}' => break,
                _ => continue,
            };
            match nibble.take() {
                Some(hi) => data.push((hi << 4) | v),
                None => nibble = Some(v),
            }
        }
        if !data.is_empty() {
            out.push(data);
        }
        from = end.max(start);
        if out.len() >= 1000 || from >= b.len() {
            break;
        }
    }
    out
}

/// An OLE1 embedded object's native data (`ObjectHeader`: version, format 2, class name, topic,
/// item, then the data size and data); None when it is not one.
pub fn ole1_native(d: &[u8]) -> Option<(String, &[u8])> {
    use crate::common::le_u32;
    if le_u32(d, 4)? != 2 {
        return None;
    }
    let class_len = le_u32(d, 8)? as usize;
    let class = d.get(12..12usize.checked_add(class_len)?)?;
    let class = String::from_utf8_lossy(class.strip_suffix(&[0]).unwrap_or(class)).into_owned();
    let mut at = 12 + class_len;
    for _ in 0..2 {
        let n = le_u32(d, at)? as usize;
        at = at.checked_add(4)?.checked_add(n)?;
    }
    let size = le_u32(d, at)? as usize;
    let data = d.get(at + 4..(at + 4).checked_add(size)?)?;
    Some((class, data))
}

/// An `Ole10Native` stream (an embedded "Package"): (file name, data).
pub fn ole10_native(s: &[u8]) -> Option<(String, &[u8])> {
    // The stream starts with the size of the native data that follows (4).
    package_fields(s, 4)
}

/// The native data of an OLE1 `Package` object (what an RTF `\objdata` carries): the same
/// layout as an `Ole10Native` stream without its size prefix, which the OLE1 header already gave.
/// (file name, data); None when it is not one.
pub fn ole1_package(d: &[u8]) -> Option<(String, &[u8])> {
    // Its flags are 2 (an embedded file): anything else is some other class's data by that name.
    if d.get(..2)? != [2, 0] {
        return None;
    }
    package_fields(d, 0)
}

/// A packager's fields from `start`: flags (2), label, original path, reserved (4), temp path
/// (length-prefixed), then the file's size and bytes. The name is the label, else the original
/// path's file name.
fn package_fields(s: &[u8], start: usize) -> Option<(String, &[u8])> {
    use crate::common::le_u32;
    let mut at = start.checked_add(2)?; // flags
    let cstr = |at: &mut usize| -> Option<String> {
        let rest = s.get(*at..)?;
        let end = rest.iter().take(4096).position(|&b| b == 0)?;
        *at += end + 1;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let label = cstr(&mut at)?;
    let path = cstr(&mut at)?;
    at += 4; // reserved (0x00030000)
    let tmp_len = le_u32(s, at)? as usize;
    at = at.checked_add(4)?.checked_add(tmp_len)?;
    let size = le_u32(s, at)? as usize;
    let data = s.get(at + 4..(at + 4).checked_add(size)?)?;
    let name = if label.is_empty() { path } else { label };
    Some((name, data))
}

/// A member name from a name a sample chose: its last path component, printable, at most 128
/// characters; None when nothing is left.
pub(crate) fn plain_file_name(name: &str) -> Option<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let base: String = base
        .chars()
        .filter(|ch| !ch.is_control())
        .take(128)
        .collect();
    let base = base.trim();
    (!base.is_empty() && base != "." && base != "..").then(|| base.to_string())
}

pub(crate) fn rtf_objects(b: &[u8], c: &mut Collector) {
    for (i, raw) in rtf_objdata(b).iter().enumerate() {
        let (name, data) = match ole1_native(raw) {
            // A packaged file: the program inside, under its own name.
            Some((class, data)) if class.eq_ignore_ascii_case("package") => {
                match ole1_package(data) {
                    Some((file, payload)) => (
                        plain_file_name(&file).unwrap_or_else(|| format!("objdata-{}.bin", i + 1)),
                        payload,
                    ),
                    None => (format!("objdata-{}.{class}", i + 1), data),
                }
            }
            Some((class, data)) => (format!("objdata-{}.{class}", i + 1), data),
            None => (format!("objdata-{}.bin", i + 1), &raw[..]),
        };
        if !c.add_bytes(&name, "rtf", data) {
            break;
        }
    }
}

pub(crate) fn ole_objects(b: &[u8], c: &mut Collector) {
    let Ok(mut file) = cfb::CompoundFile::open(std::io::Cursor::new(b)) else {
        return;
    };
    let streams: Vec<std::path::PathBuf> = file
        .walk()
        .filter(|e| e.is_stream() && e.name() == "\u{1}Ole10Native")
        .map(|e| e.path().to_path_buf())
        .take(1000)
        .collect();
    for path in streams {
        let mut data = Vec::new();
        let Ok(mut s) = file.open_stream(&path) else {
            continue;
        };
        use std::io::Read;
        if s.by_ref().take(256 << 20).read_to_end(&mut data).is_err() {
            continue;
        }
        if let Some((label, payload)) = ole10_native(&data) {
            let name = if label.is_empty() {
                "ole10native".into()
            } else {
                label
            };
            if !c.add_bytes(&name, "ole10native", payload) {
                break;
            }
        }
    }
}

/// A PDF's embedded files (`/Type /EmbeddedFile` streams), named from their file specifications.
pub(crate) fn pdf_files(b: &[u8], c: &mut Collector) -> bool {
    use lopdf::Object;
    let options = lopdf::LoadOptions::with_max_decompressed_size(64 << 20);
    let Ok(doc) = lopdf::Document::load_mem_with_options(b, options) else {
        return false;
    };
    let text = |o: &Object| match o {
        Object::String(s, _) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    };
    // File specification → the stream it points at, for the name.
    let mut names = std::collections::HashMap::new();
    for obj in doc.objects.values() {
        let Ok(d) = obj.as_dict() else { continue };
        let Some(ef) = d
            .get(b"EF")
            .ok()
            .and_then(|o| doc.dereference(o).ok())
            .and_then(|(_, o)| o.as_dict().ok())
        else {
            continue;
        };
        let name = d
            .get(b"UF")
            .ok()
            .and_then(text)
            .or_else(|| d.get(b"F").ok().and_then(text));
        if let (Ok(Object::Reference(id)), Some(name)) = (ef.get(b"F"), name) {
            names.insert(*id, name);
        }
    }
    let mut any = false;
    let mut ids: Vec<_> = doc.objects.keys().copied().collect();
    ids.sort();
    for id in ids.into_iter().take(10_000) {
        let Some(Object::Stream(s)) = doc.objects.get(&id) else {
            continue;
        };
        let embedded = s
            .dict
            .get(b"Type")
            .is_ok_and(|t| matches!(t, Object::Name(n) if n == b"EmbeddedFile"));
        if !embedded {
            continue;
        }
        any = true;
        let data = if s.dict.get(b"Filter").is_ok() {
            match s.decompressed_content_with_limit(64 << 20) {
                Ok(d) => d,
                Err(e) => {
                    c.skip(
                        &format!("object {}", id.0),
                        format!("cannot be decoded: {e}"),
                    );
                    continue;
                }
            }
        } else {
            s.content.clone()
        };
        let name = names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("embedded-{}.bin", id.0));
        let packed = s.content.len() as u64;
        if !c.add(&name, "pdf", Some(packed), &mut &data[..], None) {
            break;
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuencode_round_trip() {
        // "Cat" uuencoded.
        let text = b"begin 644 cat.txt\n#0V%T\n`\nend\n";
        assert_eq!(
            uudecode_all(text),
            [("cat.txt".to_string(), b"Cat".to_vec())]
        );
    }

    #[test]
    fn cpio_newc_entries() {
        fn newc(name: &str, data: &[u8], mode: u32) -> Vec<u8> {
            let mut h = format!(
                "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
                1, mode, 0, 0, 1, 0, data.len(), 0, 0, 0, 0, name.len() + 1, 0
            )
            .into_bytes();
            h.extend_from_slice(name.as_bytes());
            h.push(0);
            while h.len() % 4 != 0 {
                h.push(0);
            }
            h.extend_from_slice(data);
            while h.len() % 4 != 0 {
                h.push(0);
            }
            h
        }
        let a = [
            newc("a.exe", b"MZhello", 0o100644),
            newc("TRAILER!!!", b"", 0),
        ]
        .concat();
        let e = cpio_entries(&a, 10);
        assert_eq!(e.len(), 1);
        assert_eq!(&a[e[0].data.clone()], b"MZhello");
    }

    #[test]
    fn rtf_objdata_is_decoded() {
        let rtf = b"{\\rtf1{\\object{\\*\\objdata 4d5a\n9000}}}";
        assert_eq!(rtf_objdata(rtf), [vec![0x4d, 0x5a, 0x90, 0x00]]);
    }
}
