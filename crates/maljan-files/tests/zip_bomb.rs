//! Zip extraction is bounded (issue 18 item 5): total bytes, member count and expansion ratio,
//! each configurable; over a bound, or on any failure mid-way, the answer names what stopped
//! it and the target tree is exactly as it was.

mod common;

use std::{collections::BTreeMap, io::Write, path::Path};

use common::Harness;
use maljan_files::ExtractionLimits;
use serde_json::json;
use zip::{CompressionMethod, ZipWriter, write::SimpleFileOptions};

/// Every entry below `dir`: kind, size, mode, modification time and content.
fn tree(dir: &Path) -> BTreeMap<String, (bool, u64, u32, std::time::SystemTime, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.path().symlink_metadata().unwrap();
            let content = if meta.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.path().strip_prefix(dir).unwrap().display().to_string(),
                (
                    meta.is_dir(),
                    meta.len(),
                    meta.permissions().mode(),
                    meta.modified().unwrap(),
                    content,
                ),
            )
        })
        .collect()
}

/// A zip of the given members, deflated unless `stored`.
fn zip_of(members: &[(&str, Vec<u8>)], stored: bool) -> Vec<u8> {
    let mut zw = ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let method = if stored {
        CompressionMethod::Stored
    } else {
        CompressionMethod::Deflated
    };
    for (name, data) in members {
        zw.start_file(
            *name,
            SimpleFileOptions::default().compression_method(method),
        )
        .unwrap();
        zw.write_all(data).unwrap();
    }
    zw.finish().unwrap().into_inner()
}

/// A target that already holds files, one of which the archive would overwrite.
fn with_target(h: &Harness) {
    h.write("out/keep.txt", "kept");
    h.write("out/a/overwritten.txt", "old content");
}

async fn refused(h: &Harness, zip: &str, limit_name: &str) {
    let before = tree(&h.root());
    let (code, message) = h
        .error(
            "FA_unzip_all",
            json!({"zip_file_path": h.p(zip), "extract_path": h.p("out")}),
        )
        .await;
    assert_eq!(code, "bad_argument", "{message}");
    assert!(message.contains(limit_name), "{message}");
    assert_eq!(tree(&h.root()), before, "the target tree changed");
}

#[tokio::test]
async fn a_flat_bomb_over_the_byte_limit_writes_nothing() {
    let h = Harness::with_extraction(ExtractionLimits {
        max_bytes: 4 << 20,
        ..Default::default()
    });
    with_target(&h);
    // One highly compressible member of 16 MiB: a few KiB zipped.
    let bomb = zip_of(&[("a/overwritten.txt", vec![0u8; 16 << 20])], false);
    assert!(bomb.len() < 64 << 10);
    std::fs::write(h.path("bomb.zip"), bomb).unwrap();
    refused(&h, "bomb.zip", "max_extracted_bytes").await;
}

#[tokio::test]
async fn a_bomb_over_the_ratio_is_refused() {
    let h = Harness::with_extraction(ExtractionLimits {
        max_ratio: 50,
        ..Default::default()
    });
    with_target(&h);
    std::fs::write(
        h.path("bomb.zip"),
        zip_of(&[("x.bin", vec![b'a'; 8 << 20])], false),
    )
    .unwrap();
    refused(&h, "bomb.zip", "max_expansion_ratio").await;
}

#[tokio::test]
async fn too_many_members_are_refused() {
    let h = Harness::with_extraction(ExtractionLimits {
        max_files: 3,
        ..Default::default()
    });
    with_target(&h);
    let members: Vec<(String, Vec<u8>)> = (0..5)
        .map(|i| (format!("m{i}.txt"), b"x".to_vec()))
        .collect();
    let members: Vec<(&str, Vec<u8>)> = members
        .iter()
        .map(|(n, d)| (n.as_str(), d.clone()))
        .collect();
    std::fs::write(h.path("many.zip"), zip_of(&members, false)).unwrap();
    refused(&h, "many.zip", "max_extracted_files").await;
}

#[tokio::test]
async fn a_failure_mid_way_removes_what_was_written() {
    let h = Harness::new();
    with_target(&h);
    // Good members first (a new directory, an overwrite), then one whose CRC does not match.
    let marker = b"CORRUPT-ME-PLEASE".to_vec();
    let mut zip = zip_of(
        &[
            ("new/dir/first.txt", b"first".to_vec()),
            ("a/overwritten.txt", b"new content".to_vec()),
            ("bad.txt", marker.clone()),
        ],
        true,
    );
    let at = zip
        .windows(marker.len())
        .position(|w| w == marker.as_slice())
        .unwrap();
    zip[at] ^= 0x20;
    std::fs::write(h.path("bad.zip"), zip).unwrap();
    let before = tree(&h.root());
    let (_code, message) = h
        .error(
            "FA_unzip_all",
            json!({"zip_file_path": h.p("bad.zip"), "extract_path": h.p("out")}),
        )
        .await;
    assert!(message.contains("bad.txt"), "{message}");
    assert_eq!(tree(&h.root()), before, "the target tree changed");
}

#[tokio::test]
async fn within_the_limits_everything_is_extracted() {
    let h = Harness::with_extraction(ExtractionLimits {
        max_bytes: 1 << 20,
        max_files: 4,
        max_ratio: 1000,
    });
    with_target(&h);
    std::fs::write(
        h.path("ok.zip"),
        zip_of(
            &[
                ("new/dir/first.txt", b"first".to_vec()),
                ("a/overwritten.txt", b"new content".to_vec()),
            ],
            false,
        ),
    )
    .unwrap();
    let out = h
        .call(
            "FA_unzip_all",
            json!({"zip_file_path": h.p("ok.zip"), "extract_path": h.p("out")}),
        )
        .await
        .unwrap();
    assert_eq!(out["count"], 2, "{out}");
    assert_eq!(
        std::fs::read_to_string(h.path("out/a/overwritten.txt")).unwrap(),
        "new content"
    );
    assert_eq!(
        std::fs::read_to_string(h.path("out/new/dir/first.txt")).unwrap(),
        "first"
    );
    assert_eq!(
        std::fs::read_to_string(h.path("out/keep.txt")).unwrap(),
        "kept"
    );
    // No temporary file is left behind.
    let names: Vec<String> = tree(&h.path("out")).into_keys().collect();
    assert!(names.iter().all(|n| !n.contains(".part")), "{names:?}");
}
