//! `extract_members` on ISO 9660 images built here sector by sector (ECMA-119): a primary
//! volume with a program in a subdirectory, a Joliet volume whose long Unicode names win, and a
//! directory that points at itself (the walk ends); and the program through the served tools.

mod corpus;
mod server;

use maljan_analysis::members::{Extraction, Limits, extract};
use serde_json::json;
use server::Server;

const SECTOR: usize = 2048;

fn members(b: &[u8]) -> Extraction {
    extract(b, Limits::default(), &|| false).0
}

fn names(x: &Extraction) -> Vec<&str> {
    x.members.iter().map(|m| m.name.as_str()).collect()
}

/// A directory record: extent, length, flags (2: a directory) and identifier.
fn record(lba: u32, len: u32, dir: bool, name: &[u8]) -> Vec<u8> {
    let mut r = vec![0u8; 33];
    r[2..6].copy_from_slice(&lba.to_le_bytes());
    r[6..10].copy_from_slice(&lba.to_be_bytes());
    r[10..14].copy_from_slice(&len.to_le_bytes());
    r[14..18].copy_from_slice(&len.to_be_bytes());
    r[25] = if dir { 2 } else { 0 };
    r[28] = 1; // volume sequence number
    r[32] = name.len() as u8;
    r.extend_from_slice(name);
    if r.len() % 2 == 1 {
        r.push(0);
    }
    r[0] = r.len() as u8;
    r
}

fn descriptor(kind: u8, root: &[u8], joliet: bool) -> Vec<u8> {
    let mut d = vec![0u8; SECTOR];
    d[0] = kind;
    d[1..6].copy_from_slice(b"CD001");
    d[6] = 1;
    if joliet {
        d[88..91].copy_from_slice(b"%/E");
    }
    d[156..156 + root.len()].copy_from_slice(root);
    d
}

/// An image: root (sector 20) holding `file_in_root` and a DOCS directory (sector 21) holding
/// `file_in_docs`; file data from sector 22. `encode` writes a name the volume's way.
fn image(
    file_in_root: (&str, &[u8]),
    file_in_docs: (&str, &[u8]),
    joliet: bool,
    docs_points_at_root: bool,
) -> Vec<u8> {
    let encode = |n: &str| -> Vec<u8> {
        if joliet {
            n.encode_utf16().flat_map(|u| u.to_be_bytes()).collect()
        } else {
            format!("{};1", n.to_ascii_uppercase()).into_bytes()
        }
    };
    let (root_lba, docs_lba, data_lba) = (20u32, 21u32, 22u32);
    let sectors_of = |n: usize| n.div_ceil(SECTOR) as u32;
    let second_lba = data_lba + sectors_of(file_in_root.1.len()).max(1);
    let mut root = Vec::new();
    root.extend(record(root_lba, SECTOR as u32, true, &[0]));
    root.extend(record(root_lba, SECTOR as u32, true, &[1]));
    let docs_target = if docs_points_at_root {
        root_lba
    } else {
        docs_lba
    };
    root.extend(record(docs_target, SECTOR as u32, true, &encode("docs")));
    root.extend(record(
        data_lba,
        file_in_root.1.len() as u32,
        false,
        &encode(file_in_root.0),
    ));
    let mut docs = Vec::new();
    docs.extend(record(docs_lba, SECTOR as u32, true, &[0]));
    docs.extend(record(root_lba, SECTOR as u32, true, &[1]));
    docs.extend(record(
        second_lba,
        file_in_docs.1.len() as u32,
        false,
        &encode(file_in_docs.0),
    ));
    let root_record = record(root_lba, SECTOR as u32, true, &[0]);
    let mut iso = vec![0u8; 16 * SECTOR];
    iso.extend(descriptor(1, &root_record, false));
    iso.extend(descriptor(
        if joliet { 2 } else { 0xFF },
        &root_record,
        joliet,
    ));
    let mut end = descriptor(0xFF, &[], false);
    end[156] = 0;
    iso.extend(end);
    iso.resize(root_lba as usize * SECTOR, 0);
    let sector = |data: &[u8], iso: &mut Vec<u8>| {
        let at = iso.len();
        iso.extend_from_slice(data);
        iso.resize(at + (data.len().div_ceil(SECTOR).max(1)) * SECTOR, 0);
    };
    sector(&root, &mut iso);
    sector(&docs, &mut iso);
    sector(file_in_root.1, &mut iso);
    sector(file_in_docs.1, &mut iso);
    iso
}

#[test]
fn a_primary_volume_gives_its_files_with_their_paths() {
    let pe = corpus::pe();
    let iso = image(("setup.exe", &pe), ("readme.txt", b"hello"), false, false);
    let x = members(&iso);
    assert_eq!(x.format, "iso9660", "{:?}", x.skipped);
    let mut n = names(&x);
    n.sort();
    assert_eq!(n, ["DOCS/README.TXT", "SETUP.EXE"]);
    let exe = x.members.iter().find(|m| m.name == "SETUP.EXE").unwrap();
    assert_eq!(exe.kind, "pe");
    assert_eq!(exe.sha256, maljan_analysis::hashes::sha256_hex(&pe));
}

#[test]
fn a_joliet_volume_gives_the_long_names() {
    let pe = corpus::pe();
    let iso = image(
        ("Invoice 2026.pdf.exe", &pe),
        ("notes.txt", b"hi"),
        true,
        false,
    );
    let x = members(&iso);
    let mut n = names(&x);
    n.sort();
    assert_eq!(
        n,
        ["Invoice 2026.pdf.exe", "docs/notes.txt"],
        "{:?}",
        x.skipped
    );
    assert!(
        x.members
            .iter()
            .any(|m| m.flags.contains(&"double_extension".to_string()))
    );
}

#[test]
fn a_directory_that_points_at_itself_ends() {
    let pe = corpus::pe();
    let iso = image(("setup.exe", &pe), ("readme.txt", b"hello"), false, true);
    let x = members(&iso);
    assert_eq!(names(&x), ["SETUP.EXE"], "{:?}", x.skipped);
}

#[tokio::test]
async fn an_image_through_the_served_tools_gives_a_program_pe_info_reads() {
    let pe = corpus::pe();
    let iso = image(("setup.exe", &pe), ("readme.txt", b"hello"), true, false);
    let srv = Server::new(&[("delivery.iso", iso)]);
    let (v, is_error) = srv
        .call("extract_members", json!({"path": srv.path("delivery.iso")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["format"], "iso9660", "{v}");
    let exe = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "setup.exe")
        .expect("the program");
    let (info, is_error) = srv
        .call("pe_info", json!({"carved_path": exe["carved_path"]}))
        .await;
    assert!(!is_error, "{info}");
}
