//! `extract_members` on zips whose members use each compression method malware-exchange zips
//! use — bzip2, zstd and xz (written with the zip crate), Deflate64, LZMA and PPMd (written by
//! 7-Zip, a peer: `eval "$(scripts/peers.sh)"` installs p7zip-full) and PKWARE implode (built
//! here bit by bit, as no writer of it is packaged) — and on zips whose central directory lies:
//! missing, pointing at the wrong member, or leaving a member out. The program inside each comes
//! out and is analysed through the served tools.

mod corpus;
mod server;

use std::io::{Cursor, Write};

use maljan_analysis::members::{Extraction, Limits, extract};
use serde_json::json;
use server::Server;

fn members(b: &[u8]) -> Extraction {
    extract(b, Limits::default(), &|| false).0
}

fn names(x: &Extraction) -> Vec<&str> {
    x.members.iter().map(|m| m.name.as_str()).collect()
}

fn zip_of(entries: &[(&str, &[u8], zip::CompressionMethod)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data, method) in entries {
        let o = zip::write::SimpleFileOptions::default().compression_method(*method);
        w.start_file(*name, o).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// A zip 7-Zip writes with `-mm=METHOD` (and `-pPASSWORD`, ZipCrypto).
fn seven_zip(method: &str, password: Option<&str>, name: &str, data: &[u8]) -> Vec<u8> {
    let sz = which("7z").expect(
        "7z (p7zip-full) writes the Deflate64 and PPMd zips: run eval \"$(scripts/peers.sh)\"",
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), data).unwrap();
    let out = dir.path().join("out.zip");
    let mut cmd = std::process::Command::new(sz);
    cmd.current_dir(dir.path())
        .args(["a", "-tzip", &format!("-mm={method}")]);
    if let Some(p) = password {
        cmd.arg(format!("-p{p}"));
    }
    let status = cmd
        .arg(&out)
        .arg(name)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "7z failed writing {method}");
    std::fs::read(out).unwrap()
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// The compression method a zip's first local header declares.
fn first_method(zip: &[u8]) -> u16 {
    u16::from_le_bytes([zip[8], zip[9]])
}

/// A zip holding `data` as one PKWARE-imploded member (method 6): 4 KiB dictionary, two
/// Shannon-Fano trees (lengths and distances, 64 codes of 6 bits each), every byte a literal
/// (a flag bit 1, then its 8 bits, least significant first).
fn imploded_zip(name: &str, data: &[u8]) -> Vec<u8> {
    let mut bits = BitWriter::default();
    for _tree in 0..2 {
        // Four description bytes (count - 1): each is 16 codes (0xF_) of 6 bits (0x_5).
        for byte in [3u8, 0xF5, 0xF5, 0xF5, 0xF5] {
            bits.put(u32::from(byte), 8);
        }
    }
    for &byte in data {
        bits.put(1, 1);
        bits.put(u32::from(byte), 8);
    }
    let packed = bits.finish();
    stored_container(name, 6, 0, data, &packed)
}

#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl BitWriter {
    fn put(&mut self, value: u32, width: u32) {
        for i in 0..width {
            self.acc |= ((value >> i) & 1) << self.n;
            self.n += 1;
            if self.n == 8 {
                self.out.push(self.acc as u8);
                self.acc = 0;
                self.n = 0;
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// One member (already packed with `method`) in a zip with its central directory.
fn stored_container(name: &str, method: u16, flags: u16, data: &[u8], packed: &[u8]) -> Vec<u8> {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    let crc = crc.sum();
    let header = |sig: &[u8], central: bool| {
        let mut h = sig.to_vec();
        if central {
            h.extend_from_slice(&20u16.to_le_bytes()); // made by
        }
        h.extend_from_slice(&20u16.to_le_bytes()); // needed
        h.extend_from_slice(&flags.to_le_bytes());
        h.extend_from_slice(&method.to_le_bytes());
        h.extend_from_slice(&[0, 0, 0x21, 0]); // time, date
        h.extend_from_slice(&crc.to_le_bytes());
        h.extend_from_slice(&(packed.len() as u32).to_le_bytes());
        h.extend_from_slice(&(data.len() as u32).to_le_bytes());
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // extra
        if central {
            h.extend_from_slice(&[0; 6]); // comment, disk, internal attributes
            h.extend_from_slice(&0u32.to_le_bytes()); // external attributes
            h.extend_from_slice(&0u32.to_le_bytes()); // local header offset
        }
        h.extend_from_slice(name.as_bytes());
        h
    };
    let mut z = header(b"PK\x03\x04", false);
    z.extend_from_slice(packed);
    let cd_at = z.len() as u32;
    let cd = header(b"PK\x01\x02", true);
    z.extend_from_slice(&cd);
    z.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0");
    z.extend_from_slice(&(cd.len() as u32).to_le_bytes());
    z.extend_from_slice(&cd_at.to_le_bytes());
    z.extend_from_slice(&[0, 0]);
    z
}

#[test]
fn members_packed_with_bzip2_zstd_and_xz_come_out_as_programs() {
    let pe = corpus::pe();
    use zip::CompressionMethod as M;
    for (method, code) in [(M::Bzip2, 12), (M::Zstd, 93), (M::Xz, 95)] {
        let z = zip_of(&[("drop.exe", &pe, method)]);
        assert_eq!(first_method(&z), code, "{method:?} written as itself");
        let x = members(&z);
        assert_eq!(names(&x), ["drop.exe"], "{method:?}: {:?}", x.skipped);
        assert_eq!(x.members[0].kind, "pe", "{method:?}");
        assert_eq!(
            x.members[0].sha256,
            maljan_analysis::hashes::sha256_hex(&pe)
        );
    }
}

#[test]
fn deflate64_lzma_and_ppmd_members_written_by_7zip_come_out() {
    let pe = corpus::pe();
    for (method, code) in [("Deflate64", 9), ("LZMA", 14), ("PPMd", 98)] {
        let z = seven_zip(method, None, "setup.exe", &pe);
        assert_eq!(first_method(&z), code, "7z wrote {method}");
        let x = members(&z);
        assert_eq!(names(&x), ["setup.exe"], "{method}: {:?}", x.skipped);
        assert_eq!(x.members[0].kind, "pe", "{method}");
    }
    // 7-Zip's ZipCrypto over Deflate64, with the usual password.
    let z = seven_zip("Deflate64", Some("virus"), "setup.exe", &pe);
    let x = members(&z);
    assert_eq!(names(&x), ["setup.exe"], "{:?}", x.skipped);
    assert_eq!(x.members[0].password.as_deref(), Some("virus"));
    assert_eq!(x.members[0].kind, "pe");
}

#[test]
fn an_imploded_member_comes_out() {
    let pe = corpus::pe();
    let z = imploded_zip("old.exe", &pe);
    assert_eq!(first_method(&z), 6);
    let x = members(&z);
    assert_eq!(names(&x), ["old.exe"], "{:?}", x.skipped);
    assert_eq!(
        x.members[0].sha256,
        maljan_analysis::hashes::sha256_hex(&pe)
    );
}

#[test]
fn a_zip_without_its_central_directory_is_read_from_its_local_headers() {
    let pe = corpus::pe();
    let z = zip_of(&[
        ("readme.txt", b"hello", zip::CompressionMethod::Deflated),
        ("payload.exe", &pe, zip::CompressionMethod::Deflated),
    ]);
    let cd = memchr::memmem::find(&z, b"PK\x01\x02").unwrap();
    let x = members(&z[..cd]);
    assert_eq!(x.format, "zip");
    assert_eq!(names(&x), ["readme.txt", "payload.exe"], "{:?}", x.skipped);
    assert_eq!(x.members[1].kind, "pe");
    assert_eq!(x.members[1].source, "zip-local");
    assert!(
        x.skipped
            .iter()
            .any(|s| s.name == "(central directory)" && s.reason.contains("local headers"))
    );
}

#[test]
fn a_central_directory_that_hides_a_member_does_not_hide_it() {
    let pe = corpus::pe();
    let z = zip_of(&[
        ("readme.txt", b"hello", zip::CompressionMethod::Deflated),
        ("payload.exe", &pe, zip::CompressionMethod::Deflated),
    ]);
    // The directory's second entry points at the first member's header: the program is listed
    // nowhere a trusting reader looks.
    let cd = memchr::memmem::find(&z, b"PK\x01\x02").unwrap();
    let second = cd + 4 + memchr::memmem::find(&z[cd + 4..], b"PK\x01\x02").unwrap();
    let mut lying = z.clone();
    lying[second + 42..second + 46].copy_from_slice(&0u32.to_le_bytes());
    let x = members(&lying);
    assert!(
        x.members
            .iter()
            .any(|m| m.name == "payload.exe" && m.kind == "pe"),
        "{:?} {:?}",
        names(&x),
        x.skipped
    );
    assert!(
        x.skipped
            .iter()
            .any(|s| s.reason.contains("lying central directory")),
        "{:?}",
        x.skipped
    );
}

#[test]
fn an_encrypted_member_past_a_missing_directory_opens_with_the_usual_password() {
    use zip::unstable::write::FileOptionsExt;
    let pe = corpus::pe();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .with_deprecated_encryption(b"infected")
        .unwrap();
    w.start_file("locked.exe", o).unwrap();
    w.write_all(&pe).unwrap();
    let z = w.finish().unwrap().into_inner();
    let cd = memchr::memmem::find(&z, b"PK\x01\x02").unwrap();
    let x = members(&z[..cd]);
    assert_eq!(names(&x), ["locked.exe"], "{:?}", x.skipped);
    assert_eq!(x.members[0].password.as_deref(), Some("infected"));
    assert_eq!(x.members[0].kind, "pe");
}

#[test]
fn a_stored_zip_in_a_zip_is_one_member_not_two() {
    let pe = corpus::pe();
    let inner = zip_of(&[("inner.exe", &pe, zip::CompressionMethod::Stored)]);
    let outer = zip_of(&[("inner.zip", &inner, zip::CompressionMethod::Stored)]);
    let x = members(&outer);
    assert_eq!(names(&x), ["inner.zip"], "{:?}", x.skipped);
}

#[test]
fn a_bomb_found_by_its_local_header_is_still_a_ratio_finding() {
    let zeros = vec![0u8; 40 << 20];
    let z = zip_of(&[("zeros.bin", &zeros, zip::CompressionMethod::Deflated)]);
    let cd = memchr::memmem::find(&z, b"PK\x01\x02").unwrap();
    let x = members(&z[..cd]);
    assert!(x.members.is_empty(), "{:?}", names(&x));
    assert_eq!(x.limits_hit[0].limit, "ratio", "{:?}", x.limits_hit);
}

#[test]
fn zstd_and_lz4_streams_give_the_program_they_hold() {
    let pe = corpus::pe();
    let zst = zstd::stream::encode_all(&pe[..], 3).unwrap();
    let x = members(&zst);
    assert_eq!(
        (x.format.as_str(), x.members[0].kind.as_str()),
        ("zstd", "pe")
    );

    let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
    lz.write_all(&pe).unwrap();
    let lz4 = lz.finish().unwrap();
    let x = members(&lz4);
    assert_eq!(
        (x.format.as_str(), x.members[0].kind.as_str()),
        ("lz4", "pe")
    );
}

#[tokio::test]
async fn a_deflate64_zip_through_the_served_tools_gives_a_program_pe_info_reads() {
    let pe = corpus::pe();
    let z = seven_zip("Deflate64", Some("infected"), "invoice.exe", &pe);
    let srv = Server::new(&[("invoice.zip", z)]);
    let (v, is_error) = srv
        .call("extract_members", json!({"path": srv.path("invoice.zip")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["members"][0]["name"], "invoice.exe", "{v}");
    assert_eq!(v["members"][0]["password"], "infected");
    let carved = v["members"][0]["carved_path"].as_str().unwrap();
    let (info, is_error) = srv.call("pe_info", json!({"carved_path": carved})).await;
    assert!(!is_error, "{info}");
    assert!(
        info["sections"].as_array().is_some_and(|s| !s.is_empty()),
        "{info}"
    );
}
