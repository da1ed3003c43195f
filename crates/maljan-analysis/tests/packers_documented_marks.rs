//! detect_packer on crafted headers carrying the documented marks of packers and protectors no
//! package registry gives us (PECompact, Obsidium, .NET Reactor, FSG 1.x, Upack's folded header,
//! Themida's and MPRESS's 64-bit stubs, Enigma): each is named, by the mark given. These marks are
//! untested on real samples; UPX, NSIS, Go and MSVC are checked on real files beside Detect It
//! Easy in packers_agree_with_die.rs.

mod corpus;

use corpus::packed::sections_pe;
use maljan_analysis::toolchain::{Category, Finding, detect};

fn findings(b: &[u8]) -> Vec<Finding> {
    detect(
        b,
        &maljan_analysis::budget::Budget::for_file(b.len(), &|| false),
    )
    .unwrap()
}

/// Hex with `??` (written as 0x00 here) to bytes.
fn bytes(pat: &str) -> Vec<u8> {
    pat.split_whitespace()
        .map(|t| u8::from_str_radix(t, 16).unwrap_or(0))
        .collect()
}

#[test]
fn entry_point_stubs_name_their_family() {
    let cases: &[(&str, &str, Category)] = &[
        (
            "B8 00 10 40 00 50 64 FF 35 00 00 00 00 64 89 25 00 00 00 00 33 C0 89 08 50 45 43 32",
            "PECompact",
            Category::Packer,
        ),
        (
            "EB 06 68 00 10 40 00 C3 9C 60 BD",
            "PECompact",
            Category::Packer,
        ),
        (
            "EB 02 11 22 E8 25 00 00 00 EB 04 11 22 33 44 EB 01 55 8B 54 24 0C EB 01",
            "Obsidium",
            Category::Protector,
        ),
        (
            "E8 0E 00 00 00 8B 54 24 0C 83 82 B8 00 00 00 0D",
            "Obsidium",
            Category::Protector,
        ),
        (
            "55 8B EC B9 0F 00 00 00 6A 00 6A 00 49 75 F9 51 53 56 57 B8 00 20 40 00 E8",
            ".NET Reactor",
            Category::Protector,
        ),
        (
            "BE A4 01 40 00 AD 93 AD 97 AD 56 96 B2 80 A4 B6 80 FF 13 73 F9",
            "FSG",
            Category::Packer,
        ),
        (
            "BE 00 10 40 00 BF 00 20 40 00 BB 00 30 40 00 53 BB 00 40 40 00 B2 80",
            "FSG",
            Category::Packer,
        ),
        (
            "BE 88 01 40 00 AD 8B F8 95 A5 33 C0 33",
            "Upack",
            Category::Packer,
        ),
        (
            "48 83 EC 08 50 53 E8 01 00 00 00 CC 58 48 89 C3 48 FF C0",
            "Themida/WinLicense",
            Category::Protector,
        ),
        (
            "57 56 53 51 52 41 50 48 8D 05 00 10 00 00 48 8B 30 48 03 F0 48 2B C0 48 8B FE 66 AD C1 E0",
            "MPRESS",
            Category::Packer,
        ),
        (
            "E9 10 20 30 40 00 00 00 02 00 00 00 0C",
            "MEW",
            Category::Packer,
        ),
    ];
    for (ep, name, category) in cases {
        let f = findings(&sections_pe(&[b".text", b".data"], &bytes(ep)));
        let hit = f
            .iter()
            .find(|x| x.name == *name)
            .unwrap_or_else(|| panic!("{name} not named from its entry point: {f:#?}"));
        assert_eq!(hit.category, *category, "{name}");
        assert!(
            hit.evidence
                .iter()
                .any(|e| e.kind == "entry_point" && e.offset.is_some()),
            "{name}: {hit:#?}"
        );
    }
}

#[test]
fn a_shared_prologue_names_only_the_stub_it_continues_into() {
    // Enigma's stub opens like ASPack's and yoda's (pushad; call $+5; pop ebp; sub ebp, …) and goes
    // on with a second `sub ebp` and a jump: Enigma alone is named.
    let ep = bytes("60 E8 00 00 00 00 5D 81 ED 00 10 40 00 81 ED 00 20 00 00 E9");
    let f = findings(&sections_pe(&[b".text", b".data"], &ep));
    let named: Vec<&str> = f
        .iter()
        .filter(|x| matches!(x.category, Category::Packer | Category::Protector))
        .map(|x| x.name.as_str())
        .collect();
    assert_eq!(named, ["Enigma Protector"], "{f:#?}");
}

#[test]
fn upacks_folded_header_names_it() {
    // Upack writes the imported DLL's name into the DOS header and the PE header at 0x10.
    let mut pe = sections_pe(&[b".text", b".data"], &[]);
    let e_lfanew = u32::from_le_bytes(pe[0x3C..0x40].try_into().unwrap()) as usize;
    let header: Vec<u8> = pe[e_lfanew..e_lfanew + 0x200].to_vec();
    pe[2..0x10].copy_from_slice(b"KERNEL32.DLL\0\0");
    pe[0x10..0x10 + header.len()].copy_from_slice(&header);
    pe[0x3C..0x40].copy_from_slice(&0x10u32.to_le_bytes());
    let f = findings(&pe);
    let upack = f
        .iter()
        .find(|x| x.name == "Upack")
        .unwrap_or_else(|| panic!("{f:#?}"));
    assert!(
        upack
            .evidence
            .iter()
            .any(|e| e.kind == "header" && e.offset == Some(0)),
        "{upack:#?}"
    );
}

#[test]
fn the_net_reactor_section_names_it() {
    let f = findings(&sections_pe(&[b".text", b".reacto"], &[]));
    let hit = f
        .iter()
        .find(|x| x.name == ".NET Reactor")
        .unwrap_or_else(|| panic!("{f:#?}"));
    assert_eq!(hit.evidence[0].detail, "section .reacto");
}
