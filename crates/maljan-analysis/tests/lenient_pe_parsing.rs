//! pe_info on malformed PEs that the loader and pefile still read: every header, section and
//! import that parses comes back, the faults are anomalies, and only a file in which not even
//! the COFF header parses is an error.

mod corpus;

use maljan_analysis::{
    budget::Budget,
    identify::identify,
    pe::{PeParts, pe_info},
};
use proptest::prelude::*;

fn info(b: &[u8]) -> Result<maljan_analysis::pe::PeInfo, maljan_server::ToolError> {
    pe_info(b, PeParts::default(), &Budget::for_file(b.len(), &|| false))
}

#[test]
fn the_tiny_pe_with_overlapping_headers_reads_whole() {
    let b = corpus::malformed::tiny_pe();
    assert_eq!(b.len(), 544);
    assert_eq!(identify(&b).kind, "pe");
    let p = info(&b).unwrap();
    assert_eq!(p.machine, "x86");
    assert_eq!(p.bits, 32);
    assert_eq!(p.entry_point, 0x180);
    assert_eq!(p.entry_section.as_deref(), Some(".text"));
    let sections = p.sections.as_ref().unwrap();
    assert_eq!(sections.len(), 1);
    assert_eq!(sections[0].virtual_address, 0);
    let imports = p.imports.as_ref().unwrap();
    assert_eq!(imports.len(), 1, "{imports:?}");
    assert_eq!(imports[0].dll, "kernel32.dll");
    assert_eq!(imports[0].functions, ["ExitProcess"]);
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.contains("writable and executable")),
        "{:?}",
        p.anomalies
    );
}

#[test]
fn a_truncated_section_table_keeps_the_headers_and_what_sections_fit() {
    let b = corpus::malformed::truncated_pe();
    let p = info(&b).unwrap();
    assert_eq!(p.machine, "x86");
    assert_eq!(p.subsystem, "windows_gui");
    let sections = p.sections.as_ref().unwrap();
    assert!(!sections.is_empty(), "{p:?}");
    assert_eq!(sections[0].name, ".text");
    assert!(
        p.anomalies.iter().any(|a| a.contains("malformed PE")),
        "{:?}",
        p.anomalies
    );
}

#[test]
fn directories_that_point_nowhere_are_anomalies_not_errors() {
    let b = corpus::malformed::bad_directories_pe();
    let p = info(&b).unwrap();
    assert_eq!(p.sections.as_ref().unwrap()[0].name, ".text");
    assert_eq!(p.imports.as_ref().unwrap().len(), 0);
    assert!(
        p.anomalies.iter().any(|a| a.contains("malformed PE")),
        "{:?}",
        p.anomalies
    );
}

#[test]
fn nothing_that_parses_is_still_an_error() {
    for b in [
        b"MZ".to_vec(),
        b"MZ\0\0garbage without a PE header".to_vec(),
        vec![0x4D, 0x5A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        let e = info(&b).unwrap_err();
        assert_eq!(e.code, maljan_server::ErrorCode::UnsupportedFormat, "{e:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any file cut from a good PE, past its COFF header, still answers with its headers.
    #[test]
    fn any_cut_past_the_coff_header_reads(cut in 0x98usize..0x600) {
        let b = corpus::packed::upx_pe();
        let p = info(&b[..cut]).unwrap();
        prop_assert_eq!(p.machine, "x86");
    }

    /// Bytes flipped anywhere in the headers never panic, and a parse that succeeds names the machine.
    #[test]
    fn flipped_header_bytes_never_panic(at in 0usize..0x400, v in any::<u8>()) {
        let mut b = corpus::packed::nsis_pe();
        b[at] = v;
        if let Ok(p) = info(&b) {
            prop_assert!(!p.machine.is_empty());
        }
    }
}
