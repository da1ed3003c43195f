//! code_capabilities names what a sample can do with its ATT&CK technique and the evidence: the
//! imports (DLL!function), strings (with offsets) and call sites that prove it, and a packer as
//! T1027.002. Only discriminating findings accuse: what the C runtime and ordinary programs do is
//! described, never scored.

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

fn accusing(c: &[CapabilityFinding]) -> Vec<&str> {
    c.iter()
        .filter(|x| x.discriminating)
        .map(|x| x.technique.as_str())
        .collect()
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
    assert!(inject.discriminating);

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

    assert!(run.discriminating);

    // A hook and the foreground window describe; without WH_KEYBOARD_LL at the call they do not
    // accuse (MFC and many GUI programs import both).
    let keys = technique(&c, "T1056.001");
    assert_eq!(keys.technique_name, "Keylogging");
    assert!(!keys.discriminating, "{keys:#?}");
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

#[test]
fn what_the_c_runtime_imports_is_described_never_accusing() {
    // MSVC / mingw start-up code and an ordinary program: dynamic API resolution, file
    // enumeration, a debugger check, a socket, a process started.
    let b = pe32(
        vec![sec(b".text", vec![0xC3], CODE)],
        0,
        0,
        &[
            (
                "KERNEL32.dll",
                &[
                    "LoadLibraryA",
                    "GetProcAddress",
                    "FindFirstFileA",
                    "FindNextFileA",
                    "IsDebuggerPresent",
                    "OutputDebugStringA",
                    "CreateProcessA",
                    "GetSystemInfo",
                    "GetVersionExA",
                ],
            ),
            (
                "WS2_32.dll",
                &["WSAStartup", "socket", "connect", "send", "recv"],
            ),
            ("USER32.dll", &["GetKeyboardState", "MapVirtualKeyA"]),
        ],
        &[],
    );
    let c = caps(&b);
    for t in ["T1129", "T1083", "T1622", "T1095", "T1082"] {
        let found = technique(&c, t);
        assert!(!found.discriminating, "{found:#?}");
        assert!(
            !found.evidence.is_empty(),
            "every rule carries its evidence"
        );
    }
    assert_eq!(accusing(&c), Vec::<&str>::new(), "{c:#?}");
}

/// The x86 code `push 0; push 0; push proc; push id_hook; call [slot]`, the slot being the first
/// import of the only DLL (pe32 puts .idata after .text at 0x2000: descriptors, names, then IAT).
fn hook_call(id_hook: u8, funcs: usize) -> Vec<u8> {
    let iat_rva = 0x2000 + 20 * 2 + 4 * (funcs as u32 + 1);
    let mut code = vec![
        0x6A, 0x00, 0x6A, 0x00, 0x68, 0x00, 0x10, 0x40, 0x00, 0x6A, id_hook,
    ];
    code.extend_from_slice(&[0xFF, 0x15]);
    code.extend_from_slice(&(0x40_0000u32 + iat_rva).to_le_bytes());
    code.push(0xC3);
    code
}

#[test]
fn a_low_level_keyboard_hook_accuses_another_hook_does_not() {
    let funcs: &[&str] = &["SetWindowsHookExA", "CallNextHookEx", "GetMessageA"];
    let with = |id_hook| {
        pe32(
            vec![sec(b".text", hook_call(id_hook, funcs.len()), CODE)],
            0,
            0,
            &[("USER32.dll", funcs)],
            &[],
        )
    };
    let c = caps(&with(13));
    let hook = c
        .iter()
        .find(|x| x.technique == "T1056.001" && x.discriminating)
        .unwrap_or_else(|| panic!("no keyboard hook in {c:#?}"));
    assert_eq!(hook.evidence[0].kind, "code");
    assert!(
        hook.evidence[0]
            .detail
            .contains("USER32.dll!SetWindowsHookExA")
            && hook.evidence[0].detail.contains("WH_KEYBOARD_LL"),
        "{hook:#?}"
    );
    assert_eq!(hook.evidence[0].offset, Some(0x400 + 13));
    // WH_CBT (5), as MFC installs: no accusation.
    let c = caps(&with(5));
    assert!(!accusing(&c).contains(&"T1056.001"), "{c:#?}");
}

#[test]
fn a_browser_s_password_store_with_its_reader_is_credential_access() {
    let mut text = vec![0xC3];
    text.extend_from_slice(b"\\Google\\Chrome\\User Data\\Default\\Login Data\0");
    let b = pe32(
        vec![sec(b".text", text, CODE)],
        0,
        0,
        &[("CRYPT32.dll", &["CryptUnprotectData"])],
        &[],
    );
    let c = caps(&b);
    let cred = technique(&c, "T1555.003");
    assert!(cred.discriminating);
    assert!(cred.evidence.iter().any(|e| e.kind == "string"));
    assert!(
        cred.evidence
            .iter()
            .any(|e| e.detail == "CRYPT32.dll!CryptUnprotectData")
    );
    // The path alone (a browser's own files, a backup tool) is not enough.
    let mut text = vec![0xC3];
    text.extend_from_slice(b"\\Google\\Chrome\\User Data\0");
    let b = pe32(vec![sec(b".text", text, CODE)], 0, 0, &[], &[]);
    assert!(caps(&b).iter().all(|x| x.technique != "T1555.003"));
}

#[test]
fn vm_artifacts_accuse_product_names_describe() {
    let mut text = vec![0xC3];
    text.extend_from_slice(b"VBoxService.exe\0vmtoolsd.exe\0");
    let b = pe32(vec![sec(b".text", text, CODE)], 0, 0, &[], &[]);
    assert!(accusing(&caps(&b)).contains(&"T1497.001"));
    // qemu-nbd and virtualisation tools name the products: described only.
    let mut text = vec![0xC3];
    text.extend_from_slice(b"QEMU\0VMware\0VirtualBox\0");
    let b = pe32(vec![sec(b".text", text, CODE)], 0, 0, &[], &[]);
    let c = caps(&b);
    assert!(!technique(&c, "T1497.001").discriminating);
    assert_eq!(accusing(&c), Vec::<&str>::new());
    // … unless the firmware tables are searched for them.
    let mut text = vec![0xC3];
    text.extend_from_slice(b"VMware\0VirtualBox\0");
    let b = pe32(
        vec![sec(b".text", text, CODE)],
        0,
        0,
        &[("KERNEL32.dll", &["GetSystemFirmwareTable"])],
        &[],
    );
    assert!(accusing(&caps(&b)).contains(&"T1497.001"));
}

#[test]
fn a_scheduled_task_created_from_the_command_line_accuses_the_word_alone_does_not() {
    let mut text = vec![0xC3];
    text.extend_from_slice(b"schtasks /create /f /sc onlogon /tn x /tr c:\\x.exe\0");
    let b = pe32(
        vec![sec(b".text", text, CODE)],
        0,
        0,
        &[("KERNEL32.dll", &["WinExec"])],
        &[],
    );
    assert!(accusing(&caps(&b)).contains(&"T1053.005"));
    let b = pe32(
        vec![sec(b".text", b"\xC3schtasks.exe\0".to_vec(), CODE)],
        0,
        0,
        &[],
        &[],
    );
    assert!(!accusing(&caps(&b)).contains(&"T1053.005"));
}

#[test]
fn rwx_memory_is_described_a_ransom_note_with_encryption_accuses() {
    // push 0x40 (PAGE_EXECUTE_READWRITE); push 0x3000; push 16; push 0; call [VirtualAlloc]
    let funcs: &[&str] = &["VirtualAlloc", "CreateThread"];
    let mut code = vec![
        0x6A, 0x40, 0x68, 0x00, 0x30, 0x00, 0x00, 0x6A, 0x10, 0x6A, 0x00,
    ];
    code.extend_from_slice(&[0xFF, 0x15]);
    code.extend_from_slice(&(0x40_0000u32 + 0x2000 + 40 + 4 * 3).to_le_bytes());
    code.push(0xC3);
    let b = pe32(
        vec![sec(b".text", code, CODE)],
        0,
        0,
        &[("KERNEL32.dll", funcs)],
        &[],
    );
    let c = caps(&b);
    let rwx = technique(&c, "T1620");
    assert!(!rwx.discriminating, "JITs do it too");
    assert!(
        rwx.evidence[0].detail.contains("PAGE_EXECUTE_READWRITE"),
        "{rwx:#?}"
    );

    let mut text = vec![0xC3];
    text.extend_from_slice(b"All your files have been encrypted!\r\nSend 0.05 BTC\0");
    let b = pe32(
        vec![sec(b".text", text, CODE)],
        0,
        0,
        &[("ADVAPI32.dll", &["CryptAcquireContextA", "CryptEncrypt"])],
        &[],
    );
    assert!(accusing(&caps(&b)).contains(&"T1486"));
}
