//! `extract_members` on a corpus the test builds: nested containers (a zip in a tar.gz in a mail),
//! an encrypted zip opened with "infected", a zip bomb that ends as a finding, and each of the
//! other containers (bzip2, xz, 7z, cab, cpio, uuencode, RTF objects, OLE packages, PDF embedded
//! files, a PE overlay), through the pure function and through the served tool (files written,
//! confined, reusable).

mod corpus;
mod server;

use std::io::{Cursor, Write};

use maljan_analysis::members::{Limits, extract};
use serde_json::{Value, json};
use server::{Server, error_code};

fn members(b: &[u8]) -> maljan_analysis::members::Extraction {
    extract(b, Limits::default(), &|| false).0
}

fn names(x: &maljan_analysis::members::Extraction) -> Vec<&str> {
    x.members.iter().map(|m| m.name.as_str()).collect()
}

fn zip_with(entries: &[(&str, &[u8])], password: Option<&str>) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        let mut o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        if let Some(p) = password {
            o = o.with_aes_encryption(zip::AesMode::Aes256, p);
        }
        w.start_file(*name, o).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn tar_gz(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut t = tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, name, *data).unwrap();
    }
    let tar = t.into_inner().unwrap();
    corpus::gzip(&tar, "bundle.tar")
}

fn mail_with(name: &str, attachment: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(attachment);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: invoice\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n--XX\r\nContent-Type: text/plain\r\n\r\n\
         see attached\r\n--XX\r\nContent-Type: application/gzip\r\nContent-Transfer-Encoding: base64\r\n\
         Content-Disposition: attachment; filename=\"{name}\"\r\n\r\n{}\r\n--XX--\r\n",
        lines.join("\r\n")
    )
    .into_bytes()
}

/// A zip in a tar.gz in a mail, with a PE at the bottom.
pub fn nested_mail() -> Vec<u8> {
    let inner = zip_with(&[("invoice.pdf.exe", &corpus::pe())], None);
    let tgz = tar_gz(&[("docs/payload.zip", &inner), ("docs/readme.txt", b"hello")]);
    mail_with("invoice.tar.gz", &tgz)
}

#[test]
fn a_zip_in_a_tar_gz_in_a_mail_comes_apart_level_by_level() {
    let mail = members(&nested_mail());
    assert_eq!(mail.format, "email");
    assert_eq!(names(&mail), ["invoice.tar.gz"]);
    assert_eq!(mail.members[0].kind, "gzip");
    assert_eq!(mail.members[0].source, "mime");

    let (tgz, data) = extract(
        &corpus::gzip(
            &{
                let inner = zip_with(&[("invoice.pdf.exe", &corpus::pe())], None);
                let mut t = tar::Builder::new(Vec::new());
                let mut h = tar::Header::new_gnu();
                h.set_size(inner.len() as u64);
                h.set_cksum();
                t.append_data(&mut h, "docs/payload.zip", &inner[..])
                    .unwrap();
                t.into_inner().unwrap()
            },
            "b.tar",
        ),
        Limits::default(),
        &|| false,
    );
    assert_eq!(tgz.format, "tar.gz");
    assert_eq!(names(&tgz), ["docs/payload.zip"]);
    assert_eq!(tgz.members[0].kind, "zip");

    let z = members(&data[0]);
    assert_eq!(names(&z), ["invoice.pdf.exe"]);
    let pe = &z.members[0];
    assert_eq!(pe.kind, "pe");
    assert_eq!(
        pe.sha256,
        maljan_analysis::hashes::sha256_hex(&corpus::pe())
    );
    assert!(
        pe.flags.contains(&"double_extension".to_string()),
        "{:?}",
        pe.flags
    );
}

#[test]
fn an_encrypted_zip_opens_with_infected_and_an_unknown_password_is_a_skip() {
    let pe = corpus::pe();
    let x = members(&zip_with(&[("sample.exe", &pe)], Some("infected")));
    assert_eq!(names(&x), ["sample.exe"]);
    assert!(x.members[0].encrypted);
    assert_eq!(x.members[0].password.as_deref(), Some("infected"));
    assert_eq!(x.members[0].kind, "pe");

    let x = members(&zip_with(&[("sample.exe", &pe)], Some("correct horse")));
    assert!(x.members.is_empty());
    assert!(
        x.skipped[0].reason.contains("none of the usual passwords"),
        "{:?}",
        x.skipped
    );
}

/// The legacy ZipCrypto cipher most malware zips still use (7-Zip and Windows write it by default).
#[test]
fn a_zipcrypto_zip_opens_with_one_of_the_usual_passwords() {
    use zip::unstable::write::FileOptionsExt;
    let pe = corpus::pe();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .with_deprecated_encryption(b"malware")
        .unwrap();
    w.start_file("dropper.exe", o).unwrap();
    w.write_all(&pe).unwrap();
    let x = members(&w.finish().unwrap().into_inner());
    assert_eq!(names(&x), ["dropper.exe"], "{:?}", x.skipped);
    assert!(x.members[0].encrypted);
    assert_eq!(x.members[0].password.as_deref(), Some("malware"));
    assert_eq!(x.members[0].kind, "pe");
}

#[test]
fn a_zip_bomb_ends_as_a_ratio_finding_and_the_other_members_still_come_out() {
    let zeros = vec![0u8; 40 << 20];
    let bomb = zip_with(&[("zeros.bin", &zeros), ("note.txt", b"still here")], None);
    assert!(bomb.len() < 100 << 10, "the bomb is small: {}", bomb.len());
    let x = members(&bomb);
    assert_eq!(names(&x), ["note.txt"]);
    assert_eq!(x.limits_hit.len(), 1, "{:?}", x.limits_hit);
    assert_eq!(x.limits_hit[0].limit, "ratio");
    assert_eq!(x.limits_hit[0].member.as_deref(), Some("zeros.bin"));
    assert!(x.total_bytes < 1 << 20);

    // A gzip bomb: the stream itself is the member.
    let gz = corpus::gzip(&zeros, "zeros.bin");
    let x = members(&gz);
    assert!(x.members.is_empty());
    assert_eq!(x.limits_hit[0].limit, "ratio");

    // The byte and count bounds of the call hold too.
    let many: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("f{i}.txt"), vec![b'a' + i as u8; 100]))
        .collect();
    let refs: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), &d[..])).collect();
    let (x, _) = extract(
        &zip_with(&refs, None),
        Limits {
            max_members: 5,
            ..Limits::default()
        },
        &|| false,
    );
    assert_eq!(x.members.len(), 5);
    assert_eq!(x.limits_hit[0].limit, "members");
    let (x, _) = extract(
        &zip_with(&refs, None),
        Limits {
            max_total_bytes: 250,
            ..Limits::default()
        },
        &|| false,
    );
    assert_eq!(x.members.len(), 2);
    assert_eq!(x.limits_hit[0].limit, "total_bytes");
}

#[test]
fn compressors_and_the_other_archives_give_their_members() {
    let pe = corpus::pe();
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    bz.write_all(&pe).unwrap();
    let x = members(&bz.finish().unwrap());
    assert_eq!(
        (x.format.as_str(), x.members[0].kind.as_str()),
        ("bzip2", "pe")
    );

    let mut xz = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::default()).unwrap();
    xz.write_all(&pe).unwrap();
    let x = members(&xz.finish().unwrap());
    assert_eq!(
        (x.format.as_str(), x.members[0].kind.as_str()),
        ("xz", "pe")
    );

    // cab, written with the cab crate.
    let mut builder = cab::CabinetBuilder::new();
    builder
        .add_folder(cab::CompressionType::MsZip)
        .add_file("setup.exe");
    let mut w = builder.build(Cursor::new(Vec::new())).unwrap();
    while let Some(mut f) = w.next_file().unwrap() {
        f.write_all(&pe).unwrap();
    }
    let x = members(&w.finish().unwrap().into_inner());
    assert_eq!(x.format, "cab");
    assert_eq!(names(&x), ["setup.exe"]);
    assert_eq!(x.members[0].kind, "pe");

    // 7z, without and with the password "infected".
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("drop.exe"), &pe).unwrap();
    let plain = sevenz_rust2::compress(dir.path(), Cursor::new(Vec::new()))
        .unwrap()
        .into_inner();
    let x = members(&plain);
    assert_eq!(x.format, "7z");
    assert_eq!(names(&x), ["drop.exe"]);
    let locked = sevenz_rust2::compress_encrypted(
        dir.path(),
        Cursor::new(Vec::new()),
        sevenz_rust2::Password::from("infected"),
    )
    .unwrap()
    .into_inner();
    let x = members(&locked);
    assert_eq!(names(&x), ["drop.exe"], "{:?}", x.skipped);
    assert_eq!(x.members[0].password.as_deref(), Some("infected"));
    assert_eq!(x.members[0].kind, "pe");
}

#[test]
fn cpio_uuencode_rtf_ole_packages_and_overlays_give_their_payloads() {
    let pe = corpus::pe();
    // cpio newc
    let mut c = format!(
        "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        1,
        0o100755,
        0,
        0,
        1,
        0,
        pe.len(),
        0,
        0,
        0,
        0,
        8,
        0
    )
    .into_bytes();
    c.extend_from_slice(b"bin/app\0");
    while c.len() % 4 != 0 {
        c.push(0);
    }
    c.extend_from_slice(&pe);
    while c.len() % 4 != 0 {
        c.push(0);
    }
    c.extend_from_slice(
        format!(
            "070701{}{:08x}{:08x}TRAILER!!!\0",
            "0".repeat(8 * 11),
            11,
            0
        )
        .as_bytes(),
    );
    let x = members(&c);
    assert_eq!((x.format.as_str(), names(&x)), ("cpio", vec!["bin/app"]));
    assert_eq!(x.members[0].kind, "pe");

    // uuencode
    let mut uu = b"begin 644 tool.exe\n".to_vec();
    for chunk in pe.chunks(45) {
        uu.push(b' ' + chunk.len() as u8);
        for t in chunk.chunks(3) {
            let v = [t[0], *t.get(1).unwrap_or(&0), *t.get(2).unwrap_or(&0)];
            for s in [
                v[0] >> 2,
                (v[0] << 4 | v[1] >> 4) & 63,
                (v[1] << 2 | v[2] >> 6) & 63,
                v[2] & 63,
            ] {
                uu.push(if s == 0 { b'`' } else { b' ' + s });
            }
        }
        uu.push(b'\n');
    }
    uu.extend_from_slice(b"`\nend\n");
    let x = members(&uu);
    assert_eq!(x.format, "uuencode");
    assert_eq!(names(&x), ["tool.exe"]);
    assert_eq!(
        x.members[0].sha256,
        maljan_analysis::hashes::sha256_hex(&pe)
    );

    // RTF \objdata holding an OLE1 embedded object
    let mut ole1 = Vec::new();
    ole1.extend_from_slice(&0x0501u32.to_le_bytes());
    ole1.extend_from_slice(&2u32.to_le_bytes());
    ole1.extend_from_slice(&8u32.to_le_bytes());
    ole1.extend_from_slice(b"Package\0");
    ole1.extend_from_slice(&0u32.to_le_bytes());
    ole1.extend_from_slice(&0u32.to_le_bytes());
    ole1.extend_from_slice(&(pe.len() as u32).to_le_bytes());
    ole1.extend_from_slice(&pe);
    let rtf = format!(
        "{{\\rtf1\\ansi{{\\object\\objemb{{\\*\\objclass Package}}{{\\*\\objdata {}}}}}}}",
        hex::encode(&ole1)
    );
    let x = members(rtf.as_bytes());
    assert_eq!(x.format, "rtf");
    assert_eq!(names(&x), ["objdata-1.Package"]);
    assert_eq!(x.members[0].kind, "pe");

    // OLE2 with an Ole10Native package stream
    let mut native = Vec::new();
    native.extend_from_slice(&0u32.to_le_bytes());
    native.extend_from_slice(&2u16.to_le_bytes());
    native.extend_from_slice(b"evil.exe\0C:\\tmp\\evil.exe\0");
    native.extend_from_slice(&0x0003_0000u32.to_le_bytes());
    native.extend_from_slice(&4u32.to_le_bytes());
    native.extend_from_slice(b"tmp\0");
    native.extend_from_slice(&(pe.len() as u32).to_le_bytes());
    native.extend_from_slice(&pe);
    let mut cf = cfb::CompoundFile::create(Cursor::new(Vec::new())).unwrap();
    cf.create_stream("/\u{1}Ole10Native")
        .unwrap()
        .write_all(&native)
        .unwrap();
    cf.flush().unwrap();
    let x = members(&cf.into_inner().into_inner());
    assert_eq!(x.format, "ole2");
    assert!(names(&x).contains(&"evil.exe"), "{:?}", names(&x));

    // A PDF with an embedded file, named by its file specification.
    let mut doc = lopdf::Document::with_version("1.7");
    let mut dict = lopdf::Dictionary::new();
    dict.set("Type", lopdf::Object::Name(b"EmbeddedFile".to_vec()));
    let file = doc.add_object(lopdf::Stream::new(dict, pe.clone()));
    let mut ef = lopdf::Dictionary::new();
    ef.set("F", lopdf::Object::Reference(file));
    let mut spec = lopdf::Dictionary::new();
    spec.set("Type", lopdf::Object::Name(b"Filespec".to_vec()));
    spec.set("F", lopdf::Object::string_literal("report.exe"));
    spec.set("EF", lopdf::Object::Dictionary(ef));
    let spec = doc.add_object(spec);
    let mut catalog = lopdf::Dictionary::new();
    catalog.set("Type", lopdf::Object::Name(b"Catalog".to_vec()));
    catalog.set("Attachment", lopdf::Object::Reference(spec));
    let root = doc.add_object(catalog);
    doc.trailer.set("Root", lopdf::Object::Reference(root));
    let mut pdf = Vec::new();
    doc.save_to(&mut pdf).unwrap();
    let x = members(&pdf);
    assert_eq!(x.format, "pdf");
    assert_eq!(names(&x), ["report.exe"]);
    assert_eq!(x.members[0].kind, "pe");

    // A PE with a zip overlay (a self-extractor).
    let sfx = [pe.clone(), zip_with(&[("payload.dll", &pe)], None)].concat();
    let x = members(&sfx);
    assert_eq!(x.format, "carved");
    assert_eq!(x.members[0].kind, "zip");
    assert!(x.members[0].name.starts_with("zip@0x"), "{:?}", names(&x));

    // Text has nothing to extract.
    assert_eq!(members(b"just some words").format, "none");
}

#[tokio::test]
async fn the_tool_writes_members_where_carved_path_reads_them_and_keeps_to_the_roots() {
    let srv = Server::new(&[("mail.eml", nested_mail())]);
    let (v, is_error) = srv
        .call("extract_members", json!({"path": srv.path("mail.eml")}))
        .await;
    assert!(!is_error, "{v}");
    let m = &v["members"][0];
    let carved = m["carved_path"].as_str().unwrap();
    assert!(carved.contains("/carved/"), "{carved}");
    // In the server's work directory, never beside the sample.
    assert!(carved.starts_with(srv.work.to_str().unwrap()), "{carved}");
    assert!(!carved.starts_with(srv.samples.to_str().unwrap()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(carved).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // Level two and three, by carved_path: everything stays in the outermost carved directory.
    let (v2, _) = srv
        .call("extract_members", json!({"carved_path": carved}))
        .await;
    let zip_path = v2["members"][0]["carved_path"]
        .as_str()
        .unwrap()
        .to_string();
    let (v3, _) = srv
        .call("extract_members", json!({"carved_path": zip_path}))
        .await;
    assert_eq!(v3["members"][0]["kind"], "pe", "{v3}");
    let pe_path = v3["members"][0]["carved_path"].as_str().unwrap();
    assert_eq!(
        std::path::Path::new(pe_path).parent(),
        std::path::Path::new(carved).parent()
    );
    let (info, is_error) = srv.call("pe_info", json!({"carved_path": pe_path})).await;
    assert!(!is_error, "{info}");

    // Twice is fine (content-addressed), a dry run writes nothing, outside the roots is refused.
    let (again, is_error) = srv
        .call("extract_members", json!({"path": srv.path("mail.eml")}))
        .await;
    assert!(!is_error, "{again}");
    let (dry, _) = srv
        .call(
            "extract_members",
            json!({"path": srv.path("small.txt"), "dry_run": true}),
        )
        .await;
    assert_eq!(dry["format"], "none");
    let (e, is_error) = srv
        .call("extract_members", json!({"path": "/etc/passwd"}))
        .await;
    assert!(is_error);
    assert_eq!(error_code(&e), "path_outside_roots");
    let (e, is_error) = srv
        .call(
            "extract_members",
            json!({"path": srv.path("mail.eml"), "max_ratio": "x"}),
        )
        .await;
    assert!(is_error, "{e}");
    srv.still_answers().await;
    let _: Value = v;
}
