//! `pe_info`: headers, sections with entropy, imports, exports, resources, timestamps, imphash,
//! Rich header, PDB path, overlay and the anomalies an analyst looks at first.
//!
//! The headers, sections, imports (plain, delay-loaded and bound), exports, TLS callbacks,
//! resources and overlay are read through the loader's map ([`crate::pe_map`]): raw pointers
//! rounded down, sizes clipped, tables in the headers or past the sections found where the
//! Windows loader finds them, as pefile reads them. goblin gives the rest (debug directory and
//! PDB path, Rich header, version strings, CLR header), strictly first and then leniently
//! ([`crate::pe_lenient`]), inside `contain` since it has had overflow panics on fuzzed input:
//! a malformed file is answered with what parses and its faults among the anomalies. The
//! resource tree is walked here with bounds checks, so a hostile tree costs nothing but a shorter
//! list.

use std::{collections::BTreeMap, sync::Arc};

use goblin::pe::{PE, options::ParseOptions};
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, iso8601, on_sample},
    pe_exports,
    pe_imports::{self, ImportDll},
    pe_lenient,
    pe_map::PeMap,
    pe_parts::{self, Overlay, Pdb, PeResource, PeSection, RichEntry},
};

pub use crate::{
    pe_exports::{ExportFn, ExportInfo},
    pe_imports::BoundImport,
};

pub fn machine_name(machine: u16) -> &'static str {
    match machine {
        0x14c => "x86",
        0x8664 => "x86-64",
        0x1c0 => "ARM",
        0x1c4 => "ARMv7 Thumb-2",
        0xaa64 => "ARM64",
        0x200 => "IA-64",
        0x5032 => "RISC-V 32",
        0x5064 => "RISC-V 64",
        0 => "unknown",
        _ => "other",
    }
}

/// A timestamp and its reading.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Stamp {
    pub value: u32,
    /// ISO 8601 UTC; null for 0.
    pub utc: Option<String>,
}

impl Stamp {
    pub(crate) fn new(value: u32) -> Self {
        Self {
            value,
            utc: (value != 0).then(|| iso8601(i64::from(value))),
        }
    }
}

/// What pe_info finds.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct PeInfo {
    pub machine: String,
    pub bits: u8,
    pub is_dll: bool,
    /// A .NET assembly (CLR runtime header present).
    pub is_dotnet: bool,
    pub subsystem: String,
    pub characteristics: Vec<String>,
    pub dll_characteristics: Vec<String>,
    /// Entry point RVA.
    pub entry_point: u32,
    /// The section holding the entry point (null: outside every section).
    pub entry_section: Option<String>,
    pub image_base: u64,
    pub size_of_image: u32,
    pub header_checksum: u32,
    pub linker_version: String,
    pub os_version: String,
    /// COFF header, debug directory, export and resource directory timestamps.
    pub timestamps: BTreeMap<String, Stamp>,
    /// pefile-compatible import hash (null without imports).
    pub imphash: Option<String>,
    pub rich_header: Option<Vec<RichEntry>>,
    pub sections: Option<Vec<PeSection>>,
    pub import_count: usize,
    pub imports: Option<Vec<ImportDll>>,
    /// Delay-loaded imports, by DLL (null when imports are not asked for).
    pub delay_imports: Option<Vec<ImportDll>>,
    /// The bound-import directory: the DLLs the IAT was bound against (null when imports are not
    /// asked for).
    pub bound_imports: Option<Vec<BoundImport>>,
    pub exports: Option<ExportInfo>,
    pub resources: Option<Vec<PeResource>>,
    /// Version resource strings (CompanyName, OriginalFilename, …).
    pub version_info: BTreeMap<String, String>,
    pub overlay: Option<Overlay>,
    pub pdb: Option<Pdb>,
    /// Size of the Authenticode signature (security directory), 0 when unsigned.
    pub signature_size: u32,
    pub tls_callbacks: usize,
    /// The TLS callbacks' addresses (virtual addresses, as the array holds them): code the loader
    /// runs before the entry point.
    pub tls_callback_addresses: Vec<u64>,
    /// Things worth a second look (W+X sections, entry point outside sections, zero timestamp, …).
    pub anomalies: Vec<String>,
}

/// Which parts pe_info reports.
#[derive(Debug, Clone, Copy)]
pub struct PeParts {
    pub sections: bool,
    pub imports: bool,
    pub exports: bool,
    pub resources: bool,
    pub overlay: bool,
    pub pdb: bool,
    pub limit: usize,
}

impl Default for PeParts {
    fn default() -> Self {
        Self {
            sections: true,
            imports: true,
            exports: true,
            resources: true,
            overlay: true,
            pdb: true,
            limit: 2000,
        }
    }
}

/// Parses a PE file within `budget`, leniently: a malformed file yields every header, section,
/// import and resource the loader would read, with its faults among the anomalies. Only a file
/// without `MZ`, a `PE` signature and a whole COFF header is an error.
pub fn pe_info(b: &[u8], parts: PeParts, budget: &Budget) -> Result<PeInfo, ToolError> {
    contain("PE", || {
        let map = PeMap::parse(b).ok_or_else(|| {
            ToolError::unsupported_format(
                "not a PE file this parser can read: no MZ header, PE signature and COFF header",
            )
            .with_remediation(
                "check identify_file; for a damaged PE try strings, carve_payloads or entropy",
            )
        })?;
        let mut anomalies = map.faults.clone();
        let strict = match parse(b) {
            Ok(pe) => return build(&map, Some(&pe), parts, budget, anomalies),
            Err(e) => e,
        };
        anomalies.push(format!("malformed PE, read leniently: {strict}"));
        let (copy, copy_faults) = pe_lenient::lenient_copy(b, budget)?;
        anomalies.extend(copy_faults);
        let goblin = pe_lenient::parse(&copy, &mut anomalies);
        build(&map, goblin.as_ref(), parts, budget, anomalies)
    })
}

/// goblin's PE parse without its import walk, which expands shared thunk arrays without bound:
/// [`pe_imports`] reads the import directory within the budget instead.
pub(crate) fn parse(b: &[u8]) -> goblin::error::Result<PE<'_>> {
    PE::parse_with_opts(b, &ParseOptions::default().with_parse_imports(false))
}

fn entry_section(sections: &[PeSection], map: &PeMap<'_>, entry: u32) -> Option<String> {
    map.section_of(entry)
        .and_then(|i| sections.get(i))
        .map(|s| s.name.clone())
}

fn section_anomalies(sections: &[PeSection], anomalies: &mut Vec<String>) {
    for s in sections {
        if s.characteristics.iter().any(|c| c == "write")
            && s.characteristics.iter().any(|c| c == "execute")
        {
            anomalies.push(format!("section {} is writable and executable", s.name));
        }
        if s.entropy >= 7.2 && s.raw_size > 1024 {
            anomalies.push(format!(
                "section {} has high entropy ({:.2}): packed or encrypted?",
                s.name, s.entropy
            ));
        }
        if s.raw_size == 0
            && s.virtual_size > 0x10000
            && s.characteristics.iter().any(|c| c == "execute")
        {
            anomalies.push(format!(
                "executable section {} is empty on disk but large in memory (unpacking stub?)",
                s.name
            ));
        }
    }
}

/// The imports, delay imports, bound imports, their count and the imphash, when asked for.
type Imports = (
    Vec<ImportDll>,
    usize,
    Option<String>,
    Vec<ImportDll>,
    Vec<BoundImport>,
);

fn all_imports(map: &PeMap<'_>, budget: &Budget) -> Result<Imports, ToolError> {
    let (imports, count, imphash) = pe_imports::imports(map, budget)?;
    let delay = pe_imports::delay_imports(map, budget)?;
    let bound = pe_imports::bound_imports(map, budget)?;
    Ok((imports, count, imphash, delay, bound))
}

fn build(
    map: &PeMap<'_>,
    pe: Option<&PE<'_>>,
    parts: PeParts,
    budget: &Budget,
    mut anomalies: Vec<String>,
) -> Result<PeInfo, ToolError> {
    let o = &map.optional;
    let sections: Vec<PeSection> = (0..map.sections.len())
        .map(|i| pe_parts::section(map, i, budget))
        .collect::<Result<_, _>>()?;
    let entry_section = entry_section(&sections, map, o.entry);
    let is_dll = map.characteristics & 0x2000 != 0;

    let mut timestamps = BTreeMap::new();
    timestamps.insert("coff".to_string(), Stamp::new(map.time_date_stamp));
    if let Some(debug) = pe.and_then(|pe| pe.debug_data.as_ref())
        && let Some(first) = debug.entries().flatten().next()
    {
        timestamps.insert("debug".to_string(), Stamp::new(first.time_date_stamp));
    }
    let exports = pe_exports::exports(map, parts.limit, budget)?;
    if let Some((_, stamp)) = &exports {
        timestamps.insert("export".to_string(), Stamp::new(*stamp));
    }
    let resource_root = map.directory(2).and_then(|(rva, _)| map.offset(rva));
    if let Some(root) = resource_root
        && let Some(ts) = crate::common::le_u32(map.b, root + 4)
    {
        timestamps.insert("resource".to_string(), Stamp::new(ts));
    }

    let (imports, import_count, imphash, delay_imports, bound_imports) = if parts.imports {
        all_imports(map, budget).map_err(|e| {
            let remediation = format!("{}; or call pe_info with imports=false", e.remediation);
            e.with_remediation(remediation)
        })?
    } else {
        Default::default()
    };
    let overlay = pe_parts::overlay(map, budget)?;
    let signature_size = map.directory(4).map(|d| d.1).unwrap_or(0);
    let tls_callback_addresses = pe_exports::tls_callbacks(map, budget)?;
    let resources = match resource_root {
        Some(root) if parts.resources => pe_parts::resources(map, root, parts.limit, budget)?,
        _ => Vec::new(),
    };
    let is_dotnet = map.directory(14).is_some() || pe.is_some_and(|pe| pe.clr_data.is_some());

    if map.time_date_stamp == 0 {
        anomalies.push("COFF timestamp is zero".to_string());
    } else if map.time_date_stamp > 4_102_444_800 {
        anomalies.push("COFF timestamp is after 2100".to_string());
    }
    if entry_section.is_none() && o.entry != 0 {
        anomalies.push("entry point lies outside every section".to_string());
    }
    section_anomalies(&sections, &mut anomalies);
    if let Some(ov) = &overlay
        && ov.size > 0
        && signature_size == 0
    {
        anomalies.push(format!(
            "{} bytes of overlay after the last section",
            ov.size
        ));
    }
    if parts.imports && imports.is_empty() && delay_imports.is_empty() && !is_dll && !is_dotnet {
        anomalies.push("no imports (packed, or resolves its API at run time?)".to_string());
    }

    Ok(PeInfo {
        machine: machine_name(map.machine).to_string(),
        bits: if map.is_64 { 64 } else { 32 },
        is_dll,
        is_dotnet,
        subsystem: pe_parts::subsystem_name(o.subsystem).to_string(),
        characteristics: pe_parts::characteristics(map.characteristics),
        dll_characteristics: pe_parts::dll_characteristics(o.dll_characteristics),
        entry_point: o.entry,
        entry_section,
        image_base: o.image_base,
        size_of_image: o.size_of_image,
        header_checksum: o.check_sum,
        linker_version: format!("{}.{}", o.linker.0, o.linker.1),
        os_version: format!("{}.{}", o.os_version.0, o.os_version.1),
        timestamps,
        imphash,
        rich_header: pe.and_then(pe_parts::rich),
        sections: parts.sections.then_some(sections),
        import_count,
        imports: parts.imports.then_some(imports),
        delay_imports: parts.imports.then_some(delay_imports),
        bound_imports: parts.imports.then_some(bound_imports),
        exports: if parts.exports {
            exports.map(|e| e.0)
        } else {
            None
        },
        resources: parts.resources.then_some(resources),
        version_info: pe.map(version_info).unwrap_or_default(),
        overlay: if parts.overlay { overlay } else { None },
        pdb: if parts.pdb {
            pe.and_then(pe_parts::pdb)
        } else {
            None
        },
        signature_size,
        tls_callbacks: tls_callback_addresses.len(),
        tls_callback_addresses,
        anomalies,
    })
}

/// The version resource's strings, as goblin reads them.
fn version_info(pe: &PE<'_>) -> BTreeMap<String, String> {
    let mut version_info = BTreeMap::new();
    if let Some(v) = pe
        .resource_data
        .as_ref()
        .and_then(|r| r.version_info.as_ref())
    {
        let s = &v.string_info;
        for (k, val) in [
            ("CompanyName", s.company_name()),
            ("FileDescription", s.file_description()),
            ("FileVersion", s.file_version()),
            ("InternalName", s.internal_name()),
            ("LegalCopyright", s.legal_copyright()),
            ("OriginalFilename", s.original_filename()),
            ("ProductName", s.product_name()),
            ("ProductVersion", s.product_version()),
            ("Comments", s.comments()),
        ] {
            if let Some(val) = val.filter(|v| !v.is_empty()) {
                version_info.insert(k.to_string(), val);
            }
        }
    }
    version_info
}

fn yes() -> bool {
    true
}
fn default_limit() -> usize {
    2000
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeInfoArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Include the section table (with entropy).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub sections: bool,
    /// Include imports, by DLL (false also leaves out the imphash and import_count: the import
    /// table is not read at all).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub imports: bool,
    /// Include exports.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub exports: bool,
    /// Include resources (type, name, language, size, entropy, what the data is).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub resources: bool,
    /// Include the overlay (data after the last section).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub overlay: bool,
    /// Include the PDB path from the debug directory.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub pdb: bool,
    /// Most exports and resources listed.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PeInfoOutput {
    pub read_path: String,
    pub size: u64,
    pub entropy: f64,
    #[serde(flatten)]
    pub info: PeInfo,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "pe_info",
            "Windows PE (EXE/DLL/driver) structure: headers, sections with entropy, imports by DLL, exports, \
             resources, timestamps, imphash, Rich header, PDB path, overlay, and anomalies.",
        )
        .title("PE structure")
        .timeout_s(60),
        move |ctx, a: PeInfoArgs| {
            let config = config.clone();
            async move {
                let parts = PeParts {
                    sections: a.sections,
                    imports: a.imports,
                    exports: a.exports,
                    resources: a.resources,
                    overlay: a.overlay,
                    pdb: a.pdb,
                    limit: a.limit.max(1),
                };
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(b.len(), &cancel);
                    let info = pe_info(b, parts, &budget)?;
                    let entropy = budget.entropy(b, "the whole file")?;
                    Ok(PeInfoOutput { read_path: s.read_path(), size: b.len() as u64, entropy, info })
                })
                .await
            }
        },
    );
}
