//! The formats of identify_file beyond the executables, Office, PDF and the common archives of
//! `identify`: the rest of the archives and compressors malware arrives in (ARJ, cpio in its four
//! forms, ISO 9660, SZDD/KWAJ, SquashFS, lzma, lzip, ar), CHM, TNEF, DEX, by their magic numbers
//! as libmagic's database defines them.

use crate::{
    common::{le_u16, le_u32},
    identify::FileKind,
};

fn archive(kind: &str, desc: &str, mime: &str, ext: &str) -> FileKind {
    FileKind::new(kind, desc, mime, ext, Some("archive_list"))
}

/// The binary formats known by a magic number, else None.
pub(crate) fn by_magic(b: &[u8]) -> Option<FileKind> {
    let at = |off: usize, m: &[u8]| b.get(off..off + m.len()) == Some(m);
    // ARJ: 0x60 0xEA, then a basic header of at most 2600 bytes.
    if at(0, &[0x60, 0xEA]) && le_u16(b, 2).is_some_and(|n| n > 0 && n <= 2600) {
        return Some(archive(
            "arj",
            "ARJ archive data",
            "application/x-arj",
            "arj",
        ));
    }
    for (magic, form) in [
        (&b"070707"[..], "portable ASCII (odc)"),
        (b"070701", "new ASCII (newc)"),
        (b"070702", "new ASCII with CRC (crc)"),
    ] {
        if at(0, magic) {
            return Some(
                archive(
                    "cpio",
                    &format!("cpio archive, {form}"),
                    "application/x-cpio",
                    "cpio",
                )
                .with("form", form),
            );
        }
    }
    if at(0, &[0xC7, 0x71]) || at(0, &[0x71, 0xC7]) {
        let form = if b[0] == 0xC7 {
            "binary little-endian"
        } else {
            "binary big-endian"
        };
        return Some(
            archive(
                "cpio",
                &format!("cpio archive, {form}"),
                "application/x-cpio",
                "cpio",
            )
            .with("form", form),
        );
    }
    if at(0, b"ITSF\x03\0\0\0") {
        return Some(FileKind::new(
            "chm",
            "MS Windows HtmlHelp Data (CHM)",
            "application/vnd.ms-htmlhelp",
            "chm",
            Some("strings"),
        ));
    }
    if [0x8001, 0x8801, 0x9001].iter().any(|&o| at(o, b"CD001")) {
        return Some(archive(
            "iso9660",
            "ISO 9660 CD-ROM filesystem data",
            "application/x-iso9660-image",
            "iso",
        ));
    }
    if at(0, b"SZDD\x88\xF0\x27\x33") {
        return Some(archive(
            "szdd",
            "MS Compress archive data, SZDD variant",
            "application/x-ms-compress-szdd",
            "ex_",
        ));
    }
    if at(0, b"KWAJ\x88\xF0\x27\xD1") {
        return Some(archive(
            "kwaj",
            "MS Compress archive data, KWAJ variant",
            "application/x-ms-compress-kwaj",
            "ex_",
        ));
    }
    if at(0, b"hsqs") || at(0, b"sqsh") {
        return Some(archive(
            "squashfs",
            "Squashfs filesystem",
            "application/x-squashfs",
            "squashfs",
        ));
    }
    if at(0, b"LZIP") {
        return Some(archive(
            "lzip",
            "lzip compressed data",
            "application/x-lzip",
            "lz",
        ));
    }
    // lzma-alone: properties byte 0x5D and a power-of-two-ish dictionary size.
    if at(0, &[0x5D, 0, 0]) && b.len() >= 13 {
        return Some(archive(
            "lzma",
            "LZMA compressed data",
            "application/x-lzma",
            "lzma",
        ));
    }
    if at(0, b"!<arch>\n") {
        let deb = at(8, b"debian-binary");
        return Some(archive(
            "ar",
            if deb {
                "Debian binary package"
            } else {
                "current ar archive"
            },
            if deb {
                "application/vnd.debian.binary-package"
            } else {
                "application/x-archive"
            },
            if deb { "deb" } else { "a" },
        ));
    }
    if at(0, &[0x78, 0x9F, 0x3E, 0x22]) {
        return Some(FileKind::new(
            "tnef",
            "Transport Neutral Encapsulation Format (TNEF, winmail.dat)",
            "application/vnd.ms-tnef",
            "dat",
            Some("strings"),
        ));
    }
    // Symbian installation packages: SIS 9.x opens with UID1 0x10201A7A; the EPOC release 3-5
    // format carries UID2 0x1000006D and UID3 0x10000419 (Magdir/symbos, Magdir/epoc).
    let sis = if le_u32(b, 0) == Some(0x1020_1A7A) {
        Some("Symbian OS 9.x")
    } else if le_u32(b, 4) == Some(0x1000_006D) && le_u32(b, 8) == Some(0x1000_0419) {
        Some("EPOC release 3/4/5")
    } else {
        None
    };
    if let Some(release) = sis {
        return Some(
            FileKind::new(
                "sis",
                format!("Symbian installation file ({release})"),
                "application/vnd.symbian.install",
                "sis",
                Some("strings"),
            )
            .with("release", release),
        );
    }
    if at(0, b"%!PS") && !at(0, b"%!PS-AdobeFont") {
        return Some(FileKind::new(
            "postscript",
            "PostScript document text",
            "application/postscript",
            "ps",
            Some("strings"),
        ));
    }
    if at(0, b"dex\n") && b.get(7) == Some(&0) {
        let v = String::from_utf8_lossy(&b[4..7]).into_owned();
        return Some(
            FileKind::new(
                "dex",
                format!("Dalvik dex file version {v}"),
                "application/vnd.android.dex",
                "dex",
                Some("strings"),
            )
            .with("version", v),
        );
    }
    None
}

/// What a PE's subsystem makes of it, in libmagic's words.
pub(crate) fn pe_role(subsystem: u16, dll: bool) -> &'static str {
    match subsystem {
        1 if !dll => "(native) driver",
        10 => "(EFI application)",
        11 => "(EFI boot service driver)",
        12 => "(EFI runtime driver)",
        13 => "(EFI ROM)",
        _ if dll => "(DLL)",
        2 => "(GUI)",
        3 => "(console)",
        _ => "",
    }
}

/// The installer a PE carries, from the marks its stub leaves in the first MiB.
pub(crate) fn pe_installer(b: &[u8]) -> Option<&'static str> {
    let head = &b[..b.len().min(1 << 20)];
    let has = |m: &[u8]| memchr::memmem::find(head, m).is_some();
    if has(b"NullsoftInst") || has(b"Nullsoft Install System") {
        Some("Nullsoft Installer self-extracting archive")
    } else if has(b"Inno Setup Setup Data") || has(b"InnoSetupLdrWindow") {
        Some("Inno Setup installer")
    } else if has(b"InstallShield") && has(b"ISSetup") {
        Some("InstallShield setup")
    } else {
        None
    }
}
