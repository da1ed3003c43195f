//! The export directory and the TLS callbacks of a PE, read through the loader's map
//! ([`PeMap`]): a directory in the headers, in a section whose raw pointer is unaligned or past
//! the sections ("in the overlay") reads as the loader reads it.

use maljan_server::ToolError;
use schemars::JsonSchema;
use serde::Serialize;

use crate::{budget::Budget, pe_map::PeMap};

/// Longest export name or forwarder read (pefile's MAX_SYMBOL_NAME_LENGTH).
const MAX_NAME: usize = 0x200;
/// Most TLS callbacks read (the loader calls them until a null pointer; a list this long is a
/// trap, not a program).
const MAX_CALLBACKS: usize = 256;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ExportInfo {
    /// The DLL name the export directory gives itself.
    pub dll_name: Option<String>,
    /// Exports listed (named ones in name order, then those exported by ordinal only).
    pub count: usize,
    pub functions: Vec<ExportFn>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ExportFn {
    pub name: Option<String>,
    /// Base + index in the address table.
    pub ordinal: u32,
    pub rva: u32,
    /// `LIB.func` for a forwarded export.
    pub forward: Option<String>,
}

/// The export directory (data directory 0): every named export, then each address-table entry
/// no name points at, as pefile lists them; None without a directory. Every entry is charged to
/// `budget`; at most `limit` are listed (`count` says how many there are).
pub(crate) fn exports(
    map: &PeMap<'_>,
    limit: usize,
    budget: &Budget,
) -> Result<Option<(ExportInfo, u32)>, ToolError> {
    let Some((dir, dir_size)) = map.directory(0) else {
        return Ok(None);
    };
    let Some(d) = map.bytes::<40>(dir) else {
        return Ok(None);
    };
    let field = |k: usize| u32::from_le_bytes([d[k], d[k + 1], d[k + 2], d[k + 3]]);
    let (timestamp, name_rva, base) = (field(4), field(12), field(16));
    let (n_functions, n_names) = (field(20), field(24));
    let (functions_rva, names_rva, ordinals_rva) = (field(28), field(32), field(36));
    // No table can hold more entries than the file has bytes for.
    let most = (map.b.len() / 2) as u32;
    let forward = |address: u32| -> Option<String> {
        let inside = address >= dir && u64::from(address) < u64::from(dir) + u64::from(dir_size);
        inside.then(|| text(map.c_str(address, MAX_NAME).unwrap_or_default()))
    };
    let mut listed: Vec<ExportFn> = Vec::new();
    let mut count = 0usize;
    let mut named = std::collections::HashSet::new();
    for i in 0..n_names.min(most) {
        budget.items(1, "exports")?;
        let index = map.u16(ordinals_rva.wrapping_add(2 * i)).unwrap_or(0);
        let Some(address) = map.u32(functions_rva.wrapping_add(4 * u32::from(index))) else {
            break;
        };
        if u32::from(index) >= n_functions {
            // An ordinal past the address table: pefile gives the whole table up here.
            break;
        }
        if address == 0 {
            continue;
        }
        let Some(name) = map
            .u32(names_rva.wrapping_add(4 * i))
            .and_then(|r| map.c_str(r, MAX_NAME))
        else {
            continue;
        };
        named.insert(index);
        count += 1;
        if listed.len() < limit {
            listed.push(ExportFn {
                name: Some(text(name)),
                ordinal: base.wrapping_add(u32::from(index)),
                rva: address,
                forward: forward(address),
            });
        }
    }
    for index in 0..n_functions.min(most) {
        budget.items(1, "exports")?;
        if u16::try_from(index).is_ok_and(|i| named.contains(&i)) {
            continue;
        }
        let Some(address) = map.u32(functions_rva.wrapping_add(4 * index)) else {
            break;
        };
        if address == 0 {
            continue;
        }
        count += 1;
        if listed.len() < limit {
            listed.push(ExportFn {
                name: None,
                ordinal: base.wrapping_add(index),
                rva: address,
                forward: forward(address),
            });
        }
    }
    let dll_name = map
        .c_str(name_rva, MAX_NAME)
        .filter(|n| !n.is_empty() && name_rva != 0)
        .map(text);
    Ok(Some((
        ExportInfo {
            dll_name,
            count,
            functions: listed,
        },
        timestamp,
    )))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The TLS callbacks (data directory 9): the addresses the loader calls before the entry point,
/// read from the null-terminated array AddressOfCallBacks points at.
pub(crate) fn tls_callbacks(map: &PeMap<'_>, budget: &Budget) -> Result<Vec<u64>, ToolError> {
    let mut out = Vec::new();
    let Some((dir, _)) = map.directory(9) else {
        return Ok(out);
    };
    let base = map.optional.image_base;
    let (array, width) = if map.is_64 {
        (map.u64(dir + 24), 8)
    } else {
        (map.u32(dir + 12).map(u64::from), 4)
    };
    let Some(array) = array.filter(|&a| a != 0) else {
        return Ok(out);
    };
    let Ok(mut rva) = u32::try_from(array.wrapping_sub(base)) else {
        return Ok(out);
    };
    while out.len() < MAX_CALLBACKS {
        budget.items(1, "TLS callbacks")?;
        let callback = if map.is_64 {
            map.u64(rva)
        } else {
            map.u32(rva).map(u64::from)
        };
        match callback {
            Some(c) if c != 0 => out.push(c),
            _ => break,
        }
        rva = rva.wrapping_add(width);
    }
    Ok(out)
}
