//! `macho_info`: Mach-O (single or universal) header, load commands, segments and sections with
//! entropy, linked dylibs (weak ones named), entry point, UUID, code signature and encryption,
//! imports and exports, and the lies in the headers read past as anomalies (macho_commands).

use std::sync::Arc;

use goblin::mach::MachO;
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
    macho_commands, macho_parts,
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

/// The name llvm-objdump prints for a load command.
pub(crate) fn command_name(cmd: u32) -> String {
    let name = match cmd {
        0x1 => "LC_SEGMENT",
        0x2 => "LC_SYMTAB",
        0x3 => "LC_SYMSEG",
        0x4 => "LC_THREAD",
        0x5 => "LC_UNIXTHREAD",
        0x6 => "LC_LOADFVMLIB",
        0x7 => "LC_IDFVMLIB",
        0x8 => "LC_IDENT",
        0x9 => "LC_FVMFILE",
        0xa => "LC_PREPAGE",
        0xb => "LC_DYSYMTAB",
        0xc => "LC_LOAD_DYLIB",
        0xd => "LC_ID_DYLIB",
        0xe => "LC_LOAD_DYLINKER",
        0xf => "LC_ID_DYLINKER",
        0x10 => "LC_PREBOUND_DYLIB",
        0x11 => "LC_ROUTINES",
        0x12 => "LC_SUB_FRAMEWORK",
        0x13 => "LC_SUB_UMBRELLA",
        0x14 => "LC_SUB_CLIENT",
        0x15 => "LC_SUB_LIBRARY",
        0x16 => "LC_TWOLEVEL_HINTS",
        0x17 => "LC_PREBIND_CKSUM",
        0x8000_0018 => "LC_LOAD_WEAK_DYLIB",
        0x19 => "LC_SEGMENT_64",
        0x1a => "LC_ROUTINES_64",
        0x1b => "LC_UUID",
        0x8000_001c => "LC_RPATH",
        0x1d => "LC_CODE_SIGNATURE",
        0x1e => "LC_SEGMENT_SPLIT_INFO",
        0x8000_001f => "LC_REEXPORT_DYLIB",
        0x20 => "LC_LAZY_LOAD_DYLIB",
        0x21 => "LC_ENCRYPTION_INFO",
        0x22 => "LC_DYLD_INFO",
        0x8000_0022 => "LC_DYLD_INFO_ONLY",
        0x8000_0023 => "LC_LOAD_UPWARD_DYLIB",
        0x24 => "LC_VERSION_MIN_MACOSX",
        0x25 => "LC_VERSION_MIN_IPHONEOS",
        0x26 => "LC_FUNCTION_STARTS",
        0x27 => "LC_DYLD_ENVIRONMENT",
        0x8000_0028 => "LC_MAIN",
        0x29 => "LC_DATA_IN_CODE",
        0x2a => "LC_SOURCE_VERSION",
        0x2b => "LC_DYLIB_CODE_SIGN_DRS",
        0x2c => "LC_ENCRYPTION_INFO_64",
        0x2d => "LC_LINKER_OPTION",
        0x2e => "LC_LINKER_OPTIMIZATION_HINT",
        0x2f => "LC_VERSION_MIN_TVOS",
        0x30 => "LC_VERSION_MIN_WATCHOS",
        0x31 => "LC_NOTE",
        0x32 => "LC_BUILD_VERSION",
        0x8000_0033 => "LC_DYLD_EXPORTS_TRIE",
        0x8000_0034 => "LC_DYLD_CHAINED_FIXUPS",
        0x8000_0035 => "LC_FILESET_ENTRY",
        _ => return format!("LC_{cmd:#x}"),
    };
    name.to_string()
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
    /// Most protection the segment may be given later (mprotect), "rwx" style.
    pub max_protection: String,
    pub entropy: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachLoadCommand {
    /// `LC_SEGMENT_64` style (`LC_0x…` when unknown).
    pub name: String,
    /// Where the command starts in its image.
    pub offset: u64,
    pub size: u32,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachArch {
    pub cpu: String,
    pub bits: u8,
    pub file_type: String,
    pub flags: Vec<String>,
    /// LC_MAIN's entry (the __TEXT segment's address plus its offset), else LC_UNIXTHREAD's
    /// program counter, as dyld chooses; 0 when neither is there.
    pub entry_point: u64,
    pub uuid: Option<String>,
    /// A dylib's own install name (LC_ID_DYLIB).
    pub install_name: Option<String>,
    /// Every linked dylib, weak ones included, in load-command order.
    pub libraries: Vec<String>,
    /// The dylibs linked weakly (LC_LOAD_WEAK_DYLIB): the program runs without them, so a planted
    /// one on an @rpath is loaded (dylib hijacking).
    pub weak_libraries: Vec<String>,
    pub rpaths: Vec<String>,
    pub code_signature: bool,
    /// LC_ENCRYPTION_INFO with a non-zero cryptid (FairPlay-encrypted).
    pub encrypted: bool,
    pub load_commands: Vec<MachLoadCommand>,
    pub segments: Vec<MachSegment>,
    pub sections: Vec<MachSection>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    pub import_count: usize,
    pub export_count: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachSlice {
    pub cpu: String,
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct MachInfo {
    /// A universal (fat) binary.
    pub universal: bool,
    /// A universal binary's slices as its header lists them.
    pub slices: Vec<MachSlice>,
    /// The Mach-O images read: the file itself, or each universal slice that could be.
    pub architectures: Vec<MachArch>,
    /// Slices that could not be read, and why.
    pub errors: Vec<String>,
    /// Lies in the headers and load commands (each one LLVM refuses the file for, and the
    /// kernel would not load it), read past where possible; a universal slice's are prefixed
    /// `slice N (cpu): `.
    pub anomalies: Vec<String>,
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

/// The header flags set, named as `<mach-o/loader.h>` does (`MH_` dropped, lower case).
fn header_flags(f: u32) -> Vec<String> {
    const NAMES: [&str; 29] = [
        "noundefs",
        "incrlink",
        "dyldlink",
        "bindatload",
        "prebound",
        "split_segs",
        "lazy_init",
        "twolevel",
        "force_flat",
        "nomultidefs",
        "nofixprebinding",
        "prebindable",
        "allmodsbound",
        "subsections_via_symbols",
        "canonical",
        "weak_defines",
        "binds_to_weak",
        "allow_stack_execution",
        "root_safe",
        "setuid_safe",
        "no_reexported_dylibs",
        "pie",
        "dead_strippable_dylib",
        "has_tlv_descriptors",
        "no_heap_execution",
        "app_extension_safe",
        "nlist_outofsync_with_dyldinfo",
        "sim_support",
        "dylib_in_cache",
    ];
    let bit = |i: usize| if i < 28 { 1u32 << i } else { 1 << 31 };
    (0..NAMES.len())
        .filter(|&i| f & bit(i) != 0)
        .map(|i| NAMES[i].to_string())
        .collect()
}

fn arch(b: &[u8], limit: usize, budget: &Budget) -> Result<(MachArch, Vec<String>), ToolError> {
    let image = macho_commands::read(b, budget)?;
    let slice = |off: u64, size: u64| {
        let s = usize::try_from(off).unwrap_or(usize::MAX).min(b.len());
        &b[s..s
            .saturating_add(usize::try_from(size).unwrap_or(usize::MAX))
            .min(b.len())]
    };
    let mut segments = Vec::new();
    let mut sections = Vec::new();
    for seg in &image.segments {
        budget.items(1, "Mach-O segments")?;
        segments.push(MachSegment {
            name: seg.name.clone(),
            vmaddr: seg.vmaddr,
            vmsize: seg.vmsize,
            fileoff: seg.fileoff,
            filesize: seg.filesize,
            protection: prot(seg.initprot),
            max_protection: prot(seg.maxprot),
            entropy: budget.entropy(slice(seg.fileoff, seg.filesize), "Mach-O segments")?,
        });
        for s in &seg.sections {
            sections.push(MachSection {
                name: format!("{},{}", s.segname, s.sectname),
                address: s.addr,
                offset: s.offset,
                size: s.size,
                entropy: budget.entropy(slice(u64::from(s.offset), s.size), "Mach-O sections")?,
            });
        }
    }
    let mut anomalies = image.anomalies;
    // dyld prefers LC_MAIN, an offset from the image's start, which __TEXT maps.
    let entry_point = match (image.main_entry, image.thread_entry) {
        (Some(offset), _) => match image.segments.iter().find(|s| s.name == "__TEXT") {
            Some(text) => text.vmaddr.wrapping_sub(text.fileoff).wrapping_add(offset),
            None => {
                anomalies.push("LC_MAIN without a __TEXT segment to place it in".into());
                offset
            }
        },
        (None, Some(pc)) => pc,
        (None, None) => 0,
    };
    let (imports, import_count, exports, export_count) = bound_symbols(b, limit, budget)?;
    let library = |(_, name): &(u32, String)| name.clone();
    let arch = MachArch {
        cpu: cpu_name(image.header.cputype).to_string(),
        bits: if image.header.is_64 { 64 } else { 32 },
        file_type: file_type(image.header.filetype).to_string(),
        flags: header_flags(image.header.flags),
        entry_point,
        uuid: image.uuid.map(hex::encode_upper),
        install_name: image.install_name,
        libraries: image.libraries.iter().map(library).collect(),
        weak_libraries: image
            .libraries
            .iter()
            .filter(|(cmd, _)| *cmd == macho_commands::LC_LOAD_WEAK_DYLIB)
            .map(library)
            .collect(),
        rpaths: image.rpaths,
        code_signature: image.code_signature,
        encrypted: image.encrypted,
        load_commands: image
            .commands
            .iter()
            .map(|c| MachLoadCommand {
                name: command_name(c.cmd),
                offset: c.offset as u64,
                size: c.cmdsize,
            })
            .collect(),
        segments,
        sections,
        imports,
        exports,
        import_count,
        export_count,
    };
    Ok((arch, anomalies))
}

/// The imports (bind opcodes) and exports (export trie), read through goblin when it can parse
/// the image at all (it stops at the lies macho_commands reads past).
fn bound_symbols(
    b: &[u8],
    limit: usize,
    budget: &Budget,
) -> Result<(Vec<String>, usize, Vec<String>, usize), ToolError> {
    let Ok(m) = MachO::parse_lossy(b, 0) else {
        return Ok((Vec::new(), 0, Vec::new(), 0));
    };
    // goblin expands the bind opcodes' repeat counts as they claim: count them first.
    let (bind_entries, indexes_exist) = macho_parts::bind_entries(b, &m);
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
    let mut exports = macho_parts::exports(b, &m, budget)?;
    let (import_count, export_count) = (imports.len(), exports.len());
    imports.truncate(limit);
    exports.truncate(limit);
    Ok((imports, import_count, exports, export_count))
}

fn not_macho(e: impl std::fmt::Display) -> ToolError {
    ToolError::unsupported_format(format!("not a Mach-O file this parser can read: {e}"))
        .with_remediation("check identify_file; for a damaged file try strings or entropy")
}

/// Parses a Mach-O file, universal (32- or 64-bit header) or not, within `budget`.
pub fn macho_info(b: &[u8], limit: usize, budget: &Budget) -> Result<MachInfo, ToolError> {
    contain("Mach-O", || {
        let Some(arches) = macho_parts::fat_arches(b) else {
            if !macho_commands::has_magic(b) {
                return Err(not_macho("no Mach-O magic"));
            }
            let (arch, anomalies) = arch(b, limit, budget)?;
            return Ok(MachInfo {
                universal: false,
                slices: vec![],
                architectures: vec![arch],
                errors: vec![],
                anomalies,
            });
        };
        let arches = arches?;
        let mut info = MachInfo {
            universal: true,
            slices: arches
                .iter()
                .map(|a| MachSlice {
                    cpu: cpu_name(a.cputype).to_string(),
                    offset: a.offset,
                    size: a.size,
                })
                .collect(),
            architectures: Vec::new(),
            errors: Vec::new(),
            anomalies: Vec::new(),
        };
        for (i, fat) in arches.iter().enumerate() {
            let start = usize::try_from(fat.offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(usize::try_from(fat.size).unwrap_or(usize::MAX));
            let Some(slice) = b.get(start..end) else {
                info.errors.push(format!(
                    "slice {i} ({}) lies outside the file ({:#x}+{:#x})",
                    cpu_name(fat.cputype),
                    fat.offset,
                    fat.size
                ));
                continue;
            };
            if slice.starts_with(b"!<arch>") {
                info.errors
                    .push(format!("slice {i} is a static library archive"));
                continue;
            }
            if !macho_commands::has_magic(slice) {
                info.errors.push(format!("slice {i} is not a Mach-O image"));
                continue;
            }
            let (a, anomalies) = arch(slice, limit, budget)?;
            info.anomalies.extend(
                anomalies
                    .into_iter()
                    .map(|x| format!("slice {i} ({}): {x}", a.cpu)),
            );
            info.architectures.push(a);
        }
        Ok(info)
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
