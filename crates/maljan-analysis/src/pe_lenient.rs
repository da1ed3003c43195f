//! The lenient side of pe_info's goblin parse, which gives the parts the loader's map
//! ([`crate::pe_map`]) does not read (debug directory and PDB path, Rich header, version strings,
//! CLR header): when goblin's strict parse fails, read the file again, less strictly each time,
//! and keep what parses, with the faults as anomalies.
//!
//! The ladder: goblin strict over the file; goblin permissive (bad DOS stub, directories that
//! point nowhere) over a copy padded with zeros where the headers or tables run past the end of
//! the file (the loader maps missing bytes as zeros: tiny PEs rely on it) and without an export
//! directory that claims more than the file holds; the same without resources, TLS and
//! certificates; then nothing from goblin.

use goblin::pe::{
    PE,
    options::{ParseMode, ParseOptions},
};
use maljan_server::ToolError;

use crate::{
    budget::Budget,
    common::{le_u16, le_u32},
};

/// The most zero bytes appended to read headers that run past the end (headers, a section
/// table of 96 entries and the data directories fit).
const MAX_PADDING: usize = 64 * 1024;

/// goblin with these options; imports are never walked by goblin (see `pe::parse`).
fn goblin_parse(b: &[u8], mode: ParseMode, tables: bool) -> goblin::error::Result<PE<'_>> {
    let mut opts = ParseOptions::default()
        .with_parse_imports(false)
        .with_parse_mode(mode);
    if !tables {
        opts = opts.with_parse_resources(false).with_parse_tls_data(false);
        opts.parse_attribute_certificates = false;
    }
    PE::parse_with_opts(b, &opts)
}

/// The copy the lenient passes read: padded with zeros where the headers and section table run
/// past the end (at most [`MAX_PADDING`]), and with an export directory that claims more entries
/// than the file can hold taken out (goblin would reserve memory for every one of them).
pub(crate) fn lenient_copy(b: &[u8], budget: &Budget) -> Result<(Vec<u8>, Vec<String>), ToolError> {
    budget.scan(b.len(), "the lenient copy")?;
    let mut faults = Vec::new();
    let mut copy = b.to_vec();
    let Some(pe) = le_u32(b, 0x3c).map(|v| v as usize) else {
        return Ok((copy, faults));
    };
    let size_of_optional = le_u16(b, pe + 20).unwrap_or(0) as usize;
    let n_sections = le_u16(b, pe + 6).unwrap_or(0) as usize;
    let headers_end = pe
        .saturating_add(24 + size_of_optional.max(240))
        .saturating_add(40 * n_sections);
    if headers_end > b.len() && headers_end - b.len() <= MAX_PADDING {
        copy.resize(headers_end, 0);
        faults.push(format!(
            "headers run {} bytes past the end of the file: read as zeros, as the loader maps them",
            headers_end - b.len()
        ));
    }
    // The export directory: data directory 0, after the PE32 / PE32+ fields.
    let o = pe + 24;
    let dirs = o + if le_u16(&copy, o) == Some(0x20b) {
        112
    } else {
        96
    };
    if let Some(rva) = le_u32(&copy, dirs).filter(|&r| r != 0) {
        let table = o + size_of_optional;
        let offset = (0..n_sections.min(96)).find_map(|i| {
            let at = table + 40 * i;
            let (vsize, va, raw_size, raw) = (
                le_u32(&copy, at + 8)?,
                le_u32(&copy, at + 12)?,
                le_u32(&copy, at + 16)?,
                le_u32(&copy, at + 20)?,
            );
            (rva >= va && rva - va < vsize.max(raw_size))
                .then(|| (rva - va) as usize + raw as usize)
        });
        let claims = offset.map(|at| {
            let n = |k| le_u32(&copy, at + k).unwrap_or(0) as usize;
            n(20).max(n(24))
        });
        if let Some(n) = claims
            && n.saturating_mul(4) > b.len()
        {
            copy[dirs..dirs + 8].fill(0);
            faults.push(format!(
                "the export directory claims {n} entries, more than the file holds: left out"
            ));
        }
    }
    Ok((copy, faults))
}

/// goblin's view of the lenient `copy` of a file whose strict parse failed, as leniently as it
/// takes; None when not even the permissive parse without tables succeeds (pe_info then reports
/// what the loader's map reads, without the debug directory, Rich header and version strings
/// goblin gives).
pub(crate) fn parse<'a>(copy: &'a [u8], faults: &mut Vec<String>) -> Option<PE<'a>> {
    for tables in [true, false] {
        if let Ok(pe) = goblin_parse(copy, ParseMode::Permissive, tables) {
            if !tables {
                faults.push("resource, TLS or certificate table unreadable: left out".into());
            }
            return Some(pe);
        }
    }
    faults.push("no debug directory, Rich header or version strings read".into());
    None
}
