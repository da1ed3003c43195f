//! Two mail-borne wrappers no maintained crate reads, decoded by hand for `extract_members`:
//! MS-TNEF (`winmail.dat`, Outlook's rich-text wrapper; the only crate, `tnef` 0.1, is
//! unmaintained since 2018 and refuses a whole file when one attachment lacks a date) and BinHex
//! 4.0 (`.hqx`; the one crate is GPL-only). Both are small, bounded and property-tested
//! (tests/hostile_members.rs): they never read outside their input, and what they return is never
//! larger than a fixed multiple of it.

use crate::{
    common::{le_u16, le_u32},
    members::Collector,
};

const TNEF_SIGNATURE: u32 = 0x223E_9F78;
/// Attachment-level attribute ids (the low word of the attribute id), MS-OXTNEF 2.1.3.
const ATT_ATTACH_DATA: u32 = 0x800F;
const ATT_ATTACH_TITLE: u32 = 0x8010;
const ATT_ATTACH_REND_DATA: u32 = 0x9002;
const ATT_ATTACHMENT: u32 = 0x9005;
/// MAPI properties an attachment's `attAttachment` carries.
const PR_ATTACH_DATA_OBJ: u16 = 0x3701;
const PR_ATTACH_LONG_FILENAME: u16 = 0x3707;
const PR_ATTACH_FILENAME: u16 = 0x3704;
const MAX_ATTACHMENTS: usize = 1000;
/// The most a BinHex text decodes to (its run-length coding can expand 127 times).
const MAX_BINHEX_DECODED: usize = 256 << 20;

/// One attachment of a TNEF stream: its name (the long file name when the MAPI properties carry
/// one, else the 8.3 title) and its bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TnefAttachment {
    pub name: String,
    pub data: Vec<u8>,
}

/// The attachments of a TNEF stream, up to the first damaged attribute.
pub fn tnef_attachments(b: &[u8]) -> Vec<TnefAttachment> {
    let mut out: Vec<TnefAttachment> = Vec::new();
    if le_u32(b, 0) != Some(TNEF_SIGNATURE) {
        return out;
    }
    let mut at = 6; // signature, legacy key
    let mut current: Option<TnefAttachment> = None;
    while let (Some(&level), Some(id), Some(len)) =
        (b.get(at), le_u32(b, at + 1), le_u32(b, at + 5))
    {
        let start = at + 9;
        let Some(data) = start
            .checked_add(len as usize)
            .and_then(|end| b.get(start..end))
        else {
            break;
        };
        at = start + data.len() + 2; // the checksum
        if level != 2 {
            continue;
        }
        match id & 0xFFFF {
            ATT_ATTACH_REND_DATA => {
                out.extend(current.take());
                if out.len() >= MAX_ATTACHMENTS {
                    return out;
                }
                current = Some(TnefAttachment::default());
            }
            ATT_ATTACH_TITLE => {
                let a = current.get_or_insert_with(TnefAttachment::default);
                if a.name.is_empty() {
                    a.name = c_string(data);
                }
            }
            ATT_ATTACH_DATA => {
                current.get_or_insert_with(TnefAttachment::default).data = data.to_vec();
            }
            ATT_ATTACHMENT => {
                let a = current.get_or_insert_with(TnefAttachment::default);
                for (prop, value) in mapi_properties(data) {
                    match prop {
                        PR_ATTACH_LONG_FILENAME => a.name = c_string(value),
                        PR_ATTACH_FILENAME if a.name.is_empty() => a.name = c_string(value),
                        // An embedded message or OLE object: its bytes after the 16-byte IID.
                        PR_ATTACH_DATA_OBJ if a.data.is_empty() && value.len() > 16 => {
                            a.data = value[16..].to_vec();
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out.extend(current);
    out.retain(|a| !a.data.is_empty());
    out
}

fn c_string(d: &[u8]) -> String {
    let end = d.iter().position(|&c| c == 0).unwrap_or(d.len());
    String::from_utf8_lossy(&d[..end]).into_owned()
}

/// The single-valued string, binary and object properties of a MAPI property list (MS-OXTNEF
/// 2.1.3.4): (property id, value). Stops at the first type it cannot size.
fn mapi_properties(d: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let Some(count) = le_u32(d, 0) else {
        return out;
    };
    let mut at = 4usize;
    let pad4 = |n: usize| n.checked_add(3).map(|v| v & !3);
    for _ in 0..count.min(10_000) {
        let (Some(kind), Some(id)) = (le_u16(d, at), le_u16(d, at + 2)) else {
            break;
        };
        at += 4;
        if id >= 0x8000 {
            // A named property: its GUID, then a number or a name.
            let Some(name_kind) = le_u32(d, at + 16) else {
                break;
            };
            at += 20;
            if name_kind == 0 {
                at += 4;
            } else {
                let Some(n) = le_u32(d, at).and_then(|n| pad4(n as usize)) else {
                    break;
                };
                at = at.saturating_add(4).saturating_add(n);
            }
        }
        let multi = kind & 0x1000 != 0;
        let values = if multi {
            let Some(n) = le_u32(d, at) else { break };
            at += 4;
            n
        } else {
            1
        };
        let fixed = match kind & 0x0FFF {
            0x0002 | 0x0003 | 0x0004 | 0x000A | 0x000B => Some(4),
            0x0005 | 0x0006 | 0x0007 | 0x0014 | 0x0040 => Some(8),
            0x0048 => Some(16),
            0x001E | 0x001F | 0x0102 | 0x000D => None,
            _ => return out,
        };
        match fixed {
            Some(size) => {
                let Some(skip) = (values as usize).checked_mul(size) else {
                    break;
                };
                at = at.saturating_add(skip);
            }
            None => {
                // Variable-sized values are counted even when single-valued.
                let Some(n) = le_u32(d, at) else { break };
                at += 4;
                for _ in 0..n.min(10_000) {
                    let Some(len) = le_u32(d, at).map(|l| l as usize) else {
                        return out;
                    };
                    let start = at + 4;
                    let Some(value) = start.checked_add(len).and_then(|end| d.get(start..end))
                    else {
                        return out;
                    };
                    if !multi {
                        out.push((id, value));
                    }
                    let Some(next) = pad4(len).and_then(|p| start.checked_add(p)) else {
                        return out;
                    };
                    at = next;
                }
            }
        }
        if at > d.len() {
            break;
        }
    }
    out
}

pub(crate) fn tnef(b: &[u8], c: &mut Collector) {
    for (i, a) in tnef_attachments(b).into_iter().enumerate() {
        let name = crate::members_mail::plain_file_name(&a.name)
            .unwrap_or_else(|| format!("attachment-{}", i + 1));
        if !c.add_bytes(&name, "tnef", &a.data) {
            break;
        }
    }
}

const BINHEX_ALPHABET: &[u8; 64] =
    b"!\"#$%&'()*+,-012345689@ABCDEFGHIJKLMNPQRSTUVXYZ[`abcdefhijklmpqr";

/// A BinHex 4.0 file: (file name, data fork, resource fork); None when there is none. The
/// encoded text runs from the first `:` after the banner to the next `:`; characters outside the
/// alphabet (line breaks) are skipped, and the forks are cut to what the text holds.
pub fn binhex_decode(b: &[u8]) -> Option<(String, Vec<u8>, Vec<u8>)> {
    let banner = memchr::memmem::find(b, b"(This file must be converted with BinHex")?;
    let start = banner + memchr::memchr(b':', &b[banner..])? + 1;
    let end = start + memchr::memchr(b':', &b[start..]).unwrap_or(b.len() - start);
    let mut value = [0xFFu8; 256];
    for (i, &ch) in BINHEX_ALPHABET.iter().enumerate() {
        value[usize::from(ch)] = i as u8;
    }
    // 6-bit groups to bytes.
    let mut packed = Vec::with_capacity((end - start) * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &ch in &b[start..end] {
        let v = value[usize::from(ch)];
        if v == 0xFF {
            continue;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            packed.push((acc >> bits) as u8);
        }
    }
    // Run-length: 0x90 n repeats the byte before it n times in all; 0x90 0 is a literal 0x90.
    // Runs are bounded: at most 127 times the input, and MAX_BINHEX_DECODED in all.
    let mut data = Vec::with_capacity(packed.len());
    let mut i = 0;
    while i < packed.len() && data.len() < MAX_BINHEX_DECODED {
        let byte = packed[i];
        if byte == 0x90 && i + 1 < packed.len() {
            let n = packed[i + 1];
            i += 2;
            match (n, data.last().copied()) {
                (0, _) => data.push(0x90),
                (n, Some(prev)) => data.extend(std::iter::repeat_n(prev, usize::from(n) - 1)),
                (_, None) => {}
            }
            continue;
        }
        data.push(byte);
        i += 1;
    }
    // Header: name length, name, version, type, creator, flags, data and resource lengths, CRC.
    let name_len = usize::from(*data.first()?);
    let name = String::from_utf8_lossy(data.get(1..1 + name_len)?).into_owned();
    let h = 1 + name_len + 1 + 4 + 4 + 2;
    let be = |at: usize| -> Option<usize> {
        Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let (data_len, rsrc_len) = (be(h)?, be(h + 4)?);
    let data_at = h + 8 + 2;
    let fork = |at: usize, len: usize| -> Vec<u8> {
        let end = at.saturating_add(len).min(data.len());
        data.get(at..end).map(<[u8]>::to_vec).unwrap_or_default()
    };
    let data_fork = fork(data_at, data_len);
    let rsrc_fork = fork(data_at.saturating_add(data_len).saturating_add(2), rsrc_len);
    Some((name, data_fork, rsrc_fork))
}

pub(crate) fn binhex(b: &[u8], c: &mut Collector) {
    let Some((name, data, rsrc)) = binhex_decode(b) else {
        c.skip("(binhex)", "no BinHex 4.0 text found");
        return;
    };
    let name = crate::members_mail::plain_file_name(&name).unwrap_or_else(|| "binhex-data".into());
    if !data.is_empty() && !c.add_bytes(&name, "binhex", &data) {
        return;
    }
    if !rsrc.is_empty() {
        c.add_bytes(&format!("{name}.rsrc"), "binhex", &rsrc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binhex_runs_expand_and_a_literal_marker_stays() {
        // "(This file…" banner, then ':' + encoded + ':'. Encoded bytes: 0x41 0x90 0x03 0x90 0x00.
        let bytes = [0x41u8, 0x90, 0x03, 0x90, 0x00, 0, 0];
        let mut bits = String::new();
        for b in bytes {
            bits.push_str(&format!("{b:08b}"));
        }
        while !bits.len().is_multiple_of(6) {
            bits.push('0');
        }
        let text: String = bits
            .as_bytes()
            .chunks(6)
            .map(|c| {
                BINHEX_ALPHABET[usize::from_str_radix(std::str::from_utf8(c).unwrap(), 2).unwrap()]
                    as char
            })
            .collect();
        let hqx = format!("(This file must be converted with BinHex 4.0)\n:{text}:\n");
        // Too short for a header: nothing, and no panic.
        assert_eq!(binhex_decode(hqx.as_bytes()), None);
    }

    #[test]
    fn mapi_long_file_names_are_read() {
        let mut p = 1u32.to_le_bytes().to_vec();
        p.extend_from_slice(&0x001Eu16.to_le_bytes());
        p.extend_from_slice(&PR_ATTACH_LONG_FILENAME.to_le_bytes());
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(b"long.exe\0\0\0\0");
        assert_eq!(
            mapi_properties(&p),
            [(PR_ATTACH_LONG_FILENAME, &b"long.exe\0"[..])]
        );
    }
}
