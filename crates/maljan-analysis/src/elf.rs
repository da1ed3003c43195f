//! `elf_info`: ELF header, interpreter, needed libraries, sections with entropy, segments, imported
//! and exported symbols, and hardening (PIE, NX, RELRO, stripped, static).

use std::sync::Arc;

use goblin::elf::{Elf, program_header as ph, section_header as sh, sym};
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
};

pub fn machine_name(m: u16) -> &'static str {
    match m {
        3 => "x86",
        62 => "x86-64",
        40 => "ARM",
        183 => "AArch64",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "S390",
        2 => "SPARC",
        43 => "SPARC V9",
        243 => "RISC-V",
        258 => "LoongArch",
        42 => "SuperH",
        0 => "none",
        _ => "other",
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ElfSection {
    pub name: String,
    pub r#type: u32,
    pub address: u64,
    pub offset: u64,
    pub size: u64,
    /// "w", "a", "x" flags as readelf shows them.
    pub flags: String,
    pub entropy: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ElfSegment {
    pub r#type: String,
    pub offset: u64,
    pub vaddr: u64,
    pub file_size: u64,
    pub mem_size: u64,
    /// "rwx" permissions.
    pub flags: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ElfInfo {
    pub bits: u8,
    pub endianness: String,
    pub r#type: String,
    pub machine: String,
    pub os_abi: u8,
    pub entry_point: u64,
    pub interpreter: Option<String>,
    pub soname: Option<String>,
    pub needed: Vec<String>,
    pub rpaths: Vec<String>,
    pub pie: bool,
    /// The stack is not executable (PT_GNU_STACK without X).
    pub nx: bool,
    /// "full", "partial" or "none".
    pub relro: String,
    /// No .symtab.
    pub stripped: bool,
    /// No interpreter and no needed libraries.
    pub statically_linked: bool,
    pub sections: Vec<ElfSection>,
    pub segments: Vec<ElfSegment>,
    pub imported_symbols: Vec<String>,
    pub exported_symbols: Vec<String>,
    /// How many symbols each list had before `limit` cut it.
    pub imported_count: usize,
    pub exported_count: usize,
    pub anomalies: Vec<String>,
}

fn segment_type(t: u32) -> String {
    match t {
        ph::PT_NULL => "NULL".into(),
        ph::PT_LOAD => "LOAD".into(),
        ph::PT_DYNAMIC => "DYNAMIC".into(),
        ph::PT_INTERP => "INTERP".into(),
        ph::PT_NOTE => "NOTE".into(),
        ph::PT_PHDR => "PHDR".into(),
        ph::PT_TLS => "TLS".into(),
        ph::PT_GNU_EH_FRAME => "GNU_EH_FRAME".into(),
        ph::PT_GNU_STACK => "GNU_STACK".into(),
        ph::PT_GNU_RELRO => "GNU_RELRO".into(),
        0x6474_e553 => "GNU_PROPERTY".into(),
        other => format!("{other:#x}"),
    }
}

fn rwx(flags: u32) -> String {
    let mut s = String::new();
    s.push(if flags & ph::PF_R != 0 { 'r' } else { '-' });
    s.push(if flags & ph::PF_W != 0 { 'w' } else { '-' });
    s.push(if flags & ph::PF_X != 0 { 'x' } else { '-' });
    s
}

/// Parses an ELF file within `budget`. `limit` caps each symbol list.
///
/// The kernel and ld.so read only the program headers; section headers are for tools, and a
/// program hides from tools by lying in them (a table past the end of the file, a huge count, a
/// string-table index out of range). When goblin refuses the section headers, the file is read
/// again without them, from the program headers and the dynamic segment as the loader (and
/// `readelf -D`) reads it, and the refusal is an anomaly.
pub fn elf_info(b: &[u8], limit: usize, budget: &Budget) -> Result<ElfInfo, ToolError> {
    contain("ELF", || {
        let refused = |e: &goblin::error::Error| {
            ToolError::unsupported_format(format!("not an ELF file this parser can read: {e}"))
                .with_remediation("check identify_file; for a damaged ELF try strings or entropy")
        };
        let strict = match Elf::parse(b) {
            Ok(elf) => return build(b, &elf, limit, budget, Vec::new()),
            Err(e) => e,
        };
        let copy = without_section_headers(b).ok_or_else(|| refused(&strict))?;
        let elf = Elf::parse(&copy).map_err(|_| refused(&strict))?;
        let anomaly = format!(
            "section headers unreadable ({strict}): read from the program headers, as the \
             kernel and ld.so do"
        );
        build(b, &elf, limit, budget, vec![anomaly])
    })
}

/// A copy of an ELF file whose header names no section headers (e_shoff, e_shnum and
/// e_shstrndx zero); None when the file is too short for an ELF header.
fn without_section_headers(b: &[u8]) -> Option<Vec<u8>> {
    let is_64 = *b.get(4)? == 2;
    let (shoff, shoff_len, shnum) = if is_64 {
        (0x28, 8, 0x3c)
    } else {
        (0x20, 4, 0x30)
    };
    if b.len() < shnum + 4 {
        return None;
    }
    let mut copy = b.to_vec();
    copy[shoff..shoff + shoff_len].fill(0);
    copy[shnum..shnum + 4].fill(0);
    Some(copy)
}

fn build(
    b: &[u8],
    elf: &Elf<'_>,
    limit: usize,
    budget: &Budget,
    mut anomalies: Vec<String>,
) -> Result<ElfInfo, ToolError> {
    // Read again without the section headers it has: their absence is not the packer's mark.
    let sections_refused = !anomalies.is_empty();
    let sections: Vec<ElfSection> = elf
        .section_headers
        .iter()
        .map(|s| {
            budget.items(1, "sections")?;
            let data = if s.sh_type == sh::SHT_NOBITS {
                &[][..]
            } else {
                let start = (s.sh_offset as usize).min(b.len());
                &b[start..start.saturating_add(s.sh_size as usize).min(b.len())]
            };
            let mut flags = String::new();
            if s.sh_flags & u64::from(sh::SHF_WRITE) != 0 {
                flags.push('w');
            }
            if s.sh_flags & u64::from(sh::SHF_ALLOC) != 0 {
                flags.push('a');
            }
            if s.sh_flags & u64::from(sh::SHF_EXECINSTR) != 0 {
                flags.push('x');
            }
            let name = elf.shdr_strtab.get_at(s.sh_name).unwrap_or("");
            budget.scan(name.len(), "section names")?;
            Ok(ElfSection {
                name: name.to_string(),
                r#type: s.sh_type,
                address: s.sh_addr,
                offset: s.sh_offset,
                size: s.sh_size,
                flags,
                entropy: budget.entropy(data, "sections")?,
            })
        })
        .collect::<Result<_, ToolError>>()?;
    budget.items(elf.program_headers.len(), "program headers")?;
    let segments: Vec<ElfSegment> = elf
        .program_headers
        .iter()
        .map(|p| ElfSegment {
            r#type: segment_type(p.p_type),
            offset: p.p_offset,
            vaddr: p.p_vaddr,
            file_size: p.p_filesz,
            mem_size: p.p_memsz,
            flags: rwx(p.p_flags),
        })
        .collect();
    let has_relro = elf
        .program_headers
        .iter()
        .any(|p| p.p_type == ph::PT_GNU_RELRO);
    let bind_now = elf.dynamic.as_ref().is_some_and(|d| {
        d.dyns.iter().any(|e| {
            (e.d_tag == goblin::elf::dynamic::DT_FLAGS
                && e.d_val & goblin::elf::dynamic::DF_BIND_NOW != 0)
                || (e.d_tag == goblin::elf::dynamic::DT_FLAGS_1
                    && e.d_val & goblin::elf::dynamic::DF_1_NOW != 0)
                || e.d_tag == goblin::elf::dynamic::DT_BIND_NOW
        })
    });
    let nx = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == ph::PT_GNU_STACK)
        .is_some_and(|p| p.p_flags & ph::PF_X == 0);
    let mut imported = Vec::new();
    let mut exported = Vec::new();
    for s in elf.dynsyms.iter() {
        budget.items(1, "dynamic symbols")?;
        let name = elf.dynstrtab.get_at(s.st_name).unwrap_or("");
        if name.is_empty() {
            continue;
        }
        // Every symbol may name the same long string: copying is what is charged.
        budget.scan(name.len(), "symbol names")?;
        if s.st_shndx == 0 {
            imported.push(name.to_string());
        } else if s.st_bind() != sym::STB_LOCAL
            && (s.st_type() == sym::STT_FUNC || s.st_type() == sym::STT_OBJECT)
        {
            exported.push(name.to_string());
        }
    }
    let (imported_count, exported_count) = (imported.len(), exported.len());
    imported.truncate(limit);
    exported.truncate(limit);
    for p in &segments {
        if p.r#type == "LOAD" && p.flags == "rwx" {
            anomalies.push(format!(
                "a LOAD segment at {:#x} is writable and executable",
                p.vaddr
            ));
        }
    }
    if elf.section_headers.is_empty() && !elf.program_headers.is_empty() && !sections_refused {
        anomalies.push("no section headers (stripped or packed, e.g. UPX)".into());
    }
    if memchr::memmem::find(&b[..b.len().min(1 << 20)], b"UPX!").is_some() {
        anomalies.push("UPX packer signature present".into());
    }
    if let Some(entry_seg) = segments
        .iter()
        .find(|p| p.r#type == "LOAD" && elf.entry >= p.vaddr && elf.entry < p.vaddr + p.mem_size)
    {
        if !entry_seg.flags.contains('x') {
            anomalies.push("the entry point lies in a non-executable segment".into());
        }
    } else if elf.entry != 0 {
        anomalies.push("the entry point lies outside every LOAD segment".into());
    }
    let interpreter = elf.interpreter.map(str::to_string);
    Ok(ElfInfo {
        bits: if elf.is_64 { 64 } else { 32 },
        endianness: if elf.little_endian { "little" } else { "big" }.into(),
        r#type: match elf.header.e_type {
            1 => "relocatable",
            2 => "executable",
            3 => "shared_object",
            4 => "core",
            _ => "other",
        }
        .into(),
        machine: machine_name(elf.header.e_machine).into(),
        os_abi: elf.header.e_ident[7],
        entry_point: elf.entry,
        statically_linked: interpreter.is_none() && elf.libraries.is_empty(),
        interpreter,
        soname: elf.soname.map(str::to_string),
        needed: elf.libraries.iter().map(|s| s.to_string()).collect(),
        rpaths: elf
            .rpaths
            .iter()
            .chain(elf.runpaths.iter())
            .map(|s| s.to_string())
            .collect(),
        pie: elf.header.e_type == 3 && elf.interpreter.is_some(),
        nx,
        relro: if has_relro && bind_now {
            "full"
        } else if has_relro {
            "partial"
        } else {
            "none"
        }
        .into(),
        stripped: !elf
            .section_headers
            .iter()
            .any(|s| s.sh_type == sh::SHT_SYMTAB),
        sections,
        segments,
        imported_symbols: imported,
        exported_symbols: exported,
        imported_count,
        exported_count,
        anomalies,
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElfInfoArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Most imported / exported symbols listed.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
}

fn default_limit() -> usize {
    2000
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ElfInfoOutput {
    pub read_path: String,
    pub size: u64,
    pub entropy: f64,
    #[serde(flatten)]
    pub info: ElfInfo,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "elf_info",
            "Linux/Unix ELF structure: header, interpreter, needed libraries, sections with entropy, \
             segments, imported and exported symbols, hardening (PIE, NX, RELRO) and anomalies.",
        )
        .title("ELF structure")
        .timeout_s(60),
        move |ctx, a: ElfInfoArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(b.len(), &cancel);
                    let info = elf_info(b, a.limit.max(1), &budget)?;
                    let entropy = budget.entropy(b, "the whole file")?;
                    Ok(ElfInfoOutput { read_path: s.read_path(), size: b.len() as u64, entropy, info })
                })
                .await
            }
        },
    );
}
