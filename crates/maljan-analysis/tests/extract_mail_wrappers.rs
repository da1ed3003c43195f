//! `extract_members` on the wrappers mail carries programs in, each built here: an Outlook
//! `winmail.dat` (MS-TNEF) attached to a mail, a BinHex 4.0 attachment and body, a forwarded
//! message (message/rfc822) whose own attachment is quoted-printable, and the same chain through
//! the served tools down to pe_info.

mod corpus;
mod server;

use maljan_analysis::members::{Extraction, Limits, extract};
use serde_json::json;
use server::Server;

fn members(b: &[u8]) -> Extraction {
    extract(b, Limits::default(), &|| false).0
}

fn names(x: &Extraction) -> Vec<&str> {
    x.members.iter().map(|m| m.name.as_str()).collect()
}

/// One TNEF attribute: level, id, length, data, checksum (the sum of the data's bytes).
fn attribute(level: u8, id: u32, data: &[u8]) -> Vec<u8> {
    let mut a = vec![level];
    a.extend_from_slice(&id.to_le_bytes());
    a.extend_from_slice(&(data.len() as u32).to_le_bytes());
    a.extend_from_slice(data);
    let sum = data.iter().fold(0u16, |s, &b| s.wrapping_add(u16::from(b)));
    a.extend_from_slice(&sum.to_le_bytes());
    a
}

/// A winmail.dat as Outlook writes one: the message's attributes, then per attachment its
/// rendering, 8.3 title, data and MAPI properties (with the long file name).
fn winmail_dat(files: &[(&str, &str, &[u8])]) -> Vec<u8> {
    let mut t = 0x223E_9F78u32.to_le_bytes().to_vec();
    t.extend_from_slice(&0x0001u16.to_le_bytes());
    t.extend(attribute(1, 0x0008_9006, &[0, 1, 0, 0])); // attTnefVersion
    t.extend(attribute(1, 0x0001_8004, b"Invoice\0")); // attSubject
    for (short, long, data) in files {
        t.extend(attribute(
            2,
            0x0006_9002,
            &[1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0],
        ));
        t.extend(attribute(2, 0x0001_8010, format!("{short}\0").as_bytes()));
        t.extend(attribute(2, 0x0006_800F, data));
        let mut props = 1u32.to_le_bytes().to_vec();
        props.extend_from_slice(&0x001Eu16.to_le_bytes());
        props.extend_from_slice(&0x3707u16.to_le_bytes());
        props.extend_from_slice(&1u32.to_le_bytes());
        let name = format!("{long}\0");
        props.extend_from_slice(&(name.len() as u32).to_le_bytes());
        props.extend_from_slice(name.as_bytes());
        while !props.len().is_multiple_of(4) {
            props.push(0);
        }
        t.extend(attribute(2, 0x0006_9005, &props));
    }
    t
}

fn b64_lines(data: &[u8]) -> String {
    use base64::Engine as _;
    let b = base64::engine::general_purpose::STANDARD.encode(data);
    b.as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join("\r\n")
}

fn mail(parts: &[(&str, &str, &str, String)]) -> Vec<u8> {
    let mut m = String::from(
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: invoice\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n--XX\r\nContent-Type: text/plain\r\n\r\n\
         see attached\r\n",
    );
    for (ctype, encoding, name, body) in parts {
        m.push_str(&format!(
            "--XX\r\nContent-Type: {ctype}\r\nContent-Transfer-Encoding: {encoding}\r\n\
             Content-Disposition: attachment; filename=\"{name}\"\r\n\r\n{body}\r\n"
        ));
    }
    m.push_str("--XX--\r\n");
    m.into_bytes()
}

/// BinHex 4.0 of one file (data fork only; CRCs left zero, as the reader does not need them).
fn binhex(name: &str, data: &[u8]) -> String {
    let mut raw = vec![name.len() as u8];
    raw.extend_from_slice(name.as_bytes());
    raw.push(0);
    raw.extend_from_slice(b"APPLmaln\0\0");
    raw.extend_from_slice(&(data.len() as u32).to_be_bytes());
    raw.extend_from_slice(&0u32.to_be_bytes());
    raw.extend_from_slice(&[0, 0]);
    raw.extend_from_slice(data);
    raw.extend_from_slice(&[0, 0, 0, 0]);
    // Run-length escape: a literal 0x90 is 0x90 0x00.
    let mut rle = Vec::new();
    for b in raw {
        rle.push(b);
        if b == 0x90 {
            rle.push(0);
        }
    }
    const ALPHABET: &[u8] = b"!\"#$%&'()*+,-012345689@ABCDEFGHIJKLMNPQRSTUVXYZ[`abcdefhijklmpqr";
    let mut text = String::new();
    let (mut acc, mut bits) = (0u32, 0);
    for b in rle {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            text.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        text.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "(This file must be converted with BinHex 4.0)\r\n:{}:\r\n",
        lines.join("\r\n")
    )
}

#[test]
fn a_winmail_dat_gives_each_attachment_under_its_long_name() {
    let pe = corpus::pe();
    let dat = winmail_dat(&[
        ("INVOIC~1.EXE", "Invoice 2026-12.pdf.exe", &pe),
        ("NOTES.TXT", "notes.txt", b"hello"),
    ]);
    let x = members(&dat);
    assert_eq!(x.format, "tnef");
    assert_eq!(
        names(&x),
        ["Invoice 2026-12.pdf.exe", "notes.txt"],
        "{:?}",
        x.skipped
    );
    assert_eq!(x.members[0].kind, "pe");
    assert_eq!(x.members[0].source, "tnef");
    assert!(x.members[0].flags.contains(&"double_extension".to_string()));
}

#[test]
fn binhex_attachments_and_bodies_are_decoded() {
    let pe = corpus::pe();
    let hqx = binhex("setup.exe", &pe);
    let x = members(hqx.as_bytes());
    assert_eq!(x.format, "binhex");
    assert_eq!(names(&x), ["setup.exe"], "{:?}", x.skipped);
    assert_eq!(
        x.members[0].sha256,
        maljan_analysis::hashes::sha256_hex(&pe)
    );
    // In a mail's text body, as old Mac mailers sent it.
    let m = format!("From: a@example.com\r\nTo: b@example.com\r\nSubject: file\r\n\r\n{hqx}");
    let x = members(m.as_bytes());
    assert_eq!(x.format, "email");
    assert!(names(&x).contains(&"setup.exe"), "{:?}", names(&x));
}

#[test]
fn a_forwarded_message_gives_itself_then_its_quoted_printable_attachment() {
    let pe = corpus::pe();
    // Quoted-printable: every byte written as =XX.
    let qp: String = pe
        .chunks(25)
        .map(|c| c.iter().map(|b| format!("={b:02X}")).collect::<String>())
        .collect::<Vec<_>>()
        .join("=\r\n");
    let inner = mail(&[(
        "application/octet-stream",
        "quoted-printable",
        "scan.exe",
        qp,
    )]);
    let outer = mail(&[(
        "message/rfc822",
        "7bit",
        "forwarded.eml",
        String::from_utf8(inner).unwrap(),
    )]);
    let x = members(&outer);
    assert_eq!(x.format, "email");
    assert_eq!(x.members[0].kind, "email", "{:?}", names(&x));
    let carried = extract(&outer, Limits::default(), &|| false).1;
    let y = members(&carried[0]);
    assert_eq!(names(&y), ["scan.exe"]);
    assert_eq!(y.members[0].kind, "pe");
}

#[tokio::test]
async fn a_mail_with_a_winmail_dat_comes_apart_through_the_served_tools() {
    let pe = corpus::pe();
    let dat = winmail_dat(&[("PAYLOAD.EXE", "payload.exe", &pe)]);
    let m = mail(&[(
        "application/ms-tnef",
        "base64",
        "winmail.dat",
        b64_lines(&dat),
    )]);
    let srv = Server::new(&[("outlook.eml", m)]);
    let (v, is_error) = srv
        .call("extract_members", json!({"path": srv.path("outlook.eml")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["members"][0]["name"], "winmail.dat", "{v}");
    assert_eq!(v["members"][0]["kind"], "tnef", "{v}");
    let dat_path = v["members"][0]["carved_path"].as_str().unwrap();
    let (v2, is_error) = srv
        .call("extract_members", json!({"carved_path": dat_path}))
        .await;
    assert!(!is_error, "{v2}");
    assert_eq!(v2["format"], "tnef");
    assert_eq!(v2["members"][0]["name"], "payload.exe", "{v2}");
    let exe = v2["members"][0]["carved_path"].as_str().unwrap();
    let (info, is_error) = srv.call("pe_info", json!({"carved_path": exe})).await;
    assert!(!is_error, "{info}");
}
