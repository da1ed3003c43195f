//! A sample corpus written from code, for tests and benchmarks: a valid PE32 and ELF64 built
//! byte by byte (no toolchain needed), and text full of indicators (plain and defanged). Every
//! sample carries the same known indicators, so tests can assert what each tool must find.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

pub const URL: &str = "http://evil-c2.example.com/gate.php";
pub const RUN_KEY: &str = "Software\\Microsoft\\Windows\\CurrentVersion\\Run";
pub const IPV4: &str = "198.51.100.23";

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// A small, valid PE32 executable: one `.text` section holding a URL, a registry Run key and an
/// IP address; `extra` bytes of deterministic filler are appended inside the section (for the
/// 10 MiB benchmark sample).
pub fn pe_bytes(extra: usize) -> Vec<u8> {
    let raw_size = (0x200 + extra).div_ceil(0x200) * 0x200;
    let mut b = vec![0u8; 0x200 + raw_size];
    b[0..2].copy_from_slice(b"MZ");
    put32(&mut b, 0x3c, 0x80);
    b[0x80..0x84].copy_from_slice(b"PE\0\0");
    let coff = 0x84;
    put16(&mut b, coff, 0x14c); // i386
    put16(&mut b, coff + 2, 1); // one section
    put32(&mut b, coff + 4, 0x5F5E_1000); // 2020-09-13: a timestamp pe_info reads back
    put16(&mut b, coff + 16, 0xE0); // optional header size
    put16(&mut b, coff + 18, 0x0102); // executable, 32-bit
    let opt = coff + 20;
    put16(&mut b, opt, 0x10b); // PE32
    put32(&mut b, opt + 16, 0x1000); // entry point
    put32(&mut b, opt + 20, 0x1000); // base of code
    put32(&mut b, opt + 28, 0x40_0000); // image base
    put32(&mut b, opt + 32, 0x1000); // section alignment
    put32(&mut b, opt + 36, 0x200); // file alignment
    put16(&mut b, opt + 40, 6); // OS version
    put16(&mut b, opt + 48, 6); // subsystem version
    put32(
        &mut b,
        opt + 56,
        (0x1000 + raw_size as u32).div_ceil(0x1000) * 0x1000,
    ); // image size
    put32(&mut b, opt + 60, 0x200); // headers size
    put16(&mut b, opt + 68, 3); // console subsystem
    put32(&mut b, opt + 92, 16); // data directories
    let sec = opt + 0xE0;
    b[sec..sec + 5].copy_from_slice(b".text");
    put32(&mut b, sec + 8, raw_size as u32); // virtual size
    put32(&mut b, sec + 12, 0x1000); // virtual address
    put32(&mut b, sec + 16, raw_size as u32); // raw size
    put32(&mut b, sec + 20, 0x200); // raw pointer
    put32(&mut b, sec + 36, 0x6000_0020); // code, execute, read
    // push ebp; mov ebp, esp — then the strings the tools must find.
    let mut text = vec![0x55u8, 0x8b, 0xec];
    text.extend_from_slice(
        format!("{URL}\0{RUN_KEY}\0connect to {IPV4} now\0CreateMutexW\0").as_bytes(),
    );
    b[0x200..0x200 + text.len()].copy_from_slice(&text);
    // Filler: a cheap xorshift, so the section has realistic (high) entropy and no long strings.
    let mut x: u32 = 0x9E37_79B9;
    for byte in &mut b[0x200 + text.len() + 16..] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *byte = x as u8;
    }
    b
}

/// A minimal ELF64 x86-64 executable with one PT_LOAD program header.
pub fn elf_bytes() -> Vec<u8> {
    let mut b = vec![0u8; 0x200];
    b[0..4].copy_from_slice(b"\x7fELF");
    b[4] = 2; // 64-bit
    b[5] = 1; // little-endian
    b[6] = 1; // version
    put16(&mut b, 16, 2); // ET_EXEC
    put16(&mut b, 18, 0x3e); // x86-64
    put32(&mut b, 20, 1);
    b[24..32].copy_from_slice(&0x40_1000u64.to_le_bytes()); // entry
    b[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
    put16(&mut b, 52, 64); // ehsize
    put16(&mut b, 54, 56); // phentsize
    put16(&mut b, 56, 1); // phnum
    put16(&mut b, 58, 64); // shentsize
    let ph = 64;
    put32(&mut b, ph, 1); // PT_LOAD
    put32(&mut b, ph + 4, 5); // R+X
    b[ph + 16..ph + 24].copy_from_slice(&0x40_0000u64.to_le_bytes()); // vaddr
    b[ph + 24..ph + 32].copy_from_slice(&0x40_0000u64.to_le_bytes()); // paddr
    b[ph + 32..ph + 40].copy_from_slice(&0x200u64.to_le_bytes()); // filesz
    b[ph + 40..ph + 48].copy_from_slice(&0x200u64.to_le_bytes()); // memsz
    let s = format!("{URL}\0");
    b[0x100..0x100 + s.len()].copy_from_slice(s.as_bytes());
    b
}

pub fn indicator_text() -> String {
    format!(
        "Beacon config:\nprimary {URL}\nfallback hxxp://backup[.]evil-c2[.]example[.]net/x\n\
         relay {IPV4}:8443\ncontact ops@evil-c2.example.com\npersist via HKLM\\{RUN_KEY}\n"
    )
}

/// Writes the corpus into `dir`: sample.exe, sample.elf, notes.txt.
pub fn write_corpus(dir: &Path) -> BTreeMap<&'static str, PathBuf> {
    let mut out = BTreeMap::new();
    for (name, bytes) in [
        ("sample.exe", pe_bytes(4096)),
        ("sample.elf", elf_bytes()),
        ("notes.txt", indicator_text().into_bytes()),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        out.insert(name, p);
    }
    out
}
