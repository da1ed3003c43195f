//! Windows shortcuts (`.lnk`, MS-SHLLINK) for document_info: what the shortcut runs and with
//! which arguments — the target from the LinkInfo paths, the environment-variable block or the
//! shell item ID list (malware shortcuts often carry only one of them), the command-line
//! arguments, working directory, icon and description. Hand-written: the `lnk` crate reads only
//! from a path on disk and panics (`expect`) on a LinkInfo without a base path. Bounded by the
//! input (every length is checked) and property-tested (tests/hostile_members.rs).

use schemars::JsonSchema;
use serde::Serialize;

use crate::common::{le_u16, le_u32};

const HAS_ID_LIST: u32 = 0x01;
const HAS_LINK_INFO: u32 = 0x02;
const HAS_NAME: u32 = 0x04;
const HAS_RELATIVE_PATH: u32 = 0x08;
const HAS_WORKING_DIR: u32 = 0x10;
const HAS_ARGUMENTS: u32 = 0x20;
const HAS_ICON: u32 = 0x40;
const IS_UNICODE: u32 = 0x80;
const ENVIRONMENT_BLOCK: u32 = 0xA000_0001;

/// What a shortcut runs.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct Shortcut {
    /// The program it starts: the LinkInfo path, else the environment block's, else the one
    /// the shell item ID list spells out.
    pub target: Option<String>,
    /// Where `target` was read: link_info, environment, id_list.
    pub target_from: Option<String>,
    pub arguments: Option<String>,
    pub working_dir: Option<String>,
    pub relative_path: Option<String>,
    pub icon_location: Option<String>,
    pub description: Option<String>,
    /// The target path of the environment-variable block (`%windir%\…`), when there is one.
    pub environment_target: Option<String>,
    /// The path the shell item ID list spells out, when it has one.
    pub id_list_path: Option<String>,
}

/// Reads a shell link; None when `b` is not one.
pub fn shortcut(b: &[u8]) -> Option<Shortcut> {
    if le_u32(b, 0)? != 0x4C || b.get(4..8)? != [0x01, 0x14, 0x02, 0x00] {
        return None;
    }
    let flags = le_u32(b, 0x14)?;
    let mut s = Shortcut::default();
    let mut at = 0x4C;
    if flags & HAS_ID_LIST != 0 {
        let size = usize::from(le_u16(b, at)?);
        s.id_list_path = id_list_path(b.get(at + 2..at + 2 + size)?);
        at += 2 + size;
    }
    let mut link_info_target = None;
    if flags & HAS_LINK_INFO != 0 {
        let size = le_u32(b, at)? as usize;
        link_info_target = link_info_path(b.get(at..at.checked_add(size)?)?);
        at += size;
    }
    let unicode = flags & IS_UNICODE != 0;
    for (flag, field) in [
        (HAS_NAME, &mut s.description),
        (HAS_RELATIVE_PATH, &mut s.relative_path),
        (HAS_WORKING_DIR, &mut s.working_dir),
        (HAS_ARGUMENTS, &mut s.arguments),
        (HAS_ICON, &mut s.icon_location),
    ] {
        if flags & flag == 0 {
            continue;
        }
        let Some(count) = le_u16(b, at).map(usize::from) else {
            break;
        };
        let len = if unicode { count * 2 } else { count };
        let Some(raw) = b.get(at + 2..at + 2 + len) else {
            break;
        };
        *field = Some(text(raw, unicode));
        at += 2 + len;
    }
    s.environment_target = environment_target(b, at);
    (s.target, s.target_from) = if let Some(t) = link_info_target {
        (Some(t), Some("link_info".into()))
    } else if let Some(t) = s.environment_target.clone() {
        (Some(t), Some("environment".into()))
    } else if let Some(t) = s.id_list_path.clone() {
        (Some(t), Some("id_list".into()))
    } else {
        (None, None)
    };
    Some(s)
}

fn text(raw: &[u8], unicode: bool) -> String {
    if unicode {
        let units: Vec<u16> = raw
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(raw).into_owned()
    }
}

fn c_string_at(b: &[u8], at: usize) -> Option<String> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

fn c_string16_at(b: &[u8], at: usize) -> Option<String> {
    let rest = b.get(at..)?;
    let units: Vec<u16> = rest
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0)
        .collect();
    Some(String::from_utf16_lossy(&units))
}

/// LinkInfo's local base path (Unicode when the header is long enough) and common path suffix.
fn link_info_path(info: &[u8]) -> Option<String> {
    let header_size = le_u32(info, 4)?;
    let flags = le_u32(info, 8)?;
    if flags & 0x01 == 0 {
        return None; // no local path (a network share only)
    }
    let base = if header_size >= 0x24 {
        c_string16_at(info, le_u32(info, 0x1C)? as usize)
    } else {
        c_string_at(info, le_u32(info, 0x10)? as usize)
    }?;
    let suffix = if header_size >= 0x24 {
        c_string16_at(info, le_u32(info, 0x20)? as usize)
    } else {
        c_string_at(info, le_u32(info, 0x18)? as usize)
    }
    .unwrap_or_default();
    let joined = match (base.ends_with('\\'), suffix.is_empty()) {
        (_, true) => base,
        (true, false) => format!("{base}{suffix}"),
        (false, false) => format!("{base}\\{suffix}"),
    };
    (!joined.is_empty()).then_some(joined)
}

/// The environment-variable block's Unicode (else ANSI) target among the extra data blocks.
fn environment_target(b: &[u8], mut at: usize) -> Option<String> {
    for _ in 0..64 {
        let size = le_u32(b, at)? as usize;
        if size < 8 {
            return None;
        }
        if le_u32(b, at + 4)? == ENVIRONMENT_BLOCK {
            let block = b.get(at..at.checked_add(size)?)?;
            let wide = c_string16_at(block.get(..8 + 260 + 520)?, 8 + 260).unwrap_or_default();
            let narrow = c_string_at(block, 8).unwrap_or_default();
            let t = if wide.is_empty() { narrow } else { wide };
            return (!t.is_empty()).then_some(t);
        }
        at = at.checked_add(size)?;
    }
    None
}

/// The path a shell item ID list spells: the drive of its volume item, then each file-entry
/// item's name (its long Unicode name from the 0xBEEF0004 extension when present).
fn id_list_path(list: &[u8]) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut at = 0;
    for _ in 0..256 {
        let size = usize::from(le_u16(list, at)?);
        if size == 0 {
            break;
        }
        let item = list.get(at..at + size)?;
        at += size;
        let kind = *item.get(2)?;
        match kind & 0x70 {
            0x20 => {
                if let Some(drive) = c_string_at(item, 3).filter(|d| !d.is_empty()) {
                    parts.clear();
                    parts.push(drive.trim_end_matches('\\').to_string());
                }
            }
            0x30 => {
                let short = c_string_at(item, 14).unwrap_or_default();
                parts.push(long_name(item).unwrap_or(short));
            }
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join("\\"))
}

/// A file-entry shell item's long name: its 0xBEEF0004 extension block, whose Unicode name
/// follows a fixed header (46 bytes from version 7 on, else shorter).
fn long_name(item: &[u8]) -> Option<String> {
    let sig = memchr::memmem::find(item, &[0x04, 0x00, 0xEF, 0xBE])?;
    let block = sig.checked_sub(4)?;
    let version = le_u16(item, block + 2)?;
    let offset = match version {
        9.. => 46,
        8 => 42,
        7 => 42,
        _ => 26,
    };
    let name = c_string16_at(item, block + offset)?;
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_shortcut_is_none() {
        assert_eq!(shortcut(b"MZ"), None);
        assert_eq!(shortcut(&[0x4C, 0, 0, 0]), None);
    }

    #[test]
    fn an_id_list_spells_the_drive_and_the_names() {
        let mut list = Vec::new();
        let mut volume = vec![0, 0, 0x2F];
        volume.extend_from_slice(b"C:\\\0");
        volume.resize(25, 0);
        volume[0] = 25;
        list.extend(volume);
        let mut file = vec![0u8; 14];
        file[2] = 0x32;
        file.extend_from_slice(b"cmd.exe\0");
        file[0] = file.len() as u8;
        list.extend(file);
        list.extend([0, 0]);
        assert_eq!(id_list_path(&list).as_deref(), Some("C:\\cmd.exe"));
    }
}
