//! The parts of a Mach-O file read here rather than by goblin, each bounded by the file's real
//! size: the universal (fat) header, 32- and 64-bit alike (goblin reads only `0xcafebabe`); each
//! segment's section table, held to the load command that contains it (goblin takes `nsects` at
//! its word and reads on into the next commands); the bind opcodes' entry count, summed before
//! goblin expands them (one `BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB` can claim 2^64
//! entries); and the export trie, walked once per node (goblin recurses into cycles until the
//! stack overflows, and expands shared nodes exponentially).

use std::collections::HashSet;

use goblin::mach::{
    MachO,
    load_command::CommandVariant,
    segment::{Section, SectionData, Segment},
};
use maljan_server::ToolError;

use crate::budget::Budget;

/// One slice of a universal binary.
pub struct FatArch {
    pub cputype: u32,
    pub offset: u64,
    pub size: u64,
}

/// Most slices a universal header is read for (Apple's tools write a handful).
const MAX_FAT_ARCHES: u32 = 64;

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The slices of a universal binary (`0xcafebabe`: fat_arch, `0xcafebabf`: fat_arch_64), or None
/// when `b` does not start with a universal header.
pub fn fat_arches(b: &[u8]) -> Option<Result<Vec<FatArch>, ToolError>> {
    let wide = match be_u32(b, 0)? {
        0xcafe_babe => false,
        0xcafe_babf => true,
        _ => return None,
    };
    let count = be_u32(b, 4)?;
    // A Java class file shares 0xcafebabe; its version words read as a count in the forties.
    if count == 0 || count > MAX_FAT_ARCHES {
        return Some(Err(ToolError::unsupported_format(format!(
            "a universal header claiming {count} architectures (at most {MAX_FAT_ARCHES} are read): \
             a Java class file or a damaged Mach-O"
        ))));
    }
    let entry = if wide { 32 } else { 20 };
    let mut arches = Vec::new();
    for i in 0..count as usize {
        let at = 8 + i * entry;
        let arch = if wide {
            be_u32(b, at).zip(be_u64(b, at + 8)).zip(be_u64(b, at + 16))
        } else {
            be_u32(b, at)
                .zip(be_u32(b, at + 8).map(u64::from))
                .zip(be_u32(b, at + 12).map(u64::from))
        };
        let Some(((cputype, offset), size)) = arch else {
            return Some(Err(ToolError::unsupported_format(
                "the universal header's architecture table is cut short",
            )));
        };
        arches.push(FatArch {
            cputype,
            offset,
            size,
        });
    }
    Some(Ok(arches))
}

/// The sections of `seg` that lie inside its load command, in order, stopping at the first that
/// does not parse.
pub fn sections<'a>(
    seg: &Segment<'a>,
    is_64: bool,
    budget: &Budget,
) -> Result<Vec<(Section, SectionData<'a>)>, ToolError> {
    let (header, record) = if is_64 { (72, 80) } else { (56, 68) };
    let room = (seg.cmdsize as usize).saturating_sub(header) / record;
    let count = (seg.nsects as usize).min(room);
    budget.items(count, "Mach-O sections")?;
    Ok(seg.into_iter().take(count).map_while(Result::ok).collect())
}

fn uleb(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// How many imports goblin's bind interpreter would produce from `m`'s bind and lazy-bind
/// opcodes (saturating), read without producing them, and whether every segment index and
/// library ordinal they name exists (goblin indexes its lists with them unchecked, and panics).
pub fn bind_entries(b: &[u8], m: &MachO<'_>) -> (u64, bool) {
    let mut total = 0u64;
    let mut indexes_exist = true;
    for lc in &m.load_commands {
        let (CommandVariant::DyldInfo(info) | CommandVariant::DyldInfoOnly(info)) = &lc.command
        else {
            continue;
        };
        for (off, size) in [
            (info.bind_off, info.bind_size),
            (info.lazy_bind_off, info.lazy_bind_size),
        ] {
            let start = off as usize;
            let stream = bind_stream_entries(b, start, start.saturating_add(size as usize));
            total = total.saturating_add(stream.entries);
            // goblin indexes its segments and libraries with these unchecked.
            indexes_exist &= stream
                .max_segment
                .is_none_or(|s| (s as usize) < m.segments.len());
            indexes_exist &= stream
                .max_library
                .is_none_or(|l| (l as usize) < m.libs.len());
        }
    }
    (total, indexes_exist)
}

/// What one bind opcode stream claims: its entries, and the largest segment and library
/// ordinal it names.
struct BindStream {
    entries: u64,
    max_segment: Option<u8>,
    max_library: Option<u8>,
}

/// Reads the opcodes at `start..end` of the file as goblin does: an operand may run past `end`
/// (goblin reads it from the rest of the file), and the first byte that is not there ends it.
fn bind_stream_entries(ops: &[u8], start: usize, end: usize) -> BindStream {
    let mut at = start;
    let mut s = BindStream {
        entries: 0,
        max_segment: None,
        max_library: None,
    };
    while at < end
        && let Some(&op) = ops.get(at)
    {
        at += 1;
        match op & 0xf0 {
            0x70 => s.max_segment = s.max_segment.max(Some(op & 0x0f)),
            0x10 => s.max_library = s.max_library.max(Some(op & 0x0f)),
            _ => {}
        }
        let step = match op & 0xf0 {
            // goblin keeps the low byte of a ULEB library ordinal.
            0x20 => uleb(ops, &mut at).map(|ordinal| {
                s.max_library = s.max_library.max(Some(ordinal as u8));
                0
            }),
            0x60 | 0x70 | 0x80 => uleb(ops, &mut at).map(|_| 0),
            0x40 => memchr::memchr(0, &ops[at..]).map(|n| {
                at += n + 1;
                0
            }),
            0x90 | 0xb0 => Some(1),
            0xa0 => uleb(ops, &mut at).map(|_| 1),
            0xc0 => uleb(ops, &mut at).and_then(|count| uleb(ops, &mut at).map(|_| count)),
            _ => Some(0),
        };
        match step {
            Some(n) => s.entries = s.entries.saturating_add(n),
            // goblin stops with an error at a cut-short operand too.
            None => break,
        }
    }
    s
}

/// The exported names in `m`'s export trie (LC_DYLD_INFO or LC_DYLD_EXPORTS_TRIE), each node
/// read once; every node and every byte of name built is charged to `budget`.
pub fn exports(b: &[u8], m: &MachO<'_>, budget: &Budget) -> Result<Vec<String>, ToolError> {
    let trie = m.load_commands.iter().find_map(|lc| match &lc.command {
        CommandVariant::DyldInfo(i) | CommandVariant::DyldInfoOnly(i) if i.export_size > 0 => {
            Some((i.export_off, i.export_size))
        }
        CommandVariant::DyldExportsTrie(t) => Some((t.dataoff, t.datasize)),
        _ => None,
    });
    let Some((off, size)) = trie else {
        return Ok(Vec::new());
    };
    let start = (off as usize).min(b.len());
    let trie = &b[start..start.saturating_add(size as usize).min(b.len())];
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(0usize, String::new())];
    while let Some((node, prefix)) = stack.pop() {
        if !seen.insert(node) {
            continue;
        }
        budget.items(1, "Mach-O export trie nodes")?;
        let mut at = node;
        let Some(terminal) = uleb(trie, &mut at) else {
            continue;
        };
        if terminal > 0 {
            names.push(prefix.clone());
        }
        at = at.saturating_add(terminal as usize);
        let Some(&children) = trie.get(at) else {
            continue;
        };
        at += 1;
        for _ in 0..children {
            let Some(edge_len) = trie.get(at..).and_then(|r| memchr::memchr(0, r)) else {
                break;
            };
            let edge = &trie[at..at + edge_len];
            at += edge_len + 1;
            let Some(child) = uleb(trie, &mut at) else {
                break;
            };
            budget.scan(prefix.len() + edge.len(), "Mach-O export names")?;
            let name = format!("{prefix}{}", String::from_utf8_lossy(edge));
            stack.push((child as usize, name));
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_counts_sum_the_repeat_opcode() {
        // SET_SYMBOL "_x", DO_BIND, then DO_BIND_ULEB_TIMES_SKIPPING_ULEB count=2^63, skip=0.
        let mut ops = vec![0x40, b'_', b'x', 0, 0x90, 0xc0];
        ops.extend([0x80; 9]);
        ops.extend([0x01, 0x00]);
        assert_eq!(
            bind_stream_entries(&ops, 0, ops.len()).entries,
            1 + (1 << 63)
        );
        let three = [0x90, 0xb0, 0xa0, 0x05];
        assert_eq!(bind_stream_entries(&three, 0, 4).entries, 3);
    }

    #[test]
    fn an_operand_past_the_stream_s_end_is_read_from_the_file_as_goblin_does() {
        // The stream is the first byte (DO_BIND_ULEB_TIMES_SKIPPING_ULEB); its count and skip
        // lie after it: goblin reads them and binds 1000 times.
        let ops = [0xc0, 0xe8, 0x07, 0x00];
        assert_eq!(bind_stream_entries(&ops, 0, 1).entries, 1000);
    }

    #[test]
    fn the_library_ordinals_a_stream_names_are_reported() {
        // SET_DYLIB_ORDINAL_IMM 3, then SET_DYLIB_ORDINAL_ULEB 300 (goblin keeps 300 as u8 = 44).
        let ops = [0x13, 0x20, 0xac, 0x02];
        assert_eq!(bind_stream_entries(&ops, 0, 4).max_library, Some(44));
    }

    #[test]
    fn fat_headers_of_both_widths() {
        let mut narrow = vec![0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 1];
        narrow.extend([
            0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0x10, 0, 0, 0, 0, 0x20, 0, 0, 0, 12,
        ]);
        let arches = fat_arches(&narrow).unwrap().unwrap();
        assert_eq!(
            (arches[0].cputype, arches[0].offset, arches[0].size),
            (7, 0x1000, 0x20)
        );
        let mut wide = vec![0xca, 0xfe, 0xba, 0xbf, 0, 0, 0, 1];
        wide.extend([1, 0, 0, 12, 0, 0, 0, 0]);
        wide.extend(0x1_0000_0000u64.to_be_bytes());
        wide.extend(0x40u64.to_be_bytes());
        wide.extend([0; 8]);
        let arches = fat_arches(&wide).unwrap().unwrap();
        assert_eq!(
            (arches[0].cputype, arches[0].offset, arches[0].size),
            (0x0100_000c, 1 << 32, 0x40)
        );
        assert!(
            fat_arches(b"\xca\xfe\xba\xbe\x00\x00\x00\x34")
                .unwrap()
                .is_err()
        );
        assert!(fat_arches(b"\xcf\xfa\xed\xfe").is_none());
    }
}
