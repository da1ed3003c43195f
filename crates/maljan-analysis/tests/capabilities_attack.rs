//! code_capabilities names what a sample can do with its ATT&CK technique and the evidence: the
//! imports (DLL!function) and strings (with offsets) that prove it, and a packer as T1027.002.

mod corpus;

use corpus::packed::{self, CODE, pe32, sec};
use maljan_analysis::capabilities::{CapabilityFinding, capabilities};

fn caps(b: &[u8]) -> Vec<CapabilityFinding> {
    capabilities(
        b,
        &maljan_analysis::budget::Budget::for_file(b.len(), &|| false),
    )
    .unwrap()
}

fn technique<'a>(c: &'a [CapabilityFinding], id: &str) -> &'a CapabilityFinding {
    c.iter()
        .find(|x| x.technique == id)
        .unwrap_or_else(|| panic!("no {id} in {c:#?}"))
}

#[test]
fn injection_persistence_and_keylogging_from_the_import_table() {
    let text = b"\xC3Software\\Microsoft\\Windows\\CurrentVersion\\Run\0".to_vec();
    let b = pe32(
        vec![sec(b".text", text, CODE)],
        0,
        0,
        &[
            (
                "KERNEL32.dll",
                &[
                    "OpenProcess",
                    "VirtualAllocEx",
                    "WriteProcessMemory",
                    "CreateRemoteThread",
                ],
            ),
            ("ADVAPI32.dll", &["RegOpenKeyExW", "RegSetValueExW"]),
            ("USER32.dll", &["SetWindowsHookExW", "GetForegroundWindow"]),
        ],
        &[],
    );
    let c = caps(&b);
    let inject = technique(&c, "T1055");
    assert_eq!(inject.tactic, "defense-evasion");
    let details: Vec<&str> = inject.evidence.iter().map(|e| e.detail.as_str()).collect();
    assert!(
        details.contains(&"KERNEL32.dll!VirtualAllocEx"),
        "{details:?}"
    );
    assert!(
        details.contains(&"KERNEL32.dll!WriteProcessMemory"),
        "{details:?}"
    );
    assert!(
        details.contains(&"KERNEL32.dll!CreateRemoteThread"),
        "{details:?}"
    );
    assert!(inject.evidence.iter().all(|e| e.kind == "import"));

    let run = technique(&c, "T1547.001");
    let key = run.evidence.iter().find(|e| e.kind == "string").unwrap();
    assert_eq!(
        key.offset,
        Some(0x401 + "Software\\Microsoft\\Windows".len() as u64)
    );
    assert!(
        run.evidence
            .iter()
            .any(|e| e.detail == "ADVAPI32.dll!RegSetValueExW")
    );

    assert_eq!(technique(&c, "T1056.001").technique_name, "Keylogging");
    // Nothing it does not do.
    assert!(
        c.iter()
            .all(|x| x.technique != "T1113" && x.technique != "T1490"),
        "{c:#?}"
    );
}

#[test]
fn api_resolved_by_name_and_script_strings_count_as_strings() {
    // No imports for these: the names are strings, as when resolved with GetProcAddress.
    let mut text = vec![0xC3];
    text.extend_from_slice(
        b"URLDownloadToFileA\0WinExec\0IsDebuggerPresent\0CheckRemoteDebuggerPresent\0",
    );
    text.extend_from_slice(b"cmd.exe /c vssadmin delete shadows /all /quiet\0");
    let b = pe32(
        vec![sec(b".text", text, CODE)],
        0,
        0,
        &[("KERNEL32.dll", &["LoadLibraryA", "GetProcAddress"])],
        &[],
    );
    let c = caps(&b);
    let dl = technique(&c, "T1105");
    assert_eq!(dl.evidence[0].kind, "string");
    assert_eq!(dl.evidence[0].offset, Some(0x401));
    technique(&c, "T1622");
    technique(&c, "T1490");
    technique(&c, "T1059.003");
    let shared = technique(&c, "T1129");
    assert!(
        shared
            .evidence
            .iter()
            .any(|e| e.detail == "KERNEL32.dll!GetProcAddress")
    );
    // Short API names never match inside longer words.
    assert!(c.iter().all(|x| x.technique != "T1095"), "{c:#?}");
}

#[test]
fn a_packer_is_software_packing() {
    let c = caps(&packed::upx_pe());
    let p = technique(&c, "T1027.002");
    assert_eq!(p.name, "packed with UPX");
    assert!(p.evidence.iter().any(|e| e.kind == "section_name"));
}

#[test]
fn linux_persistence_from_strings() {
    let elf = [
        corpus::elf(),
        b"\0/etc/ld.so.preload\0/etc/crontab\0".to_vec(),
    ]
    .concat();
    let c = caps(&elf);
    technique(&c, "T1574.006");
    technique(&c, "T1053.003");
    assert!(caps(b"plain words, nothing to see").is_empty());
}
