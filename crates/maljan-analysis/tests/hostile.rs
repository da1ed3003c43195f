//! Hostile input: random bytes, and the corpus files with bytes flipped, cut or spliced, through every
//! parser. Nothing may panic out of a tool (library panics are contained and become tool_failed), and
//! the parsers written here (resource walker, MS-OVBA, dir stream, PDF raw scan, strings, IOCs,
//! carving) must not panic at all — they are called outside any containment.

mod corpus;

use maljan_analysis::{
    archive, budget::Budget, carve, document, elf, entropy, identify, iocs, macho, ole, pe, strings,
};
use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    vec![
        corpus::pe(),
        corpus::elf(),
        corpus::macho(),
        corpus::ole_with_vba("Macros/", true),
        corpus::docm(),
        corpus::pdf(),
        corpus::zip_archive(),
        corpus::tar_archive(),
        corpus::gzip(&corpus::tar_archive(), "a.tar"),
    ]
}

/// Runs every parser on `b`; returns normally unless one of them panics.
fn every_parser(b: &[u8]) {
    let before = maljan_analysis::common::contained_panics();
    let _ = identify(b);
    let budget = || Budget::for_file(b.len(), &|| false);
    let _ = pe::pe_info(b, Default::default(), &budget());
    let _ = elf::elf_info(b, 100, &budget());
    let _ = macho::macho_info(b, 100, &budget());
    let _ = archive::list(b, 100, &budget());
    let _ = document::document_info(b, 100);
    let _ = carve::carve(b, 100, &|| false);
    let _ = entropy::sections(b, &budget());
    let q = strings::StringQuery {
        min_len: 4,
        ascii: true,
        utf16le: true,
        pattern: None,
        ignore_case: false,
        offset: 0,
        limit: 10,
    };
    let _ = strings::extract(b, &q, &|| false);
    let _ = iocs::extract(&String::from_utf8_lossy(b), iocs::KINDS);
    let _ = ole::ovba_decompress(b);
    let _ = ole::parse_dir(b);
    let _ = ole::analyze(b, 100);
    // Containment is the last line of defence, not a parsing strategy: on these inputs no parser
    // (ours or a library's) panicked at all.
    assert_eq!(
        maljan_analysis::common::contained_panics(),
        before,
        "a parser panicked on {} bytes",
        b.len()
    );
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Cut(usize),
    Splice(usize, Vec<u8>),
    Zero(usize, usize),
}

fn apply(mut b: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        if b.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(i, x) => {
                let i = i % b.len();
                b[i] ^= x | 1;
            }
            Mutation::Cut(i) => b.truncate(i % b.len()),
            Mutation::Splice(i, data) => {
                let i = i % b.len();
                b.splice(i..i, data.iter().copied());
            }
            Mutation::Zero(i, n) => {
                let i = i % b.len();
                let end = (i + n).min(b.len());
                b[i..end].fill(0xFF);
            }
        }
    }
    b
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Flip(i, x)),
        1 => any::<usize>().prop_map(Mutation::Cut),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..64)).prop_map(|(i, d)| Mutation::Splice(i, d)),
        2 => (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Zero(i, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..4096)) {
        every_parser(&b);
    }

    #[test]
    fn random_bytes_behind_a_magic_never_panic(
        magic in prop_oneof![
            Just(b"MZ".to_vec()), Just(b"\x7FELF\x02\x01\x01".to_vec()), Just(b"\xCF\xFA\xED\xFE".to_vec()),
            Just(b"\xCA\xFE\xBA\xBE\x00\x00\x00\x02".to_vec()), Just(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1".to_vec()),
            Just(b"PK\x03\x04".to_vec()), Just(b"%PDF-1.7\n".to_vec()), Just(b"\x1F\x8B\x08\x08".to_vec()),
            Just(b"7z\xBC\xAF\x27\x1C".to_vec()), Just(b"MSCF\0\0\0\0".to_vec()), Just(vec![1u8]),
        ],
        rest in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        every_parser(&[magic, rest].concat());
    }

    #[test]
    fn mutated_corpus_files_never_panic(
        which in 0usize..9,
        muts in proptest::collection::vec(mutation(), 1..8),
    ) {
        let b = apply(seeds()[which].clone(), &muts);
        every_parser(&b);
    }
}

/// The hand-written parsers are not inside `contain`: their results on the mutated corpus must come
/// from their own checks. This runs them over every single-byte truncation of the OLE and PE seeds.
#[test]
fn every_truncation_of_the_seeds_is_survived() {
    for seed in [
        corpus::ole_with_vba("Macros/", true),
        corpus::pe(),
        corpus::pdf(),
    ] {
        for cut in (0..seed.len()).step_by(29) {
            every_parser(&seed[..cut]);
        }
    }
    let compressed = corpus::ovba_compress(corpus::MACRO_SOURCE.as_bytes());
    for cut in 0..compressed.len() {
        let _ = ole::ovba_decompress(&compressed[..cut]);
    }
    assert_eq!(
        ole::ovba_decompress(&compressed).unwrap(),
        corpus::MACRO_SOURCE.as_bytes()
    );
}
