//! Malformed executables the Windows loader (and pefile) still read.

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// A 544-byte PE32 in the style of the well-known tiny PEs: the PE header overlaps the DOS header
/// (e_lfanew = 4), e_lfanew doubles as SectionAlignment, file and section alignment are 4, the
/// optional header has two data directories, and one RWX section maps the whole file, headers
/// included, from RVA 0. It imports kernel32!ExitProcess and its code calls it.
pub fn tiny_pe() -> Vec<u8> {
    let mut b = vec![0u8; 0x220];
    put(&mut b, 0, b"MZ");
    put(&mut b, 4, b"PE\0\0");
    put(&mut b, 0x08, &0x14cu16.to_le_bytes()); // i386
    put(&mut b, 0x0A, &1u16.to_le_bytes()); // one section
    put(&mut b, 0x18, &0x70u16.to_le_bytes()); // SizeOfOptionalHeader: 96 + 2 directories
    put(&mut b, 0x1A, &0x0102u16.to_le_bytes()); // executable, 32-bit
    let o = 0x1C;
    put(&mut b, o, &0x10bu16.to_le_bytes());
    put(&mut b, o + 16, &0x180u32.to_le_bytes()); // entry point
    put(&mut b, o + 28, &0x40_0000u32.to_le_bytes()); // image base
    put(&mut b, o + 32, &4u32.to_le_bytes()); // SectionAlignment, also e_lfanew at 0x3C
    put(&mut b, o + 36, &4u32.to_le_bytes()); // FileAlignment
    put(&mut b, o + 40, &4u16.to_le_bytes());
    put(&mut b, o + 48, &4u16.to_le_bytes());
    put(&mut b, o + 56, &0x220u32.to_le_bytes()); // SizeOfImage
    put(&mut b, o + 60, &0xB4u32.to_le_bytes()); // SizeOfHeaders
    put(&mut b, o + 68, &2u16.to_le_bytes()); // GUI
    put(&mut b, o + 72, &0x10_0000u32.to_le_bytes());
    put(&mut b, o + 76, &0x1000u32.to_le_bytes());
    put(&mut b, o + 80, &0x10_0000u32.to_le_bytes());
    put(&mut b, o + 84, &0x1000u32.to_le_bytes());
    put(&mut b, o + 92, &2u32.to_le_bytes()); // NumberOfRvaAndSizes
    put(&mut b, o + 104, &0x100u32.to_le_bytes()); // import directory
    put(&mut b, o + 108, &40u32.to_le_bytes());
    let s = o + 0x70; // the section table, right after the short optional header
    put(&mut b, s, b".text");
    put(&mut b, s + 8, &0x220u32.to_le_bytes()); // VirtualSize
    put(&mut b, s + 12, &0u32.to_le_bytes()); // VirtualAddress 0: the headers are in it
    put(&mut b, s + 16, &0x220u32.to_le_bytes());
    put(&mut b, s + 20, &0u32.to_le_bytes());
    put(&mut b, s + 36, &0xE000_0020u32.to_le_bytes());
    // Import descriptor without a lookup table (the loader uses the IAT).
    put(&mut b, 0x100 + 12, &0x140u32.to_le_bytes());
    put(&mut b, 0x100 + 16, &0x150u32.to_le_bytes());
    put(&mut b, 0x140, b"kernel32.dll\0");
    put(&mut b, 0x150, &0x160u32.to_le_bytes());
    put(&mut b, 0x162, b"ExitProcess\0");
    // push 0; call [0x400150]
    put(
        &mut b,
        0x180,
        &[0x6A, 0x00, 0xFF, 0x15, 0x50, 0x01, 0x40, 0x00],
    );
    put(&mut b, 0x1C0, b"tiny PE, 544 bytes");
    b
}

/// A PE whose headers end mid-way: the COFF header claims four sections and a full optional
/// header, the file stops inside the section table (after the first section's record and data).
pub fn truncated_pe() -> Vec<u8> {
    let full = super::packed::pe32(
        vec![
            super::packed::sec(b".text", vec![0xC3; 0x10], super::packed::CODE),
            super::packed::sec(b".data", vec![1; 0x10], super::packed::DATA),
        ],
        0,
        0,
        &[],
        &[],
    );
    let mut b = full[..super::packed::OPT + 224 + 40 + 8].to_vec();
    b[0x86..0x88].copy_from_slice(&4u16.to_le_bytes());
    b
}

/// A PE whose import directory points far outside the file and whose resource directory is
/// garbage: the headers and sections still read.
pub fn bad_directories_pe() -> Vec<u8> {
    let mut b = super::packed::pe32(
        vec![super::packed::sec(
            b".text",
            vec![0xC3; 0x200],
            super::packed::CODE,
        )],
        0,
        0,
        &[],
        &[],
    );
    let o = super::packed::OPT;
    b[o + 104..o + 108].copy_from_slice(&0x7FFF_0000u32.to_le_bytes()); // import RVA
    b[o + 108..o + 112].copy_from_slice(&0x100u32.to_le_bytes());
    b[o + 112..o + 116].copy_from_slice(&0x1000u32.to_le_bytes()); // resources: into .text
    b[o + 116..o + 120].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    b
}
