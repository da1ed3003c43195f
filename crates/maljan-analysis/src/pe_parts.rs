//! The parts of pe_info: sections, resources, overlay, PDB, Rich header, and the flag names.
//! Every offset comes from the loader's map ([`PeMap`]).

use goblin::pe::PE;
use maljan_server::ToolError;
use schemars::JsonSchema;
use serde::Serialize;

use crate::{
    budget::Budget,
    common::{le_u16, le_u32},
    identify::identify,
    pe_map::PeMap,
};

/// A section as its header writes it; its entropy is that of the bytes the loader reads for it
/// (from its raw pointer rounded down, clipped to the file and its aligned virtual size).
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct PeSection {
    pub name: String,
    pub virtual_address: u32,
    pub virtual_size: u32,
    /// PointerToRawData as written.
    pub raw_offset: u32,
    /// SizeOfRawData as written.
    pub raw_size: u32,
    pub entropy: f64,
    /// read, write, execute, code, initialized_data, uninitialized_data, discardable, shared.
    pub characteristics: Vec<String>,
}

/// Section `index` of the table, with the entropy of what the loader reads for it.
pub(crate) fn section(
    map: &PeMap<'_>,
    index: usize,
    budget: &Budget,
) -> Result<PeSection, ToolError> {
    budget.items(1, "sections")?;
    let s = &map.sections[index];
    let c = s.characteristics;
    let flags = [
        (0x0000_0020, "code"),
        (0x0000_0040, "initialized_data"),
        (0x0000_0080, "uninitialized_data"),
        (0x0200_0000, "discardable"),
        (0x1000_0000, "shared"),
        (0x2000_0000, "execute"),
        (0x4000_0000, "read"),
        (0x8000_0000, "write"),
    ];
    Ok(PeSection {
        name: map.section_name(index),
        virtual_address: s.virtual_address,
        virtual_size: s.virtual_size,
        raw_offset: s.raw_pointer,
        raw_size: s.raw_size,
        entropy: budget.entropy(map.section_bytes(index), "sections")?,
        characteristics: flags
            .iter()
            .filter(|(bit, _)| c & bit != 0)
            .map(|(_, n)| n.to_string())
            .collect(),
    })
}

/// The file offset the loader reads `rva` from, over goblin's view (see
/// [`crate::pe_map::goblin_offset`]); pe_info's own readers use [`PeMap::offset`].
pub fn rva_to_offset(pe: &PE<'_>, rva: u32) -> Option<usize> {
    crate::pe_map::goblin_offset(pe, rva)
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Overlay {
    pub offset: u64,
    pub size: u64,
    pub entropy: f64,
    /// What the overlay data is (identify_file's kind: zip, pe, data, …).
    pub kind: String,
}

/// The data after what the headers describe (see [`PeMap::overlay_start`]).
pub(crate) fn overlay(map: &PeMap<'_>, budget: &Budget) -> Result<Option<Overlay>, ToolError> {
    let Some(end) = map.overlay_start() else {
        return Ok(None);
    };
    let b = map.b;
    let data = &b[end as usize..];
    let head = &data[..data.len().min(1 << 20)];
    budget.scan(head.len(), "overlay")?;
    Ok(Some(Overlay {
        offset: end,
        size: b.len() as u64 - end,
        entropy: budget.entropy(data, "overlay")?,
        kind: identify(head).kind,
    }))
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Pdb {
    pub path: String,
    pub guid: Option<String>,
    pub age: u32,
}

pub fn pdb(pe: &PE<'_>) -> Option<Pdb> {
    let debug = pe.debug_data.as_ref()?;
    if let Some(cv) = &debug.codeview_pdb70_debug_info {
        let g = cv.signature;
        let guid = format!(
            "{:08X}-{:04X}-{:04X}-{}-{}",
            u32::from_le_bytes([g[0], g[1], g[2], g[3]]),
            u16::from_le_bytes([g[4], g[5]]),
            u16::from_le_bytes([g[6], g[7]]),
            hex::encode_upper(&g[8..10]),
            hex::encode_upper(&g[10..16])
        );
        return Some(Pdb {
            path: c_str(cv.filename),
            guid: Some(guid),
            age: cv.age,
        });
    }
    debug.codeview_pdb20_debug_info.as_ref().map(|cv| Pdb {
        path: c_str(cv.filename),
        guid: None,
        age: cv.age,
    })
}

fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct RichEntry {
    pub product: u16,
    pub build: u16,
    pub count: u32,
}

pub fn rich(pe: &PE<'_>) -> Option<Vec<RichEntry>> {
    let rich = pe.header.rich_header.as_ref()?;
    let entries: Vec<RichEntry> = rich
        .metadatas()
        .filter_map(Result::ok)
        .take(256)
        .map(|m| RichEntry {
            product: m.product,
            build: m.build,
            count: m.use_count,
        })
        .collect();
    Some(entries)
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct PeResource {
    /// RT_ICON, RT_VERSION, RT_RCDATA, … or the type's own name / number.
    pub r#type: String,
    pub name: String,
    pub language: u32,
    pub offset: u64,
    pub size: u32,
    pub entropy: f64,
    /// What the data is (identify_file's kind): an embedded PE or archive stands out.
    pub kind: String,
}

fn resource_type_name(id: u32) -> String {
    let name = match id {
        1 => "RT_CURSOR",
        2 => "RT_BITMAP",
        3 => "RT_ICON",
        4 => "RT_MENU",
        5 => "RT_DIALOG",
        6 => "RT_STRING",
        7 => "RT_FONTDIR",
        8 => "RT_FONT",
        9 => "RT_ACCELERATOR",
        10 => "RT_RCDATA",
        11 => "RT_MESSAGETABLE",
        12 => "RT_GROUP_CURSOR",
        14 => "RT_GROUP_ICON",
        16 => "RT_VERSION",
        17 => "RT_DLGINCLUDE",
        19 => "RT_PLUGPLAY",
        20 => "RT_VXD",
        21 => "RT_ANICURSOR",
        22 => "RT_ANIICON",
        23 => "RT_HTML",
        24 => "RT_MANIFEST",
        _ => return id.to_string(),
    };
    name.to_string()
}

/// Walks the resource tree (type / name / language) from its root's file offset; every entry and
/// every byte of resource data read is charged to `budget` (a hostile tree points many entries at
/// one directory or one large blob).
pub(crate) fn resources(
    map: &PeMap<'_>,
    root: usize,
    limit: usize,
    budget: &Budget,
) -> Result<Vec<PeResource>, ToolError> {
    let mut tree = ResourceTree {
        b: map.b,
        map,
        root,
        limit,
        budget,
        path: Vec::new(),
        out: Vec::new(),
    };
    tree.walk(root, 0)?;
    Ok(tree.out)
}

struct ResourceTree<'a, 'b> {
    b: &'a [u8],
    map: &'a PeMap<'a>,
    root: usize,
    limit: usize,
    budget: &'a Budget<'b>,
    /// The (id, label) of each level above the entry being read.
    path: Vec<(Option<u32>, String)>,
    out: Vec<PeResource>,
}

impl ResourceTree<'_, '_> {
    fn walk(&mut self, dir: usize, depth: usize) -> Result<(), ToolError> {
        let (b, root) = (self.b, self.root);
        if depth > 3 || self.out.len() >= self.limit {
            return Ok(());
        }
        let (Some(named), Some(ids)) = (le_u16(b, dir + 12), le_u16(b, dir + 14)) else {
            return Ok(());
        };
        let count = usize::from(named) + usize::from(ids);
        for i in 0..count {
            self.budget.items(1, "resource entries")?;
            let entry = dir + 16 + i * 8;
            let (Some(name), Some(target)) = (le_u32(b, entry), le_u32(b, entry + 4)) else {
                return Ok(());
            };
            let label = if name & 0x8000_0000 != 0 {
                (
                    None,
                    resource_string(b, root + (name & 0x7fff_ffff) as usize),
                )
            } else {
                (Some(name), name.to_string())
            };
            self.path.push(label);
            if target & 0x8000_0000 != 0 {
                let sub = root + (target & 0x7fff_ffff) as usize;
                if sub != dir {
                    self.walk(sub, depth + 1)?;
                }
            } else if let (Some(rva), Some(size)) = (
                le_u32(b, root + target as usize),
                le_u32(b, root + target as usize + 4),
            ) {
                self.leaf(rva, size)?;
            }
            self.path.pop();
            if self.out.len() >= self.limit {
                return Ok(());
            }
        }
        Ok(())
    }

    fn leaf(&mut self, rva: u32, size: u32) -> Result<(), ToolError> {
        let offset = self.map.offset(rva);
        let data = offset.and_then(|o| self.b.get(o..o.saturating_add(size as usize)));
        let r#type = match self.path.first() {
            Some((Some(id), _)) => resource_type_name(*id),
            Some((None, s)) => s.clone(),
            None => String::new(),
        };
        let (entropy, kind) = match data {
            Some(d) => {
                let head = &d[..d.len().min(1 << 16)];
                self.budget.scan(head.len(), "resources")?;
                (self.budget.entropy(d, "resources")?, identify(head).kind)
            }
            None => (0.0, "outside the file".into()),
        };
        self.out.push(PeResource {
            r#type,
            name: self.path.get(1).map(|p| p.1.clone()).unwrap_or_default(),
            language: self.path.get(2).and_then(|p| p.0).unwrap_or(0),
            offset: offset.unwrap_or(0) as u64,
            size,
            entropy,
            kind,
        });
        Ok(())
    }
}

fn resource_string(b: &[u8], at: usize) -> String {
    let Some(len) = le_u16(b, at) else {
        return String::new();
    };
    let units: Vec<u16> = (0..usize::from(len).min(256))
        .filter_map(|i| le_u16(b, at + 2 + i * 2))
        .collect();
    String::from_utf16_lossy(&units)
}

pub fn subsystem_name(s: u16) -> &'static str {
    match s {
        1 => "native",
        2 => "windows_gui",
        3 => "windows_cui",
        5 => "os2_cui",
        7 => "posix_cui",
        9 => "windows_ce_gui",
        10 => "efi_application",
        11 => "efi_boot_service_driver",
        12 => "efi_runtime_driver",
        13 => "efi_rom",
        14 => "xbox",
        16 => "windows_boot_application",
        _ => "unknown",
    }
}

pub fn characteristics(c: u16) -> Vec<String> {
    [
        (0x0001, "relocs_stripped"),
        (0x0002, "executable_image"),
        (0x0020, "large_address_aware"),
        (0x0100, "32bit_machine"),
        (0x0200, "debug_stripped"),
        (0x1000, "system"),
        (0x2000, "dll"),
    ]
    .iter()
    .filter(|(bit, _)| c & bit != 0)
    .map(|(_, n)| n.to_string())
    .collect()
}

pub fn dll_characteristics(c: u16) -> Vec<String> {
    [
        (0x0020, "high_entropy_va"),
        (0x0040, "dynamic_base"),
        (0x0080, "force_integrity"),
        (0x0100, "nx_compat"),
        (0x0200, "no_isolation"),
        (0x0400, "no_seh"),
        (0x0800, "no_bind"),
        (0x1000, "appcontainer"),
        (0x2000, "wdm_driver"),
        (0x4000, "guard_cf"),
        (0x8000, "terminal_server_aware"),
    ]
    .iter()
    .filter(|(bit, _)| c & bit != 0)
    .map(|(_, n)| n.to_string())
    .collect()
}
