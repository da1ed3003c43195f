//! The binary data formats identify_file names so that they are not mistaken for unknown "data":
//! images, fonts, audio and video, time-zone files, gettext catalogues, OpenPGP keys, SQLite
//! databases — by the magic numbers libmagic's database gives them (Magdir images, fonts,
//! audio, animation, timezone, gnu, pgp, sqlite). None of them is opened further: they are
//! leaves, with no analysis tool, but an analyst sees what they are (and a PNG that is really
//! a program is not one of them: executables are tried first).

use crate::{
    common::{le_u16, le_u32},
    identify::FileKind,
};

fn leaf(kind: &str, desc: &str, mime: &str, ext: &str) -> FileKind {
    FileKind::new(kind, desc, mime, ext, None)
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Media and data formats known by a magic number, else None.
pub(crate) fn by_magic(b: &[u8]) -> Option<FileKind> {
    let at = |off: usize, m: &[u8]| b.get(off..off + m.len()) == Some(m);
    image(b, &at)
        .or_else(|| font(b, &at))
        .or_else(|| audio_video(b, &at))
        .or_else(|| data(b, &at))
}

fn image(b: &[u8], at: &dyn Fn(usize, &[u8]) -> bool) -> Option<FileKind> {
    let (desc, mime, ext) = if at(0, b"\x89PNG\r\n\x1a\n") {
        ("PNG image data", "image/png", "png")
    } else if at(0, &[0xFF, 0xD8, 0xFF]) {
        ("JPEG image data", "image/jpeg", "jpg")
    } else if at(0, b"GIF87a") || at(0, b"GIF89a") {
        ("GIF image data", "image/gif", "gif")
    } else if at(0, b"BM")
        && le_u32(b, 14).is_some_and(|h| matches!(h, 12 | 40 | 52 | 56 | 64 | 108 | 124))
    {
        ("PC bitmap", "image/bmp", "bmp")
    } else if at(0, b"II*\0") || at(0, b"MM\0*") {
        ("TIFF image data", "image/tiff", "tif")
    } else if at(0, b"RIFF") && at(8, b"WEBP") {
        (
            "RIFF (little-endian) data, Web/P image",
            "image/webp",
            "webp",
        )
    } else if at(0, b"Xcur") {
        ("X11 cursor", "image/x-xcursor", "")
    } else if (at(0, &[0, 0, 1, 0]) || at(0, &[0, 0, 2, 0]))
        && le_u16(b, 4).is_some_and(|n| (1..=64).contains(&n))
        // Each directory entry: reserved byte 0, colour planes 0/1 (icon).
        && b.get(9) == Some(&0)
    {
        let cursor = b[2] == 2;
        (
            if cursor {
                "MS Windows cursor resource"
            } else {
                "MS Windows icon resource"
            },
            "image/vnd.microsoft.icon",
            if cursor { "cur" } else { "ico" },
        )
    } else {
        return None;
    };
    Some(leaf("image", desc, mime, ext))
}

fn font(b: &[u8], at: &dyn Fn(usize, &[u8]) -> bool) -> Option<FileKind> {
    // A TrueType table directory: version 1.0 (or 'true'), then a table count that fits.
    let tables = || b.get(4..6).map(|n| u16::from_be_bytes([n[0], n[1]]));
    let (desc, mime, ext) = if (at(0, &[0, 1, 0, 0]) || at(0, b"true"))
        && tables().is_some_and(|n| (1..=64).contains(&n))
    {
        ("TrueType Font data", "font/sfnt", "ttf")
    } else if at(0, b"OTTO") && tables().is_some_and(|n| (1..=64).contains(&n)) {
        ("OpenType font data", "font/otf", "otf")
    } else if at(0, b"ttcf") {
        ("TrueType font collection data", "font/collection", "ttc")
    } else if at(0, b"wOFF") {
        ("Web Open Font Format", "font/woff", "woff")
    } else if at(0, b"wOF2") {
        ("Web Open Font Format (Version 2)", "font/woff2", "woff2")
    } else if at(34, b"LP")
        && le_u32(b, 8).is_some_and(|v| matches!(v, 0x1_0000 | 0x2_0001 | 0x2_0002))
    {
        (
            "Embedded OpenType (EOT)",
            "application/vnd.ms-fontobject",
            "eot",
        )
    } else if at(0, b"%!PS-AdobeFont-1.")
        || at(0, b"%!FontType1")
        || (at(0, &[0x80, 0x01]) && at(6, b"%!"))
    {
        ("PostScript Type 1 font", "application/x-font-type1", "pfb")
    } else {
        return None;
    };
    Some(leaf("font", desc, mime, ext))
}

fn audio_video(b: &[u8], at: &dyn Fn(usize, &[u8]) -> bool) -> Option<FileKind> {
    let audio = |desc: &str, mime: &str, ext: &str| Some(leaf("audio", desc, mime, ext));
    let video = |desc: &str, mime: &str, ext: &str| Some(leaf("video", desc, mime, ext));
    if at(0, b"OggS\0") {
        return audio("Ogg data", "audio/ogg", "ogg");
    }
    if at(0, b"fLaC") {
        return audio("FLAC audio bitstream data", "audio/flac", "flac");
    }
    if at(0, b"RIFF") && at(8, b"WAVE") {
        return audio(
            "RIFF (little-endian) data, WAVE audio",
            "audio/x-wav",
            "wav",
        );
    }
    if at(0, b"RIFF") && at(8, b"AVI ") {
        return video("RIFF (little-endian) data, AVI", "video/x-msvideo", "avi");
    }
    if at(0, b"ID3") && b.get(3).is_some_and(|v| (2..=4).contains(v)) {
        return audio("Audio file with ID3 version 2", "audio/mpeg", "mp3");
    }
    if at(0, b"MThd\0\0\0\x06") {
        return audio("Standard MIDI data", "audio/midi", "mid");
    }
    if at(4, b"ftyp") && be_u32(b, 0).is_some_and(|n| (8..=256).contains(&n)) {
        return video("ISO Media", "video/mp4", "mp4");
    }
    if at(0, &[0x1A, 0x45, 0xDF, 0xA3]) {
        let webm = memchr::memmem::find(&b[..b.len().min(64)], b"webm").is_some();
        return if webm {
            video("WebM", "video/webm", "webm")
        } else {
            video("Matroska data", "video/x-matroska", "mkv")
        };
    }
    None
}

fn data(b: &[u8], at: &dyn Fn(usize, &[u8]) -> bool) -> Option<FileKind> {
    if at(0, b"TZif")
        && b.get(4)
            .is_some_and(|v| matches!(v, 0 | b'2' | b'3' | b'4'))
    {
        return Some(leaf(
            "tzif",
            "timezone data",
            "application/octet-stream",
            "",
        ));
    }
    if at(0, &[0xDE, 0x12, 0x04, 0x95]) || at(0, &[0x95, 0x04, 0x12, 0xDE]) {
        let endian = if b[0] == 0xDE { "little" } else { "big" };
        return Some(
            leaf(
                "gettext",
                &format!("GNU message catalog ({endian} endian)"),
                "application/x-gettext-translation",
                "mo",
            )
            .with("endian", endian),
        );
    }
    if at(0, b"SQLite format 3\0") {
        return Some(leaf(
            "sqlite",
            "SQLite 3.x database",
            "application/vnd.sqlite3",
            "sqlite",
        ));
    }
    // An OpenPGP packet stream opening with a public or secret key packet (old format, 1- or
    // 2-byte length, then key version 3-5), as gpg writes keyrings.
    let version_at = match b.first()? {
        0x98 | 0x94 => Some(2),
        0x99 | 0x95 => Some(3),
        _ => None,
    };
    if let Some(v) = version_at
        && b.get(v).is_some_and(|v| (3..=5).contains(v))
    {
        let secret = matches!(b[0], 0x94 | 0x95);
        return Some(leaf(
            "pgp",
            if secret {
                "OpenPGP Secret Key"
            } else {
                "OpenPGP Public Key"
            },
            "application/pgp-keys",
            "gpg",
        ));
    }
    None
}
