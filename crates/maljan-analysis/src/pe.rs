//! `pe_info`: headers, sections with entropy, imports, exports, resources, timestamps, imphash,
//! Rich header, PDB path, overlay and the anomalies an analyst looks at first.
//!
//! goblin does the parsing (inside `contain`, since it has had overflow panics on fuzzed input),
//! strictly first and then leniently ([`crate::pe_lenient`]): a malformed file is answered with
//! what parses and its faults among the anomalies;
//! the resource tree is walked here with bounds checks, so a hostile tree costs nothing but a
//! shorter list.

use std::{collections::BTreeMap, sync::Arc};

use goblin::pe::{PE, options::ParseOptions};
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, iso8601, on_sample},
    pe_imports::{self, ImportDll},
    pe_lenient::{self, Lenient},
    pe_parts::{self, ExportInfo, Overlay, Pdb, PeResource, PeSection, RichEntry},
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
    pub exports: Option<ExportInfo>,
    pub resources: Option<Vec<PeResource>>,
    /// Version resource strings (CompanyName, OriginalFilename, …).
    pub version_info: BTreeMap<String, String>,
    pub overlay: Option<Overlay>,
    pub pdb: Option<Pdb>,
    /// Size of the Authenticode signature (security directory), 0 when unsigned.
    pub signature_size: u32,
    pub tls_callbacks: usize,
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
/// import and resource that parses, with its faults among the anomalies (see [`pe_lenient`]).
pub fn pe_info(b: &[u8], parts: PeParts, budget: &Budget) -> Result<PeInfo, ToolError> {
    contain("PE", || {
        let strict = match parse(b) {
            Ok(pe) => return build(b, &pe, parts, budget, Vec::new()),
            Err(e) => e,
        };
        // Offsets are into the copy from here on; its padding is never overlay.
        let (copy, copy_faults) = pe_lenient::lenient_copy(b, budget)?;
        let mut faults = vec![format!("malformed PE, read leniently: {strict}")];
        faults.extend(copy_faults);
        match pe_lenient::parse(&copy, b.len(), &strict, &mut faults)? {
            Lenient::Goblin(pe) => build(&copy, &pe, parts, budget, faults),
            Lenient::Headers(h) => headers_only(&copy, &h, parts, budget, faults),
        }
    })
}

/// goblin's PE parse without its import walk, which expands shared thunk arrays without bound:
/// [`pe_imports`] reads the import directory within the budget instead.
pub(crate) fn parse(b: &[u8]) -> goblin::error::Result<PE<'_>> {
    PE::parse_with_opts(b, &ParseOptions::default().with_parse_imports(false))
}

/// What the headers alone give when no parse of the tables succeeds.
fn headers_only(
    b: &[u8],
    h: &pe_lenient::Headers,
    parts: PeParts,
    budget: &Budget,
    mut anomalies: Vec<String>,
) -> Result<PeInfo, ToolError> {
    let sections: Vec<PeSection> = h
        .sections
        .iter()
        .map(|s| pe_parts::section(b, s, budget))
        .collect::<Result<_, _>>()?;
    let o = h.optional.as_ref();
    let entry = o.map(|o| o.entry).unwrap_or(0);
    let entry_section = entry_section(&sections, entry);
    section_anomalies(&sections, &mut anomalies);
    let mut timestamps = BTreeMap::new();
    timestamps.insert("coff".to_string(), Stamp::new(h.time_date_stamp));
    Ok(PeInfo {
        machine: machine_name(h.machine).to_string(),
        bits: if o.is_some_and(|o| o.is_64) { 64 } else { 32 },
        is_dll: h.characteristics & 0x2000 != 0,
        is_dotnet: false,
        subsystem: o
            .map(|o| pe_parts::subsystem_name(o.subsystem))
            .unwrap_or("none")
            .to_string(),
        characteristics: pe_parts::characteristics(h.characteristics),
        dll_characteristics: o
            .map(|o| pe_parts::dll_characteristics(o.dll_characteristics))
            .unwrap_or_default(),
        entry_point: entry,
        entry_section,
        image_base: o.map(|o| o.image_base).unwrap_or(0),
        size_of_image: o.map(|o| o.size_of_image).unwrap_or(0),
        header_checksum: o.map(|o| o.check_sum).unwrap_or(0),
        linker_version: o
            .map(|o| format!("{}.{}", o.linker.0, o.linker.1))
            .unwrap_or_default(),
        os_version: o
            .map(|o| format!("{}.{}", o.os_version.0, o.os_version.1))
            .unwrap_or_default(),
        timestamps,
        imphash: None,
        rich_header: None,
        sections: parts.sections.then_some(sections),
        import_count: 0,
        imports: parts.imports.then_some(Vec::new()),
        exports: None,
        resources: parts.resources.then_some(Vec::new()),
        version_info: BTreeMap::new(),
        overlay: None,
        pdb: None,
        signature_size: 0,
        tls_callbacks: 0,
        anomalies,
    })
}

fn entry_section(sections: &[PeSection], entry: u32) -> Option<String> {
    sections
        .iter()
        .find(|s| {
            entry >= s.virtual_address
                && (entry as u64) < s.virtual_address as u64 + s.virtual_size.max(s.raw_size) as u64
        })
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

fn build(
    b: &[u8],
    pe: &PE<'_>,
    parts: PeParts,
    budget: &Budget,
    mut anomalies: Vec<String>,
) -> Result<PeInfo, ToolError> {
    let coff = &pe.header.coff_header;
    let opt = pe.header.optional_header.as_ref();
    let win = opt.map(|o| &o.windows_fields);
    let std = opt.map(|o| &o.standard_fields);
    let dirs = opt.map(|o| &o.data_directories);
    let sections: Vec<PeSection> = pe
        .sections
        .iter()
        .map(|s| pe_parts::section(b, s, budget))
        .collect::<Result<_, _>>()?;
    let entry_section = entry_section(&sections, pe.entry);

    let mut timestamps = BTreeMap::new();
    timestamps.insert("coff".to_string(), Stamp::new(coff.time_date_stamp));
    if let Some(debug) = &pe.debug_data
        && let Some(first) = debug.entries().flatten().next()
    {
        timestamps.insert("debug".to_string(), Stamp::new(first.time_date_stamp));
    }
    if let Some(e) = &pe.export_data {
        timestamps.insert(
            "export".to_string(),
            Stamp::new(e.export_directory_table.time_date_stamp),
        );
    }
    let resource_rva = dirs
        .and_then(|d| d.get_resource_table())
        .map(|d| d.virtual_address);
    let resource_root = resource_rva.and_then(|rva| pe_parts::rva_to_offset(pe, rva));
    if let Some(root) = resource_root
        && let Some(ts) = crate::common::le_u32(b, root + 4)
    {
        timestamps.insert("resource".to_string(), Stamp::new(ts));
    }

    let (imports, import_count, imphash) = if parts.imports {
        pe_imports::imports(b, pe, budget).map_err(|e| {
            let remediation = format!("{}; or call pe_info with imports=false", e.remediation);
            e.with_remediation(remediation)
        })?
    } else {
        (Vec::new(), 0, None)
    };
    let overlay = pe_parts::overlay(b, pe, budget)?;
    let signature_size = dirs
        .and_then(|d| d.get_certificate_table())
        .map(|d| d.size)
        .unwrap_or(0);
    let tls_callbacks = pe.tls_data.as_ref().map(|t| t.callbacks.len()).unwrap_or(0);
    let resources = match resource_root {
        Some(root) if parts.resources => pe_parts::resources(b, pe, root, parts.limit, budget)?,
        _ => Vec::new(),
    };

    if coff.time_date_stamp == 0 {
        anomalies.push("COFF timestamp is zero".to_string());
    } else if coff.time_date_stamp > 4_102_444_800 {
        anomalies.push("COFF timestamp is after 2100".to_string());
    }
    if entry_section.is_none() && pe.entry != 0 {
        anomalies.push("entry point lies outside every section".to_string());
    }
    section_anomalies(&sections, &mut anomalies);
    if let Some(o) = &overlay
        && o.size > 0
        && signature_size == 0
    {
        anomalies.push(format!(
            "{} bytes of overlay after the last section",
            o.size
        ));
    }
    if parts.imports && imports.is_empty() && !pe.is_lib && pe.clr_data.is_none() {
        anomalies.push("no imports (packed, or resolves its API at run time?)".to_string());
    }

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

    Ok(PeInfo {
        machine: machine_name(coff.machine).to_string(),
        bits: if pe.is_64 { 64 } else { 32 },
        is_dll: pe.is_lib,
        is_dotnet: pe.clr_data.is_some() || dirs.and_then(|d| d.get_clr_runtime_header()).is_some(),
        subsystem: win
            .map(|w| pe_parts::subsystem_name(w.subsystem))
            .unwrap_or("none")
            .to_string(),
        characteristics: pe_parts::characteristics(coff.characteristics),
        dll_characteristics: win
            .map(|w| pe_parts::dll_characteristics(w.dll_characteristics))
            .unwrap_or_default(),
        entry_point: pe.entry,
        entry_section,
        image_base: pe.image_base,
        size_of_image: win.map(|w| w.size_of_image).unwrap_or(0),
        header_checksum: win.map(|w| w.check_sum).unwrap_or(0),
        linker_version: std
            .map(|s| format!("{}.{}", s.major_linker_version, s.minor_linker_version))
            .unwrap_or_default(),
        os_version: win
            .map(|w| {
                format!(
                    "{}.{}",
                    w.major_operating_system_version, w.minor_operating_system_version
                )
            })
            .unwrap_or_default(),
        timestamps,
        imphash,
        rich_header: pe_parts::rich(pe),
        sections: parts.sections.then_some(sections),
        import_count,
        imports: parts.imports.then_some(imports),
        exports: if parts.exports {
            pe_parts::exports(pe, parts.limit)
        } else {
            None
        },
        resources: parts.resources.then_some(resources),
        version_info,
        overlay: if parts.overlay { overlay } else { None },
        pdb: if parts.pdb { pe_parts::pdb(pe) } else { None },
        signature_size,
        tls_callbacks,
        anomalies,
    })
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
