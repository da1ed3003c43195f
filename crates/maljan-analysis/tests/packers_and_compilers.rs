//! detect_packer names the packer, installer or compiler behind a sample, with the evidence for
//! it, on PEs that carry each tool's marks — and names nothing on a plain PE or a document that
//! merely mentions a packer.

mod corpus;

use corpus::packed::{self, sections_pe};
use maljan_analysis::toolchain::{Category, Confidence, Finding, detect};

fn findings(b: &[u8]) -> Vec<Finding> {
    detect(
        b,
        &maljan_analysis::budget::Budget::for_file(b.len(), &|| false),
    )
    .unwrap()
}

fn named<'a>(f: &'a [Finding], name: &str) -> &'a Finding {
    f.iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no {name} in {f:#?}"))
}

fn evidence_kinds(f: &Finding) -> Vec<&str> {
    f.evidence.iter().map(|e| e.kind.as_str()).collect()
}

#[test]
fn upx_is_found_by_its_sections_header_and_entry_point() {
    let f = findings(&packed::upx_pe());
    let upx = named(&f, "UPX");
    assert_eq!(upx.category, Category::Packer);
    assert_eq!(upx.confidence, Confidence::High);
    assert_eq!(upx.version.as_deref(), Some("4.22"));
    let kinds = evidence_kinds(upx);
    assert!(kinds.contains(&"section_name"), "{kinds:?}");
    assert!(kinds.contains(&"entry_point"), "{kinds:?}");
    assert!(kinds.contains(&"string"), "{kinds:?}");
    let details: Vec<&str> = upx.evidence.iter().map(|e| e.detail.as_str()).collect();
    assert!(details.contains(&"section UPX0"), "{details:?}");
    // The UPX! header sits just after the section table (4 sections with .idata).
    let magic = upx
        .evidence
        .iter()
        .find(|e| e.detail == "\"UPX!\"")
        .unwrap();
    assert_eq!(magic.offset, Some((packed::OPT + 224 + 160 + 5) as u64));
    // Named, so the entropy heuristic stays out of it.
    assert!(f.iter().all(|x| x.name != "unknown packer"), "{f:#?}");
}

/// Section names, entry-point bytes, the family expected and its category.
type Case = (
    &'static [&'static [u8]],
    &'static [u8],
    &'static str,
    Category,
);

#[test]
fn protectors_are_found_by_their_section_names_and_entry_points() {
    let cases: &[Case] = &[
        (
            &[b".text", b".aspack", b".adata"],
            &[0x60, 0xE8, 3, 0, 0, 0, 0xE9, 0xEB],
            "ASPack",
            Category::Packer,
        ),
        (
            &[b".text", b".MPRESS1", b".MPRESS2"],
            &[0x60, 0xE8, 0, 0, 0, 0, 0x58, 0x05],
            "MPRESS",
            Category::Packer,
        ),
        (
            &[b".text", b".themida", b".boot"],
            &[],
            "Themida/WinLicense",
            Category::Protector,
        ),
        (
            &[b".text", b".vmp0", b".vmp1"],
            &[],
            "VMProtect",
            Category::Protector,
        ),
        (
            &[b".text", b".petite"],
            &[0xB8, 0, 0x10, 0x40, 0, 0x66, 0x9C, 0x60, 0x50],
            "Petite",
            Category::Packer,
        ),
        (
            &[b".text", b".taz"],
            &[
                0xEB, 1, 0x90, 0x60, 0xE8, 0, 0, 0, 0, 0x8B, 0x1C, 0x24, 0x83, 0xC3,
            ],
            "PESpin",
            Category::Protector,
        ),
        (&[b"MEW", b".text"], &[], "MEW", Category::Packer),
        (&[b".text", b".WWP32"], &[], "WWPack32", Category::Packer),
        (
            &[b".text", b"yC"],
            &[],
            "yoda's Crypter",
            Category::Protector,
        ),
        (&[b".text", b".Upack"], &[], "Upack", Category::Packer),
        (
            &[b".text", b".data"],
            &[
                0x87, 0x25, 0, 0x10, 0x40, 0, 0x61, 0x94, 0x55, 0xA4, 0xB6, 0x80, 0xFF, 0x13,
            ],
            "FSG",
            Category::Packer,
        ),
    ];
    for (sections, ep, name, category) in cases {
        let f = findings(&sections_pe(sections, ep));
        let hit = named(&f, name);
        assert_eq!(hit.category, *category, "{name}");
        assert!(!hit.evidence.is_empty());
        if !ep.is_empty() {
            let at = hit
                .evidence
                .iter()
                .find(|e| e.kind == "entry_point")
                .unwrap_or_else(|| panic!("{name}: {hit:#?}"));
            assert!(at.offset.is_some());
        }
    }
}

#[test]
fn installers_and_bundles_are_found_with_their_versions() {
    let nsis = findings(&packed::nsis_pe());
    let n = named(&nsis, "NSIS");
    assert_eq!(n.category, Category::Installer);
    assert_eq!(n.version.as_deref(), Some("3.08"));
    assert_eq!(n.confidence, Confidence::High);
    assert!(n.evidence.iter().any(|e| e.detail == "\"NullsoftInst\""));

    let inno = findings(&packed::inno_pe());
    let i = named(&inno, "Inno Setup");
    assert_eq!(i.version.as_deref(), Some("6.2.0"));
    assert!(i.evidence.len() >= 2);

    let py = findings(&packed::pyinstaller_pe());
    let p = named(&py, "PyInstaller");
    assert_eq!(p.category, Category::Packer);
    assert_eq!(p.version.as_deref(), Some("Python 3.11"));
}

#[test]
fn compilers_are_named_from_their_runtime() {
    let go = findings(&packed::go_pe());
    let g = named(&go, "Go");
    assert_eq!(g.category, Category::Compiler);
    assert_eq!(g.version.as_deref(), Some("go1.22.1"));

    let rust = findings(&packed::rust_pe());
    assert_eq!(
        named(&rust, "Rust").version.as_deref(),
        Some("rustc commit 90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf")
    );

    let delphi = findings(&packed::delphi_pe());
    let d = named(&delphi, "Delphi");
    assert_eq!(d.confidence, Confidence::High);
    assert!(evidence_kinds(d).contains(&"linker_version"));
    assert!(evidence_kinds(d).contains(&"section_name"));
}

#[test]
fn a_plain_pe_and_a_document_naming_packers_are_not_packed() {
    let plain = findings(&corpus::pe());
    assert!(
        plain
            .iter()
            .all(|f| !matches!(f.category, Category::Packer | Category::Protector)),
        "{plain:#?}"
    );
    let text = b"This note mentions UPX0 UPX1 UPX! .aspack Nullsoft Install System and ConfusedByAttribute.";
    assert_eq!(findings(text), Vec::<Finding>::new());
}

#[test]
fn an_unnamed_packer_is_a_low_confidence_finding_from_entropy() {
    // High-entropy entry section, two imports, no known marks.
    let b = sections_pe(&[b".text", b".code2"], &[0x90]);
    let f = findings(&b);
    let u = named(&f, "unknown packer");
    assert_eq!(u.confidence, Confidence::Low);
    assert_eq!(u.evidence[0].kind, "entropy");
}
