//! `macho_info`: Mach-O (single or universal) header, segments and sections with entropy, linked
//! dylibs, entry point, UUID, code signature and encryption, imports and exports.

use std::sync::Arc;

use goblin::mach::{MachO, load_command::CommandVariant};
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
    macho_parts,
};

pub fn cpu_name(cpu: u32) -> &'static str {
    match cpu {
        7 => "x86",
        0x0100_0007 => "x86-64",
        12 => "ARM",
        0x0100_000c => "ARM64",
        0x0200_000c => "ARM64_32",
        18 => "PowerPC",
        0x0100_0012 => "PowerPC64",
        _ => "other",
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachSection {
    /// `__TEXT,__text` style.
    pub name: String,
    pub address: u64,
    pub offset: u32,
    pub size: u64,
    pub entropy: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachSegment {
    pub name: String,
    pub vmaddr: u64,
    pub vmsize: u64,
    pub fileoff: u64,
    pub filesize: u64,
    /// Initial protection, "rwx" style.
    pub protection: String,
    pub entropy: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachArch {
    pub cpu: String,
    pub bits: u8,
    pub file_type: String,
    pub flags: Vec<String>,
    pub entry_point: u64,
    pub uuid: Option<String>,
    pub libraries: Vec<String>,
    pub rpaths: Vec<String>,
    pub code_signature: bool,
    /// LC_ENCRYPTION_INFO with a non-zero cryptid (FairPlay-encrypted).
    pub encrypted: bool,
    pub segments: Vec<MachSegment>,
    pub sections: Vec<MachSection>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    pub import_count: usize,
    pub export_count: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachInfo {
    /// A universal (fat) binary.
    pub universal: bool,
    pub architectures: Vec<MachArch>,
    /// Slices that could not be read, and why.
    pub errors: Vec<String>,
}

fn prot(p: u32) -> String {
    format!(
        "{}{}{}",
        if p & 1 != 0 { 'r' } else { '-' },
        if p & 2 != 0 { 'w' } else { '-' },
        if p & 4 != 0 { 'x' } else { '-' }
    )
}

fn file_type(t: u32) -> &'static str {
    match t {
        1 => "object",
        2 => "executable",
        3 => "fixed_vm_library",
        4 => "core",
        5 => "preload",
        6 => "dylib",
        7 => "dylinker",
        8 => "bundle",
        9 => "dylib_stub",
        10 => "dsym",
        11 => "kext_bundle",
        _ => "other",
    }
}

fn header_flags(f: u32) -> Vec<String> {
    [
        (0x1, "noundefs"),
        (0x4, "dyldlink"),
        (0x80, "twolevel"),
        (0x8000, "weak_defines"),
        (0x10000, "binds_to_weak"),
        (0x20000, "allow_stack_execution"),
        (0x200000, "pie"),
        (0x1000000, "no_heap_execution"),
    ]
    .iter()
    .filter(|(b, _)| f & b != 0)
    .map(|(_, n)| n.to_string())
    .collect()
}

fn arch(b: &[u8], m: &MachO<'_>, limit: usize, budget: &Budget) -> Result<MachArch, ToolError> {
    let slice = |off: u64, size: u64| {
        let s = (off as usize).min(b.len());
        &b[s..s.saturating_add(size as usize).min(b.len())]
    };
    let mut segments = Vec::new();
    let mut sections = Vec::new();
    for seg in m.segments.iter() {
        budget.items(1, "Mach-O segments")?;
        segments.push(MachSegment {
            name: seg.name().unwrap_or("?").to_string(),
            vmaddr: seg.vmaddr,
            vmsize: seg.vmsize,
            fileoff: seg.fileoff,
            filesize: seg.filesize,
            protection: prot(seg.initprot),
            entropy: budget.entropy(seg.data, "Mach-O segments")?,
        });
        for (s, data) in macho_parts::sections(seg, m.is_64, budget)? {
            let data = if data.is_empty() {
                slice(u64::from(s.offset), s.size)
            } else {
                data
            };
            sections.push(MachSection {
                name: format!("{},{}", s.segname().unwrap_or("?"), s.name().unwrap_or("?")),
                address: s.addr,
                offset: s.offset,
                size: s.size,
                entropy: budget.entropy(data, "Mach-O sections")?,
            });
        }
    }
    let mut uuid = None;
    let mut code_signature = false;
    let mut encrypted = false;
    for lc in &m.load_commands {
        match &lc.command {
            CommandVariant::Uuid(u) => uuid = Some(hex::encode_upper(u.uuid)),
            CommandVariant::CodeSignature(_) => code_signature = true,
            CommandVariant::EncryptionInfo32(e) => encrypted |= e.cryptid != 0,
            CommandVariant::EncryptionInfo64(e) => encrypted |= e.cryptid != 0,
            _ => {}
        }
    }
    // goblin expands the bind opcodes' repeat counts as they claim: count them first.
    let (bind_entries, indexes_exist) = macho_parts::bind_entries(b, m);
    budget.items(
        usize::try_from(bind_entries).unwrap_or(usize::MAX),
        "Mach-O bind entries",
    )?;
    let mut imports = Vec::new();
    let bound = if indexes_exist {
        m.imports().unwrap_or_default()
    } else {
        Vec::new()
    };
    for i in bound {
        budget.scan(i.dylib.len() + i.name.len(), "Mach-O import names")?;
        imports.push(format!("{}!{}", i.dylib, i.name));
    }
    let mut exports = macho_parts::exports(b, m, budget)?;
    let (import_count, export_count) = (imports.len(), exports.len());
    imports.truncate(limit);
    exports.truncate(limit);
    Ok(MachArch {
        cpu: cpu_name(m.header.cputype).to_string(),
        bits: if m.is_64 { 64 } else { 32 },
        file_type: file_type(m.header.filetype).to_string(),
        flags: header_flags(m.header.flags),
        entry_point: m.entry,
        uuid,
        libraries: m
            .libs
            .iter()
            .filter(|l| **l != "self")
            .map(|s| s.to_string())
            .collect(),
        rpaths: m.rpaths.iter().map(|s| s.to_string()).collect(),
        code_signature,
        encrypted,
        segments,
        sections,
        imports,
        exports,
        import_count,
        export_count,
    })
}

fn not_macho(e: impl std::fmt::Display) -> ToolError {
    ToolError::unsupported_format(format!("not a Mach-O file this parser can read: {e}"))
        .with_remediation("check identify_file; for a damaged file try strings or entropy")
}

/// Parses a Mach-O file, universal (32- or 64-bit header) or not, within `budget`.
pub fn macho_info(b: &[u8], limit: usize, budget: &Budget) -> Result<MachInfo, ToolError> {
    contain("Mach-O", || {
        let Some(arches) = macho_parts::fat_arches(b) else {
            let m = MachO::parse(b, 0).map_err(not_macho)?;
            return Ok(MachInfo {
                universal: false,
                architectures: vec![arch(b, &m, limit, budget)?],
                errors: vec![],
            });
        };
        let mut architectures = Vec::new();
        let mut errors = Vec::new();
        for (i, fat) in arches?.iter().enumerate() {
            let start = usize::try_from(fat.offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(usize::try_from(fat.size).unwrap_or(usize::MAX));
            let Some(slice) = b.get(start..end) else {
                errors.push(format!(
                    "slice {i} ({}) lies outside the file ({:#x}+{:#x})",
                    cpu_name(fat.cputype),
                    fat.offset,
                    fat.size
                ));
                continue;
            };
            if slice.starts_with(b"!<arch>") {
                errors.push(format!("slice {i} is a static library archive"));
                continue;
            }
            match MachO::parse(slice, 0) {
                Ok(m) => architectures.push(arch(slice, &m, limit, budget)?),
                Err(e) => errors.push(format!("slice {i}: {e}")),
            }
        }
        Ok(MachInfo {
            universal: true,
            architectures,
            errors,
        })
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MachoInfoArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Most imports / exports listed per architecture.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
}

fn default_limit() -> usize {
    2000
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MachoInfoOutput {
    pub read_path: String,
    pub size: u64,
    #[serde(flatten)]
    pub info: MachInfo,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "macho_info",
            "macOS/iOS Mach-O structure (single or universal): header, segments and sections with entropy, \
             linked dylibs, entry point, UUID, code signature, encryption, imports and exports.",
        )
        .title("Mach-O structure")
        .timeout_s(60),
        move |ctx, a: MachoInfoArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    let cancel = || ctx.is_cancelled();
                    let info = macho_info(b, a.limit.max(1), &Budget::for_file(b.len(), &cancel))?;
                    Ok(MachoInfoOutput { read_path: s.read_path(), size: b.len() as u64, info })
                })
                .await
            }
        },
    );
}
