//! The lenient side of pe_info: when goblin's strict parse fails, read the file again, less
//! strictly each time, and keep what parses, with the faults as anomalies — as pefile and the
//! Windows loader do. Only a file in which not even the COFF header parses is an error.
//!
//! The ladder: goblin strict over the file; goblin permissive (bad DOS stub, directories that
//! point nowhere) over a copy padded with zeros where the headers or tables run past the end of
//! the file (the loader maps missing bytes as zeros: tiny PEs rely on it) and without an export
//! directory that claims more than the file holds; the same without resources, TLS and
//! certificates; then the headers alone (DOS, COFF, optional header and section table), read here
//! field by field.

use goblin::pe::{
    PE,
    options::{ParseMode, ParseOptions},
    section_table::SectionTable,
};
use maljan_server::ToolError;

use crate::{
    budget::Budget,
    common::{le_u16, le_u32, le_u64},
};

/// The most zero bytes appended to read headers that run past the end (headers, a section
/// table of 96 entries and the data directories fit).
const MAX_PADDING: usize = 64 * 1024;

/// A PE read as far as it reads: goblin's view when some parse succeeds, else the headers alone.
pub(crate) enum Lenient<'a> {
    /// goblin's view of the copy.
    Goblin(Box<PE<'a>>),
    Headers(Box<Headers>),
}

/// What the headers alone say.
#[derive(Debug, Default)]
pub(crate) struct Headers {
    pub machine: u16,
    pub characteristics: u16,
    pub time_date_stamp: u32,
    pub optional: Option<Optional>,
    pub sections: Vec<SectionTable>,
}

#[derive(Debug, Default)]
pub(crate) struct Optional {
    pub is_64: bool,
    pub linker: (u8, u8),
    pub entry: u32,
    pub image_base: u64,
    pub size_of_image: u32,
    pub check_sum: u32,
    pub subsystem: u16,
    pub dll_characteristics: u16,
    pub os_version: (u16, u16),
}

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

/// Reads the lenient `copy` of a file (`real_len` bytes) whose strict parse failed, as
/// leniently as it takes; the faults found on the way go to `faults`.
pub(crate) fn parse<'a>(
    copy: &'a [u8],
    real_len: usize,
    strict: &goblin::error::Error,
    faults: &mut Vec<String>,
) -> Result<Lenient<'a>, ToolError> {
    for tables in [true, false] {
        if let Ok(pe) = goblin_parse(copy, ParseMode::Permissive, tables) {
            if !tables {
                faults.push("resource, TLS or certificate table unreadable: left out".into());
            }
            return Ok(Lenient::Goblin(Box::new(pe)));
        }
    }
    let h = headers(copy, real_len, faults).ok_or_else(|| {
        ToolError::unsupported_format(format!(
            "not a PE file this parser can read: {strict}; not even the COFF header parses"
        ))
        .with_remediation(
            "check identify_file; for a damaged PE try strings, carve_payloads or entropy",
        )
    })?;
    faults.push("only the headers parse: no imports, exports or resources read".into());
    Ok(Lenient::Headers(Box::new(h)))
}

/// The headers, field by field; None when there is no `PE\0\0` and COFF header.
fn headers(b: &[u8], real_len: usize, faults: &mut Vec<String>) -> Option<Headers> {
    if !b.starts_with(b"MZ") {
        return None;
    }
    let pe = le_u32(b, 0x3c)? as usize;
    if b.get(pe..pe.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    let coff = pe + 4;
    let mut h = Headers {
        machine: le_u16(b, coff)?,
        time_date_stamp: le_u32(b, coff + 4)?,
        characteristics: le_u16(b, coff + 18)?,
        ..Headers::default()
    };
    let n_sections = le_u16(b, coff + 2)? as usize;
    let size_of_optional = le_u16(b, coff + 16)? as usize;
    let o = coff + 20;
    h.optional = le_u16(b, o).and_then(|magic| {
        let is_64 = match magic {
            0x10b => false,
            0x20b => true,
            other => {
                faults.push(format!(
                    "optional header magic {other:#x} is neither PE32 nor PE32+"
                ));
                return None;
            }
        };
        Some(Optional {
            is_64,
            linker: (*b.get(o + 2)?, *b.get(o + 3)?),
            entry: le_u32(b, o + 16)?,
            image_base: if is_64 {
                le_u64(b, o + 24)?
            } else {
                u64::from(le_u32(b, o + 28)?)
            },
            os_version: (le_u16(b, o + 40)?, le_u16(b, o + 42)?),
            size_of_image: le_u32(b, o + 56)?,
            check_sum: le_u32(b, o + 64)?,
            subsystem: le_u16(b, o + 68)?,
            dll_characteristics: le_u16(b, o + 70)?,
        })
    });
    if h.optional.is_none() {
        faults.push("the optional header does not parse".into());
    }
    let table = o + size_of_optional;
    for i in 0..n_sections.min(96) {
        let at = table + 40 * i;
        let Some(raw) = b.get(at..at + 40) else {
            faults.push(format!(
                "the section table ends after {i} of {n_sections} sections"
            ));
            break;
        };
        let f = |k: usize| le_u32(raw, k).unwrap_or(0);
        let mut name = [0u8; 8];
        name.copy_from_slice(&raw[..8]);
        h.sections.push(SectionTable {
            name,
            virtual_size: f(8),
            virtual_address: f(12),
            size_of_raw_data: f(16),
            pointer_to_raw_data: f(20),
            characteristics: f(36),
            ..SectionTable::default()
        });
    }
    if table + 40 * n_sections > real_len {
        faults.push("the section table runs past the end of the file".into());
    }
    Some(h)
}
