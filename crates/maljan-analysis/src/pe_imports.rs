//! The import, delay-import and bound-import directories of a PE, read through the loader's map
//! ([`PeMap`]) rather than by goblin: goblin expands every descriptor's thunk array eagerly, so
//! 50,000 descriptors sharing one 50,000-entry array cost 2.5 billion entries of memory. This walk
//! charges every descriptor, thunk and copied name to the parse's [`Budget`], which is
//! proportional to the file's size, and stops with an error naming the limit when the table
//! claims more than the file can hold.
//!
//! As the loader does, a descriptor's names come from its lookup table (OriginalFirstThunk) and,
//! when that is absent or empty, from its address table (FirstThunk): an import table reached
//! only through the IAT reads whole.

use maljan_server::ToolError;
use md5::{Digest, Md5};
use schemars::JsonSchema;
use serde::Serialize;

use crate::{budget::Budget, pe_map::PeMap};

/// Longest DLL or function name read (pefile reads at most 256 for DLLs and 512 for functions).
const MAX_NAME: usize = 512;

/// Most descriptors of one directory read, and most thunks of one table (the loader has no
/// limit, but a table this long is a trap: pefile stops at 0x2000 symbols in all).
const MAX_THUNKS: usize = 0x2000;

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
fn name_at(map: &PeMap<'_>, rva: u32, budget: &Budget) -> Result<Option<String>, ToolError> {
    let Some(name) = map.c_str(rva, MAX_NAME) else {
        return Ok(None);
    };
    budget.scan(name.len(), "import names")?;
    Ok(Some(String::from_utf8_lossy(name).into_owned()))
}

/// Imports grouped by DLL (in table order), their count, and the pefile-compatible imphash.
pub(crate) fn imports(
    map: &PeMap<'_>,
    budget: &Budget,
) -> Result<(Vec<ImportDll>, usize, Option<String>), ToolError> {
    let mut dlls: Vec<ImportDll> = Vec::new();
    let mut imphash_parts: Vec<String> = Vec::new();
    let Some((mut rva, _)) = map.directory(1) else {
        return Ok((dlls, 0, None));
    };
    for _ in 0..MAX_THUNKS {
        let Some(d) = map.bytes::<20>(rva) else { break };
        if d.iter().all(|&c| c == 0) {
            break;
        }
        budget.items(1, "import descriptors")?;
        let field = |k: usize| u32::from_le_bytes([d[k], d[k + 1], d[k + 2], d[k + 3]]);
        let (lookup, name_rva, first_thunk) = (field(0), field(12), field(16));
        rva = rva.wrapping_add(20);
        let Some(dll) = name_at(map, name_rva, budget)?.filter(|n| !n.is_empty()) else {
            continue;
        };
        let functions = thunk_names(map, &dll, lookup, first_thunk, 0, budget)?;
        let lib = imphash_lib(&dll);
        imphash_parts.extend(
            functions
                .iter()
                .map(|f| format!("{lib}.{}", f.to_ascii_lowercase())),
        );
        push_dll(&mut dlls, dll, functions);
    }
    let count = imphash_parts.len();
    let imphash = (!imphash_parts.is_empty())
        .then(|| hex::encode(Md5::digest(imphash_parts.join(",").as_bytes())));
    Ok((dlls, count, imphash))
}

/// The DLL's name as the imphash writes it: lower case, without a .dll/.ocx/.sys extension.
fn imphash_lib(dll: &str) -> String {
    let lower = dll.to_ascii_lowercase();
    match lower.rsplit_once('.') {
        Some((stem, "dll" | "ocx" | "sys")) => stem.to_string(),
        _ => lower,
    }
}

/// Consecutive descriptors of one DLL read as one entry; a descriptor naming no function is left
/// out.
fn push_dll(dlls: &mut Vec<ImportDll>, dll: String, functions: Vec<String>) {
    match dlls.last_mut() {
        _ if functions.is_empty() => {}
        Some(last) if last.dll == dll => last.functions.extend(functions),
        _ => dlls.push(ImportDll { dll, functions }),
    }
}

/// The functions one descriptor imports: from its lookup table, else its address table.
/// `va_base` is subtracted from every pointer (old delay-import descriptors hold addresses).
fn thunk_names(
    map: &PeMap<'_>,
    dll: &str,
    lookup: u32,
    first_thunk: u32,
    va_base: u64,
    budget: &Budget,
) -> Result<Vec<String>, ToolError> {
    let dll_lower = dll.to_ascii_lowercase();
    let mut functions = Vec::new();
    for table in [lookup, first_thunk] {
        if table == 0 {
            continue;
        }
        for i in 0..MAX_THUNKS as u32 {
            let at = table.wrapping_add(i * if map.is_64 { 8 } else { 4 });
            let (thunk, by_ordinal) = if map.is_64 {
                let Some(t) = map.u64(at) else { break };
                (t, t & (1 << 63) != 0)
            } else {
                let Some(t) = map.u32(at) else { break };
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
                let hint_rva = (thunk.wrapping_sub(va_base) & 0x7fff_ffff) as u32;
                match name_at(map, hint_rva.wrapping_add(2), budget)? {
                    Some(name) if !name.is_empty() => name,
                    _ => continue,
                }
            };
            functions.push(func);
        }
        if !functions.is_empty() {
            break;
        }
    }
    Ok(functions)
}

/// Delay-loaded imports (data directory 13), by DLL.
pub(crate) fn delay_imports(map: &PeMap<'_>, budget: &Budget) -> Result<Vec<ImportDll>, ToolError> {
    let mut dlls = Vec::new();
    let Some((mut rva, _)) = map.directory(13) else {
        return Ok(dlls);
    };
    let (base, size) = (
        map.optional.image_base,
        u64::from(map.optional.size_of_image),
    );
    for _ in 0..MAX_THUNKS {
        let Some(d) = map.bytes::<32>(rva) else { break };
        if d.iter().all(|&c| c == 0) {
            break;
        }
        budget.items(1, "delay import descriptors")?;
        rva = rva.wrapping_add(32);
        let field = |k: usize| u32::from_le_bytes([d[k], d[k + 1], d[k + 2], d[k + 3]]);
        // Descriptors written before Visual C++ 6 (attributes 0) hold addresses, not RVAs.
        let old_style = field(0) == 0 && map.machine == 0x14c;
        let rva_of = |v: u32| {
            let v64 = u64::from(v);
            if old_style && v64 >= base && v64 < base + size {
                (v64 - base) as u32
            } else {
                v
            }
        };
        let va_base = if old_style { base } else { 0 };
        let Some(dll) = name_at(map, rva_of(field(4)), budget)?.filter(|n| !n.is_empty()) else {
            continue;
        };
        let functions = thunk_names(
            map,
            &dll,
            rva_of(field(16)),
            rva_of(field(12)),
            va_base,
            budget,
        )?;
        push_dll(&mut dlls, dll, functions);
    }
    Ok(dlls)
}

/// One entry of the bound-import directory: the DLL the IAT was bound against, when, and the DLLs
/// its forwarders were bound to.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct BoundImport {
    pub dll: String,
    pub timestamp: u32,
    pub forwarders: Vec<String>,
}

/// The bound-import directory (data directory 11): names are offsets from its start.
pub(crate) fn bound_imports(
    map: &PeMap<'_>,
    budget: &Budget,
) -> Result<Vec<BoundImport>, ToolError> {
    let mut out = Vec::new();
    let Some((start, _)) = map.directory(11) else {
        return Ok(out);
    };
    let mut rva = start;
    let name = |offset: u16| -> Result<Option<String>, ToolError> {
        name_at(map, start.wrapping_add(u32::from(offset)), budget)
    };
    for _ in 0..MAX_THUNKS {
        let Some(d) = map.bytes::<8>(rva) else { break };
        if d.iter().all(|&c| c == 0) {
            break;
        }
        budget.items(1, "bound imports")?;
        rva = rva.wrapping_add(8);
        let timestamp = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
        let refs = u16::from_le_bytes([d[6], d[7]]);
        let mut forwarders = Vec::new();
        for _ in 0..refs {
            let Some(f) = map.bytes::<8>(rva) else { break };
            rva = rva.wrapping_add(8);
            budget.items(1, "bound imports")?;
            if let Some(n) = name(u16::from_le_bytes([f[4], f[5]]))?.filter(|n| !n.is_empty()) {
                forwarders.push(n);
            }
        }
        let Some(dll) = name(u16::from_le_bytes([d[4], d[5]]))?.filter(|n| !n.is_empty()) else {
            break;
        };
        out.push(BoundImport {
            dll,
            timestamp,
            forwarders,
        });
    }
    Ok(out)
}
