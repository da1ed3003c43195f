//! Compiled HTML Help files (CHM, `ITSF`) for `extract_members`: a help file that carries a
//! program is a document carrying one (issue 40), so its files are members. The directory is
//! read by hand (no maintained crate reads ITSF; the format is in Matthew Russotto's and
//! libmspack's notes): the ITSF header, the ITSP directory header and its PMGL listing chunks,
//! whose entries are ENCINT-coded (name, section, offset, length). Section 0 is stored;
//! section 1 (MSCompressed) is one LZX stream, cut into 32 KiB frames whose compressed offsets
//! the reset table lists, decoded with the `lzxd` crate under the window size and reset interval
//! of the LZXC control data. Bounded (entries, chunk size, decoded bytes by the extraction's
//! byte budget and ratio); a lie in the file is an anomaly and reading goes on where it can;
//! property-tested (tests/hostile_members.rs).

use std::ops::Range;

use lzxd::{Lzxd, WindowSize};

use crate::{
    common::{le_u32, le_u64},
    members::Collector,
};

const MAX_ENTRIES: usize = 100_000;
/// Listing chunks are 4 KiB in every compiler; a larger one than this is a lie.
const MAX_CHUNK: usize = 1 << 20;
/// An LZX frame: the unit the reset table indexes and the decoder is fed.
const FRAME: usize = 0x8000;
const CONTENT: &str = "::DataSpace/Storage/MSCompressed/Content";
const CONTROL: &str = "::DataSpace/Storage/MSCompressed/ControlData";
const RESET_TABLE: &str = "::DataSpace/Storage/MSCompressed/Transform/\
{7FC28940-9D31-11D0-9B27-00A0C91E9C7C}/InstanceData/ResetTable";

/// One directory entry: a file's name and where its bytes lie in its section.
#[derive(Debug, Clone, PartialEq)]
pub struct ChmEntry {
    pub name: String,
    /// 0: stored; 1: MSCompressed (LZX).
    pub section: u64,
    pub offset: u64,
    pub length: u64,
}

/// The directory of a help file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChmDirectory {
    /// Where section 0 begins in the file.
    pub content: u64,
    pub entries: Vec<ChmEntry>,
    /// What in the directory is damaged or a lie (reading went on past it where it could).
    pub anomalies: Vec<String>,
}

/// Section 1 decoded from its start, as far as needed and allowed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChmSection {
    pub data: Vec<u8>,
    /// The uncompressed length the reset table declares.
    pub declared: u64,
    /// The compressed stream's length.
    pub packed: u64,
    /// Why decoding stopped before the bytes asked for (a damaged frame, a lying table).
    pub stopped: Option<String>,
    /// The decoder library panicked on the stream (contained; said in `stopped`).
    pub contained_panic: bool,
}

/// An ENCINT: big-endian groups of 7 bits, the high bit set on all but the last byte.
fn encint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    loop {
        let byte = *b.get(*at)?;
        *at += 1;
        if value >> 57 != 0 {
            return None;
        }
        value = (value << 7) | u64::from(byte & 0x7F);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
}

/// The directory of a help file, at most `max` entries; None when `b` is not one.
pub fn chm_directory(b: &[u8], max: usize) -> Option<ChmDirectory> {
    if !b.starts_with(b"ITSF") {
        return None;
    }
    let version = le_u32(b, 4)?;
    let header_len = le_u32(b, 8)?;
    let dir_at = le_u64(b, 0x48)?;
    let dir_len = le_u64(b, 0x50)?;
    let content = match le_u64(b, 0x58) {
        Some(c) if version >= 3 && header_len >= 0x60 => c,
        _ => dir_at.saturating_add(dir_len),
    };
    let mut dir = ChmDirectory {
        content,
        ..ChmDirectory::default()
    };
    let at = usize::try_from(dir_at).ok()?;
    if b.get(at..at.checked_add(4)?)? != b"ITSP" {
        dir.anomalies
            .push(format!("no ITSP directory header at 0x{dir_at:x}"));
        return Some(dir);
    }
    let itsp_len = le_u32(b, at + 8)? as usize;
    let chunk_size = le_u32(b, at + 0x10)? as usize;
    let chunks = le_u32(b, at + 0x2C)? as usize;
    if !(0x20..=MAX_CHUNK).contains(&chunk_size) {
        dir.anomalies.push(format!(
            "a directory chunk size of {chunk_size} bytes (compilers write 4096)"
        ));
        return Some(dir);
    }
    let base = at.checked_add(itsp_len)?;
    for n in 0..chunks {
        if dir.entries.len() >= max {
            break;
        }
        let start = n.checked_mul(chunk_size).and_then(|o| o.checked_add(base));
        let Some(chunk) = start.and_then(|s| b.get(s..s.checked_add(chunk_size)?)) else {
            dir.anomalies.push(format!(
                "the directory declares {chunks} chunks; the file ends in chunk {n}"
            ));
            break;
        };
        // PMGI chunks only index the listing; the PMGL chunks hold every entry.
        if chunk.starts_with(b"PMGL") {
            listing(chunk, n, max, &mut dir);
        }
    }
    Some(dir)
}

/// The entries of one PMGL chunk (up to its free space, where the quick-reference area lies).
fn listing(chunk: &[u8], n: usize, max: usize, dir: &mut ChmDirectory) {
    let free = le_u32(chunk, 4).unwrap_or(0) as usize;
    let end = chunk.len().saturating_sub(free).max(0x14);
    let mut at = 0x14;
    while at < end && dir.entries.len() < max {
        let entry = (|| {
            let len = usize::try_from(encint(chunk, &mut at)?).ok()?;
            let name = chunk.get(at..at.checked_add(len)?)?;
            at += len;
            let name = String::from_utf8_lossy(name).into_owned();
            let section = encint(chunk, &mut at)?;
            let offset = encint(chunk, &mut at)?;
            let length = encint(chunk, &mut at)?;
            Some(ChmEntry {
                name,
                section,
                offset,
                length,
            })
        })();
        match entry {
            Some(e) if at <= end => dir.entries.push(e),
            _ => {
                dir.anomalies
                    .push(format!("listing chunk {n}: an entry runs past its end"));
                return;
            }
        }
    }
}

/// Where a stored (section 0) entry's bytes lie in the file, clipped to it; None when they
/// start past its end.
fn stored(b: &[u8], dir: &ChmDirectory, e: &ChmEntry) -> Option<Range<usize>> {
    let start = usize::try_from(dir.content.checked_add(e.offset)?).ok()?;
    let end = usize::try_from(e.length)
        .ok()
        .and_then(|l| start.checked_add(l))
        .unwrap_or(usize::MAX);
    (start <= b.len()).then(|| start..end.min(b.len()))
}

fn stored_named<'a>(b: &'a [u8], dir: &ChmDirectory, name: &str) -> Result<&'a [u8], String> {
    let e = dir
        .entries
        .iter()
        .find(|e| e.name == name && e.section == 0)
        .ok_or_else(|| format!("no {name}"))?;
    stored(b, dir, e)
        .map(|r| &b[r])
        .ok_or_else(|| format!("{name} lies past the end of the file"))
}

/// The parameters of section 1's LZX stream.
struct LzxStream<'a> {
    content: &'a [u8],
    window: WindowSize,
    frames_per_reset: usize,
    table: &'a [u8],
    entry_size: usize,
    entries: usize,
    declared: u64,
}

impl LzxStream<'_> {
    /// Where frame `n` starts in the compressed stream.
    fn frame_start(&self, n: usize) -> Option<u64> {
        if n >= self.entries {
            return None;
        }
        let at = n.checked_mul(self.entry_size)?;
        match self.entry_size {
            4 => le_u32(self.table, at).map(u64::from),
            _ => le_u64(self.table, at),
        }
    }

    /// Frame `n`'s compressed bytes, as the reset table places them.
    fn frame(&self, n: usize) -> Result<&[u8], String> {
        let start = self
            .frame_start(n)
            .ok_or_else(|| format!("the reset table has no frame {n}"))?;
        let end = self
            .frame_start(n + 1)
            .unwrap_or(self.content.len() as u64)
            .min(self.content.len() as u64);
        usize::try_from(start)
            .ok()
            .and_then(|s| self.content.get(s..end as usize))
            .ok_or_else(|| {
                format!("the reset table puts frame {n} at 0x{start:x}, outside the stream")
            })
    }
}

fn lzx_stream<'a>(b: &'a [u8], dir: &ChmDirectory) -> Result<LzxStream<'a>, String> {
    let content = stored_named(b, dir, CONTENT)?;
    let control = stored_named(b, dir, CONTROL)?;
    let table = stored_named(b, dir, RESET_TABLE)?;
    if control.get(4..8) != Some(b"LZXC") {
        return Err("the control data is not LZXC".into());
    }
    let short = || "the control data is cut".to_string();
    let version = le_u32(control, 8).ok_or_else(short)?;
    let mut reset = le_u32(control, 12).ok_or_else(short)? as usize;
    let mut window = le_u32(control, 16).ok_or_else(short)? as usize;
    if version == 2 {
        // Version 2 counts both in frames.
        reset = reset.saturating_mul(FRAME);
        window = window.saturating_mul(FRAME);
    }
    let window = match window {
        0x8000 => WindowSize::KB32,
        0x1_0000 => WindowSize::KB64,
        0x2_0000 => WindowSize::KB128,
        0x4_0000 => WindowSize::KB256,
        0x8_0000 => WindowSize::KB512,
        0x10_0000 => WindowSize::MB1,
        0x20_0000 => WindowSize::MB2,
        w => {
            return Err(format!(
                "an LZX window of {w} bytes (CHM uses 32 KiB to 2 MiB)"
            ));
        }
    };
    if reset == 0 || !reset.is_multiple_of(FRAME) {
        return Err(format!("an LZX reset interval of {reset} bytes"));
    }
    let short = || "the reset table is cut".to_string();
    let entries = le_u32(table, 4).ok_or_else(short)? as usize;
    let entry_size = le_u32(table, 8).ok_or_else(short)? as usize;
    let table_at = le_u32(table, 12).ok_or_else(short)? as usize;
    let declared = le_u64(table, 16).ok_or_else(short)?;
    let frame = le_u64(table, 32).ok_or_else(short)?;
    if frame != FRAME as u64 || !matches!(entry_size, 4 | 8) {
        return Err(format!(
            "a reset table of {frame}-byte frames and {entry_size}-byte entries"
        ));
    }
    Ok(LzxStream {
        content,
        window,
        frames_per_reset: reset / FRAME,
        table: table.get(table_at..).unwrap_or(&[]),
        entry_size,
        entries,
        declared,
    })
}

/// Why a frame did not decode, and whether the decoder library panicked on it.
type FrameError = (String, bool);

/// One frame through the decoder, a panic in it contained.
fn decode_frame(
    lzx: &mut Lzxd,
    chunk: &[u8],
    n: usize,
    want: usize,
) -> Result<Vec<u8>, FrameError> {
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lzx.decompress_next(chunk, want).map(|d| d.to_vec())
    }));
    match decoded {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err((format!("LZX frame {n} is damaged: {e}"), false)),
        Err(_) => Err((format!("the LZX decoder failed on frame {n}"), true)),
    }
}

/// The last frame, shorter than 32 KiB, again as a whole frame: some compilers (chmcmd) fill it
/// with a match that runs past the section's end, which a decoder asked for the exact length
/// cannot stop inside. Decoded afresh from its reset point (no match reaches back past one:
/// that is what the reset table is for), then cut to `want`.
fn last_frame_whole(s: &LzxStream, n: usize, want: usize) -> Result<Vec<u8>, FrameError> {
    let mut lzx = Lzxd::new(s.window);
    let mut last = Vec::new();
    for f in n - n % s.frames_per_reset..=n {
        let chunk = s.frame(f).map_err(|e| (e, false))?;
        last = decode_frame(&mut lzx, chunk, f, FRAME)?;
    }
    last.truncate(want);
    Ok(last)
}

/// Section 1 decoded from its start up to `max_bytes` (and the declared length); `stop` is
/// asked between frames. Err when the stream cannot be decoded at all (why).
pub fn chm_compressed(
    b: &[u8],
    dir: &ChmDirectory,
    max_bytes: usize,
    stop: &dyn Fn() -> bool,
) -> Result<ChmSection, String> {
    let s = lzx_stream(b, dir)?;
    let mut out = ChmSection {
        declared: s.declared,
        packed: s.content.len() as u64,
        ..ChmSection::default()
    };
    let target = usize::try_from(s.declared)
        .unwrap_or(usize::MAX)
        .min(max_bytes);
    let mut lzx = Lzxd::new(s.window);
    let mut n = 0usize;
    while out.data.len() < target && !stop() {
        let chunk = match s.frame(n) {
            Ok(chunk) => chunk,
            Err(e) => {
                out.stopped = Some(e);
                break;
            }
        };
        if n > 0 && n.is_multiple_of(s.frames_per_reset) {
            lzx.reset();
        }
        let want = usize::try_from(s.declared - out.data.len() as u64)
            .unwrap_or(FRAME)
            .min(FRAME);
        let decoded = match decode_frame(&mut lzx, chunk, n, want) {
            Err(_) if want < FRAME => last_frame_whole(&s, n, want),
            d => d,
        };
        match decoded {
            Ok(d) => out.data.extend_from_slice(&d),
            Err((why, panicked)) => {
                out.stopped = Some(why);
                out.contained_panic = panicked;
                break;
            }
        }
        n += 1;
    }
    out.data.truncate(target);
    Ok(out)
}

/// A file of the help's author: not the format's own (`::DataSpace…`, `/#SYSTEM`, `/$FIftiMain`)
/// and not a directory.
fn authored(e: &ChmEntry) -> bool {
    e.name.starts_with('/')
        && !e.name.starts_with("/#")
        && !e.name.starts_with("/$")
        && !e.name.ends_with('/')
}

pub(crate) fn chm(b: &[u8], c: &mut Collector) {
    let Some(dir) = chm_directory(b, MAX_ENTRIES) else {
        c.skip("(help file)", "no readable CHM directory");
        return;
    };
    for a in &dir.anomalies {
        c.skip("(directory)", a.clone());
    }
    let files: Vec<&ChmEntry> = dir.entries.iter().filter(|e| authored(e)).collect();
    let needed = files
        .iter()
        .filter(|e| e.section == 1)
        .map(|e| e.offset.saturating_add(e.length))
        .max()
        .unwrap_or(0);
    let section = (needed > 0).then(|| decode_section(b, &dir, needed, c));
    for e in files {
        let name = e.name.trim_start_matches('/');
        let go_on = match (e.section, &section) {
            (0, _) => match stored(b, &dir, e) {
                Some(r) => c.add_bytes(name, "chm", &b[r]),
                None => {
                    c.skip(name, "lies past the end of the file");
                    true
                }
            },
            (1, Some(Ok((s, capped)))) => {
                let part = usize::try_from(e.offset).ok().and_then(|o| {
                    let end = o.checked_add(usize::try_from(e.length).ok()?)?;
                    s.data.get(o..end)
                });
                match part {
                    Some(d) => c.add_bytes(name, "chm", d),
                    None => {
                        let why = s.stopped.as_deref().unwrap_or(if capped.is_empty() {
                            "lies past the compressed section's end"
                        } else {
                            capped
                        });
                        c.skip(name, why);
                        true
                    }
                }
            }
            (1, Some(Err(why))) => {
                c.skip(
                    name,
                    format!("the compressed section cannot be read: {why}"),
                );
                true
            }
            (n, _) => {
                c.skip(name, format!("in section {n}, which a CHM does not have"));
                true
            }
        };
        if !go_on {
            break;
        }
    }
}

/// Section 1 decoded as far as the authored files need, within the extraction's byte budget
/// and ratio; with why it was cut short of them ("" when it was not).
fn decode_section(
    b: &[u8],
    dir: &ChmDirectory,
    needed: u64,
    c: &mut Collector,
) -> Result<(ChmSection, &'static str), String> {
    let s = lzx_stream(b, dir)?;
    let packed = s.content.len() as u64;
    let budget = c.limits().max_total_bytes;
    let (mut cap, mut capped) = (needed, "");
    if budget < cap {
        (cap, capped) = (budget, "past the extraction's byte limit");
    }
    let ratio_cap = c.ratio_limit(packed);
    if s.declared.min(cap) > ratio_cap {
        c.ratio_hit("CHM LZX", packed);
        (cap, capped) = (ratio_cap, "past the ratio limit of the compressed section");
    }
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let decoded = chm_compressed(b, dir, cap, &|| c.done())?;
    if decoded.contained_panic {
        c.out.without.push(format!(
            "CHM: {} (a decoder bug on a hostile stream; the members before it were read)",
            decoded
                .stopped
                .as_deref()
                .unwrap_or("the LZX decoder failed")
        ));
    }
    Ok((decoded, capped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encints_are_big_endian_sevens_and_never_overflow() {
        let mut at = 0;
        assert_eq!(encint(&[0x81, 0x00, 0x05], &mut at), Some(128));
        assert_eq!(at, 2);
        assert_eq!(encint(&[0x05], &mut 0), Some(5));
        assert_eq!(encint(&[0xFF; 20], &mut 0), None);
        assert_eq!(encint(&[0x80], &mut 0), None);
    }

    #[test]
    fn not_a_help_file_has_no_directory() {
        assert!(chm_directory(b"ITSF", 10).is_none());
        assert!(chm_directory(&[0u8; 200], 10).is_none());
        let mut h = vec![0u8; 0x60];
        h[..4].copy_from_slice(b"ITSF");
        h[0x48] = 0x60;
        let d = chm_directory(&h, 10);
        assert!(d.is_none_or(|d| d.entries.is_empty()));
    }

    #[test]
    fn the_format_s_own_files_are_not_members() {
        let e = |name: &str| ChmEntry {
            name: name.into(),
            section: 0,
            offset: 0,
            length: 1,
        };
        assert!(authored(&e("/index.html")));
        assert!(authored(&e("/img/a.exe")));
        assert!(!authored(&e("/#SYSTEM")));
        assert!(!authored(&e("/$FIftiMain")));
        assert!(!authored(&e("::DataSpace/NameList")));
        assert!(!authored(&e("/img/")));
    }
}
