//! `identify_file`: what a file is, by content (never by name), and which tool reads it further.
//!
//! Why our own detector and not libmagic: libmagic (through bindings) would agree with `file` by
//! construction, but it is C parsing hostile samples in the server's process (its CDF and ELF
//! readers have had memory-safety CVEs), it needs libmagic and its compiled database on every
//! host, and its answer is free text that would still have to be mapped to the stable `kind` and
//! `analysis_tool` the triage job routes on. The pure-Rust detectors on crates.io cover less of
//! what malware arrives in (`infer` and `file-format` read binary magic only: no mail, uuencode,
//! BinHex or scripts; `tree_magic_mini` needs the shared-mime-info database on the host). So the
//! magic numbers are read here, bounded and in safe Rust, after libmagic's own definitions
//! ([`crate::identify_formats`], [`crate::identify_text`]); bench/analysis_peers.py measures
//! the agreement with `file` by family (bench/analysis_identify.md).

use std::{io::Cursor, sync::Arc};

use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    common::{le_u16, le_u32, on_sample},
};

/// What a file is.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct FileKind {
    /// A short stable name: pe, elf, macho, ole2, ooxml, pdf, zip, apk, jar, 7z, rar, gzip, bzip2,
    /// xz, zstd, tar, cab, rtf, lnk, script, html, xml, text, empty, data.
    pub kind: String,
    /// A readable description ("PE32+ executable (DLL) x86-64", "Word 2007+ document", …).
    pub description: String,
    pub mime: String,
    /// The usual file extension, without the dot.
    pub extension: String,
    /// The tool of this server that reads this kind of file further (pe_info, document_info, …).
    pub analysis_tool: Option<String>,
    /// Format details found on the way (machine, bits, DLL, script language, …).
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl FileKind {
    pub(crate) fn new(
        kind: &str,
        description: impl Into<String>,
        mime: &str,
        ext: &str,
        tool: Option<&str>,
    ) -> Self {
        Self {
            kind: kind.into(),
            description: description.into(),
            mime: mime.into(),
            extension: ext.into(),
            analysis_tool: tool.map(str::to_string),
            details: Default::default(),
        }
    }
    pub(crate) fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }
}

/// The root storage CLSID of a Windows Installer database.
const MSI_CLSID: [u8; 16] = [
    0x84, 0x10, 0x0C, 0, 0, 0, 0, 0, 0xC0, 0, 0, 0, 0, 0, 0, 0x46,
];

/// How much of an OLE2 file is searched for its streams' names.
const OLE_WINDOW: usize = 8 << 20;

pub const OLE_MAGIC: &[u8] = &[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// The PE header offset when `b` starts a valid MZ/PE image.
pub fn pe_header_offset(b: &[u8]) -> Option<usize> {
    if !b.starts_with(b"MZ") {
        return None;
    }
    let off = le_u32(b, 0x3c)? as usize;
    (b.get(off..off.checked_add(4)?)? == b"PE\0\0").then_some(off)
}

/// Identifies `bytes` by content.
pub fn identify(b: &[u8]) -> FileKind {
    if b.is_empty() {
        return FileKind::new("empty", "empty file", "application/x-empty", "", None);
    }
    if let Some(k) = executable(b) {
        return k;
    }
    if b.starts_with(OLE_MAGIC) {
        return ole_kind(b);
    }
    if b.starts_with(b"PK\x03\x04") || b.starts_with(b"PK\x05\x06") {
        return zip_kind(b);
    }
    if b.starts_with(b"%PDF-") || memfind(&b[..b.len().min(1024)], b"%PDF-") {
        let version = memchr::memmem::find(&b[..b.len().min(1024)], b"%PDF-")
            .and_then(|p| b.get(p + 5..p + 8));
        let v = version
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        return FileKind::new(
            "pdf",
            format!("PDF document, version {v}"),
            "application/pdf",
            "pdf",
            Some("document_info"),
        )
        .with("version", v);
    }
    if b.starts_with(b"7z\xBC\xAF\x27\x1C") {
        return FileKind::new(
            "7z",
            "7-Zip archive",
            "application/x-7z-compressed",
            "7z",
            Some("archive_list"),
        );
    }
    if b.starts_with(b"Rar!\x1A\x07\x01\x00") {
        return FileKind::new(
            "rar",
            "RAR archive, version 5",
            "application/vnd.rar",
            "rar",
            Some("archive_list"),
        )
        .with("version", 5);
    }
    if b.starts_with(b"Rar!\x1A\x07\x00") {
        return FileKind::new(
            "rar",
            "RAR archive, version 4",
            "application/vnd.rar",
            "rar",
            Some("archive_list"),
        )
        .with("version", 4);
    }
    if b.starts_with(&[0x1F, 0x8B]) {
        return FileKind::new(
            "gzip",
            "gzip compressed data",
            "application/gzip",
            "gz",
            Some("archive_list"),
        );
    }
    if b.starts_with(b"BZh") && b.get(3).is_some_and(|c| (b'1'..=b'9').contains(c)) {
        return FileKind::new(
            "bzip2",
            "bzip2 compressed data",
            "application/x-bzip2",
            "bz2",
            Some("archive_list"),
        );
    }
    if b.starts_with(b"\xFD7zXZ\x00") {
        return FileKind::new(
            "xz",
            "XZ compressed data",
            "application/x-xz",
            "xz",
            Some("archive_list"),
        );
    }
    if b.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
        return FileKind::new(
            "zstd",
            "Zstandard compressed data",
            "application/zstd",
            "zst",
            Some("archive_list"),
        );
    }
    if b.get(257..262) == Some(b"ustar") {
        return FileKind::new(
            "tar",
            "POSIX tar archive",
            "application/x-tar",
            "tar",
            Some("archive_list"),
        );
    }
    if b.starts_with(b"MSCF\0\0\0\0") {
        return FileKind::new(
            "cab",
            "Microsoft Cabinet archive",
            "application/vnd.ms-cab-compressed",
            "cab",
            Some("archive_list"),
        );
    }
    if b.starts_with(b"{\\rt") {
        return FileKind::new(
            "rtf",
            "Rich Text Format document",
            "text/rtf",
            "rtf",
            Some("document_info"),
        );
    }
    if b.starts_with(&[0x4C, 0, 0, 0, 0x01, 0x14, 0x02, 0]) {
        return FileKind::new(
            "lnk",
            "Windows shortcut (LNK)",
            "application/x-ms-shortcut",
            "lnk",
            // document_info reads its target and arguments.
            Some("document_info"),
        );
    }
    if let Some(k) = crate::identify_formats::by_magic(b) {
        return k;
    }
    if let Some(k) = crate::identify_media::by_magic(b) {
        return k;
    }
    if b.starts_with(b"MZ") {
        return FileKind::new(
            "dos",
            "MS-DOS executable (no PE header)",
            "application/x-dosexec",
            "exe",
            Some("pe_info"),
        );
    }
    crate::identify_text::text_kind(b)
}

fn executable(b: &[u8]) -> Option<FileKind> {
    if let Some(pe) = pe_header_offset(b) {
        let machine = le_u16(b, pe + 4).unwrap_or(0);
        let characteristics = le_u16(b, pe + 22).unwrap_or(0);
        let magic = le_u16(b, pe + 24).unwrap_or(0);
        let is_dll = characteristics & 0x2000 != 0;
        let bits = if magic == 0x20b { 64 } else { 32 };
        let subsystem = le_u16(b, pe + 24 + 68).unwrap_or(0);
        // CLR runtime header: data directory 14.
        let dd = pe + 24 + if bits == 64 { 112 } else { 96 };
        let dotnet = le_u32(b, dd + 14 * 8).is_some_and(|rva| rva != 0);
        let arch = crate::pe::machine_name(machine);
        let role = crate::identify_formats::pe_role(subsystem, is_dll);
        let mut desc = format!(
            "PE32{} executable {role} {arch}",
            if bits == 64 { "+" } else { "" }
        );
        if dotnet {
            desc.push_str(", .NET assembly");
        }
        let installer = crate::identify_formats::pe_installer(b);
        if let Some(i) = installer {
            desc.push_str(", ");
            desc.push_str(i);
        }
        return Some(
            FileKind::new(
                "pe",
                desc,
                "application/vnd.microsoft.portable-executable",
                if is_dll { "dll" } else { "exe" },
                Some("pe_info"),
            )
            .with("machine", arch)
            .with("bits", bits)
            .with("dll", is_dll)
            .with("dotnet", dotnet)
            .with("subsystem", crate::pe_parts::subsystem_name(subsystem))
            .with("installer", installer),
        );
    }
    if b.starts_with(b"\x7FELF") {
        let bits = if b.get(4) == Some(&2) { 64 } else { 32 };
        let little = b.get(5) != Some(&2);
        let rd16 = |at| {
            b.get(at..at + 2).map(|s| {
                if little {
                    u16::from_le_bytes([s[0], s[1]])
                } else {
                    u16::from_be_bytes([s[0], s[1]])
                }
            })
        };
        let etype = match rd16(16).unwrap_or(0) {
            1 => "relocatable",
            2 => "executable",
            3 => "shared object",
            4 => "core file",
            _ => "file",
        };
        let machine = crate::elf::machine_name(rd16(18).unwrap_or(0));
        return Some(
            FileKind::new(
                "elf",
                format!("ELF {bits}-bit {etype} {machine}"),
                "application/x-elf",
                "",
                Some("elf_info"),
            )
            .with("bits", bits)
            .with("machine", machine)
            .with("type", etype),
        );
    }
    let m = b.get(..4)?;
    let (bits, little) = match m {
        [0xFE, 0xED, 0xFA, 0xCE] => (32, false),
        [0xCE, 0xFA, 0xED, 0xFE] => (32, true),
        [0xFE, 0xED, 0xFA, 0xCF] => (64, false),
        [0xCF, 0xFA, 0xED, 0xFE] => (64, true),
        [0xCA, 0xFE, 0xBA, wide @ (0xBE | 0xBF)] => {
            // Java class files share the 32-bit header's magic; a fat Mach-O has few architectures.
            let n = u32::from_be_bytes(b.get(4..8)?.try_into().ok()?);
            if *wide == 0xBE && (n == 0 || n > 20) {
                return Some(FileKind::new(
                    "java_class",
                    "Java class file",
                    "application/java-vm",
                    "class",
                    None,
                ));
            }
            return Some(
                FileKind::new(
                    "macho",
                    format!("Mach-O universal binary with {n} architectures"),
                    "application/x-mach-binary",
                    "",
                    Some("macho_info"),
                )
                .with("fat", true)
                .with("fat_header_bits", if *wide == 0xBF { 64 } else { 32 })
                .with("architectures", n),
            );
        }
        _ => return None,
    };
    let rd = |at: usize| {
        b.get(at..at + 4).map(|s| {
            let a = [s[0], s[1], s[2], s[3]];
            if little {
                u32::from_le_bytes(a)
            } else {
                u32::from_be_bytes(a)
            }
        })
    };
    let cpu = crate::macho::cpu_name(rd(4).unwrap_or(0));
    let ftype = match rd(12).unwrap_or(0) {
        1 => "object",
        2 => "executable",
        6 => "dynamic library",
        8 => "bundle",
        _ => "file",
    };
    Some(
        FileKind::new(
            "macho",
            format!("Mach-O {bits}-bit {ftype} {cpu}"),
            "application/x-mach-binary",
            "",
            Some("macho_info"),
        )
        .with("bits", bits)
        .with("cpu", cpu)
        .with("type", ftype),
    )
}

fn ole_kind(b: &[u8]) -> FileKind {
    // Stream names are stored UTF-16LE in the directory; a byte search is enough to tell them apart.
    // Bounded: the directory of any document short of OLE_WINDOW is read whole.
    let b = &b[..b.len().min(OLE_WINDOW)];
    let has = |name: &str| {
        let needle: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
        memfind(b, &needle)
    };
    let (desc, ext, mime) = if has("WordDocument") {
        (
            "Microsoft Word 97-2003 document",
            "doc",
            "application/msword",
        )
    } else if has("Workbook") || has("Book") {
        (
            "Microsoft Excel 97-2003 workbook",
            "xls",
            "application/vnd.ms-excel",
        )
    } else if has("PowerPoint Document") {
        (
            "Microsoft PowerPoint 97-2003 presentation",
            "ppt",
            "application/vnd.ms-powerpoint",
        )
    } else if has("__substg1.0_") {
        ("Outlook message", "msg", "application/vnd.ms-outlook")
    } else if memfind(&b[..b.len().min(1 << 20)], &MSI_CLSID) {
        ("Windows Installer package", "msi", "application/x-msi")
    } else {
        ("OLE2 compound document", "ole", "application/x-ole-storage")
    };
    FileKind::new("ole2", desc, mime, ext, Some("document_info")).with("vba", has("_VBA_PROJECT"))
}

fn zip_kind(b: &[u8]) -> FileKind {
    let names: Vec<String> = zip::ZipArchive::new(Cursor::new(b))
        .map(|z| {
            z.file_names()
                .take(10_000)
                .filter_map(|n| n.ok().map(|n| n.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let has = |n: &str| names.iter().any(|x| x == n);
    let prefix = |p: &str| names.iter().any(|x| x.starts_with(p));
    if has("[Content_Types].xml") {
        let (desc, ext, mime) = if prefix("word/") {
            (
                "Word 2007+ document",
                "docx",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            )
        } else if prefix("xl/") {
            (
                "Excel 2007+ workbook",
                "xlsx",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            )
        } else if prefix("ppt/") {
            (
                "PowerPoint 2007+ presentation",
                "pptx",
                "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            )
        } else {
            ("Office Open XML package", "zip", "application/zip")
        };
        let vba = names.iter().any(|n| n.ends_with("vbaProject.bin"));
        return FileKind::new("ooxml", desc, mime, ext, Some("document_info")).with("vba", vba);
    }
    if has("AndroidManifest.xml") && prefix("classes") {
        return FileKind::new(
            "apk",
            "Android package (APK)",
            "application/vnd.android.package-archive",
            "apk",
            Some("archive_list"),
        );
    }
    if has("META-INF/MANIFEST.MF") {
        return FileKind::new(
            "jar",
            "Java archive (JAR)",
            "application/java-archive",
            "jar",
            Some("archive_list"),
        );
    }
    if has("mimetype") && b.get(30..38) == Some(b"mimetype") {
        // The first entry, stored: its content is the package's media type.
        let mime: String = b[38..b.len().min(38 + 80)]
            .iter()
            .take_while(|c| c.is_ascii_graphic() && **c != b'P')
            .map(|&c| c as char)
            .collect();
        let (desc, ext) = match mime.rsplit('.').next().unwrap_or("") {
            "text" => ("OpenDocument Text", "odt"),
            "spreadsheet" => ("OpenDocument Spreadsheet", "ods"),
            "presentation" => ("OpenDocument Presentation", "odp"),
            "graphics" => ("OpenDocument Drawing", "odg"),
            _ if mime == "application/epub+zip" => ("EPUB document", "epub"),
            _ => ("OpenDocument / EPUB package", "zip"),
        };
        return FileKind::new("odf", desc, "application/zip", ext, Some("document_info"))
            .with("mimetype", mime);
    }
    if has("mimetype") && prefix("META-INF/") {
        return FileKind::new(
            "odf",
            "OpenDocument / EPUB package",
            "application/zip",
            "zip",
            Some("archive_list"),
        );
    }
    FileKind::new(
        "zip",
        "Zip archive",
        "application/zip",
        "zip",
        Some("archive_list"),
    )
    .with("entries", names.len())
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(hay, needle).is_some()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentifyArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct IdentifyOutput {
    /// The file that was read.
    pub read_path: String,
    pub size: u64,
    #[serde(flatten)]
    pub kind: FileKind,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "identify_file",
            "What the sample is, by its content (never its name): PE, ELF, Mach-O, OLE2, OOXML, PDF, \
             zip, 7z, RAR, gzip, tar, scripts, text; and which tool of this server reads it further.",
        )
        .title("Identify file")
        .timeout_s(30),
        move |ctx, a: IdentifyArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, |s, _| {
                    Ok::<_, ToolError>(IdentifyOutput {
                        read_path: s.read_path(),
                        size: s.bytes().len() as u64,
                        kind: identify(s.bytes()),
                    })
                })
                .await
            }
        },
    );
}
