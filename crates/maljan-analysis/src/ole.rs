//! OLE2 compound files (cfb): streams, VBA projects (MS-OVBA `dir` stream and module source
//! decompression), and the embedded-object streams exploits use. Shared by document_info for .doc/.xls
//! files and for the vbaProject.bin of OOXML files.

use std::io::{Cursor, Read};

use schemars::JsonSchema;
use serde::Serialize;

use maljan_server::ToolError;

use crate::{
    budget::Budget,
    common::{le_u16, le_u32},
};

/// Most bytes one stream is read to (larger streams are listed, not read).
const STREAM_CAP: u64 = 64 << 20;
/// Most source bytes kept per VBA module in an answer.
pub const SOURCE_PREVIEW: usize = 16 * 1024;

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct OleStream {
    pub path: String,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct VbaModule {
    pub name: String,
    pub stream: String,
    pub source_size: usize,
    /// The module's source (cut at 16 KiB).
    pub source: String,
    /// Procedures that run by themselves (AutoOpen, Document_Open, Workbook_Open, …).
    pub auto_exec: Vec<String>,
    /// Keywords malware uses (Shell, CreateObject, URLDownloadToFile, …).
    pub suspicious: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
pub struct OleReport {
    pub streams: Vec<OleStream>,
    pub stream_count: usize,
    /// Any VBA project storage present.
    pub has_vba: bool,
    pub vba_modules: Vec<VbaModule>,
    /// Embedded objects and other exploit-relevant streams (Ole10Native, Equation Native, …).
    pub flags: Vec<String>,
    pub errors: Vec<String>,
}

const AUTO_EXEC: &[&str] = &[
    "AutoOpen",
    "Auto_Open",
    "AutoExec",
    "AutoClose",
    "Auto_Close",
    "AutoNew",
    "AutoExit",
    "Document_Open",
    "Document_Close",
    "Document_New",
    "DocumentOpen",
    "Workbook_Open",
    "Workbook_Activate",
    "Workbook_Close",
    "Workbook_BeforeClose",
    "Presentation_Open",
    "Document_ContentControlOnEnter",
    "InkPicture1_Painted",
];
const SUSPICIOUS: &[&str] = &[
    "Shell",
    "WScript.Shell",
    "CreateObject",
    "GetObject",
    "Environ",
    "URLDownloadToFile",
    "XMLHTTP",
    "ADODB.Stream",
    "SaveToFile",
    "PowerShell",
    "cmd.exe",
    "StrReverse",
    "Chr(",
    "ChrW(",
    "CallByName",
    "Kill ",
    "VirtualAlloc",
    "RtlMoveMemory",
    "CreateThread",
    "Lib \"",
    "ExecuteExcel4Macro",
    "Base64",
    "FromBase64String",
    "ShellExecute",
    "Run(",
    ".Run ",
    "Open ",
    "Write #",
    "MacScript",
    "vbHide",
    "Application.Run",
];

/// MS-OVBA 2.4.1 decompression. Returns what was decompressed before any damage.
pub fn ovba_decompress(data: &[u8]) -> Option<Vec<u8>> {
    if data.first() != Some(&1) {
        return None;
    }
    let mut out: Vec<u8> = Vec::new();
    let mut pos = 1;
    while pos + 2 <= data.len() && out.len() < (64 << 20) {
        let header = le_u16(data, pos)?;
        let chunk_end = (pos + 2 + usize::from(header & 0x0FFF) + 1).min(data.len());
        pos += 2;
        if header & 0x8000 == 0 {
            let end = (pos + 4096).min(data.len());
            out.extend_from_slice(&data[pos..end]);
            pos = end;
            continue;
        }
        let chunk_start = out.len();
        // A decompressed chunk is at most 4096 bytes (MS-OVBA 2.4.1.1.2): more is damage or a bomb.
        while pos < chunk_end && out.len() - chunk_start < 4096 {
            let flags = data[pos];
            pos += 1;
            for bit in 0..8 {
                if pos >= chunk_end || out.len() - chunk_start >= 4096 {
                    break;
                }
                if flags & (1 << bit) == 0 {
                    out.push(data[pos]);
                    pos += 1;
                } else {
                    let token = le_u16(data, pos)?;
                    pos += 2;
                    let d = out.len() - chunk_start;
                    let mut bit_count = 4;
                    while (1usize << bit_count) < d && bit_count < 12 {
                        bit_count += 1;
                    }
                    let length_mask = 0xFFFFu16 >> bit_count;
                    let length = usize::from(token & length_mask) + 3;
                    let offset = usize::from((token & !length_mask) >> (16 - bit_count)) + 1;
                    if offset > d {
                        return Some(out);
                    }
                    let src = out.len() - offset;
                    let length = length.min(4096 - d);
                    for i in 0..length {
                        let c = out[src + i];
                        out.push(c);
                    }
                }
            }
        }
        pos = chunk_end;
    }
    Some(out)
}

/// (module name, stream name, source offset) from a decompressed `dir` stream.
pub fn parse_dir(dir: &[u8]) -> Vec<(String, String, u32)> {
    let mut modules = Vec::new();
    let (mut name, mut stream, mut offset) = (String::new(), String::new(), 0u32);
    let mut pos = 0;
    while pos + 6 <= dir.len() {
        let id = le_u16(dir, pos).unwrap_or(0);
        let size = le_u32(dir, pos + 2).unwrap_or(0) as usize;
        pos += 6;
        if id == 0x0009 {
            // PROJECTVERSION: its "size" is a reserved field; the record holds 6 more bytes.
            pos += 6;
            continue;
        }
        let Some(data) = dir.get(pos..pos.saturating_add(size)) else {
            break;
        };
        pos += size;
        match id {
            0x0019 => name = latin1(data),
            0x001A => stream = latin1(data),
            0x0031 => offset = le_u32(data, 0).unwrap_or(0),
            0x002B => {
                modules.push((
                    std::mem::take(&mut name),
                    std::mem::take(&mut stream),
                    offset,
                ));
                offset = 0;
            }
            0x0010 => break,
            _ => {}
        }
    }
    modules
}

fn latin1(b: &[u8]) -> String {
    b.iter().map(|&c| c as char).collect()
}

fn words_in(code: &str, list: &[&str]) -> Vec<String> {
    let lower = code.to_ascii_lowercase();
    list.iter()
        .filter(|w| lower.contains(&w.to_ascii_lowercase()))
        .map(|w| w.trim().to_string())
        .collect()
}

/// Reads an OLE2 compound file within `budget` (every directory entry, stream read and byte of
/// VBA source decompressed is charged: many modules may name one large stream).
pub fn analyze(bytes: &[u8], max_streams: usize, budget: &Budget) -> Result<OleReport, ToolError> {
    let mut cf = cfb::CompoundFile::open(Cursor::new(bytes))
        .map_err(|e| ToolError::unsupported_format(format!("not a readable OLE2 file: {e}")))?;
    let mut report = OleReport::default();
    let mut entries: Vec<(String, bool, u64)> = Vec::new();
    for e in cf.walk() {
        budget.items(1, "OLE2 directory entries")?;
        entries.push((
            e.path().to_string_lossy().replace('\\', "/"),
            e.is_stream(),
            e.len(),
        ));
    }
    let mut vba_dirs = Vec::new();
    for (path, is_stream, len) in &entries {
        if !*is_stream {
            continue;
        }
        report.stream_count += 1;
        if report.streams.len() < max_streams {
            report.streams.push(OleStream {
                path: path.clone(),
                size: *len,
            });
        }
        let lower = path.to_ascii_lowercase();
        let base = lower.rsplit('/').next().unwrap_or("");
        if lower.ends_with("/vba/dir") {
            vba_dirs.push(path[..path.len() - 4].to_string());
        }
        if lower.ends_with("_vba_project") || lower.contains("/vba/") {
            report.has_vba = true;
        }
        let flag = match base {
            "\u{1}ole10native" => Some("embedded_package (Ole10Native)"),
            "equation native" => Some("equation_editor_object (CVE-2017-11882 family)"),
            "encryptioninfo" | "encryptedpackage" => Some("encrypted_ooxml_package"),
            "\u{1}compobj" if lower.contains("objectpool") => Some("embedded_ole_object"),
            "package" => Some("embedded_package"),
            "macros" | "_vba_project_cur" => Some("vba_storage"),
            _ => None,
        };
        if let Some(f) = flag
            && !report.flags.iter().any(|x| x == f)
        {
            report.flags.push(f.to_string());
        }
    }
    for vba in vba_dirs {
        let read = |cf: &mut cfb::CompoundFile<Cursor<&[u8]>>, p: &str| -> Option<Vec<u8>> {
            let mut s = cf.open_stream(p).ok()?;
            let mut buf = Vec::new();
            (&mut s).take(STREAM_CAP).read_to_end(&mut buf).ok()?;
            Some(buf)
        };
        let dir = read(&mut cf, &format!("{vba}/dir")).and_then(|d| ovba_decompress(&d));
        budget.inflate(dir.as_ref().map_or(0, Vec::len), "VBA dir streams")?;
        let Some(dir) = dir else {
            report
                .errors
                .push(format!("{vba}/dir could not be decompressed"));
            continue;
        };
        for (name, stream, offset) in parse_dir(&dir) {
            budget.items(1, "VBA modules")?;
            let path = format!("{vba}/{stream}");
            let data = read(&mut cf, &path);
            budget.scan(data.as_ref().map_or(0, Vec::len), "VBA module streams")?;
            let Some(data) = data else {
                report
                    .errors
                    .push(format!("module stream {path} is missing"));
                continue;
            };
            let code = data
                .get(offset as usize..)
                .and_then(ovba_decompress)
                .unwrap_or_default();
            budget.inflate(code.len(), "VBA module sources")?;
            let text = latin1(&code);
            let mut source: String = text.chars().take(SOURCE_PREVIEW).collect();
            if text.len() > SOURCE_PREVIEW {
                source.push('…');
            }
            report.vba_modules.push(VbaModule {
                auto_exec: words_in(&text, AUTO_EXEC),
                suspicious: words_in(&text, SUSPICIOUS),
                name,
                stream: path,
                source_size: code.len(),
                source,
            });
        }
    }
    report.has_vba |= !report.vba_modules.is_empty();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decompresses_the_spec_example() {
        // MS-OVBA 3.2.3: "#aaabcdefaaaaghijaaaaaklaaamnopqaaaaaaaaaaaarstuvwxyzaaa"
        let compressed: [u8; 51] = [
            0x01, 0x2F, 0xB0, 0x00, 0x23, 0x61, 0x61, 0x61, 0x62, 0x63, 0x64, 0x65, 0x82, 0x66,
            0x00, 0x70, 0x61, 0x67, 0x68, 0x69, 0x6A, 0x01, 0x38, 0x08, 0x61, 0x6B, 0x6C, 0x00,
            0x30, 0x6D, 0x6E, 0x6F, 0x70, 0x06, 0x71, 0x02, 0x70, 0x04, 0x10, 0x72, 0x73, 0x74,
            0x75, 0x76, 0x10, 0x77, 0x78, 0x79, 0x7A, 0x00, 0x3C,
        ];
        let out = ovba_decompress(&compressed).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "#aaabcdefaaaaghijaaaaaklaaamnopqaaaaaaaaaaaarstuvwxyzaaa"
        );
    }
}
