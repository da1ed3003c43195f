//! RAR archives written byte by byte from RARLAB's format notes, for tests: no RAR writer
//! installs from the registries (RAR compression is RARLAB's alone), so these are stored
//! (method 0) archives, which every RAR reader must decode. RAR 5 is the format WinRAR writes
//! today; RAR 4 the one before it.

/// RAR 5's variable-length integer: 7 bits a byte, low bits first.
fn vint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// One RAR 5 block: CRC32 of (size, body), the size of the body, the body.
fn rar5_block(body: &[u8], out: &mut Vec<u8>) {
    let mut sized = Vec::new();
    vint(body.len() as u64, &mut sized);
    sized.extend_from_slice(body);
    out.extend_from_slice(&crc32fast::hash(&sized).to_le_bytes());
    out.extend_from_slice(&sized);
}

/// A RAR 5 archive of stored files; `declared` overrides a file's unpacked size.
pub fn rar5(files: &[(&str, &[u8])], declared: Option<u64>) -> Vec<u8> {
    let mut out = b"Rar!\x1a\x07\x01\x00".to_vec();
    // Main archive header: type 1, no header flags, no archive flags.
    rar5_block(&[1, 0, 0], &mut out);
    for (name, data) in files {
        let mut body = Vec::new();
        vint(2, &mut body); // type: file
        vint(0x0002, &mut body); // header flags: a data area follows
        vint(data.len() as u64, &mut body); // data size
        vint(0x0004, &mut body); // file flags: data CRC32 present
        vint(declared.unwrap_or(data.len() as u64), &mut body);
        vint(0x20, &mut body); // attributes: archive
        body.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        vint(0, &mut body); // compression: version 0, not solid, method 0 (store)
        vint(0, &mut body); // host OS: Windows
        vint(name.len() as u64, &mut body);
        body.extend_from_slice(name.as_bytes());
        rar5_block(&body, &mut out);
        out.extend_from_slice(data);
    }
    // End of archive: type 5, no flags.
    rar5_block(&[5, 0, 0], &mut out);
    out
}

/// A RAR 4 archive of stored files.
pub fn rar4(files: &[(&str, &[u8])]) -> Vec<u8> {
    fn block(head: &[u8], out: &mut Vec<u8>) {
        let crc = (crc32fast::hash(head) & 0xffff) as u16;
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(head);
    }
    let mut out = b"Rar!\x1a\x07\x00".to_vec();
    // Main header: type 0x73, no flags, 13 bytes, reserved fields zero.
    block(&[0x73, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0], &mut out);
    for (name, data) in files {
        let mut head = vec![0x74];
        head.extend_from_slice(&0x8000u16.to_le_bytes()); // LONG_BLOCK: a data area follows
        head.extend_from_slice(&(32 + name.len() as u16).to_le_bytes());
        head.extend_from_slice(&(data.len() as u32).to_le_bytes()); // packed size
        head.extend_from_slice(&(data.len() as u32).to_le_bytes()); // unpacked size
        head.push(0); // host OS: MS-DOS
        head.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        head.extend_from_slice(&0x5a21_6000u32.to_le_bytes()); // DOS time: 2025-01-01
        head.push(20); // version needed: 2.0
        head.push(0x30); // method: store
        head.extend_from_slice(&(name.len() as u16).to_le_bytes());
        head.extend_from_slice(&0x20u32.to_le_bytes()); // attributes: archive
        head.extend_from_slice(name.as_bytes());
        block(&head, &mut out);
        out.extend_from_slice(data);
    }
    block(&[0x7b, 0x00, 0x40, 7, 0], &mut out);
    out
}
