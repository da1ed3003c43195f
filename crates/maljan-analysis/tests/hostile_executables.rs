//! Executables built to exhaust parsers (issue 18, item 1): a 1.4 MB PE whose 50,000 import
//! descriptors all point at one 50,000-entry thunk array, and a Mach-O with 10,000 segments each
//! claiming 0xFFFFFFFF sections. Every parsing tool answers within its budget — a result bounded
//! by the file's size or an error naming the limit — and the server answers the next call.

mod server;

use serde_json::{Value, json};
use server::{Server, error_code};

const DESCRIPTORS: usize = 50_000;
const THUNKS: usize = 50_000;

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A PE32+ whose one section holds 50,000 import descriptors that all share one thunk array of
/// 50,000 entries naming one function: 1.4 MB on disk, 2.5 billion imports as claimed.
fn import_bomb_pe() -> Vec<u8> {
    const SECTION_RVA: u32 = 0x1000;
    const SECTION_RAW: usize = 0x200;
    let descriptors = 0;
    let thunks = (DESCRIPTORS + 1) * 20 + 4; // after the null descriptor, 8-aligned
    let hint_name = thunks + (THUNKS + 1) * 8;
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
    put32(&mut b, o + 112 + 12, (DESCRIPTORS * 20) as u32);
    let st = o + 240;
    b[st..st + 6].copy_from_slice(b".idata");
    put32(&mut b, st + 8, section_size as u32);
    put32(&mut b, st + 12, SECTION_RVA);
    put32(&mut b, st + 16, section_size as u32);
    put32(&mut b, st + 20, SECTION_RAW as u32);
    put32(&mut b, st + 36, 0xC000_0040);
    let s = SECTION_RAW;
    for i in 0..DESCRIPTORS {
        let d = s + descriptors + i * 20;
        put32(&mut b, d, rva(thunks));
        put32(&mut b, d + 12, rva(dll_name));
        put32(&mut b, d + 16, rva(thunks));
    }
    for i in 0..THUNKS {
        put64(&mut b, s + thunks + i * 8, u64::from(rva(hint_name)));
    }
    b[s + hint_name + 2..s + hint_name + 4].copy_from_slice(b"A\0");
    b[s + dll_name..s + dll_name + 8].copy_from_slice(b"k32.dll\0");
    b
}

/// A 64-bit Mach-O executable with 10,000 LC_SEGMENT_64 commands of 72 bytes (room for no
/// section), each claiming 0xFFFFFFFF sections.
fn section_bomb_macho() -> Vec<u8> {
    const SEGMENTS: usize = 10_000;
    let len = 32 + SEGMENTS * 72;
    let mut b = vec![0u8; len];
    put32(&mut b, 0, 0xfeed_facf);
    put32(&mut b, 4, 0x0100_0007);
    put32(&mut b, 8, 3);
    put32(&mut b, 12, 2);
    put32(&mut b, 16, SEGMENTS as u32);
    put32(&mut b, 20, (SEGMENTS * 72) as u32);
    for i in 0..SEGMENTS {
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
fn macho_with_dyld_info(bind: &[u8], trie: &[u8]) -> Vec<u8> {
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
fn bind_bomb_macho() -> Vec<u8> {
    let mut bind = vec![0x40, b'_', b'x', 0, 0x70, 0x00];
    bind.push(0xc0);
    bind.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]); // 2^62
    bind.extend([0x00, 0x00]); // skip 0, then DONE
    macho_with_dyld_info(&bind, &[])
}

/// An export trie whose root's only edge leads back to the root.
fn trie_loop_macho() -> Vec<u8> {
    macho_with_dyld_info(&[], &[0x00, 0x01, b'a', 0x00, 0x00])
}

/// Every tool that parses the sample, with the arguments that make it parse most.
fn parsing_calls(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("identify_file", json!({"path": path})),
        ("hashes", json!({"path": path})),
        ("strings", json!({"path": path})),
        ("iocs_from_file", json!({"path": path})),
        ("entropy", json!({"path": path})),
        ("pe_info", json!({"path": path})),
        ("elf_info", json!({"path": path})),
        ("macho_info", json!({"path": path})),
        ("archive_list", json!({"path": path})),
        ("document_info", json!({"path": path})),
        ("carve_payloads", json!({"path": path})),
        ("search", json!({"path": path, "patterns": ["A"]})),
    ]
}

/// Runs every parsing tool on `name`; each answers (a result or an error) with an answer no larger
/// than a small multiple of the file, and the server answers afterwards.
async fn every_tool_answers_within_its_budget(server: &Server, name: &str, size: usize) {
    let path = server.path(name);
    for (tool, args) in parsing_calls(&path) {
        let (v, is_error) = server.call(tool, args).await;
        let answer = v.to_string().len();
        assert!(
            answer <= 4 * size + 64 * 1024,
            "{tool} answered {answer} bytes for a {size}-byte file"
        );
        if is_error {
            assert!(!error_code(&v).is_empty(), "{tool}: {v}");
        }
        server.still_answers().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pe_whose_descriptors_share_one_thunk_array_is_refused_with_the_limit() {
    let pe = import_bomb_pe();
    assert!(pe.len() > 1_400_000 && pe.len() < 1_500_000, "{}", pe.len());
    let server = Server::new(&[("bomb.exe", pe.clone())]);

    let (v, is_error) = server
        .call("pe_info", json!({"path": server.path("bomb.exe")}))
        .await;
    assert!(is_error, "{v}");
    assert_eq!(error_code(&v), "tool_failed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("more imports than a") && message.contains("limit"),
        "{message}"
    );
    assert!(
        v["error"]["remediation"]
            .as_str()
            .unwrap()
            .contains("imports=false"),
        "{v}"
    );

    // The rest of the structure is still there to read.
    let (v, is_error) = server
        .call(
            "pe_info",
            json!({"path": server.path("bomb.exe"), "imports": false}),
        )
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["sections"][0]["name"], ".idata", "{v}");

    // entropy reads the sections without the import walk at all.
    let (v, is_error) = server
        .call("entropy", json!({"path": server.path("bomb.exe")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["sections"][0]["name"], ".idata", "{v}");

    every_tool_answers_within_its_budget(&server, "bomb.exe", pe.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macho_whose_segments_claim_four_billion_sections_each_is_read_within_its_commands() {
    let macho = section_bomb_macho();
    let server = Server::new(&[("bomb.macho", macho.clone())]);

    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("bomb.macho")}))
        .await;
    assert!(!is_error, "{v}");
    let arch = &v["architectures"][0];
    assert_eq!(arch["segments"].as_array().unwrap().len(), 10_000);
    // A 72-byte LC_SEGMENT_64 has no room for a section record.
    assert_eq!(arch["sections"].as_array().unwrap().len(), 0, "{arch}");

    let (v, is_error) = server
        .call("entropy", json!({"path": server.path("bomb.macho")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["sections"].as_array().unwrap().len(), 0);

    every_tool_answers_within_its_budget(&server, "bomb.macho", macho.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macho_binding_one_symbol_four_quintillion_times_is_refused_with_the_limit() {
    let macho = bind_bomb_macho();
    let server = Server::new(&[("bind.macho", macho.clone())]);
    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("bind.macho")}))
        .await;
    assert!(is_error, "{v}");
    assert_eq!(error_code(&v), "tool_failed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("more Mach-O bind entries than a"),
        "{message}"
    );
    every_tool_answers_within_its_budget(&server, "bind.macho", macho.len()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macho_whose_export_trie_loops_is_read_once_per_node() {
    let macho = trie_loop_macho();
    let server = Server::new(&[("loop.macho", macho.clone())]);
    let (v, is_error) = server
        .call("macho_info", json!({"path": server.path("loop.macho")}))
        .await;
    assert!(!is_error, "{v}");
    assert_eq!(v["architectures"][0]["export_count"], 0, "{v}");
    every_tool_answers_within_its_budget(&server, "loop.macho", macho.len()).await;
}
