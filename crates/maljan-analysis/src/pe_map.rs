//! The headers of a PE and where each RVA lies in the file, read the way the Windows loader and
//! pefile read them. Every table pe_info reports (imports, delay and bound imports, exports, TLS,
//! resources) is found through [`PeMap::offset`] and read through [`PeMap::at`], so one set of
//! rules decides what a hostile layout means:
//!
//! - a section's raw pointer is rounded down to 0x200 (the loader reads whole sectors), except in
//!   a low-alignment image (SectionAlignment < 0x1000) whose section is mapped flat, raw pointer
//!   equal to its address;
//! - a section's address is rounded down to the SectionAlignment (the FileAlignment in a
//!   low-alignment image);
//! - a section spans max(SizeOfRawData, VirtualSize) in memory, only VirtualSize when its raw data
//!   would run past the end of the file, and never into the next section's address;
//! - its bytes on disk end at PointerToRawData + SizeOfRawData and at the end of the file: past
//!   them memory reads as zeros;
//! - an RVA outside every section but inside the file is its own file offset (the headers, or data
//!   a tiny PE leaves after its sections: an import table "in the overlay");
//! - a header that runs past the end of the file reads as zeros, as the loader maps it;
//! - at most 16 data directories are read, fewer when NumberOfRvaAndSizes says so;
//! - the section table ends at NumberOfSections, at an entry of zeros, at the end of the file, or
//!   at 2048 entries, whichever comes first.

use crate::common::{le_u16, le_u32, le_u64};

/// Most section headers read (pefile's MAX_SECTIONS; Windows 10 loads up to 96 in an image
/// but tools must survive the 65,535 a header may claim).
const MAX_SECTIONS: usize = 0x800;
/// The loader rounds raw pointers down to whole 512-byte sectors.
const SECTOR: u32 = 0x200;

/// One entry of the section table, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RawSection {
    pub name: [u8; 8],
    pub virtual_size: u32,
    pub virtual_address: u32,
    pub raw_size: u32,
    pub raw_pointer: u32,
    pub characteristics: u32,
}

/// A section as the loader maps it.
#[derive(Debug, Clone, Copy)]
struct Mapped {
    /// Index in the section table.
    index: usize,
    /// Where it starts in memory (its address rounded down to the alignment).
    start: u64,
    /// Where it ends in memory (exclusive).
    end: u64,
    /// Where its bytes start in the file.
    file_start: u64,
    /// Where its bytes end in the file (exclusive, never past the end of the file).
    file_end: u64,
}

/// The optional header's fields pe_info reports (zeros where the header is cut short).
#[derive(Debug, Clone, Default)]
pub(crate) struct Optional {
    pub linker: (u8, u8),
    pub entry: u32,
    pub image_base: u64,
    pub section_alignment: u32,
    pub file_alignment: u32,
    pub os_version: (u16, u16),
    pub size_of_image: u32,
    pub size_of_headers: u32,
    pub check_sum: u32,
    pub subsystem: u16,
    pub dll_characteristics: u16,
    pub number_of_rva_and_sizes: u32,
}

/// The headers of a PE and the loader's map from RVAs to file offsets.
pub(crate) struct PeMap<'a> {
    pub b: &'a [u8],
    pub machine: u16,
    pub characteristics: u16,
    pub time_date_stamp: u32,
    /// PointerToSymbolTable and NumberOfSymbols: the COFF string table after the symbols holds
    /// the long section names (`/4`) MinGW writes.
    symbols: (u32, u32),
    pub declared_sections: u16,
    /// File offset of the optional header.
    pub optional_at: usize,
    pub size_of_optional: u16,
    pub is_64: bool,
    pub optional: Optional,
    /// (RVA, size) of each data directory present.
    pub directories: Vec<(u32, u32)>,
    /// The section table in file order.
    pub sections: Vec<RawSection>,
    /// The sections in address order, as mapped.
    mapped: Vec<Mapped>,
    /// What the headers get wrong (for the anomalies).
    pub faults: Vec<String>,
}

/// Reads `n` bytes at `at` with zeros past the end of the file (the loader maps missing header
/// bytes as zeros).
fn padded<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(rest) = b.get(at..) {
        let n = rest.len().min(N);
        out[..n].copy_from_slice(&rest[..n]);
    }
    out
}

fn u16_of(h: &[u8], at: usize) -> u16 {
    le_u16(h, at).unwrap_or(0)
}
fn u32_of(h: &[u8], at: usize) -> u32 {
    le_u32(h, at).unwrap_or(0)
}

impl<'a> PeMap<'a> {
    /// Reads the headers; None without `MZ`, a `PE\0\0` signature inside the file and a whole
    /// COFF header.
    pub fn parse(b: &'a [u8]) -> Option<Self> {
        if !b.starts_with(b"MZ") {
            return None;
        }
        let pe = le_u32(b, 0x3c)? as usize;
        if b.get(pe..pe.checked_add(4)?)? != b"PE\0\0" {
            return None;
        }
        let coff = b.get(pe + 4..pe + 24)?;
        let optional_at = pe + 24;
        let mut map = PeMap {
            b,
            machine: u16_of(coff, 0),
            declared_sections: u16_of(coff, 2),
            time_date_stamp: u32_of(coff, 4),
            symbols: (u32_of(coff, 8), u32_of(coff, 12)),
            size_of_optional: u16_of(coff, 16),
            characteristics: u16_of(coff, 18),
            optional_at,
            is_64: false,
            optional: Optional::default(),
            directories: Vec::new(),
            sections: Vec::new(),
            mapped: Vec::new(),
            faults: Vec::new(),
        };
        map.read_optional();
        map.read_sections();
        map.map_sections();
        Some(map)
    }

    fn read_optional(&mut self) {
        let (b, o) = (self.b, self.optional_at);
        let h: [u8; 240] = padded(b, o);
        let magic = u16_of(&h, 0);
        self.is_64 = magic == 0x20b;
        if magic != 0x10b && magic != 0x20b {
            self.faults.push(format!(
                "optional header magic {magic:#x} is neither PE32 nor PE32+: read as PE32"
            ));
        }
        let (image_base, dirs_at, count_at) = if self.is_64 {
            (le_u64(&h, 24).unwrap_or(0), 112, 108)
        } else {
            (u64::from(u32_of(&h, 28)), 96, 92)
        };
        self.optional = Optional {
            linker: (h[2], h[3]),
            entry: u32_of(&h, 16),
            image_base,
            section_alignment: u32_of(&h, 32),
            file_alignment: u32_of(&h, 36),
            os_version: (u16_of(&h, 40), u16_of(&h, 42)),
            size_of_image: u32_of(&h, 56),
            size_of_headers: u32_of(&h, 60),
            check_sum: u32_of(&h, 64),
            subsystem: u16_of(&h, 68),
            dll_characteristics: u16_of(&h, 70),
            number_of_rva_and_sizes: u32_of(&h, count_at),
        };
        let declared = self.optional.number_of_rva_and_sizes & 0x7fff_ffff;
        let needed = dirs_at + 8 * declared.min(16) as usize;
        if b.len() < o + needed {
            self.faults.push(format!(
                "the optional header is cut short by the end of the file ({} of its {needed} \
                 bytes): the rest read as zeros",
                b.len().saturating_sub(o)
            ));
        }
        if declared > 16 {
            self.faults.push(format!(
                "NumberOfRvaAndSizes is {declared}: only the 16 directories there are read"
            ));
        }
        for i in 0..declared.min(16) as usize {
            let at = o + dirs_at + 8 * i;
            if at >= b.len() {
                break;
            }
            let d: [u8; 8] = padded(b, at);
            self.directories.push((u32_of(&d, 0), u32_of(&d, 4)));
        }
    }

    fn read_sections(&mut self) {
        let table = self.optional_at + usize::from(self.size_of_optional);
        let declared = usize::from(self.declared_sections);
        if declared > MAX_SECTIONS {
            self.faults.push(format!(
                "the COFF header claims {declared} sections: at most {MAX_SECTIONS} read"
            ));
        }
        for i in 0..declared.min(MAX_SECTIONS) {
            let at = table + 40 * i;
            let Some(raw) = self.b.get(at..at + 40) else {
                self.faults.push(format!(
                    "the section table ends with the file after {i} of {declared} sections"
                ));
                break;
            };
            if raw.iter().all(|&c| c == 0) {
                if i + 1 < declared {
                    self.faults.push(format!(
                        "section header {i} of {declared} is all zeros: the table ends there"
                    ));
                }
                break;
            }
            let mut name = [0u8; 8];
            name.copy_from_slice(&raw[..8]);
            self.sections.push(RawSection {
                name,
                virtual_size: u32_of(raw, 8),
                virtual_address: u32_of(raw, 12),
                raw_size: u32_of(raw, 16),
                raw_pointer: u32_of(raw, 20),
                characteristics: u32_of(raw, 36),
            });
        }
    }

    /// Where each section lies in memory and in the file, in address order.
    fn map_sections(&mut self) {
        let (sa, fa) = (
            self.optional.section_alignment,
            self.optional.file_alignment,
        );
        let len = self.b.len() as u64;
        let mut order: Vec<usize> = (0..self.sections.len()).collect();
        order.sort_by_key(|&i| self.sections[i].virtual_address);
        let mut mapped = Vec::with_capacity(order.len());
        for (k, &i) in order.iter().enumerate() {
            let s = &self.sections[i];
            let file_start = u64::from(raw_pointer(s, sa));
            let start = u64::from(aligned_address(s.virtual_address, sa, fa));
            let raw_fits = len.saturating_sub(file_start) >= u64::from(s.raw_size);
            let mut size = if raw_fits {
                u64::from(s.raw_size.max(s.virtual_size))
            } else {
                u64::from(s.virtual_size)
            };
            // The loader maps VirtualSize rounded up to the alignment and no more: raw data past
            // it is not in memory (pefile maps it while no section follows).
            let aligned_virtual = aligned_size(s.virtual_size, sa, fa);
            if let Some(v) = aligned_virtual {
                size = size.min(v);
            }
            let next = order
                .get(k + 1)
                .map(|&n| u64::from(self.sections[n].virtual_address));
            if let Some(next) = next
                && next > u64::from(s.virtual_address)
                && start + size > next
            {
                size = next - start;
            }
            let mut file_end = (u64::from(s.raw_pointer) + u64::from(s.raw_size)).min(len);
            if let Some(v) = aligned_virtual {
                file_end = file_end.min(file_start + v);
            }
            mapped.push(Mapped {
                index: i,
                start,
                end: start + size,
                file_start,
                file_end: file_end.max(file_start.min(len)),
            });
            if !s.raw_pointer.is_multiple_of(SECTOR) && s.raw_size != 0 && !flat(s, sa) {
                self.faults.push(format!(
                    "section {} has an unaligned raw pointer {:#x}: read from {:#x}, as the \
                     loader rounds it down",
                    section_name(s),
                    s.raw_pointer,
                    file_start
                ));
            }
            if u64::from(s.raw_pointer) + u64::from(s.raw_size) > len && s.raw_size != 0 {
                self.faults.push(format!(
                    "section {}'s raw data runs past the end of the file",
                    section_name(s)
                ));
            }
        }
        self.mapped = mapped;
    }

    /// The section (table index) holding `rva`, as pefile's get_section_by_rva finds it.
    pub fn section_of(&self, rva: u32) -> Option<usize> {
        self.mapped_of(rva).map(|m| m.index)
    }

    fn mapped_of(&self, rva: u32) -> Option<&Mapped> {
        let rva = u64::from(rva);
        self.mapped.iter().find(|m| m.start <= rva && rva < m.end)
    }

    /// The file offset the loader reads `rva` from; None when it lies in no section and past the
    /// end of the file.
    pub fn offset(&self, rva: u32) -> Option<usize> {
        match self.mapped_of(rva) {
            Some(m) => usize::try_from(u64::from(rva) - m.start + m.file_start).ok(),
            None => ((rva as usize) < self.b.len()).then_some(rva as usize),
        }
    }

    /// The bytes the image holds from `rva` on, up to the end of what the file backs there
    /// (its section's raw data, or the file): memory past them reads as zeros. None when the
    /// RVA maps to nothing at all.
    pub fn at(&self, rva: u32) -> Option<&'a [u8]> {
        match self.mapped_of(rva) {
            Some(m) => {
                let from = u64::from(rva) - m.start + m.file_start;
                let from = usize::try_from(from.min(m.file_end)).ok()?;
                let to = usize::try_from(m.file_end).ok()?;
                Some(self.b.get(from..to).unwrap_or(&[]))
            }
            None => self.b.get(rva as usize..).filter(|r| !r.is_empty()),
        }
    }

    pub fn u16(&self, rva: u32) -> Option<u16> {
        self.at(rva).map(|r| u16_of(&padded::<2>(r, 0), 0))
    }
    pub fn u32(&self, rva: u32) -> Option<u32> {
        self.at(rva).map(|r| u32_of(&padded::<4>(r, 0), 0))
    }
    pub fn u64(&self, rva: u32) -> Option<u64> {
        self.at(rva)
            .map(|r| le_u64(&padded::<8>(r, 0), 0).unwrap_or(0))
    }
    /// `N` bytes at `rva`, zeros where the file backs none of them.
    pub fn bytes<const N: usize>(&self, rva: u32) -> Option<[u8; N]> {
        self.at(rva).map(|r| padded::<N>(r, 0))
    }

    /// The NUL-terminated string at `rva`, at most `max` bytes (None when the RVA maps nowhere).
    pub fn c_str(&self, rva: u32, max: usize) -> Option<&'a [u8]> {
        let r = self.at(rva)?;
        let r = &r[..r.len().min(max)];
        Some(&r[..memchr::memchr(0, r).unwrap_or(r.len())])
    }

    /// Section `index`'s name: as written, or the long name a `/N` name points at in the COFF
    /// string table.
    pub fn section_name(&self, index: usize) -> String {
        let s = &self.sections[index];
        let short = section_name(s);
        let long = short
            .strip_prefix('/')
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|_| self.symbols.0 != 0)
            .and_then(|n| {
                let table = u64::from(self.symbols.0) + 18 * u64::from(self.symbols.1);
                let at = usize::try_from(table + n).ok()?;
                let rest = self.b.get(at..)?;
                let rest = &rest[..rest.len().min(256)];
                let end = memchr::memchr(0, rest)?;
                Some(String::from_utf8_lossy(&rest[..end]).into_owned())
            });
        long.unwrap_or(short)
    }

    /// Data directory `i` when present and non-zero.
    pub fn directory(&self, i: usize) -> Option<(u32, u32)> {
        self.directories.get(i).copied().filter(|d| d.0 != 0)
    }

    /// The file bytes section `index` covers as the loader reads them.
    pub fn section_bytes(&self, index: usize) -> &'a [u8] {
        self.mapped
            .iter()
            .find(|m| m.index == index)
            .and_then(|m| self.b.get(m.file_start as usize..m.file_end as usize))
            .unwrap_or(&[])
    }

    /// Where the data the headers describe ends, as pefile finds it — the optional header, each
    /// section's raw data and each data directory but the certificates (which Authenticode
    /// places after the image) — and, as the loader maps them, never before SizeOfHeaders. The
    /// headers and a section whose raw data runs past the end of the file cover the file to its
    /// end (pefile leaves them out, and calls the bytes they map overlay); a directory that
    /// claims more than the file holds is left out (its size is not the loader's business).
    /// None when the file ends there.
    pub fn overlay_start(&self) -> Option<u64> {
        let len = self.b.len() as u64;
        let mut end = u64::from(self.optional.size_of_headers).min(len);
        let mut cover = |offset: u64, size: u64, clip: bool| {
            let e = offset + size;
            let e = if clip && offset < len { e.min(len) } else { e };
            if e > end && e <= len {
                end = e;
            }
        };
        cover(
            self.optional_at as u64,
            u64::from(self.size_of_optional),
            true,
        );
        for s in &self.sections {
            cover(u64::from(s.raw_pointer), u64::from(s.raw_size), true);
        }
        for (i, &(rva, size)) in self.directories.iter().enumerate() {
            if i == 4 {
                continue;
            }
            if let Some(at) = self.offset(rva) {
                cover(at as u64, u64::from(size), false);
            }
        }
        (len > end).then_some(end)
    }
}

/// A low-alignment image maps this section flat: its raw pointer is its address.
fn flat(s: &RawSection, section_alignment: u32) -> bool {
    section_alignment < 0x1000 && s.raw_pointer == s.virtual_address
}

/// Where the loader reads a section's bytes from.
fn raw_pointer(s: &RawSection, section_alignment: u32) -> u32 {
    if flat(s, section_alignment) {
        s.raw_pointer
    } else {
        s.raw_pointer & !(SECTOR - 1)
    }
}

/// A section's address rounded down to the alignment (the FileAlignment when the
/// SectionAlignment is below a page).
fn aligned_address(va: u32, section_alignment: u32, file_alignment: u32) -> u32 {
    let a = if section_alignment < 0x1000 {
        file_alignment
    } else {
        section_alignment
    };
    if a != 0 { va - va % a } else { va }
}

/// VirtualSize rounded up to the alignment; None when either is zero (the loader then maps the
/// raw size).
fn aligned_size(virtual_size: u32, section_alignment: u32, file_alignment: u32) -> Option<u64> {
    let a = u64::from(if section_alignment < 0x1000 {
        file_alignment
    } else {
        section_alignment
    });
    (virtual_size != 0 && a != 0).then(|| u64::from(virtual_size).div_ceil(a) * a)
}

/// A section's name as written (up to its first NUL).
pub(crate) fn section_name(s: &RawSection) -> String {
    let end = s.name.iter().position(|&c| c == 0).unwrap_or(8);
    String::from_utf8_lossy(&s.name[..end]).into_owned()
}

/// The loader's mapping over goblin's view, for readers that hold a goblin `PE` but not the file
/// length (any RVA outside the sections is taken as its own offset; the caller bounds it).
pub(crate) fn goblin_offset(pe: &goblin::pe::PE<'_>, rva: u32) -> Option<usize> {
    let (sa, fa) = pe
        .header
        .optional_header
        .as_ref()
        .map(|o| {
            (
                o.windows_fields.section_alignment,
                o.windows_fields.file_alignment,
            )
        })
        .unwrap_or((0, 0));
    let mut sections: Vec<RawSection> = pe
        .sections
        .iter()
        .map(|s| RawSection {
            name: s.name,
            virtual_size: s.virtual_size,
            virtual_address: s.virtual_address,
            raw_size: s.size_of_raw_data,
            raw_pointer: s.pointer_to_raw_data,
            characteristics: s.characteristics,
        })
        .collect();
    sections.sort_by_key(|s| s.virtual_address);
    let rva64 = u64::from(rva);
    for (k, s) in sections.iter().enumerate() {
        let start = u64::from(aligned_address(s.virtual_address, sa, fa));
        let mut size = u64::from(s.raw_size.max(s.virtual_size));
        if let Some(next) = sections.get(k + 1).map(|n| u64::from(n.virtual_address))
            && next > u64::from(s.virtual_address)
            && start + size > next
        {
            size = next - start;
        }
        if start <= rva64 && rva64 < start + size {
            return usize::try_from(rva64 - start + u64::from(raw_pointer(s, sa))).ok();
        }
    }
    Some(rva as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(va: u32, vsize: u32, ptr: u32, raw: u32) -> RawSection {
        RawSection {
            name: *b".text\0\0\0",
            virtual_size: vsize,
            virtual_address: va,
            raw_size: raw,
            raw_pointer: ptr,
            characteristics: 0,
        }
    }

    #[test]
    fn raw_pointers_round_down_to_sectors_unless_the_image_is_flat() {
        assert_eq!(
            raw_pointer(&section(0x1000, 0x10, 0x401, 0x200), 0x1000),
            0x400
        );
        assert_eq!(raw_pointer(&section(0x1000, 0x10, 1, 0x200), 0x1000), 0);
        assert_eq!(raw_pointer(&section(0x84, 0x10, 0x84, 0x20), 4), 0x84);
        assert_eq!(raw_pointer(&section(0x80, 0x10, 0x84, 0x20), 4), 0);
    }

    #[test]
    fn addresses_round_down_to_the_alignment() {
        assert_eq!(aligned_address(0x1234, 0x1000, 0x200), 0x1000);
        assert_eq!(aligned_address(0x1234, 0x200, 0x200), 0x1200);
        assert_eq!(aligned_address(0x1234, 0, 0), 0x1234);
    }
}
