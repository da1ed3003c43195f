//! Hostile input: random bytes, and the corpus files with bytes flipped, cut or spliced or huge
//! counts written over their header fields, through every parser. Nothing may panic out of a tool
//! (library panics are contained and become tool_failed), the parsers written here (resource
//! walker, import walker, MS-OVBA, dir stream, PDF raw scan, strings, IOCs, carving) must not panic
//! at all — they are called outside any containment — and no answer may be larger than a small
//! multiple of its input.

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
        // The structures that exhausted the parsers, small: 200 descriptors sharing one thunk
        // array of 200 claim 40,000 imports from 6 KB; 100 segments claim 400 billion sections.
        corpus::import_bomb_pe(200, 200),
        corpus::section_bomb_macho(100),
        corpus::bind_bomb_macho(),
    ]
}

/// The most bytes of JSON any parser may answer for an input of `len` bytes: its answer is
/// bounded by the file's size, never by the counts the file claims.
fn answer_bound(len: usize) -> usize {
    16 * len + 256 * 1024
}

/// The size of `answer` as JSON (0 for an error: an error is a bounded answer).
fn json_len<T: serde::Serialize, E>(answer: &Result<T, E>) -> usize {
    answer
        .as_ref()
        .map(|v| serde_json::to_vec(v).map(|j| j.len()).unwrap_or(0))
        .unwrap_or(0)
}

/// Runs every parser on `b`; returns normally unless one of them panics or answers more than
/// [`answer_bound`] bytes.
fn every_parser(b: &[u8]) {
    let before = maljan_analysis::common::contained_panics();
    let budget = || Budget::for_file(b.len(), &|| false);
    let bound = answer_bound(b.len());
    let mut sizes: Vec<(&str, usize)> = vec![
        ("identify", json_len(&Ok::<_, ()>(identify(b)))),
        (
            "pe",
            json_len(&pe::pe_info(b, Default::default(), &budget())),
        ),
        ("elf", json_len(&elf::elf_info(b, 100, &budget()))),
        ("macho", json_len(&macho::macho_info(b, 100, &budget()))),
        ("archive", json_len(&archive::list(b, 100, &budget()))),
        (
            "document",
            json_len(&document::document_info(b, 100, &budget())),
        ),
        (
            "carve",
            json_len(&Ok::<_, ()>(carve::carve(b, 100, &|| false))),
        ),
        ("sections", json_len(&entropy::sections(b, &budget()))),
    ];
    let q = strings::StringQuery {
        min_len: 4,
        ascii: true,
        utf16le: true,
        pattern: None,
        ignore_case: false,
        offset: 0,
        limit: 10,
    };
    sizes.push((
        "strings",
        json_len(&Ok::<_, ()>(strings::extract(b, &q, &|| false).0)),
    ));
    let text = String::from_utf8_lossy(b);
    sizes.push((
        "iocs",
        json_len(&Ok::<_, ()>(iocs::extract(&text, iocs::KINDS))),
    ));
    let _ = ole::ovba_decompress(b);
    let _ = ole::parse_dir(b);
    sizes.push(("ole", json_len(&ole::analyze(b, 100, &budget()))));
    for (parser, size) in sizes {
        assert!(
            size <= bound,
            "{parser} answered {size} bytes of JSON for {} bytes of input",
            b.len()
        );
    }
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
    /// A huge count written over a header field: (offset in the first 512 or last 64 bytes,
    /// width 2/4/8, from the end, value).
    Count(usize, u8, bool, u64),
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
            Mutation::Count(i, width, from_end, value) => {
                let width = usize::from(*width);
                if b.len() < width {
                    continue;
                }
                // Header counts sit at aligned offsets near the start (or, for zip, the end).
                let span = if *from_end { 64 } else { 512 }.min(b.len() - width + 1);
                let at = (i % span) / width * width;
                let at = if *from_end { b.len() - width - at } else { at };
                b[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
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

/// The values a hostile header claims: all ones, the top of a signed range, just past a 16-bit
/// count, and in between.
fn huge_count() -> impl Strategy<Value = Mutation> {
    (
        any::<usize>(),
        prop_oneof![Just(2u8), Just(4u8), Just(8u8)],
        any::<bool>(),
        prop_oneof![
            Just(u64::MAX),
            Just(0x7fff_ffff),
            Just(0xffff_ffff),
            Just(0x1_0000),
            Just(0xffff),
            1u64..1_000_000,
        ],
    )
        .prop_map(|(i, w, end, v)| Mutation::Count(i, w, end, v))
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
            Just(b"Rar!\x1A\x07\x01\x00".to_vec()), Just(b"Rar!\x1A\x07\x00".to_vec()),
        ],
        rest in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        every_parser(&[magic, rest].concat());
    }

    #[test]
    fn huge_counts_in_the_headers_of_corpus_files_cost_no_more_than_the_file(
        which in 0usize..12,
        muts in proptest::collection::vec(huge_count(), 1..4),
    ) {
        let b = apply(seeds()[which].clone(), &muts);
        every_parser(&b);
    }

    #[test]
    fn mutated_corpus_files_never_panic(
        which in 0usize..12,
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
