//! RAR archives (RAR 5, the format WinRAR writes today, and RAR 4) give their members to
//! `extract_members`, each identified; a member that declares more than the limits allow is a
//! finding and is never decoded. The archives are stored ones written byte by byte
//! ([`maljan_testkit::rar`]); the decoding is unRAR's own.

mod corpus;

use maljan_analysis::members::{Limits, extract};
use maljan_testkit::rar;
use proptest::prelude::*;

fn members(b: &[u8]) -> maljan_analysis::members::Extraction {
    extract(b, Limits::default(), &|| false).0
}

#[test]
fn a_rar5_archive_gives_its_members_each_identified() {
    let pe = corpus::pe();
    let archive = rar::rar5(
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
    let x = members(&rar::rar4(&[("setup.exe", &pe)]));
    assert_eq!(x.format, "rar");
    assert_eq!(x.members.len(), 1, "{:?}", x.skipped);
    assert_eq!(x.members[0].name, "setup.exe");
    assert_eq!(x.members[0].kind, "pe");
    use sha2::Digest as _;
    assert_eq!(x.members[0].sha256, hex::encode(sha2::Sha256::digest(&pe)));
}

#[test]
fn a_member_declaring_more_than_the_limits_is_a_finding_and_is_not_decoded() {
    let archive = rar::rar5(
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
    let mut archive = rar::rar5(&[("a.txt", b"hello rar\n")], None);
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
        let mut archive = rar::rar5(&[("a.exe", &corpus::pe()[..300]), ("b.txt", b"bee")], None);
        let at = at % archive.len();
        archive[at] ^= flip;
        archive.truncate(archive.len() - cut % archive.len());
        let x = members(&archive);
        prop_assert!(x.members.len() <= 2);
        prop_assert!(x.total_bytes <= 303);
    }
}
