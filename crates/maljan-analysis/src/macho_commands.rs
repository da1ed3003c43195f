//! The header and load commands of one Mach-O image, walked here rather than by goblin (which
//! refuses a whole file at the first lie, or loops on a zero cmdsize): each command is checked
//! the way LLVM's MachOObjectFile checks it before llvm-objdump prints anything — and XNU's loader
//! refuses the same lies — but a lie here is an anomaly, not the end: the commands before it, and
//! after it where its size still says where the next one starts, are read.
//! crates/maljan-analysis/tests/macho_parity.rs holds this to llvm-objdump.

use maljan_server::ToolError;

use crate::{budget::Budget, macho::command_name};

/// Most anomalies kept per image (a crafted file can lie in every one of its commands).
const MAX_ANOMALIES: usize = 64;

pub struct Header {
    pub is_64: bool,
    pub cputype: u32,
    pub filetype: u32,
    pub flags: u32,
}

pub struct SectionRecord {
    pub sectname: String,
    pub segname: String,
    pub addr: u64,
    pub size: u64,
    pub offset: u32,
}

pub struct SegmentRecord {
    pub name: String,
    pub vmaddr: u64,
    pub vmsize: u64,
    pub fileoff: u64,
    pub filesize: u64,
    pub maxprot: u32,
    pub initprot: u32,
    pub sections: Vec<SectionRecord>,
}

/// One load command as it stands in the file.
pub struct RawCommand {
    pub cmd: u32,
    pub offset: usize,
    pub cmdsize: u32,
}

/// Everything read from one image's load commands.
pub struct Image {
    pub header: Header,
    pub commands: Vec<RawCommand>,
    pub segments: Vec<SegmentRecord>,
    /// Every linked dylib (LC_LOAD_DYLIB, weak, re-exported, lazy, upward), in command order,
    /// with the command that names it.
    pub libraries: Vec<(u32, String)>,
    /// LC_ID_DYLIB's name: the install name of a dylib.
    pub install_name: Option<String>,
    pub rpaths: Vec<String>,
    pub uuid: Option<[u8; 16]>,
    /// LC_MAIN's entry offset, the first one.
    pub main_entry: Option<u64>,
    /// LC_UNIXTHREAD's (or LC_THREAD's) program counter, the first one.
    pub thread_entry: Option<u64>,
    pub code_signature: bool,
    pub encrypted: bool,
    /// LC_SYMTAB's symbol count, and LC_DYSYMTAB's ranges of it (local, defined external,
    /// undefined), checked against each other once every command is read.
    nsyms: Option<u32>,
    symbol_ranges: Vec<(&'static str, u32, u32)>,
    pub anomalies: Vec<String>,
}

pub const LC_LOAD_WEAK_DYLIB: u32 = 0x8000_0018;

/// The linkedit_data_command kinds (code signature, split info, function starts, data in code,
/// code-signing DRs, optimization hints, exports trie, chained fixups): 16 bytes, a file range.
macro_rules! linkedit_data_commands {
    () => {
        0x1d | 0x1e | 0x26 | 0x29 | 0x2b | 0x2e | 0x8000_0033 | 0x8000_0034
    };
}

/// Reads integers of the image's byte order, bounded by the image.
struct Reader<'a> {
    b: &'a [u8],
    le: bool,
}

impl Reader<'_> {
    fn u32(&self, at: usize) -> Option<u32> {
        let w: [u8; 4] = self.b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    }
    fn u64(&self, at: usize) -> Option<u64> {
        let w: [u8; 8] = self.b.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.le {
            u64::from_le_bytes(w)
        } else {
            u64::from_be_bytes(w)
        })
    }
    /// A 32-bit field, or a 64-bit one in a 64-bit image.
    fn word(&self, at: usize, wide: bool) -> Option<u64> {
        if wide {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }
    /// A fixed 16-byte name field, up to its first NUL.
    fn name16(&self, at: usize) -> String {
        let raw = self.b.get(at..at + 16).unwrap_or_default();
        let end = memchr::memchr(0, raw).unwrap_or(raw.len());
        String::from_utf8_lossy(&raw[..end]).into_owned()
    }
}

struct Anomalies(Vec<String>, usize);

impl Anomalies {
    fn add(&mut self, a: String) {
        if self.0.len() < MAX_ANOMALIES {
            self.0.push(a);
        } else {
            self.1 += 1;
        }
    }
    fn finish(mut self) -> Vec<String> {
        if self.1 > 0 {
            self.0.push(format!("and {} more anomalies", self.1));
        }
        self.0
    }
}

fn past(start: u64, size: u64, len: usize) -> bool {
    start.saturating_add(size) > len as u64
}

/// `b` starts with a Mach-O image's magic, either byte order, 32 or 64 bits.
pub fn has_magic(b: &[u8]) -> bool {
    matches!(
        b.get(..4),
        Some([0xce | 0xcf, 0xfa, 0xed, 0xfe] | [0xfe, 0xed, 0xfa, 0xce | 0xcf])
    )
}

/// Reads `b` as one Mach-O image; an error only when it has no Mach-O header at all.
pub fn read(b: &[u8], budget: &Budget) -> Result<Image, ToolError> {
    let magic = b.get(..4).unwrap_or_default();
    let (is_64, le) = match magic {
        [0xce, 0xfa, 0xed, 0xfe] => (false, true),
        [0xcf, 0xfa, 0xed, 0xfe] => (true, true),
        [0xfe, 0xed, 0xfa, 0xce] => (false, false),
        [0xfe, 0xed, 0xfa, 0xcf] => (true, false),
        _ => {
            return Err(ToolError::unsupported_format(
                "not a Mach-O image (no 0xfeedface/0xfeedfacf magic)",
            ));
        }
    };
    let r = Reader { b, le };
    let header_size = if is_64 { 32 } else { 28 };
    let word = |at| r.u32(at);
    let (Some(cputype), Some(filetype), Some(ncmds), Some(sizeofcmds), Some(flags)) =
        (word(4), word(12), word(16), word(20), word(24))
    else {
        return Err(ToolError::unsupported_format(
            "a Mach-O header cut by the end of the file",
        ));
    };
    if b.len() < header_size {
        return Err(ToolError::unsupported_format(
            "a Mach-O header cut by the end of the file",
        ));
    }
    let mut image = Image {
        header: Header {
            is_64,
            cputype,
            filetype,
            flags,
        },
        commands: Vec::new(),
        segments: Vec::new(),
        libraries: Vec::new(),
        install_name: None,
        rpaths: Vec::new(),
        uuid: None,
        main_entry: None,
        thread_entry: None,
        code_signature: false,
        encrypted: false,
        nsyms: None,
        symbol_ranges: Vec::new(),
        anomalies: Vec::new(),
    };
    let mut anomalies = Anomalies(Vec::new(), 0);
    let commands_end = header_size as u64 + u64::from(sizeofcmds);
    if commands_end > b.len() as u64 {
        anomalies.add(format!(
            "the load commands (sizeofcmds {sizeofcmds}) extend past the end of the file"
        ));
    }
    let mut at = header_size;
    for i in 0..ncmds {
        if at as u64 >= commands_end {
            anomalies.add(format!(
                "ncmds claims {ncmds} load commands; only {i} fit in sizeofcmds ({sizeofcmds})"
            ));
            break;
        }
        let (Some(cmd), Some(cmdsize)) = (r.u32(at), r.u32(at + 4)) else {
            anomalies.add(format!("load command {i} is cut by the end of the file"));
            break;
        };
        budget.items(1, "Mach-O load commands")?;
        if cmdsize < 8 {
            anomalies.add(format!(
                "load command {i} ({}) claims {cmdsize} bytes, less than 8: the commands after it cannot be found",
                command_name(cmd)
            ));
            break;
        }
        let end = at as u64 + u64::from(cmdsize);
        if end > commands_end {
            anomalies.add(format!(
                "load command {i} ({}) of {cmdsize} bytes extends past the load commands",
                command_name(cmd)
            ));
        }
        if end > b.len() as u64 {
            anomalies.add(format!(
                "load command {i} ({}) of {cmdsize} bytes extends past the end of the file",
                command_name(cmd)
            ));
            break;
        }
        if cmdsize % if is_64 { 8 } else { 4 } != 0 {
            anomalies.add(format!(
                "load command {i} ({}): cmdsize {cmdsize} is not a multiple of {}",
                command_name(cmd),
                if is_64 { 8 } else { 4 }
            ));
        }
        image.commands.push(RawCommand {
            cmd,
            offset: at,
            cmdsize,
        });
        let c = Command {
            r: &r,
            i,
            at,
            cmd,
            size: cmdsize as usize,
        };
        c.interpret(&mut image, &mut anomalies, budget)?;
        at += cmdsize as usize;
    }
    let nsyms = image.nsyms.unwrap_or(0);
    for (what, first, count) in std::mem::take(&mut image.symbol_ranges) {
        if u64::from(first) + u64::from(count) > u64::from(nsyms) {
            anomalies.add(format!(
                "LC_DYSYMTAB's {what} symbols ({first}+{count}) extend past the symbol table's {nsyms}"
            ));
        }
    }
    // dyld loads a dylib by its install name; llvm refuses a dylib without one too.
    if filetype == 6 && !image.commands.iter().any(|c| c.cmd == 0xd) {
        anomalies.add("a dylib without LC_ID_DYLIB (its install name)".into());
    }
    image.anomalies = anomalies.finish();
    Ok(image)
}

/// One load command being interpreted.
struct Command<'r, 'a> {
    r: &'r Reader<'a>,
    i: u32,
    at: usize,
    cmd: u32,
    size: usize,
}

impl Command<'_, '_> {
    fn label(&self) -> String {
        format!("{} command {}", command_name(self.cmd), self.i)
    }

    /// The string a command holds at the offset in its field `field_at` (an lc_str), which
    /// must lie past the command's `fixed` bytes and inside it.
    fn string(&self, field_at: usize, fixed: usize, anomalies: &mut Anomalies) -> Option<String> {
        if self.size < fixed {
            anomalies.add(format!("{} is smaller than its structure", self.label()));
            return None;
        }
        let offset = self.r.u32(self.at + field_at)? as usize;
        if offset < fixed || offset >= self.size {
            anomalies.add(format!(
                "{}: its name's offset {offset} lies outside the command ({fixed}..{})",
                self.label(),
                self.size
            ));
            return None;
        }
        let raw = &self.r.b[self.at + offset..self.at + self.size];
        let end = memchr::memchr(0, raw).unwrap_or_else(|| {
            anomalies.add(format!("{}: its name runs past the command", self.label()));
            raw.len()
        });
        Some(String::from_utf8_lossy(&raw[..end]).into_owned())
    }

    /// A table of `count` records of `record` bytes at `offset` lies inside the file.
    fn in_file(&self, what: &str, offset: u64, size: u64, anomalies: &mut Anomalies) {
        let len = self.r.b.len();
        if offset > len as u64 {
            anomalies.add(format!(
                "{}: {what} at {offset:#x} starts past the end of the file",
                self.label()
            ));
        } else if past(offset, size, len) {
            anomalies.add(format!(
                "{}: {what} at {offset:#x}+{size:#x} extends past the end of the file",
                self.label()
            ));
        }
    }

    fn interpret(
        &self,
        image: &mut Image,
        anomalies: &mut Anomalies,
        budget: &Budget,
    ) -> Result<(), ToolError> {
        let r = self.r;
        let at = self.at;
        let wide = image.header.is_64;
        // The commands of one fixed size: one of another size is not read (llvm refuses it).
        let exact = match self.cmd {
            0x2 | 0x1b | 0x8000_0028 => Some(24),
            0xb => Some(80),
            linkedit_data_commands!() => Some(16),
            _ => None,
        };
        if let Some(want) = exact
            && self.size != want
        {
            anomalies.add(format!(
                "{} has cmdsize {}, not {want}",
                self.label(),
                self.size
            ));
            return Ok(());
        }
        let field = |n| u64::from(r.u32(at + n).unwrap_or(0));
        match self.cmd {
            0x1 | 0x19 => self.segment(image, anomalies, budget)?,
            0x2 => {
                image.nsyms = image.nsyms.or(r.u32(at + 12));
                let nlist = if wide { 16 } else { 12 };
                self.in_file("the symbol table", field(8), field(12) * nlist, anomalies);
                self.in_file("the string table", field(16), field(20), anomalies);
            }
            0xb => {
                let word = |n| r.u32(at + n).unwrap_or(0);
                for (what, n) in [("local", 8), ("defined external", 16), ("undefined", 24)] {
                    image.symbol_ranges.push((what, word(n), word(n + 4)));
                }
                let module = if wide { 56 } else { 52 };
                for (what, n, record) in [
                    ("the table of contents", 32, 8),
                    ("the module table", 40, module),
                    ("the referenced symbols", 48, 4),
                    ("the indirect symbols", 56, 4),
                    ("the external relocations", 64, 8),
                    ("the local relocations", 72, 8),
                ] {
                    self.in_file(what, field(n), field(n + 4) * record, anomalies);
                }
            }
            0xc | 0x8000_0018 | 0x8000_001f | 0x20 | 0x8000_0023 => {
                if let Some(name) = self.string(8, 24, anomalies) {
                    image.libraries.push((self.cmd, name));
                }
            }
            0xd => image.install_name = self.string(8, 24, anomalies),
            0xe | 0xf | 0x27 => {
                self.string(8, 12, anomalies);
            }
            0x8000_001c => {
                if let Some(path) = self.string(8, 12, anomalies) {
                    image.rpaths.push(path);
                }
            }
            0x1b => image.uuid = r.b[at + 8..at + 24].try_into().ok(),
            // dyld takes the first LC_MAIN, and the first thread's pc.
            0x8000_0028 if image.main_entry.is_none() => image.main_entry = r.u64(at + 8),
            0x4 | 0x5 if image.thread_entry.is_none() => {
                image.thread_entry = self.thread_pc(image.header.cputype, anomalies);
            }
            linkedit_data_commands!() => {
                self.in_file("its data", field(8), field(12), anomalies);
                image.code_signature |= self.cmd == 0x1d;
            }
            0x21 | 0x2c if self.size >= 20 => {
                image.encrypted |= r.u32(at + 16).is_some_and(|id| id != 0);
            }
            _ => {}
        }
        Ok(())
    }

    fn segment(
        &self,
        image: &mut Image,
        anomalies: &mut Anomalies,
        budget: &Budget,
    ) -> Result<(), ToolError> {
        let (r, at, wide) = (self.r, self.at, self.cmd == 0x19);
        let (fixed, record) = if wide { (72, 80) } else { (56, 68) };
        if self.size < fixed {
            anomalies.add(format!("{} is smaller than its structure", self.label()));
            return Ok(());
        }
        let w = if wide { 8 } else { 4 };
        let word = |n: usize| r.word(at + n, wide).unwrap_or(0);
        let u32_at = |n: usize| r.u32(at + n).unwrap_or(0);
        let (vmaddr, vmsize, fileoff, filesize) =
            (word(24), word(24 + w), word(24 + 2 * w), word(24 + 3 * w));
        let after = 24 + 4 * w;
        let (maxprot, initprot, nsects) = (u32_at(after), u32_at(after + 4), u32_at(after + 8));
        let len = r.b.len();
        if fileoff > len as u64 {
            anomalies.add(format!(
                "{}: fileoff {fileoff:#x} lies past the end of the file",
                self.label()
            ));
        } else if past(fileoff, filesize, len) {
            anomalies.add(format!(
                "{}: fileoff {fileoff:#x} plus filesize {filesize:#x} extends past the end of the file",
                self.label()
            ));
        }
        let room = (self.size - fixed) / record;
        if nsects as usize > room {
            anomalies.add(format!(
                "{} claims {nsects} sections; its cmdsize holds {room}",
                self.label()
            ));
        }
        let count = (nsects as usize).min(room);
        budget.items(count, "Mach-O sections")?;
        let mut sections = Vec::with_capacity(count);
        for j in 0..count {
            let s = at + fixed + j * record;
            let size = r.word(s + 32 + w, wide).unwrap_or(0);
            let field = |n: usize| r.u32(s + 32 + 2 * w + n).unwrap_or(0);
            let (offset, reloff, nreloc, flags) = (field(0), field(8), field(12), field(16));
            let section = SectionRecord {
                sectname: r.name16(s),
                segname: r.name16(s + 16),
                addr: r.word(s + 32, wide).unwrap_or(0),
                size,
                offset,
            };
            // Zero-fill sections take no room in the file, whatever their offset says.
            let zerofill = matches!(flags & 0xff, 0x1 | 0xc | 0x12);
            if !zerofill && image.header.filetype != 0xa {
                let what = format!("section {j} ({})", section.sectname);
                self.in_file(&what, u64::from(offset), size, anomalies);
            }
            if nreloc > 0 {
                let what = format!("section {j}'s relocations");
                self.in_file(&what, u64::from(reloff), u64::from(nreloc) * 8, anomalies);
            }
            sections.push(section);
        }
        image.segments.push(SegmentRecord {
            name: r.name16(at + 8),
            vmaddr,
            vmsize,
            fileoff,
            filesize,
            maxprot,
            initprot,
            sections,
        });
        Ok(())
    }

    /// The program counter of an LC_UNIXTHREAD / LC_THREAD's first thread state of the image's
    /// architecture.
    fn thread_pc(&self, cputype: u32, anomalies: &mut Anomalies) -> Option<u64> {
        let r = self.r;
        // (flavor, its pc's offset in the state, pc width)
        let (flavor, pc_at, pc_wide) = match cputype {
            7 => (1, 10 * 4, false),
            0x0100_0007 => (4, 16 * 8, true),
            12 => (1, 15 * 4, false),
            0x0100_000c => (6, 32 * 8, true),
            _ => return None,
        };
        let mut at = self.at + 8;
        let end = self.at + self.size;
        while at + 8 <= end {
            let (f, count) = (r.u32(at)?, r.u32(at + 4)? as usize);
            let state = at + 8;
            if f == flavor {
                if pc_at + if pc_wide { 8 } else { 4 } > count * 4 || state + count * 4 > end {
                    anomalies.add(format!(
                        "{}: its thread state is too short for the program counter",
                        self.label()
                    ));
                    return None;
                }
                return r.word(state + pc_at, pc_wide);
            }
            at = state.saturating_add(count.saturating_mul(4));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget_for(b: &[u8]) -> Budget<'_> {
        Budget::for_file(b.len(), &|| false)
    }

    /// A 64-bit header, then `cmds` as they are.
    fn image(ncmds: u32, cmds: &[u8]) -> Vec<u8> {
        let mut b = vec![0xcf, 0xfa, 0xed, 0xfe];
        for w in [0x0100_0007u32, 3, 2, ncmds, cmds.len() as u32, 0, 0] {
            b.extend(w.to_le_bytes());
        }
        b.extend(cmds);
        b
    }

    #[test]
    fn a_zero_cmdsize_ends_the_walk_with_an_anomaly_instead_of_looping() {
        let mut cmds = vec![0x1b, 0, 0, 0, 0, 0, 0, 0];
        cmds.extend([0; 16]);
        let b = image(3, &cmds);
        let i = read(&b, &budget_for(&b)).unwrap();
        assert_eq!(i.commands.len(), 0);
        assert!(i.anomalies[0].contains("less than 8"), "{:?}", i.anomalies);
    }

    #[test]
    fn a_huge_ncmds_reads_the_commands_sizeofcmds_holds() {
        let mut cmds = vec![0x1b, 0, 0, 0, 24, 0, 0, 0];
        cmds.extend(1..=16u8);
        let b = image(0xffff_fff0, &cmds);
        let i = read(&b, &budget_for(&b)).unwrap();
        assert_eq!(i.uuid.unwrap()[0], 1);
        assert!(i.anomalies[0].contains("only 1 fit"), "{:?}", i.anomalies);
    }

    #[test]
    fn a_dylib_name_outside_its_command_is_an_anomaly() {
        let mut cmds = vec![0x0c, 0, 0, 0, 32, 0, 0, 0, 0, 4, 0, 0];
        cmds.extend([0; 12]);
        cmds.extend(b"/a.dylib");
        let b = image(1, &cmds);
        let i = read(&b, &budget_for(&b)).unwrap();
        assert!(i.libraries.is_empty());
        assert!(
            i.anomalies[0].contains("outside the command"),
            "{:?}",
            i.anomalies
        );
    }
}
