//! Answers that used to be wrong without a warning (issue 18, item 7): a zip member whose declared
//! size understates its compressed data is flagged, a zip symlink member is listed as a symlink
//! with its target, and macho_info reads a 64-bit universal header (0xcafebabf).

mod corpus;
mod server;

use std::io::{Cursor, Write};

use serde_json::{Value, json};
use server::Server;

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// A zip of one stored member of 20,000 bytes whose local and central headers declare 10.
fn understated_zip() -> Vec<u8> {
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    w.start_file("small.txt", stored).unwrap();
    w.write_all(&data).unwrap();
    let mut b = w.finish().unwrap().into_inner();
    assert_eq!(&b[..4], b"PK\x03\x04");
    put32(&mut b, 22, 10);
    let central = memchr::memmem::find(&b, b"PK\x01\x02").unwrap();
    put32(&mut b, central + 24, 10);
    b
}

/// A zip with a regular file and a symlink member (mode 0o120777) pointing outside.
fn symlink_zip() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    w.start_file("readme.txt", opts).unwrap();
    w.write_all(b"hello").unwrap();
    w.add_symlink("link", "../../../etc/passwd", opts).unwrap();
    w.finish().unwrap().into_inner()
}

/// A universal binary with a 64-bit header (fat_arch_64) holding one x86-64 Mach-O slice.
fn fat64_macho() -> Vec<u8> {
    let slice = corpus::macho();
    let offset = 0x1000u64;
    let mut b = Vec::new();
    b.extend(0xcafe_babfu32.to_be_bytes());
    b.extend(1u32.to_be_bytes());
    b.extend(0x0100_0007u32.to_be_bytes()); // cputype x86-64
    b.extend(3u32.to_be_bytes()); // cpusubtype
    b.extend(offset.to_be_bytes());
    b.extend((slice.len() as u64).to_be_bytes());
    b.extend(12u32.to_be_bytes()); // align 2^12
    b.extend(0u32.to_be_bytes()); // reserved
    b.resize(offset as usize, 0);
    b.extend(slice);
    b
}

fn member<'a>(listing: &'a Value, name: &str) -> &'a Value {
    listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no member {name} in {listing}"))
}

fn flags(entry: &Value) -> Vec<&str> {
    entry["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_member_whose_declared_size_understates_its_data_is_flagged() {
    let server = Server::new(&[
        ("understated.zip", understated_zip()),
        ("honest.zip", corpus::zip_archive()),
    ]);
    let (v, is_error) = server
        .call(
            "archive_list",
            json!({"path": server.path("understated.zip")}),
        )
        .await;
    assert!(!is_error, "{v}");
    let small = member(&v, "small.txt");
    assert_eq!(small["size"], 10);
    assert_eq!(small["compressed_size"], 20_000);
    assert!(
        flags(small).contains(&"compressed_over_100x_declared_size"),
        "{small}"
    );

    let (v, _) = server
        .call("archive_list", json!({"path": server.path("honest.zip")}))
        .await;
    for entry in v["entries"].as_array().unwrap() {
        assert!(
            !flags(entry).contains(&"compressed_over_100x_declared_size"),
            "{entry}"
        );
    }
}

#[tokio::test]
async fn a_zip_symlink_member_is_listed_as_a_symlink_with_its_target() {
    let server = Server::new(&[("links.zip", symlink_zip())]);
    let (v, is_error) = server
        .call("archive_list", json!({"path": server.path("links.zip")}))
        .await;
    assert!(!is_error, "{v}");
    let link = member(&v, "link");
    assert_eq!(link["is_symlink"], true, "{link}");
    assert_eq!(link["link_target"], "../../../etc/passwd", "{link}");
    assert!(flags(link).contains(&"symlink"), "{link}");
    let file = member(&v, "readme.txt");
    assert_eq!(file["is_symlink"], false, "{file}");
    assert_eq!(file["link_target"], Value::Null, "{file}");
}

#[tokio::test]
async fn macho_info_reads_a_64_bit_universal_header() {
    let server = Server::new(&[("fat64.macho", fat64_macho())]);
    let (v, _) = server
        .call("identify_file", json!({"path": server.path("fat64.macho")}))
        .await;
    assert_eq!(v["kind"], "macho", "{v}");
    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("fat64.macho")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["universal"], true, "{v}");
    assert_eq!(v["errors"], json!([]), "{v}");
    let arch = &v["architectures"][0];
    assert_eq!(arch["cpu"], "x86-64", "{v}");
    let sections: Vec<&str> = arch["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(sections.contains(&"__TEXT,__text"), "{sections:?}");
}
