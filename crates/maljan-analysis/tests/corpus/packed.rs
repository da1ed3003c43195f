//! PE32 images built section by section, and the packed / installer / compiler variants the
//! toolchain and YARA tests read: each carries the marks the real tool leaves (section names,
//! entry-point bytes, overlay headers, strings), and nothing else of it.

/// Section characteristics.
pub const CODE: u32 = 0x6000_0020;
pub const RDATA: u32 = 0x4000_0040;
pub const DATA: u32 = 0xC000_0040;
pub const RWX: u32 = 0xE000_0060;
/// Where the optional header starts (the PE header is at 0x80).
pub const OPT: usize = 0x98;

pub struct Sec {
    pub name: &'static [u8],
    pub data: Vec<u8>,
    pub vsize: u32,
    pub chars: u32,
}

pub fn sec(name: &'static [u8], data: Vec<u8>, chars: u32) -> Sec {
    let vsize = data.len().max(1) as u32;
    Sec {
        name,
        data,
        vsize,
        chars,
    }
}

/// Bytes that look compressed: a xorshift stream (entropy ~8).
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn align(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// A PE32 x86 executable with these sections (an `.idata` with `imports` is appended when there
/// are any), its entry point at `entry` bytes into section `entry_section`, and `overlay` after the
/// last section.
pub fn pe32(
    mut sections: Vec<Sec>,
    entry_section: usize,
    entry: u32,
    imports: &[(&str, &[&str])],
    overlay: &[u8],
) -> Vec<u8> {
    let va_of = |i: usize, secs: &[Sec]| -> u32 {
        let mut va = 0x1000u32;
        for s in &secs[..i] {
            va += align(s.vsize.max(s.data.len() as u32) as usize, 0x1000) as u32;
        }
        va
    };
    let mut import_dir = (0u32, 0u32);
    if !imports.is_empty() {
        let base = va_of(sections.len(), &sections);
        let mut idata = vec![0u8; 20 * (imports.len() + 1)];
        let mut strings = Vec::new();
        let mut thunks: Vec<(usize, Vec<u32>)> = Vec::new();
        // Names and hint/name entries after the descriptors and thunk arrays.
        let thunk_bytes: usize = imports.iter().map(|(_, f)| 4 * (f.len() + 1)).sum();
        let names_at = idata.len() + 2 * thunk_bytes;
        let mut cursor = idata.len();
        for (i, (dll, funcs)) in imports.iter().enumerate() {
            let mut rvas = Vec::new();
            for f in *funcs {
                rvas.push(base + (names_at + strings.len()) as u32);
                strings.extend_from_slice(&[0, 0]);
                strings.extend_from_slice(f.as_bytes());
                strings.push(0);
                if strings.len() % 2 == 1 {
                    strings.push(0);
                }
            }
            let dll_rva = base + (names_at + strings.len()) as u32;
            strings.extend_from_slice(dll.as_bytes());
            strings.push(0);
            let ilt = cursor;
            let iat = cursor + thunk_bytes;
            let d = 20 * i;
            idata[d..d + 4].copy_from_slice(&(base + ilt as u32).to_le_bytes());
            idata[d + 12..d + 16].copy_from_slice(&dll_rva.to_le_bytes());
            idata[d + 16..d + 20].copy_from_slice(&(base + iat as u32).to_le_bytes());
            thunks.push((ilt, rvas));
            cursor += 4 * (funcs.len() + 1);
        }
        idata.resize(names_at, 0);
        for (ilt, rvas) in &thunks {
            for (k, rva) in rvas.iter().enumerate() {
                idata[ilt + 4 * k..ilt + 4 * k + 4].copy_from_slice(&rva.to_le_bytes());
                let iat = ilt + thunk_bytes;
                idata[iat + 4 * k..iat + 4 * k + 4].copy_from_slice(&rva.to_le_bytes());
            }
        }
        idata.extend_from_slice(&strings);
        import_dir = (base, (20 * (imports.len() + 1)) as u32);
        sections.push(sec(b".idata", idata, DATA));
    }
    let headers = 0x400usize;
    let mut b = vec![0u8; headers];
    b[0..2].copy_from_slice(b"MZ");
    b[0x3c..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    b[0x40..0x40 + 39].copy_from_slice(b"This program cannot be run in DOS mode.");
    b[0x80..0x84].copy_from_slice(b"PE\0\0");
    let p16 = |b: &mut Vec<u8>, at: usize, v: u16| b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    let p32 = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    p16(&mut b, 0x84, 0x14c);
    p16(&mut b, 0x86, sections.len() as u16);
    p32(&mut b, 0x88, 1_600_000_000);
    p16(&mut b, 0x94, 224);
    p16(&mut b, 0x96, 0x0102);
    let o = OPT;
    p16(&mut b, o, 0x10b);
    b[o + 2] = 14;
    p32(&mut b, o + 16, va_of(entry_section, &sections) + entry);
    p32(&mut b, o + 28, 0x40_0000);
    p32(&mut b, o + 32, 0x1000);
    p32(&mut b, o + 36, 0x200);
    p16(&mut b, o + 40, 6);
    p16(&mut b, o + 48, 6);
    p32(&mut b, o + 56, va_of(sections.len(), &sections));
    p32(&mut b, o + 60, headers as u32);
    p16(&mut b, o + 68, 2);
    p16(&mut b, o + 70, 0x8140);
    p32(&mut b, o + 72, 0x10_0000);
    p32(&mut b, o + 76, 0x1000);
    p32(&mut b, o + 80, 0x10_0000);
    p32(&mut b, o + 84, 0x1000);
    p32(&mut b, o + 92, 16);
    p32(&mut b, o + 96 + 8, import_dir.0);
    p32(&mut b, o + 96 + 12, import_dir.1);
    let table = o + 224;
    assert!(table + 40 * sections.len() <= headers, "too many sections");
    let mut raw = headers;
    for (i, s) in sections.iter().enumerate() {
        let at = table + 40 * i;
        b[at..at + s.name.len().min(8)].copy_from_slice(&s.name[..s.name.len().min(8)]);
        p32(&mut b, at + 8, s.vsize.max(s.data.len() as u32));
        p32(&mut b, at + 12, va_of(i, &sections));
        let size = align(s.data.len(), 0x200);
        p32(&mut b, at + 16, size as u32);
        p32(&mut b, at + 20, if size == 0 { 0 } else { raw as u32 });
        p32(&mut b, at + 36, s.chars);
        raw += size;
    }
    for s in &sections {
        let mut d = s.data.clone();
        d.resize(align(d.len(), 0x200), 0);
        b.extend_from_slice(&d);
    }
    b.extend_from_slice(overlay);
    b
}

const KERNEL32: (&str, &[&str]) = (
    "KERNEL32.DLL",
    &[
        "LoadLibraryA",
        "GetProcAddress",
        "VirtualProtect",
        "ExitProcess",
    ],
);

/// UPX 3.x/4.x: an empty UPX0 (large in memory), UPX1 with the compressed data and the stub at
/// its end, the `UPX!` block header after the section table, the stub's pushad / mov esi prologue.
pub fn upx_pe() -> Vec<u8> {
    let mut stub = noise(0x1800, 7);
    let ep = stub.len() - 0x100;
    stub[ep..ep + 12].copy_from_slice(&[
        0x60, 0xBE, 0x00, 0x10, 0x41, 0x00, 0x8D, 0xBE, 0x00, 0x00, 0xFF, 0xFF,
    ]);
    let mut s0 = sec(b"UPX0", Vec::new(), RWX);
    s0.vsize = 0x20000;
    let mut b = pe32(
        vec![
            s0,
            sec(b"UPX1", stub, RWX),
            sec(b".rsrc", vec![0; 0x200], DATA),
        ],
        1,
        ep as u32,
        &[KERNEL32],
        &[],
    );
    // The packer writes its version and the UPX! header just after the section table.
    let at = OPT + 224 + 40 * 4;
    b[at..at + 5].copy_from_slice(b"4.22\0");
    b[at + 5..at + 9].copy_from_slice(b"UPX!");
    b
}

/// A PE with these section names over noise (the protectors that are known by their sections).
pub fn sections_pe(names: &[&'static [u8]], ep_bytes: &[u8]) -> Vec<u8> {
    let mut secs: Vec<Sec> = names
        .iter()
        .enumerate()
        .map(|(i, n)| sec(n, noise(0x800, i as u64 + 3), RWX))
        .collect();
    let last = secs.len() - 1;
    secs[last].data[0x10..0x10 + ep_bytes.len()].copy_from_slice(ep_bytes);
    pe32(secs, last, 0x10, &[KERNEL32], &[])
}

/// An NSIS installer: a small stub, then the overlay's first header (flags, 0xDEADBEEF,
/// "NullsoftInst", sizes) and compressed data.
pub fn nsis_pe() -> Vec<u8> {
    let mut text = vec![0x55, 0x8B, 0xEC, 0xC3];
    text.extend_from_slice(b"\0Nullsoft Install System v3.08\0NSIS Error\0");
    let mut overlay = Vec::new();
    overlay.extend_from_slice(&0u32.to_le_bytes());
    overlay.extend_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
    overlay.extend_from_slice(b"NullsoftInst");
    overlay.extend_from_slice(&0x4000u32.to_le_bytes());
    overlay.extend_from_slice(&0x3000u32.to_le_bytes());
    overlay.extend_from_slice(&noise(0x3000, 11));
    pe32(
        vec![
            sec(b".text", text, CODE),
            sec(b".rdata", vec![1; 0x100], RDATA),
            sec(b".ndata", Vec::new(), DATA),
        ],
        0,
        0,
        &[("KERNEL32.dll", &["CreateFileW", "GetModuleFileNameW"])],
        &overlay,
    )
}

/// Inno Setup: its loader's window class and the setup data header in the overlay.
pub fn inno_pe() -> Vec<u8> {
    let mut text = vec![0xC3; 16];
    text.extend_from_slice(b"InnoSetupLdrWindow\0");
    let mut overlay = b"rDlPtS\xCD\xE6\xD7\x7B\x0B\x2A".to_vec();
    overlay.extend_from_slice(&noise(0x400, 5));
    overlay.extend_from_slice(b"Inno Setup Setup Data (6.2.0) (u)\0");
    overlay.extend_from_slice(&noise(0x400, 6));
    pe32(
        vec![sec(b"CODE", text, CODE), sec(b"DATA", vec![2; 0x100], DATA)],
        0,
        0,
        &[KERNEL32],
        &overlay,
    )
}

/// A PyInstaller one-file bundle: the bootloader's strings and the CArchive cookie at the end.
pub fn pyinstaller_pe() -> Vec<u8> {
    let mut text = vec![0xC3; 16];
    text.extend_from_slice(
        b"Cannot open PyInstaller archive from executable\0_MEIPASS2\0python311.dll\0",
    );
    let mut overlay = noise(0x800, 9);
    overlay.extend_from_slice(b"MEI\x0c\x0b\x0a\x0b\x0e");
    overlay.extend_from_slice(&(0x800u32 + 88).to_be_bytes());
    overlay.extend_from_slice(&[0; 8]);
    overlay.extend_from_slice(&311u32.to_be_bytes());
    let mut lib = b"python311.dll".to_vec();
    lib.resize(64, 0);
    overlay.extend_from_slice(&lib);
    pe32(vec![sec(b".text", text, CODE)], 0, 0, &[KERNEL32], &overlay)
}

/// A Go binary: the build-info header and the runtime's names.
pub fn go_pe() -> Vec<u8> {
    let mut text = vec![0xC3; 16];
    text.extend_from_slice(b"\xff Go buildinf:\x08\x02");
    text.extend_from_slice(&[0; 14]);
    text.extend_from_slice(
        b"\x08go1.22.1\0runtime.gopanic\0runtime.main\0Go build ID: \"abc/def\"\0",
    );
    pe32(
        vec![
            sec(b".text", text, CODE),
            sec(b".symtab", vec![0; 4], RDATA),
        ],
        0,
        0,
        &[KERNEL32],
        &[],
    )
}

/// A Rust binary: the panic machinery's paths.
pub fn rust_pe() -> Vec<u8> {
    let mut text = vec![0xC3; 16];
    text.extend_from_slice(b"/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/panicking.rs\0RUST_BACKTRACE\0called `Option::unwrap()` on a `None` value\0");
    pe32(vec![sec(b".text", text, CODE)], 0, 0, &[KERNEL32], &[])
}

/// A Delphi binary: Borland's section names and linker version, the RTL's class names.
pub fn delphi_pe() -> Vec<u8> {
    let mut code = vec![0xC3; 16];
    code.extend_from_slice(
        b"\x07TObject\0\x0aExceptionB\0SOFTWARE\\Borland\\Delphi\\RTL\0FastMM Borland Edition\0",
    );
    let mut b = pe32(
        vec![
            sec(b"CODE", code, CODE),
            sec(b"DATA", vec![3; 0x40], DATA),
            sec(b"BSS", Vec::new(), DATA),
        ],
        0,
        0,
        &[KERNEL32],
        &[],
    );
    b[OPT + 2] = 2;
    b[OPT + 3] = 25;
    b
}
