//! Writes a Word 97–2003 document (an OLE2 compound file) for the labelled corpora
//! (scripts/corpus.sh): a `WordDocument` stream with a FIB and the text, a `1Table` stream, the
//! `CompObj` and summary streams Word writes, and — with `--package FILE` — an embedded OLE
//! "Package" object under `ObjectPool/_<id>/` whose `\x01Ole10Native` stream carries the file,
//! the way Word stores a file dropped into a document. Python's olefile cannot create a compound
//! file and Debian has no tool that does; the `cfb` crate can.
//!
//! Usage: corpus-ole OUT.doc --text TEXT [--package FILE [--label NAME]]

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};

/// The class id of Word.Document.8.
const WORD_CLSID: [u8; 16] = [
    0x06, 0x09, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46,
];
/// The class id of the OLE Packager ("Package").
const PACKAGE_CLSID: [u8; 16] = [
    0x0C, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46,
];

struct Args {
    out: PathBuf,
    text: String,
    package: Option<PathBuf>,
    label: Option<String>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut it = std::env::args().skip(1);
    let mut out = None;
    let mut text = String::from("Document");
    let mut package = None;
    let mut label = None;
    while let Some(a) = it.next() {
        match a.as_str() {
            "--text" => text = it.next().context("--text needs a value")?,
            "--package" => package = Some(PathBuf::from(it.next().context("--package FILE")?)),
            "--label" => label = Some(it.next().context("--label needs a value")?),
            _ if a.starts_with("--") => bail!("unknown option {a}"),
            _ => out = Some(PathBuf::from(a)),
        }
    }
    Ok(Args {
        out: out
            .context("usage: corpus-ole OUT.doc --text TEXT [--package FILE [--label NAME]]")?,
        text,
        package,
        label,
    })
}

/// A File Information Block: the FibBase of [MS-DOC] 2.5.2 (Word 97, the table in `1Table`),
/// then the text from offset 0x800 as 8-bit characters (fComplex clear).
fn word_document(text: &str) -> Vec<u8> {
    let mut b = vec![0u8; 0x800];
    b[0..2].copy_from_slice(&0xA5ECu16.to_le_bytes()); // wIdent
    b[2..4].copy_from_slice(&0x00C1u16.to_le_bytes()); // nFib: Word 97
    b[6..8].copy_from_slice(&0x0409u16.to_le_bytes()); // lid: en-US
    b[10..12].copy_from_slice(&0x0200u16.to_le_bytes()); // fWhichTblStm: 1Table
    b[12..14].copy_from_slice(&0x00BFu16.to_le_bytes()); // nFibBack
    b[32..34].copy_from_slice(&14u16.to_le_bytes()); // csw
    let cp_text = u32::try_from(text.len()).unwrap_or(u32::MAX);
    // ccpText in FibRgLw97 (csw 14 shorts after the base, then cslw, then the longs).
    let rglw = 32 + 2 + 28 + 2;
    b[rglw + 12..rglw + 16].copy_from_slice(&cp_text.to_le_bytes());
    b.extend(text.bytes().map(|c| if c.is_ascii() { c } else { b'?' }));
    b.push(b'\r');
    b
}

/// `\x01CompObj`: the user type, clipboard format and ProgID of a class.
fn comp_obj(clsid: &[u8; 16], user_type: &str, format: &str, prog_id: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&[
        0x01, 0x00, 0xFE, 0xFF, 0x03, 0x0A, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF,
    ]);
    b.extend_from_slice(clsid);
    for s in [user_type, format, prog_id] {
        b.extend_from_slice(&(u32::try_from(s.len() + 1).unwrap_or(0)).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
        b.push(0);
    }
    b.extend_from_slice(&0x7134_B2F4u32.to_le_bytes()); // the Unicode marker Word writes
    b.extend_from_slice(&[0u8; 12]);
    b
}

/// `\x01Ole10Native`: total size, flags, label, source path, then the temporary path and the data
/// as the Packager writes them.
fn ole10_native(label: &str, data: &[u8]) -> Vec<u8> {
    let source = format!("C:\\Users\\user\\Desktop\\{label}");
    let temp = format!("C:\\Users\\user\\AppData\\Local\\Temp\\{label}");
    let mut body = Vec::new();
    body.extend_from_slice(&2u16.to_le_bytes());
    for s in [label, &source] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    body.extend_from_slice(&0x0003_0000u32.to_le_bytes());
    body.extend_from_slice(&(u32::try_from(temp.len() + 1).unwrap_or(0)).to_le_bytes());
    body.extend_from_slice(temp.as_bytes());
    body.push(0);
    body.extend_from_slice(&(u32::try_from(data.len()).unwrap_or(u32::MAX)).to_le_bytes());
    body.extend_from_slice(data);
    let mut b = (u32::try_from(body.len()).unwrap_or(u32::MAX))
        .to_le_bytes()
        .to_vec();
    b.extend(body);
    b
}

fn stream(
    cf: &mut cfb::CompoundFile<std::fs::File>,
    path: &str,
    data: &[u8],
) -> anyhow::Result<()> {
    let mut s = cf
        .create_stream(path)
        .with_context(|| format!("stream {path}"))?;
    s.write_all(data)?;
    Ok(())
}

fn write(args: &Args) -> anyhow::Result<()> {
    let mut cf =
        cfb::create(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    cf.set_storage_clsid("/", uuid_of(&WORD_CLSID))?;
    let mut text = args.text.clone();
    if args.package.is_some() {
        text.push_str("\rDouble-click the icon below to open the attachment.\r\u{1}");
    }
    stream(&mut cf, "/WordDocument", &word_document(&text))?;
    stream(&mut cf, "/1Table", &[0u8; 512])?;
    stream(
        &mut cf,
        "/\u{1}CompObj",
        &comp_obj(
            &WORD_CLSID,
            "Microsoft Word 97-2003 Document",
            "MSWordDoc",
            "Word.Document.8",
        ),
    )?;
    if let Some(pkg) = &args.package {
        let data = std::fs::read(pkg).with_context(|| format!("read {}", pkg.display()))?;
        let label = args.label.clone().unwrap_or_else(|| file_name(pkg));
        cf.create_storage("/ObjectPool")?;
        let obj = "/ObjectPool/_1734560001";
        cf.create_storage(obj)?;
        cf.set_storage_clsid(obj, uuid_of(&PACKAGE_CLSID))?;
        stream(
            &mut cf,
            &format!("{obj}/\u{1}Ole10Native"),
            &ole10_native(&label, &data),
        )?;
        stream(
            &mut cf,
            &format!("{obj}/\u{1}CompObj"),
            &comp_obj(&PACKAGE_CLSID, "OLE Package", "Package", "Package"),
        )?;
        // ObjInfo: an embedded (not linked) object shown as an icon.
        stream(
            &mut cf,
            &format!("{obj}/\u{3}ObjInfo"),
            &[0x00, 0x00, 0x03, 0x00, 0x04, 0x00],
        )?;
    }
    // Fixed storage times, so a rebuild writes the same bytes (the crate stamps "now").
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_772_443_800);
    let storages: Vec<PathBuf> = cf
        .walk()
        .filter(|e| !e.is_stream())
        .map(|e| e.path().to_path_buf())
        .collect();
    for p in storages {
        cf.set_created_time(&p, when)?;
        cf.set_modified_time(&p, when)?;
    }
    cf.flush()?;
    Ok(())
}

fn uuid_of(b: &[u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes_le(*b)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "attachment.bin".into())
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    write(&args)
}
