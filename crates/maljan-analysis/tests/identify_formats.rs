//! identify_file names the formats malware arrives in, by content: archives and compressors
//! beyond zip (ARJ, cpio in its four forms, ISO 9660, SZDD, SquashFS, lzma, lzip, ar), CHM,
//! TNEF, DEX, mail and mailboxes, encodings (uuencode, BinHex, base64, hex), scripts, PE roles
//! (driver, EFI, DLL) and installers.

mod corpus;

use maljan_analysis::identify;

fn kind(b: &[u8]) -> (String, String) {
    let k = identify(b);
    (k.kind, k.description)
}

fn padded(head: &[u8], len: usize) -> Vec<u8> {
    let mut b = head.to_vec();
    b.resize(len, 0);
    b
}

#[test]
fn archives_and_compressors() {
    let mut iso = vec![0u8; 0x9000];
    iso[0x8001..0x8006].copy_from_slice(b"CD001");
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (
            padded(&[0x60, 0xEA, 0x22, 0x00], 64),
            "arj",
            "ARJ archive data",
        ),
        (
            padded(b"070707000001", 80),
            "cpio",
            "cpio archive, portable ASCII (odc)",
        ),
        (
            padded(b"070701000001", 80),
            "cpio",
            "cpio archive, new ASCII (newc)",
        ),
        (
            padded(b"070702000001", 80),
            "cpio",
            "cpio archive, new ASCII with CRC (crc)",
        ),
        (
            padded(&[0xC7, 0x71, 1, 0], 80),
            "cpio",
            "cpio archive, binary little-endian",
        ),
        (
            padded(&[0x71, 0xC7, 0, 1], 80),
            "cpio",
            "cpio archive, binary big-endian",
        ),
        (iso, "iso9660", "ISO 9660 CD-ROM filesystem data"),
        (
            padded(b"SZDD\x88\xF0\x27\x33A", 40),
            "szdd",
            "MS Compress archive data, SZDD variant",
        ),
        (padded(b"hsqs", 96), "squashfs", "Squashfs filesystem"),
        (
            padded(&[0x5D, 0, 0, 0x80, 0], 32),
            "lzma",
            "LZMA compressed data",
        ),
        (padded(b"LZIP\x01", 32), "lzip", "lzip compressed data"),
        (
            padded(b"!<arch>\ndebian-binary   ", 80),
            "ar",
            "Debian binary package",
        ),
    ];
    for (b, k, d) in cases {
        assert_eq!(kind(&b), (k.to_string(), d.to_string()));
        assert_eq!(
            identify(&b).analysis_tool.as_deref(),
            Some("archive_list"),
            "{k}"
        );
    }
}

#[test]
fn documents_mail_and_android() {
    assert_eq!(kind(&padded(b"ITSF\x03\0\0\0\x60\0\0\0", 96)).0, "chm");
    assert_eq!(
        kind(&padded(&[0x78, 0x9F, 0x3E, 0x22, 0x00, 0x00], 64)).0,
        "tnef"
    );
    let dex = kind(&padded(b"dex\n035\0", 112));
    assert_eq!(dex, ("dex".into(), "Dalvik dex file version 035".into()));

    let mail = b"Received: from mx.example.com by mail.example.org\r\nFrom: a@example.com\r\nTo: b@example.org\r\nSubject: invoice\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n";
    assert_eq!(kind(mail), ("email".into(), "SMTP mail, ASCII text".into()));
    let rfc822 = b"From: a@example.com\nTo: b@example.org\nSubject: hi\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\nbody\n";
    assert_eq!(kind(rfc822).1, "RFC 822 mail, ASCII text");
    let mbox =
        b"From a@example.com Mon Jan  1 00:00:00 2024\nFrom: a@example.com\nSubject: x\n\nbody\n";
    assert_eq!(kind(mbox).0, "mbox");
}

#[test]
fn encodings() {
    let uu = b"begin 644 payload.exe\nM35J0``,````$````__\\``+@`````````0```````````````````````````\n`\nend\n";
    assert_eq!(kind(uu).0, "uuencode");
    let hqx = b"(This file must be converted with BinHex 4.0)\n:#&4&8e3\"5%9fC'PZ!!!!!!!!\n";
    assert_eq!(kind(hqx), ("binhex".into(), "BinHex binary text".into()));
    let b64 = "TVqQAAMAAAAEAAAA//8AALgAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAAAAA4fug4AtAnNIbgBTM0hVGhpcyBwcm9ncmFt\nIGNhbm5vdCBiZSBydW4gaW4gRE9TIG1vZGUuDQ0KJAAAAAAAAAA=\n";
    assert_eq!(kind(b64.as_bytes()).0, "base64");
    let hex = "4d5a90000300000004000000ffff0000b800000000000000400000000000000000000000000000\n";
    assert_eq!(kind(hex.as_bytes()).0, "hex");
    // Prose is text, not an encoding.
    assert_eq!(
        kind(b"Just a note about the meeting tomorrow at ten.\n").0,
        "text"
    );
}

#[test]
fn scripts() {
    let cases: &[(&str, &str)] = &[
        (
            "#include <MsgBoxConstants.au3>\n#NoTrayIcon\nFunc Main()\n  DllCall(\"kernel32.dll\", \"int\", \"Sleep\")\nEndFunc\n",
            "AutoIt",
        ),
        (
            "use strict;\nuse warnings;\nmy $x = shift;\nprint $x =~ /a/;\n",
            "Perl",
        ),
        (
            "var sh = new ActiveXObject(\"WScript.Shell\");\nvar x = 1;\nfunction f() { sh.Run(\"calc\"); }\n",
            "JScript",
        ),
        ("@echo off\nsetlocal\nset /a n=1\ngoto end\n", "Batch"),
        (
            "require 'net/http'\nclass Beacon\n  attr_accessor :host\n  def run\n    [1, 2].each do |i|\n      puts i\n    end\n  end\nend\n",
            "Ruby",
        ),
    ];
    for (src, lang) in cases {
        let k = identify(src.as_bytes());
        assert_eq!(k.kind, "script", "{src}");
        assert_eq!(k.details["language"], *lang, "{src}");
    }
}

#[test]
fn pe_roles_and_installers() {
    use corpus::packed;
    let mut driver = packed::pe32(
        vec![packed::sec(b".text", vec![0xC3], packed::CODE)],
        0,
        0,
        &[],
        &[],
    );
    driver[packed::OPT + 68] = 1; // native
    assert_eq!(kind(&driver).1, "PE32 executable (native) driver x86");
    let mut efi = driver.clone();
    efi[packed::OPT + 68] = 10;
    assert_eq!(kind(&efi).1, "PE32 executable (EFI application) x86");
    let nsis = identify(&packed::nsis_pe());
    assert_eq!(
        nsis.description,
        "PE32 executable (GUI) x86, Nullsoft Installer self-extracting archive"
    );
    assert_eq!(
        nsis.details["installer"],
        "Nullsoft Installer self-extracting archive"
    );
    assert_eq!(kind(&corpus::pe()).1, "PE32+ executable (console) x86-64");
}
