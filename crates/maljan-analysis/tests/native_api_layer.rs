//! A layer over the native API forwards its calls; it does not inject. Programs the test compiles
//! with mingw-w64 (x64, -O0 and -O2), linked against ntdll: a DLL exporting wrappers of the
//! Nt* functions it imports (NtOpenProcess, NtAllocateVirtualMemory, NtWriteVirtualMemory,
//! NtCreateThreadEx and a dozen more) describes process injection with the layer as its basis; an
//! EXE importing the same functions, and a DLL exporting wrappers of only the four injection
//! functions, still accuse. On the benign corpus Wine's wow64.dll (which imports 212 of ntdll's
//! system-call functions to translate a 32-bit program's calls) accuses of neither injection nor
//! anti-debugging. Needs x86_64-w64-mingw32-gcc and MALJAN_CORPUS (`eval "$(scripts/peers.sh)"`);
//! without them these tests fail, they do not skip.

use std::{path::Path, process::Command};

use maljan_analysis::{
    budget::Budget,
    capabilities::{CapabilityFinding, capabilities},
};

fn caps(b: &[u8]) -> Vec<CapabilityFinding> {
    capabilities(b, &Budget::for_file(b.len(), &|| false)).unwrap()
}

fn finding<'a>(c: &'a [CapabilityFinding], technique: &str) -> &'a CapabilityFinding {
    c.iter()
        .find(|x| x.technique == technique)
        .unwrap_or_else(|| panic!("no {technique} in {c:#?}"))
}

/// The native functions the programs import: the injection four, the debugger queries and more
/// of the interface, as a system-call layer carries it.
const NATIVE: &[&str] = &[
    "NtOpenProcess",
    "NtAllocateVirtualMemory",
    "NtWriteVirtualMemory",
    "NtCreateThreadEx",
    "NtQueryInformationProcess",
    "NtSetInformationThread",
    "NtClose",
    "NtReadVirtualMemory",
    "NtProtectVirtualMemory",
    "NtFreeVirtualMemory",
    "NtQueryVirtualMemory",
    "NtOpenThread",
    "NtSuspendThread",
    "NtResumeThread",
    "NtTerminateProcess",
    "NtWaitForSingleObject",
    "NtCreateFile",
    "NtReadFile",
    "NtWriteFile",
    "NtQuerySystemInformation",
];

/// C declaring each native function and a wrapper of it: exported (`dllexport`, named
/// `Layer_NtFoo`) or, for an EXE, static and called from main.
fn source(functions: &[&str], exported: bool) -> String {
    let mut c = String::from("typedef long NTSTATUS;\n");
    for f in functions {
        let linkage = if exported {
            "__declspec(dllexport)"
        } else {
            "static"
        };
        c.push_str(&format!(
            "extern NTSTATUS __stdcall {f}(void *, void *, void *, void *, void *, void *);\n\
             {linkage} NTSTATUS Layer_{f}(void *a, void *b, void *c, void *d, void *e, void *g) \
             {{ return {f}(a, b, c, d, e, g); }}\n"
        ));
    }
    if !exported {
        c.push_str("int main(int argc, char **argv) {\n    NTSTATUS s = 0;\n");
        for f in functions {
            c.push_str(&format!(
                "    s |= Layer_{f}(argv, argv, argv, argv, argv, argv);\n"
            ));
        }
        c.push_str("    return (int)s + argc;\n}\n");
    }
    c
}

/// Compiles `source` with mingw-w64 for x64 at -O0 and -O2, as a DLL or an EXE, against ntdll.
fn compile(dir: &Path, name: &str, source: &str, dll: bool) -> Vec<(String, Vec<u8>)> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let gcc = "x86_64-w64-mingw32-gcc";
    let mut out = Vec::new();
    for opt in ["-O0", "-O2"] {
        let file = dir.join(format!("{name}{opt}.{}", if dll { "dll" } else { "exe" }));
        let mut cmd = Command::new(gcc);
        cmd.arg(opt).arg("-o").arg(&file).arg(&src);
        if dll {
            cmd.arg("-shared");
        }
        let status = cmd.arg("-lntdll").status().unwrap_or_else(|e| {
            panic!("{gcc} is not installed ({e}): run `eval \"$(scripts/peers.sh)\"`")
        });
        assert!(status.success(), "{gcc} {opt} could not build {name}");
        out.push((format!("{name} {opt}"), std::fs::read(&file).unwrap()));
    }
    out
}

#[test]
fn a_dll_exporting_wrappers_of_its_native_imports_describes_injection() {
    let dir = tempfile::tempdir().unwrap();
    for (name, b) in compile(dir.path(), "layer", &source(NATIVE, true), true) {
        let c = caps(&b);
        let inject = finding(&c, "T1055");
        assert!(!inject.discriminating, "{name}: {inject:#?}");
        let basis = &inject.evidence[0];
        assert_eq!(basis.kind, "structure", "{name}: {inject:#?}");
        assert!(
            basis
                .detail
                .contains("wrappers of 20 of the 20 Nt*/Zw* functions"),
            "{name}: {}",
            basis.detail
        );
        // The imports that matched stay as evidence.
        assert!(
            inject
                .evidence
                .iter()
                .any(|e| e.detail.ends_with("!NtWriteVirtualMemory")),
            "{name}: {inject:#?}"
        );
        assert!(
            c.iter().all(|x| !x.discriminating),
            "{name}: nothing accuses: {c:#?}"
        );
    }
}

#[test]
fn an_exe_importing_the_same_native_functions_still_injects() {
    let dir = tempfile::tempdir().unwrap();
    for (name, b) in compile(dir.path(), "injector", &source(NATIVE, false), false) {
        let c = caps(&b);
        let inject = finding(&c, "T1055");
        assert!(inject.discriminating, "{name}: {inject:#?}");
        assert!(
            inject.evidence.iter().all(|e| e.kind != "structure"),
            "{name}: {inject:#?}"
        );
    }
}

#[test]
fn a_dll_wrapping_only_the_injection_functions_still_injects() {
    let dir = tempfile::tempdir().unwrap();
    let source = source(&NATIVE[..4], true);
    for (name, b) in compile(dir.path(), "few", &source, true) {
        let inject = caps(&b)
            .into_iter()
            .find(|x| x.technique == "T1055")
            .unwrap_or_else(|| panic!("{name}: no T1055"));
        assert!(inject.discriminating, "{name}: {inject:#?}");
    }
}

#[test]
fn wine_wow64_forwards_system_calls_rather_than_injecting() {
    let corpus = std::env::var_os("MALJAN_CORPUS")
        .map(std::path::PathBuf::from)
        .expect("MALJAN_CORPUS is not set: run `eval \"$(scripts/peers.sh)\"`");
    let b = std::fs::read(corpus.join("files/benign/wine/wow64.dll"))
        .expect("the corpus's Wine wow64.dll");
    let c = caps(&b);
    let inject = finding(&c, "T1055");
    assert!(!inject.discriminating, "{inject:#?}");
    assert!(
        inject.evidence[0]
            .detail
            .contains("of ntdll's Nt*/Zw* system-call functions"),
        "{inject:#?}"
    );
    assert!(c.iter().all(|x| !x.discriminating), "{c:#?}");
    // The corpus's injector is still one.
    let b = std::fs::read(corpus.join("files/malicious/exe/inject_remote_thread.exe"))
        .expect("the corpus's injector");
    assert!(finding(&caps(&b), "T1055").discriminating);
}
