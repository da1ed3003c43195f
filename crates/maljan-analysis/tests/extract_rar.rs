//! RAR archives (RAR 5, the format WinRAR writes today, and RAR 4) give their members to
//! `extract_members`, each identified; a member that declares more than the limits allow is a
//! finding and is never decoded. No RAR writer installs from the registries (RAR compression is
//! RARLAB's alone), so the test writes stored (method 0) archives byte by byte from RARLAB's
//! format notes; the decoding is unRAR's own.

mod corpus;

use maljan_analysis::members::{Limits, extract};
use proptest::prelude::*;

fn members(b: &[u8]) -> maljan_analysis::members::Extraction {
    extract(b, Limits::default(), &|| false).0
}

/// RAR 5's variable-length integer: 7 bits a byte, low bits first.
fn vint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// One RAR 5 block: CRC32 of (size, body), the size of the body, the body.
fn rar5_block(body: &[u8], out: &mut Vec<u8>) {
    let mut sized = Vec::new();
    vint(body.len() as u64, &mut sized);
    sized.extend_from_slice(body);
    out.extend_from_slice(&crc32fast::hash(&sized).to_le_bytes());
    out.extend_from_slice(&sized);
}

/// A RAR 5 archive of stored files; `declared` overrides a file's unpacked size.
fn rar5(files: &[(&str, &[u8])], declared: Option<u64>) -> Vec<u8> {
    let mut out = b"Rar!\x1a\x07\x01\x00".to_vec();
    // Main archive header: type 1, no header flags, no archive flags.
    rar5_block(&[1, 0, 0], &mut out);
    for (name, data) in files {
        let mut body = Vec::new();
        vint(2, &mut body); // type: file
        vint(0x0002, &mut body); // header flags: a data area follows
        vint(data.len() as u64, &mut body); // data size
        vint(0x0004, &mut body); // file flags: data CRC32 present
        vint(declared.unwrap_or(data.len() as u64), &mut body);
        vint(0x20, &mut body); // attributes: archive
        body.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        vint(0, &mut body); // compression: version 0, not solid, method 0 (store)
        vint(0, &mut body); // host OS: Windows
        vint(name.len() as u64, &mut body);
        body.extend_from_slice(name.as_bytes());
        rar5_block(&body, &mut out);
        out.extend_from_slice(data);
    }
    // End of archive: type 5, no flags.
    rar5_block(&[5, 0, 0], &mut out);
    out
}

/// A RAR 4 archive of stored files.
fn rar4(files: &[(&str, &[u8])]) -> Vec<u8> {
    fn block(head: &[u8], out: &mut Vec<u8>) {
        let crc = (crc32fast::hash(head) & 0xffff) as u16;
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(head);
    }
    let mut out = b"Rar!\x1a\x07\x00".to_vec();
    // Main header: type 0x73, no flags, 13 bytes, reserved fields zero.
    block(&[0x73, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0], &mut out);
    for (name, data) in files {
        let mut head = vec![0x74];
        head.extend_from_slice(&0x8000u16.to_le_bytes()); // LONG_BLOCK: a data area follows
        head.extend_from_slice(&(32 + name.len() as u16).to_le_bytes());
        head.extend_from_slice(&(data.len() as u32).to_le_bytes()); // packed size
        head.extend_from_slice(&(data.len() as u32).to_le_bytes()); // unpacked size
        head.push(0); // host OS: MS-DOS
        head.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        head.extend_from_slice(&0x5a21_6000u32.to_le_bytes()); // DOS time: 2025-01-01
        head.push(20); // version needed: 2.0
        head.push(0x30); // method: store
        head.extend_from_slice(&(name.len() as u16).to_le_bytes());
        head.extend_from_slice(&0x20u32.to_le_bytes()); // attributes: archive
        head.extend_from_slice(name.as_bytes());
        block(&head, &mut out);
        out.extend_from_slice(data);
    }
    block(&[0x7b, 0x00, 0x40, 7, 0], &mut out);
    out
}

#[test]
fn a_rar5_archive_gives_its_members_each_identified() {
    let pe = corpus::pe();
    let archive = rar5(
        &[
            ("invoice.exe", &pe),
            ("notes/readme.txt", b"call 10.1.2.3 now\n"),
        ],
        None,
    );
    let x = members(&archive);
    assert_eq!(x.format, "rar", "{:?}", x.skipped);
    let got: Vec<(&str, &str, u64)> = x
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.kind.as_str(), m.size))
        .collect();
    assert_eq!(
        got,
        [
            ("invoice.exe", "pe", pe.len() as u64),
            ("notes/readme.txt", "text", 18)
        ],
        "{:?}",
        x.skipped
    );
    assert!(x.members.iter().all(|m| m.source == "rar" && !m.encrypted));

    // archive_list reads the same headers, decoding nothing.
    let budget = maljan_analysis::budget::Budget::for_file(archive.len(), &|| false);
    let l = maljan_analysis::archive::list(&archive, 100, &budget).unwrap();
    let listed: Vec<(&str, u64)> = l
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.size))
        .collect();
    assert_eq!(
        listed,
        [("invoice.exe", pe.len() as u64), ("notes/readme.txt", 18)]
    );
}

#[test]
fn a_rar4_archive_gives_its_members() {
    let pe = corpus::pe();
    let x = members(&rar4(&[("setup.exe", &pe)]));
    assert_eq!(x.format, "rar");
    assert_eq!(x.members.len(), 1, "{:?}", x.skipped);
    assert_eq!(x.members[0].name, "setup.exe");
    assert_eq!(x.members[0].kind, "pe");
    use sha2::Digest as _;
    assert_eq!(x.members[0].sha256, hex::encode(sha2::Sha256::digest(&pe)));
}

#[test]
fn a_member_declaring_more_than_the_limits_is_a_finding_and_is_not_decoded() {
    let archive = rar5(
        &[("bomb.bin", b"tiny"), ("after.txt", b"still read\n")],
        Some(40 * 1024 * 1024 * 1024),
    );
    let x = members(&archive);
    assert!(
        x.limits_hit
            .iter()
            .any(|h| h.member.as_deref() == Some("bomb.bin")),
        "{:?}",
        x.limits_hit
    );
    assert!(x.members.iter().all(|m| m.name != "bomb.bin"));
}

#[test]
fn a_damaged_rar_is_a_clear_skip_not_an_error() {
    let mut archive = rar5(&[("a.txt", b"hello rar\n")], None);
    let data_at = archive.len() - 10 - 4; // inside the stored data, before the end block
    archive[data_at] ^= 0xff;
    let x = members(&archive);
    assert_eq!(x.format, "rar");
    assert!(x.members.is_empty(), "{:?}", x.members);
    assert!(
        x.skipped.iter().any(|s| s.reason.contains("damaged")),
        "{:?}",
        x.skipped
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any damage to a RAR (a byte flipped anywhere, the tail cut) is read as far as it goes:
    /// members or skips, never a crash, never more than the archive held.
    #[test]
    fn a_damaged_or_cut_rar_never_crashes(at in 0usize..400, flip in 1u8..=255, cut in 0usize..400) {
        let mut archive = rar5(&[("a.exe", &corpus::pe()[..300]), ("b.txt", b"bee")], None);
        let at = at % archive.len();
        archive[at] ^= flip;
        archive.truncate(archive.len() - cut % archive.len());
        let x = members(&archive);
        prop_assert!(x.members.len() <= 2);
        prop_assert!(x.total_bytes <= 303);
    }
}
