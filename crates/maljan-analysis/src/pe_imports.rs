//! The import directory of a PE, walked here rather than by goblin: goblin expands every
//! descriptor's thunk array eagerly, so 50,000 descriptors sharing one 50,000-entry array cost
//! 2.5 billion entries of memory. This walk charges every descriptor, thunk and copied name to the
//! parse's [`Budget`], which is proportional to the file's size, and stops with an error naming
//! the limit when the table claims more than the file can hold.

use goblin::pe::PE;
use maljan_server::ToolError;
use md5::{Digest, Md5};
use schemars::JsonSchema;
use serde::Serialize;

use crate::{
    budget::Budget,
    common::{le_u32, le_u64},
    pe_parts::rva_to_offset,
};

/// Longest DLL or function name read (pefile reads at most 256 for DLLs and 512 for functions).
const MAX_NAME: usize = 512;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ImportDll {
    pub dll: String,
    /// Function names; imports by ordinal appear as `ord123` (or their name for ws2_32/wsock32).
    pub functions: Vec<String>,
}

/// ws2_32 / wsock32 ordinals as pefile's ordlookup names them (the ones malware imports).
fn ws2_32_name(ord: u16) -> Option<&'static str> {
    Some(match ord {
        1 => "accept",
        2 => "bind",
        3 => "closesocket",
        4 => "connect",
        5 => "getpeername",
        6 => "getsockname",
        7 => "getsockopt",
        8 => "htonl",
        9 => "htons",
        10 => "ioctlsocket",
        11 => "inet_addr",
        12 => "inet_ntoa",
        13 => "listen",
        14 => "ntohl",
        15 => "ntohs",
        16 => "recv",
        17 => "recvfrom",
        18 => "select",
        19 => "send",
        20 => "sendto",
        21 => "setsockopt",
        22 => "shutdown",
        23 => "socket",
        51 => "gethostbyaddr",
        52 => "gethostbyname",
        53 => "getprotobyname",
        54 => "getprotobynumber",
        55 => "getservbyname",
        56 => "getservbyport",
        57 => "gethostname",
        111 => "WSAGetLastError",
        112 => "WSASetLastError",
        115 => "WSAStartup",
        116 => "WSACleanup",
        151 => "__WSAFDIsSet",
        _ => return None,
    })
}

/// A NUL-terminated name at `rva`, at most [`MAX_NAME`] bytes, charged as scanned.
fn name_at(b: &[u8], pe: &PE<'_>, rva: u32, budget: &Budget) -> Result<Option<String>, ToolError> {
    let Some(rest) = rva_to_offset(pe, rva).and_then(|o| b.get(o..)) else {
        return Ok(None);
    };
    let rest = &rest[..rest.len().min(MAX_NAME)];
    let end = memchr::memchr(0, rest).unwrap_or(rest.len());
    budget.scan(end, "import names")?;
    Ok(Some(String::from_utf8_lossy(&rest[..end]).into_owned()))
}

/// Imports grouped by DLL (in table order), their count, and the pefile-compatible imphash.
pub fn imports(
    b: &[u8],
    pe: &PE<'_>,
    budget: &Budget,
) -> Result<(Vec<ImportDll>, usize, Option<String>), ToolError> {
    let mut dlls: Vec<ImportDll> = Vec::new();
    let mut imphash_parts: Vec<String> = Vec::new();
    let table = pe
        .header
        .optional_header
        .as_ref()
        .and_then(|o| o.data_directories.get_import_table())
        .filter(|d| d.virtual_address != 0)
        .and_then(|d| rva_to_offset(pe, d.virtual_address));
    let Some(table) = table else {
        return Ok((dlls, 0, None));
    };
    let thunk_size = if pe.is_64 { 8 } else { 4 };
    for descriptor in (table..).step_by(20) {
        let (Some(lookup), Some(name_rva), Some(first_thunk)) = (
            le_u32(b, descriptor),
            le_u32(b, descriptor + 12),
            le_u32(b, descriptor + 16),
        ) else {
            break;
        };
        if lookup == 0 && name_rva == 0 && first_thunk == 0 {
            break;
        }
        budget.items(1, "import descriptors")?;
        let Some(dll) = name_at(b, pe, name_rva, budget)?.filter(|n| !n.is_empty()) else {
            continue;
        };
        let dll_lower = dll.to_ascii_lowercase();
        let lib = match dll_lower.rsplit_once('.') {
            Some((stem, "dll" | "ocx" | "sys")) => stem.to_string(),
            _ => dll_lower.clone(),
        };
        let array_rva = if lookup != 0 { lookup } else { first_thunk };
        let Some(array) = rva_to_offset(pe, array_rva) else {
            continue;
        };
        let mut functions = Vec::new();
        for at in (array..).step_by(thunk_size) {
            let (thunk, by_ordinal) = if pe.is_64 {
                let Some(t) = le_u64(b, at) else { break };
                (t, t & (1 << 63) != 0)
            } else {
                let Some(t) = le_u32(b, at) else { break };
                (u64::from(t), t & (1 << 31) != 0)
            };
            if thunk == 0 {
                break;
            }
            budget.items(1, "imports")?;
            let func = if by_ordinal {
                let ordinal = thunk as u16;
                match dll_lower.as_str() {
                    "ws2_32.dll" | "wsock32.dll" => ws2_32_name(ordinal).map(str::to_string),
                    _ => None,
                }
                .unwrap_or_else(|| format!("ord{ordinal}"))
            } else {
                // The hint/name entry: a two-byte hint, then the name.
                let hint_rva = (thunk & 0x7fff_ffff) as u32;
                match name_at(b, pe, hint_rva.saturating_add(2), budget)? {
                    Some(name) => name,
                    None => continue,
                }
            };
            imphash_parts.push(format!("{lib}.{}", func.to_ascii_lowercase()));
            functions.push(func);
        }
        match dlls.last_mut() {
            _ if functions.is_empty() => {}
            Some(last) if last.dll == dll => last.functions.extend(functions),
            _ => dlls.push(ImportDll { dll, functions }),
        }
    }
    let count = imphash_parts.len();
    let imphash = (!imphash_parts.is_empty())
        .then(|| hex::encode(Md5::digest(imphash_parts.join(",").as_bytes())));
    Ok((dlls, count, imphash))
}
