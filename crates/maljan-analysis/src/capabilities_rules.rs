//! code_capabilities' rules: each a capability (its ATT&CK technique) and the feature groups that
//! show it, and whether it is discriminating (see [`super`]'s documentation). Data, read by
//! [`super::capabilities`].

/// A feature: an API (import or name string), a string (case-sensitive) or a string any case.
#[derive(Clone, Copy)]
pub(super) enum F {
    Api(&'static str),
    Str(&'static str),
    NoCase(&'static str),
}
use F::*;

pub(super) struct Rule {
    /// Whether a match separates programs that do it on purpose (see the module documentation).
    pub(super) discriminating: bool,
    pub(super) name: &'static str,
    pub(super) technique: &'static str,
    pub(super) technique_name: &'static str,
    pub(super) tactic: &'static str,
    /// Each group: (at least this many, of these features).
    pub(super) groups: &'static [(usize, &'static [F])],
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

pub(super) const RULES: &[Rule] = &[
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
    accuse(
        "create a scheduled task from the command line",
        "T1053.005",
        "Scheduled Task",
        "persistence",
        &[
            (
                1,
                &[
                    NoCase("schtasks /create"),
                    NoCase("schtasks.exe /create"),
                    NoCase("Register-ScheduledTask"),
                ],
            ),
            (1, EXEC),
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
    accuse(
        "look for a hypervisor's name in the firmware tables",
        "T1497.001",
        "System Checks",
        "defense-evasion",
        &[
            (
                1,
                &[
                    Api("GetSystemFirmwareTable"),
                    Api("EnumSystemFirmwareTables"),
                ],
            ),
            (
                1,
                &[
                    NoCase("VMware"),
                    NoCase("VirtualBox"),
                    Str("VBOX"),
                    Str("QEMU"),
                    Str("Xen"),
                ],
            ),
        ],
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
        "encrypt files and leave a ransom note",
        "T1486",
        "Data Encrypted for Impact",
        "impact",
        &[
            (
                1,
                &[
                    NoCase("your files have been encrypted"),
                    NoCase("your files are encrypted"),
                    NoCase("files have been locked"),
                    NoCase("to decrypt your files"),
                    NoCase("to recover your files"),
                ],
            ),
            (
                1,
                &[
                    Api("CryptEncrypt"),
                    Api("BCryptEncrypt"),
                    Api("EVP_EncryptUpdate"),
                    Api("EVP_CipherUpdate"),
                ],
            ),
        ],
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
