//! `code_capabilities`: what the code can do — injects into processes, persists through Run keys or
//! services, downloads, keylogs, checks for debuggers, encrypts, … — each with its MITRE ATT&CK
//! technique id and the evidence: the imports (by DLL) and strings (with offsets) that prove it,
//! and structure (a packer found by [`crate::toolchain`]).
//!
//! A capability is [`Rule`]s of feature groups: every group must be met, a group by `min` of its
//! features. Features are API names (matched against the PE import table, A/W/Ex variants
//! included, and as strings, which also catches API resolved by name at run time) and marker
//! strings (ASCII and UTF-16LE, optionally case-insensitive), found in one Aho-Corasick pass.
//! It reads imports and strings, and the code only where an import alone says too little
//! ([`crate::capabilities_code`]: SetWindowsHookEx called with WH_KEYBOARD_LL). capa, which
//! follows the code, remains the deeper look (see bench/analysis_capabilities.md).
//!
//! Capabilities **describe**, as capa's do; each rule also says whether it is *discriminating*:
//! a combination of imports, strings and constants that separates programs doing it on purpose
//! (OpenProcess + VirtualAllocEx + WriteProcessMemory + CreateRemoteThread; a Run-key path with
//! RegSetValueEx; a low-level keyboard hook; a credential store's path with its reader). Only
//! discriminating findings accuse (maljan's verdict turns them into facts); resolving API at run
//! time (T1129), enumerating files (T1083), a debugger check the C runtime makes (T1622) or a
//! socket import alone are descriptions, never scored. An API name found as a string in a DLL's
//! own export table is not a use of it (a system DLL exports these names), so it does not count.

use std::{collections::BTreeMap, sync::Arc};

use aho_corasick::AhoCorasickBuilder;
use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{contain, on_sample},
    pe::{PeParts, pe_info},
    toolchain::Evidence,
    toolchain::{self, Category},
};

/// A feature: an API (import or name string), a string (case-sensitive) or a string any case.
#[derive(Clone, Copy)]
enum F {
    Api(&'static str),
    Str(&'static str),
    NoCase(&'static str),
}
use F::*;

struct Rule {
    /// Whether a match separates programs that do it on purpose (see the module documentation).
    discriminating: bool,
    name: &'static str,
    technique: &'static str,
    technique_name: &'static str,
    tactic: &'static str,
    /// Each group: (at least this many, of these features).
    groups: &'static [(usize, &'static [F])],
}

/// A rule that describes.
const fn rule(
    name: &'static str,
    technique: &'static str,
    technique_name: &'static str,
    tactic: &'static str,
    groups: &'static [(usize, &'static [F])],
) -> Rule {
    Rule {
        discriminating: false,
        name,
        technique,
        technique_name,
        tactic,
        groups,
    }
}

/// A discriminating rule: it accuses.
const fn accuse(
    name: &'static str,
    technique: &'static str,
    technique_name: &'static str,
    tactic: &'static str,
    groups: &'static [(usize, &'static [F])],
) -> Rule {
    Rule {
        discriminating: true,
        name,
        technique,
        technique_name,
        tactic,
        groups,
    }
}

const THREAD_START: &[F] = &[
    Api("CreateRemoteThread"),
    Api("NtCreateThreadEx"),
    Api("RtlCreateUserThread"),
    Api("QueueUserAPC"),
    Api("SetThreadContext"),
];
const EXEC: &[F] = &[
    Api("WinExec"),
    Api("ShellExecute"),
    Api("CreateProcess"),
    Api("system"),
    Api("execve"),
    Api("popen"),
];

const RULES: &[Rule] = &[
    accuse(
        "inject code into another process",
        "T1055",
        "Process Injection",
        "defense-evasion",
        &[
            (1, &[Api("OpenProcess"), Api("NtOpenProcess")]),
            (1, &[Api("VirtualAllocEx"), Api("NtAllocateVirtualMemory")]),
            (1, &[Api("WriteProcessMemory"), Api("NtWriteVirtualMemory")]),
            (1, THREAD_START),
        ],
    ),
    accuse(
        "hollow a process (unmap and replace its image)",
        "T1055.012",
        "Process Hollowing",
        "defense-evasion",
        &[
            (
                1,
                &[Api("NtUnmapViewOfSection"), Api("ZwUnmapViewOfSection")],
            ),
            (1, &[Api("SetThreadContext"), Api("Wow64SetThreadContext")]),
            (1, &[Api("WriteProcessMemory"), Api("NtWriteVirtualMemory")]),
            (1, &[Api("ResumeThread")]),
        ],
    ),
    accuse(
        "persist through a Run registry key",
        "T1547.001",
        "Registry Run Keys / Startup Folder",
        "persistence",
        &[
            (1, &[NoCase("\\CurrentVersion\\Run")]),
            (
                1,
                &[
                    Api("RegSetValueEx"),
                    NoCase("reg add"),
                    NoCase("New-ItemProperty"),
                ],
            ),
        ],
    ),
    rule(
        "persist in the Startup folder",
        "T1547.001",
        "Registry Run Keys / Startup Folder",
        "persistence",
        &[(
            1,
            &[
                NoCase("\\Start Menu\\Programs\\Startup"),
                NoCase("shell:startup"),
            ],
        )],
    ),
    rule(
        "install a service",
        "T1543.003",
        "Windows Service",
        "persistence",
        &[
            (1, &[Api("CreateService"), NoCase("sc create")]),
            (1, &[Api("OpenSCManager"), NoCase("sc create")]),
        ],
    ),
    rule(
        "schedule a task",
        "T1053.005",
        "Scheduled Task",
        "persistence",
        &[(
            1,
            &[
                NoCase("schtasks"),
                Str("Schedule.Service"),
                NoCase("Register-ScheduledTask"),
            ],
        )],
    ),
    rule(
        "persist through cron",
        "T1053.003",
        "Cron",
        "persistence",
        &[(
            1,
            &[
                Str("/etc/crontab"),
                Str("/var/spool/cron"),
                Str("crontab -"),
            ],
        )],
    ),
    rule(
        "persist as a systemd unit",
        "T1543.002",
        "Systemd Service",
        "persistence",
        &[(1, &[Str("/etc/systemd/system"), Str("systemctl enable")])],
    ),
    rule(
        "hijack the dynamic linker (LD_PRELOAD)",
        "T1574.006",
        "Dynamic Linker Hijacking",
        "persistence",
        &[(1, &[Str("/etc/ld.so.preload"), Str("LD_PRELOAD=")])],
    ),
    rule(
        "download a file",
        "T1105",
        "Ingress Tool Transfer",
        "command-and-control",
        &[(
            1,
            &[
                Api("URLDownloadToFile"),
                Api("InternetReadFile"),
                Api("WinHttpReadData"),
                NoCase("DownloadFile"),
                NoCase("DownloadString"),
                NoCase("Invoke-WebRequest"),
                Str("wget http"),
                Str("curl http"),
                NoCase("certutil -urlcache"),
            ],
        )],
    ),
    accuse(
        "download a file and run it",
        "T1105",
        "Ingress Tool Transfer",
        "command-and-control",
        &[
            (
                1,
                &[
                    Api("URLDownloadToFile"),
                    NoCase("DownloadFile"),
                    NoCase("certutil -urlcache"),
                ],
            ),
            (
                1,
                &[
                    Api("WinExec"),
                    Api("ShellExecute"),
                    Api("CreateProcess"),
                    NoCase("Start-Process"),
                ],
            ),
        ],
    ),
    rule(
        "talk HTTP to a server",
        "T1071.001",
        "Web Protocols",
        "command-and-control",
        &[
            (
                1,
                &[
                    Api("InternetConnect"),
                    Api("WinHttpConnect"),
                    Api("HttpOpenRequest"),
                ],
            ),
            (
                1,
                &[
                    Api("HttpSendRequest"),
                    Api("WinHttpSendRequest"),
                    Api("InternetReadFile"),
                ],
            ),
        ],
    ),
    rule(
        "talk over a raw socket",
        "T1095",
        "Non-Application Layer Protocol",
        "command-and-control",
        &[
            (1, &[Api("WSAStartup"), Api("socket")]),
            (1, &[Api("connect")]),
            (
                1,
                &[Api("send"), Api("recv"), Api("WSASend"), Api("WSARecv")],
            ),
        ],
    ),
    rule(
        "read the keyboard's state",
        "T1056.001",
        "Keylogging",
        "collection",
        &[
            (
                1,
                &[
                    Api("SetWindowsHookEx"),
                    Api("GetAsyncKeyState"),
                    Api("GetKeyboardState"),
                    Api("GetRawInputData"),
                ],
            ),
            (
                1,
                &[
                    Api("GetForegroundWindow"),
                    Api("MapVirtualKey"),
                    Api("ToUnicode"),
                    Api("GetWindowText"),
                ],
            ),
        ],
    ),
    rule(
        "capture the screen",
        "T1113",
        "Screen Capture",
        "collection",
        &[
            (1, &[Api("BitBlt"), Api("StretchBlt")]),
            (1, &[Api("GetDesktopWindow"), Api("CreateCompatibleBitmap")]),
            (1, &[Api("GetDC"), Api("GetWindowDC")]),
        ],
    ),
    rule(
        "read the clipboard",
        "T1115",
        "Clipboard Data",
        "collection",
        &[
            (1, &[Api("OpenClipboard")]),
            (1, &[Api("GetClipboardData")]),
        ],
    ),
    rule(
        "detect a debugger",
        "T1622",
        "Debugger Evasion",
        "defense-evasion",
        &[(
            2,
            &[
                Api("IsDebuggerPresent"),
                Api("CheckRemoteDebuggerPresent"),
                Api("NtQueryInformationProcess"),
                Api("OutputDebugString"),
                Api("NtSetInformationThread"),
                Str("ptrace"),
            ],
        )],
    ),
    accuse(
        "detect a debugger deliberately (remote-debugger and thread-hiding checks)",
        "T1622",
        "Debugger Evasion",
        "defense-evasion",
        &[
            (
                1,
                &[
                    Api("CheckRemoteDebuggerPresent"),
                    Api("NtSetInformationThread"),
                    Api("ZwSetInformationThread"),
                ],
            ),
            (
                1,
                &[
                    Api("IsDebuggerPresent"),
                    Api("NtQueryInformationProcess"),
                    Api("ZwQueryInformationProcess"),
                ],
            ),
        ],
    ),
    accuse(
        "look for analysis tools by process name",
        "T1622",
        "Debugger Evasion",
        "defense-evasion",
        &[(
            2,
            &[
                NoCase("ollydbg.exe"),
                NoCase("x64dbg.exe"),
                NoCase("x32dbg.exe"),
                NoCase("windbg.exe"),
                NoCase("idaq.exe"),
                NoCase("ida64.exe"),
                NoCase("procmon.exe"),
                NoCase("wireshark.exe"),
                NoCase("processhacker.exe"),
                NoCase("fiddler.exe"),
            ],
        )],
    ),
    accuse(
        "detect a virtual machine or sandbox by its artifacts",
        "T1497.001",
        "System Checks",
        "defense-evasion",
        &[(
            2,
            &[
                NoCase("VBoxService.exe"),
                NoCase("VBoxTray.exe"),
                NoCase("VBoxMouse.sys"),
                NoCase("VBoxGuest.sys"),
                NoCase("vmtoolsd.exe"),
                NoCase("vmwaretray.exe"),
                NoCase("vmhgfs.sys"),
                NoCase("vmmouse.sys"),
                Str("SbieDll.dll"),
                NoCase("HARDWARE\\ACPI\\DSDT\\VBOX__"),
                NoCase("qemu-ga.exe"),
            ],
        )],
    ),
    rule(
        "detect a virtual machine or sandbox",
        "T1497.001",
        "System Checks",
        "defense-evasion",
        &[(
            2,
            &[
                NoCase("VMware"),
                NoCase("VBoxService"),
                NoCase("VirtualBox"),
                NoCase("vmtoolsd"),
                Str("SbieDll.dll"),
                NoCase("QEMU"),
                Str("wine_get_unix_file_name"),
            ],
        )],
    ),
    rule(
        "encrypt or decrypt data with the Windows crypto API",
        "T1027",
        "Obfuscated Files or Information",
        "defense-evasion",
        &[(
            1,
            &[
                Api("CryptEncrypt"),
                Api("CryptDecrypt"),
                Api("BCryptEncrypt"),
                Api("BCryptDecrypt"),
            ],
        )],
    ),
    accuse(
        "delete shadow copies or disable recovery",
        "T1490",
        "Inhibit System Recovery",
        "impact",
        &[(
            1,
            &[
                NoCase("delete shadows"),
                NoCase("shadowcopy delete"),
                NoCase("recoveryenabled no"),
                NoCase("wbadmin delete"),
            ],
        )],
    ),
    rule(
        "run a command shell",
        "T1059.003",
        "Windows Command Shell",
        "execution",
        &[(1, &[NoCase("cmd.exe /c"), NoCase("cmd /c")]), (1, EXEC)],
    ),
    rule(
        "run PowerShell",
        "T1059.001",
        "PowerShell",
        "execution",
        &[
            (1, &[NoCase("powershell")]),
            (
                1,
                &[
                    Api("WinExec"),
                    Api("ShellExecute"),
                    Api("CreateProcess"),
                    NoCase("-EncodedCommand"),
                    NoCase("Invoke-Expression"),
                    Str("IEX"),
                ],
            ),
        ],
    ),
    rule(
        "run a Unix shell",
        "T1059.004",
        "Unix Shell",
        "execution",
        &[(1, &[Str("/bin/sh"), Str("/bin/bash")]), (1, EXEC)],
    ),
    rule(
        "list running processes",
        "T1057",
        "Process Discovery",
        "discovery",
        &[
            (1, &[Api("CreateToolhelp32Snapshot"), Api("EnumProcesses")]),
            (
                1,
                &[
                    Api("Process32First"),
                    Api("Process32Next"),
                    Api("EnumProcesses"),
                ],
            ),
        ],
    ),
    rule(
        "enumerate files",
        "T1083",
        "File and Directory Discovery",
        "discovery",
        &[(1, &[Api("FindFirstFile")]), (1, &[Api("FindNextFile")])],
    ),
    rule(
        "gather system information",
        "T1082",
        "System Information Discovery",
        "discovery",
        &[(
            2,
            &[
                Api("GetComputerName"),
                Api("GetVersionEx"),
                Api("GetNativeSystemInfo"),
                Api("RtlGetVersion"),
                Api("GetSystemInfo"),
                Str("uname"),
            ],
        )],
    ),
    accuse(
        "dump credentials from LSASS",
        "T1003.001",
        "LSASS Memory",
        "credential-access",
        &[
            (1, &[NoCase("lsass.exe")]),
            (1, &[Api("MiniDumpWriteDump")]),
        ],
    ),
    accuse(
        "copy the SAM registry hive",
        "T1003.002",
        "Security Account Manager",
        "credential-access",
        &[(
            1,
            &[
                NoCase("reg save hklm\\sam"),
                NoCase("\\config\\SAM"),
                NoCase("\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy"),
            ],
        )],
    ),
    accuse(
        "read a browser's saved passwords",
        "T1555.003",
        "Credentials from Web Browsers",
        "credential-access",
        &[
            (
                1,
                &[
                    NoCase("\\Google\\Chrome\\User Data"),
                    NoCase("\\Microsoft\\Edge\\User Data"),
                    NoCase("\\BraveSoftware\\Brave-Browser\\User Data"),
                    NoCase("\\Mozilla\\Firefox\\Profiles"),
                    Str("logins.json"),
                    Str("signons.sqlite"),
                ],
            ),
            (
                1,
                &[
                    Api("CryptUnprotectData"),
                    Api("sqlite3_open"),
                    NoCase("password_value"),
                    NoCase("encryptedPassword"),
                    Api("CopyFile"),
                    Api("CreateFile"),
                    Api("ReadFile"),
                    Api("fopen"),
                ],
            ),
        ],
    ),
    rule(
        "enable a privilege (SeDebugPrivilege)",
        "T1134",
        "Access Token Manipulation",
        "privilege-escalation",
        &[
            (1, &[Api("AdjustTokenPrivileges")]),
            (1, &[Str("SeDebugPrivilege"), Api("LookupPrivilegeValue")]),
        ],
    ),
    rule(
        "resolve API at run time",
        "T1129",
        "Shared Modules",
        "execution",
        &[
            (1, &[Api("LoadLibrary"), Api("LdrLoadDll"), Api("dlopen")]),
            (
                1,
                &[
                    Api("GetProcAddress"),
                    Api("LdrGetProcedureAddress"),
                    Api("dlsym"),
                ],
            ),
        ],
    ),
];

/// One capability the sample has, with its technique and evidence.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct CapabilityFinding {
    pub name: String,
    /// The ATT&CK technique id (T1055, T1547.001, …).
    pub technique: String,
    pub technique_name: String,
    pub tactic: String,
    /// Whether it separates programs that do it on purpose: only these accuse (maljan's verdict
    /// counts them as facts); the others describe what ordinary programs also do.
    pub discriminating: bool,
    /// import (detail "DLL!Function"), string (with its offset), code (a call site), or packer.
    pub evidence: Vec<Evidence>,
}

/// The capabilities of `b`, each with its evidence.
pub fn capabilities(b: &[u8], budget: &Budget) -> Result<Vec<CapabilityFinding>, ToolError> {
    contain("capabilities", || {
        budget.scan(b.len(), "the capability search")?;
        let (imports, exports): (Vec<(String, String)>, Vec<String>) = if b.starts_with(b"MZ") {
            let parts = PeParts {
                resources: false,
                exports: true,
                sections: false,
                limit: 100_000,
                ..PeParts::default()
            };
            let info = pe_info(b, parts, budget).ok();
            let exports = info
                .as_ref()
                .and_then(|p| p.exports.as_ref())
                .map(|e| e.functions.iter().filter_map(|f| f.name.clone()).collect())
                .unwrap_or_default();
            let imports = info
                .and_then(|p| p.imports)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|d| d.functions.into_iter().map(move |f| (d.dll.clone(), f)))
                .collect();
            (imports, exports)
        } else {
            (Vec::new(), Vec::new())
        };
        let mut strings = Strings::find(b, budget)?;
        strings.forget_exports(&exports);
        let mut out = Vec::new();
        for r in RULES {
            let mut evidence = Vec::new();
            let met = r.groups.iter().all(|(min, feats)| {
                let hits: Vec<Evidence> = feats
                    .iter()
                    .filter_map(|f| feature(f, &imports, &strings))
                    .collect();
                let ok = hits.len() >= *min;
                if ok {
                    evidence.extend(hits);
                }
                ok
            });
            if met {
                evidence.dedup_by(|a, b| a.detail == b.detail);
                out.push(CapabilityFinding {
                    name: r.name.into(),
                    technique: r.technique.into(),
                    technique_name: r.technique_name.into(),
                    tactic: r.tactic.into(),
                    discriminating: r.discriminating,
                    evidence,
                });
            }
        }
        let hooks = crate::capabilities_code::keyboard_hooks(b, budget)?;
        if !hooks.is_empty() {
            out.push(CapabilityFinding {
                name: "capture keystrokes with a low-level keyboard hook".into(),
                technique: "T1056.001".into(),
                technique_name: "Keylogging".into(),
                tactic: "collection".into(),
                discriminating: true,
                evidence: hooks,
            });
        }
        for f in toolchain::detect(b, budget)? {
            if matches!(f.category, Category::Packer | Category::Protector) {
                out.push(CapabilityFinding {
                    name: format!("packed with {}", f.name),
                    technique: "T1027.002".into(),
                    technique_name: "Software Packing".into(),
                    tactic: "defense-evasion".into(),
                    // Packing is identity (installers and ordinary programs are packed too).
                    discriminating: false,
                    evidence: f.evidence,
                });
            }
        }
        Ok(out)
    })
}

/// An API is met by an import (name, or name + A/W/Ex/ExA/ExW) or, failing that, by its name as
/// a string; a string by its first occurrence.
fn feature(f: &F, imports: &[(String, String)], strings: &Strings) -> Option<Evidence> {
    let found = |s: &str| {
        strings.at(s).map(|at| Evidence {
            kind: "string".into(),
            detail: format!("{s:?}"),
            offset: Some(at),
        })
    };
    match *f {
        Api(name) => imports
            .iter()
            .find(|(_, func)| {
                func.strip_prefix(name)
                    .is_some_and(|rest| matches!(rest, "" | "A" | "W" | "Ex" | "ExA" | "ExW"))
            })
            .map(|(dll, func)| Evidence {
                kind: "import".into(),
                detail: format!("{dll}!{func}"),
                offset: None,
            })
            .or_else(|| found(name)),
        Str(s) | NoCase(s) => found(s),
    }
}

/// Where each feature string first occurs, ASCII or UTF-16LE.
struct Strings(BTreeMap<&'static str, u64>);

/// API names shorter than this (send, connect, system) are matched as strings only whole, between
/// NULs as in a symbol table: inside other words they mean nothing.
const WHOLE_WORD_BELOW: usize = 8;

impl Strings {
    fn find(b: &[u8], budget: &Budget) -> Result<Self, ToolError> {
        // (name, pattern, case-insensitive)
        let mut patterns: Vec<(&'static str, Vec<u8>, bool)> = Vec::new();
        for r in RULES {
            for (_, feats) in r.groups {
                for f in *feats {
                    let (s, nocase) = match *f {
                        Api(s) if s.len() < WHOLE_WORD_BELOW => {
                            patterns.push((s, [&b"\0"[..], s.as_bytes(), b"\0"].concat(), false));
                            continue;
                        }
                        Api(s) | Str(s) => (s, false),
                        NoCase(s) => (s, true),
                    };
                    patterns.push((s, s.as_bytes().to_vec(), nocase));
                    patterns.push((
                        s,
                        s.encode_utf16().flat_map(u16::to_le_bytes).collect(),
                        nocase,
                    ));
                }
            }
        }
        patterns.sort();
        patterns.dedup();
        let mut found = BTreeMap::new();
        for case_insensitive in [false, true] {
            let set: Vec<&(&'static str, Vec<u8>, bool)> = patterns
                .iter()
                .filter(|p| p.2 == case_insensitive)
                .collect();
            let ac = AhoCorasickBuilder::new()
                .ascii_case_insensitive(case_insensitive)
                .build(set.iter().map(|p| &p.1))
                .map_err(|e| ToolError::tool_failed(format!("capability search: {e}")))?;
            for m in ac.find_overlapping_iter(b) {
                let (name, pat, _) = set[m.pattern().as_usize()];
                let at = m.start() as u64 + u64::from(pat.first() == Some(&0));
                found
                    .entry(*name)
                    .and_modify(|v: &mut u64| *v = (*v).min(at))
                    .or_insert(at);
            }
            budget.check_cancel()?;
        }
        Ok(Self(found))
    }

    fn at(&self, s: &str) -> Option<u64> {
        self.0.get(s).copied()
    }

    /// A DLL's own export names are not uses of those APIs: they stop counting as strings
    /// (A/W/Ex variants of a feature included).
    fn forget_exports(&mut self, exports: &[String]) {
        if exports.is_empty() {
            return;
        }
        let exported: std::collections::HashSet<&str> =
            exports.iter().map(String::as_str).collect();
        self.0.retain(|name, _| {
            !["", "A", "W", "Ex", "ExA", "ExW"]
                .iter()
                .any(|suffix| exported.contains(format!("{name}{suffix}").as_str()))
        });
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CapabilitiesOutput {
    pub read_path: String,
    pub capabilities: Vec<CapabilityFinding>,
    /// The distinct technique ids, sorted.
    pub techniques: Vec<String>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "code_capabilities",
            "What the sample's code can do, from its imports, strings and structure: process injection, \
             persistence (Run keys, services, tasks, cron), downloads, C2, keylogging, anti-debug, crypto, \
             discovery, …; each with its ATT&CK technique id and the imports and strings that prove it.",
        )
        .title("Capabilities (ATT&CK)")
        .timeout_s(60),
        move |ctx, a: CapabilitiesArgs| {
            let config = config.clone();
            async move {
                on_sample(&config.roots, ctx, a.path, a.carved_path, |s, ctx| {
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(s.bytes().len(), &cancel);
                    let capabilities = capabilities(s.bytes(), &budget)?;
                    let mut techniques: Vec<String> = capabilities.iter().map(|c| c.technique.clone()).collect();
                    techniques.sort();
                    techniques.dedup();
                    Ok(CapabilitiesOutput { read_path: s.read_path(), capabilities, techniques })
                })
                .await
            }
        },
    );
}
