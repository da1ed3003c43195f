//! A shellcode loader's act accuses; RWX memory alone does not. Programs the test compiles with
//! mingw-w64 (x64, optimised and not): memory asked for PAGE_EXECUTE_READWRITE and then a
//! thread started in it, or a call made into it, is the discriminating T1620; a JIT-style allocator
//! that makes RWX memory and hands it back is described only. And on the benign corpus
//! (scripts/corpus.sh: Wine's DLLs, PyPI wheels' DLLs with their JITs and FFI trampolines, NSIS,
//! mingw-w64 programs) no file is a shellcode loader. Needs x86_64-w64-mingw32-gcc and
//! MALJAN_CORPUS (`eval "$(scripts/peers.sh)"`); without them these tests
//! fail, they do not skip.

use std::{path::Path, process::Command};

use maljan_analysis::{
    budget::Budget,
    capabilities::{CapabilityFinding, capabilities},
};

fn caps(b: &[u8]) -> Vec<CapabilityFinding> {
    capabilities(b, &Budget::for_file(b.len(), &|| false)).unwrap()
}

fn loader(c: &[CapabilityFinding]) -> Option<&CapabilityFinding> {
    c.iter()
        .find(|x| x.technique == "T1620" && x.discriminating)
}

/// Compiles `source` with mingw-w64 for x64 at -O0 and -O2.
fn compile(dir: &Path, name: &str, source: &str) -> Vec<(String, Vec<u8>)> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let mut out = Vec::new();
    for gcc in ["x86_64-w64-mingw32-gcc"] {
        for opt in ["-O0", "-O2"] {
            let exe = dir.join(format!("{name}-{gcc}{opt}.exe"));
            let status = Command::new(gcc)
                .arg(opt)
                .arg("-o")
                .arg(&exe)
                .arg(&src)
                .status()
                .unwrap_or_else(|e| {
                    panic!("{gcc} is not installed ({e}): run `eval \"$(scripts/peers.sh)\"`")
                });
            assert!(status.success(), "{gcc} {opt} could not build {name}");
            out.push((format!("{name} {gcc} {opt}"), std::fs::read(&exe).unwrap()));
        }
    }
    out
}

const THREAD_LOADER: &str = r#"
#include <windows.h>
static unsigned char code[64] = { 0x90, 0xC3 };
int main(void) {
    unsigned char *mem = VirtualAlloc(NULL, sizeof code, MEM_COMMIT | MEM_RESERVE, PAGE_EXECUTE_READWRITE);
    if (!mem) return 1;
    for (unsigned i = 0; i < sizeof code; i++) mem[i] = code[i] ^ 0x11;
    HANDLE th = CreateThread(NULL, 0, (LPTHREAD_START_ROUTINE)(void *)mem, NULL, 0, NULL);
    WaitForSingleObject(th, INFINITE);
    return 0;
}
"#;

const CALL_LOADER: &str = r#"
#include <windows.h>
#include <string.h>
static unsigned char code[64] = { 0x90, 0xC3 };
int main(void) {
    DWORD old;
    unsigned char *mem = VirtualAlloc(NULL, sizeof code, MEM_COMMIT, PAGE_READWRITE);
    if (!mem) return 1;
    memcpy(mem, code, sizeof code);
    if (!VirtualProtect(mem, sizeof code, PAGE_EXECUTE_READWRITE, &old)) return 2;
    ((void (*)(void))mem)();
    return 0;
}
"#;

/// A JIT's shape: an allocator hands RWX memory back; code is written and run elsewhere, later.
const JIT_ALLOCATOR: &str = r#"
#include <windows.h>
#include <string.h>
#include <stdio.h>
__declspec(noinline) void *code_arena(size_t n) {
    return VirtualAlloc(NULL, n, MEM_COMMIT | MEM_RESERVE, PAGE_EXECUTE_READWRITE);
}
__declspec(noinline) void emit(unsigned char *at, const unsigned char *ops, size_t n) {
    memcpy(at, ops, n);
    FlushInstructionCache(GetCurrentProcess(), at, n);
}
static DWORD WINAPI worker(LPVOID p) { (void)p; puts("worker"); return 0; }
int main(int argc, char **argv) {
    static const unsigned char ret[] = { 0xC3 };
    unsigned char *arena = code_arena(4096);
    if (!arena) return 1;
    emit(arena, ret, sizeof ret);
    printf("%d %s\n", argc, argv[0]);
    HANDLE th = CreateThread(NULL, 0, worker, NULL, 0, NULL);
    WaitForSingleObject(th, INFINITE);
    return 0;
}
"#;

#[test]
fn rwx_memory_with_code_started_in_it_is_a_shellcode_loader() {
    let dir = tempfile::tempdir().unwrap();
    for source in [THREAD_LOADER, CALL_LOADER] {
        let name = if source == THREAD_LOADER {
            "thread"
        } else {
            "call"
        };
        for (what, b) in compile(dir.path(), name, source) {
            let c = caps(&b);
            let found = loader(&c).unwrap_or_else(|| panic!("{what}: no loader in {c:#?}"));
            assert!(
                found
                    .evidence
                    .iter()
                    .any(|e| e.detail.contains("PAGE_EXECUTE_READWRITE") && e.offset.is_some()),
                "{what}: {:?}",
                found.evidence
            );
        }
    }
}

#[test]
fn a_jit_style_allocator_is_described_not_accused() {
    let dir = tempfile::tempdir().unwrap();
    for (what, b) in compile(dir.path(), "jit", JIT_ALLOCATOR) {
        let c = caps(&b);
        assert!(loader(&c).is_none(), "{what}: {c:#?}");
    }
}

#[test]
fn no_benign_corpus_program_is_a_shellcode_loader() {
    let corpus = std::env::var_os("MALJAN_CORPUS")
        .map(std::path::PathBuf::from)
        .expect("MALJAN_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"`");
    let text = std::fs::read_to_string(corpus.join("manifest.jsonl")).expect("the manifest");
    let mut seen = 0;
    let mut accused = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        if e["label"] != "benign" || e["kind"] != "pe" {
            continue;
        }
        let path = e["path"].as_str().unwrap();
        let b = std::fs::read(corpus.join(path)).unwrap();
        seen += 1;
        if let Some(f) = loader(&caps(&b)) {
            accused.push(format!("{path}: {:?}", f.evidence));
        }
    }
    assert!(seen >= 300, "only {seen} benign programs in the corpus");
    assert!(accused.is_empty(), "{accused:#?}");
    // The corpus's own loader is found.
    let b = std::fs::read(corpus.join("files/malicious/exe/shellcode_loader.exe"))
        .expect("the corpus's shellcode loader");
    assert!(loader(&caps(&b)).is_some());
}
