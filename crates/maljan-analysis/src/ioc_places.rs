//! Where in a file an indicator lies, for [`crate::ioc_judge`]: the section and symbol name
//! tables of ELF, PE and Mach-O files, a PE's Authenticode certificates, version resources, and
//! how random the bytes around an offset are (a window's entropy).

use std::{cell::RefCell, collections::HashMap, ops::Range, sync::LazyLock};

use crate::{
    common::{le_u16, le_u32},
    ioc_judge::{CERTIFICATE, HIGH_ENTROPY, SYMBOL_NAME, VERSION_RESOURCE},
};

/// What the file says about a byte offset: which tables hold it, and how random it looks.
pub struct FileFacts<'a> {
    bytes: &'a [u8],
    names: Vec<Range<u64>>,
    certificates: Vec<Range<u64>>,
    version_info: Vec<Range<u64>>,
    entropy: RefCell<HashMap<usize, f64>>,
}

/// Half the window whose entropy decides whether a match lies in a high-entropy region.
const HALF_WINDOW: usize = 512;
/// Bits per byte from which a window reads as compressed, encrypted or random.
const HIGH_ENTROPY_BITS: f64 = 7.2;
/// A printable run this long is a real string wherever it lies.
pub const LONG_RUN: usize = 32;

impl<'a> FileFacts<'a> {
    /// Reads the tables of `bytes`; stops looking for version resources once `cancel` answers
    /// true (asked once a MiB).
    pub fn read(bytes: &'a [u8], cancel: &dyn Fn() -> bool) -> Self {
        let mut facts = FileFacts {
            bytes,
            names: Vec::new(),
            certificates: Vec::new(),
            version_info: Vec::new(),
            entropy: RefCell::new(HashMap::new()),
        };
        facts.read_elf();
        facts.read_pe();
        facts.read_macho();
        facts.read_version_info(cancel);
        facts
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    fn clamp(&self, start: u64, len: u64) -> Option<Range<u64>> {
        let n = self.bytes.len() as u64;
        (start < n && len > 0).then(|| start..start.saturating_add(len).min(n))
    }

    /// ELF: every SHT_STRTAB section (.shstrtab, .strtab, .dynstr) holds section or symbol names.
    fn read_elf(&mut self) {
        let b = self.bytes;
        if !b.starts_with(b"\x7fELF") || b.len() < 0x40 {
            return;
        }
        let wide = b[4] == 2;
        let big = b[5] == 2;
        let u16_at = |at: usize| {
            b.get(at..at + 2).map(|s| {
                let a = [s[0], s[1]];
                if big {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                }
            })
        };
        let u32_at = |at: usize| {
            b.get(at..at + 4).map(|s| {
                let a = [s[0], s[1], s[2], s[3]];
                if big {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                }
            })
        };
        let u64_at = |at: usize| {
            b.get(at..at + 8).map(|s| {
                let a: [u8; 8] = s.try_into().unwrap_or_default();
                if big {
                    u64::from_be_bytes(a)
                } else {
                    u64::from_le_bytes(a)
                }
            })
        };
        let (shoff, entsize, count) = if wide {
            (u64_at(0x28), u16_at(0x3a), u16_at(0x3c))
        } else {
            (u32_at(0x20).map(u64::from), u16_at(0x2e), u16_at(0x30))
        };
        let (Some(shoff), Some(entsize), Some(count)) = (shoff, entsize, count) else {
            return;
        };
        for i in 0..usize::from(count) {
            let Some(at) = usize::try_from(shoff)
                .ok()
                .and_then(|s| s.checked_add(i * usize::from(entsize)))
            else {
                return;
            };
            let (kind, offset, size) = if wide {
                (u32_at(at + 4), u64_at(at + 24), u64_at(at + 32))
            } else {
                (
                    u32_at(at + 4),
                    u32_at(at + 16).map(u64::from),
                    u32_at(at + 20).map(u64::from),
                )
            };
            let (Some(kind), Some(offset), Some(size)) = (kind, offset, size) else {
                return;
            };
            const SHT_STRTAB: u32 = 3;
            if kind == SHT_STRTAB
                && let Some(r) = self.clamp(offset, size)
            {
                self.names.push(r);
            }
        }
    }

    /// PE: the section table and the COFF symbol and string tables hold names; the security
    /// directory holds the Authenticode certificates.
    fn read_pe(&mut self) {
        let b = self.bytes;
        if !b.starts_with(b"MZ") {
            return;
        }
        let Some(pe) = le_u32(b, 0x3c).map(|v| v as usize) else {
            return;
        };
        if b.get(pe..pe + 4) != Some(b"PE\0\0") {
            return;
        }
        let coff = pe + 4;
        let (Some(sections), Some(symbols), Some(nsyms), Some(opt_size)) = (
            le_u16(b, coff + 2),
            le_u32(b, coff + 8),
            le_u32(b, coff + 12),
            le_u16(b, coff + 16),
        ) else {
            return;
        };
        let opt = coff + 20;
        let table = opt + usize::from(opt_size);
        if let Some(r) = self.clamp(table as u64, 40 * u64::from(sections)) {
            self.names.push(r);
        }
        if symbols != 0 {
            let strings = u64::from(symbols) + 18 * u64::from(nsyms);
            if let Some(r) = self.clamp(u64::from(symbols), 18 * u64::from(nsyms)) {
                self.names.push(r);
            }
            let size = usize::try_from(strings)
                .ok()
                .and_then(|s| le_u32(b, s))
                .unwrap_or(0);
            if let Some(r) = self.clamp(strings, u64::from(size)) {
                self.names.push(r);
            }
        }
        // The data directories: PE32 at +96, PE32+ at +112; the security directory is entry 4,
        // and its "address" is a file offset.
        let dirs = match le_u16(b, opt) {
            Some(0x10b) => opt + 96,
            Some(0x20b) => opt + 112,
            _ => return,
        };
        let count = match le_u16(b, opt) {
            Some(0x10b) => le_u32(b, opt + 92),
            _ => le_u32(b, opt + 108),
        };
        if count.unwrap_or(0) > 4
            && dirs + 5 * 8 <= opt + usize::from(opt_size)
            && let (Some(at), Some(size)) = (le_u32(b, dirs + 32), le_u32(b, dirs + 36))
            && let Some(r) = self.clamp(u64::from(at), u64::from(size))
        {
            self.certificates.push(r);
        }
    }

    /// Mach-O (thin, little-endian): the load commands (segment and section names, dylib
    /// paths) and the symbol string table.
    fn read_macho(&mut self) {
        let b = self.bytes;
        let header = match b.get(..4) {
            Some([0xce, 0xfa, 0xed, 0xfe]) => 28,
            Some([0xcf, 0xfa, 0xed, 0xfe]) => 32,
            _ => return,
        };
        let (Some(ncmds), Some(size)) = (le_u32(b, 16), le_u32(b, 20)) else {
            return;
        };
        if let Some(r) = self.clamp(header as u64, u64::from(size)) {
            self.names.push(r);
        }
        let mut at = header;
        for _ in 0..ncmds.min(10_000) {
            let (Some(cmd), Some(len)) = (le_u32(b, at), le_u32(b, at + 4)) else {
                return;
            };
            const LC_SYMTAB: u32 = 2;
            if cmd == LC_SYMTAB
                && let (Some(stroff), Some(strsize)) = (le_u32(b, at + 16), le_u32(b, at + 20))
                && let Some(r) = self.clamp(u64::from(stroff), u64::from(strsize))
            {
                self.names.push(r);
            }
            if len < 8 {
                return;
            }
            at += len as usize;
        }
    }

    /// Every `VS_VERSION_INFO` block (a PE's version resource, or a .res file): its key is
    /// UTF-16LE, preceded by the block's length, value length and type (three u16).
    fn read_version_info(&mut self, cancel: &dyn Fn() -> bool) {
        static KEY: LazyLock<Vec<u8>> = LazyLock::new(|| {
            "VS_VERSION_INFO"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect()
        });
        let finder = memchr::memmem::Finder::new(KEY.as_slice());
        let mut found = Vec::new();
        // A MiB at a time, overlapping by the key's length, so a cancelled call stops here too.
        let step = 1 << 20;
        let mut at = 0;
        while at < self.bytes.len() && found.len() < 64 {
            if cancel() {
                return;
            }
            let end = (at + step + KEY.len()).min(self.bytes.len());
            found.extend(finder.find_iter(&self.bytes[at..end]).map(|p| p + at));
            at += step;
        }
        found.dedup();
        for pos in found.into_iter().take(64) {
            let Some(start) = pos.checked_sub(6) else {
                continue;
            };
            let len = le_u16(self.bytes, start).unwrap_or(0).max(0x100);
            if let Some(r) = self.clamp(start as u64, u64::from(len)) {
                self.version_info.push(r);
            }
        }
    }

    fn in_any(ranges: &[Range<u64>], offset: u64) -> bool {
        ranges.iter().any(|r| r.contains(&offset))
    }

    /// The entropy of the window around `offset` (cached per 256-byte step).
    fn window_entropy(&self, offset: u64) -> (f64, usize) {
        let n = self.bytes.len();
        let key = (offset as usize).min(n) / 256;
        let centre = key * 256 + 128;
        let start = centre.saturating_sub(HALF_WINDOW);
        let end = (start + 2 * HALF_WINDOW).min(n);
        let start = end.saturating_sub(2 * HALF_WINDOW);
        let h = *self
            .entropy
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| crate::entropy::shannon(&self.bytes[start..end]));
        (h, end - start)
    }

    /// Whether a match at `offset`, in a printable run of `run_len` characters, lies in a
    /// high-entropy region.
    pub fn high_entropy(&self, offset: u64, run_len: usize) -> bool {
        if run_len >= LONG_RUN || self.bytes.is_empty() {
            return false;
        }
        let (h, n) = self.window_entropy(offset);
        h >= entropy_threshold(n)
    }

    /// The reason a match at `offset` is context because of where it lies in the file, if any.
    pub fn place(&self, offset: u64, run_len: usize) -> Option<&'static str> {
        if Self::in_any(&self.certificates, offset) {
            Some(CERTIFICATE)
        } else if Self::in_any(&self.names, offset) {
            Some(SYMBOL_NAME)
        } else if Self::in_any(&self.version_info, offset) {
            Some(VERSION_RESOURCE)
        } else if self.high_entropy(offset, run_len) {
            Some(HIGH_ENTROPY)
        } else {
            None
        }
    }
}

/// The entropy from which a window of `n` bytes reads as random: 7.2 bits per byte, lowered for
/// windows too short for random bytes to reach it (their expected entropy is about
/// 8 - 255 / (2 n ln 2)).
fn entropy_threshold(n: usize) -> f64 {
    let n = n.max(1) as f64;
    let random = 8.0 - 255.0 / (2.0 * n * std::f64::consts::LN_2);
    (random - 0.5).clamp(6.0, HIGH_ENTROPY_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_window_size() {
        assert_eq!(entropy_threshold(1024), HIGH_ENTROPY_BITS);
        assert!(entropy_threshold(256) < 7.0 && entropy_threshold(16) == 6.0);
    }

    /// A PE32 with one section, a COFF string table and a certificate table.
    fn pe() -> Vec<u8> {
        let mut b = vec![0u8; 0x800];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
        b[0x80..0x84].copy_from_slice(b"PE\0\0");
        b[0x86..0x88].copy_from_slice(&1u16.to_le_bytes()); // one section
        b[0x8c..0x90].copy_from_slice(&0x600u32.to_le_bytes()); // symbol table
        b[0x90..0x94].copy_from_slice(&1u32.to_le_bytes()); // one symbol
        b[0x94..0x96].copy_from_slice(&224u16.to_le_bytes());
        let opt = 0x98;
        b[opt..opt + 2].copy_from_slice(&0x10bu16.to_le_bytes());
        b[opt + 92..opt + 96].copy_from_slice(&16u32.to_le_bytes());
        let security = opt + 96 + 4 * 8;
        b[security..security + 4].copy_from_slice(&0x700u32.to_le_bytes());
        b[security + 4..security + 8].copy_from_slice(&0x80u32.to_le_bytes());
        b[opt + 224..opt + 232].copy_from_slice(b".rel.ro\0");
        b[0x612..0x616].copy_from_slice(&16u32.to_le_bytes()); // string table size
        b
    }

    #[test]
    fn pe_tables_and_certificates_are_found() {
        let b = pe();
        let facts = FileFacts::read(&b, &|| false);
        let section_name = 0x98 + 224;
        assert_eq!(facts.place(section_name as u64 + 1, 100), Some(SYMBOL_NAME));
        assert_eq!(facts.place(0x614, 100), Some(SYMBOL_NAME));
        assert_eq!(facts.place(0x720, 100), Some(CERTIFICATE));
        assert_eq!(facts.place(0x400, 100), None);
    }

    #[test]
    fn random_windows_are_high_entropy_and_long_runs_are_not() {
        // A xorshift stream: random enough for a window's byte histogram.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let b: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let facts = FileFacts::read(&b, &|| false);
        assert_eq!(facts.place(4000, 6), Some(HIGH_ENTROPY));
        assert_eq!(facts.place(4000, LONG_RUN), None);
        let zeros = vec![0u8; 8192];
        assert_eq!(FileFacts::read(&zeros, &|| false).place(4000, 6), None);
    }
}
