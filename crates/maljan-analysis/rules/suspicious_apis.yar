// Sets of Windows API names that together do one thing ordinary programs seldom do (names as
// strings, so they also catch API resolved at run time by name). Detection rules: each names the
// fact it shows (maljan's facts table), so a finding here and code_capabilities' same finding are
// one fact. A DLL is left out: a system DLL's export table holds these names without calling them.
// Key-state polling, hooks and debugger checks are not here: alone they are what ordinary GUI
// programs and the C runtime do (code_capabilities tells the discriminating forms apart).

rule API_Process_Injection
{
    meta:
        purpose = "detection"
        fact = "process_injection"
        description = "Remote process injection: open a process, allocate and write in it, start a thread there"
        category = "suspicious_api"
        attack = "T1055"
    strings:
        $open = "OpenProcess"
        $alloc = "VirtualAllocEx"
        $write = "WriteProcessMemory"
        $thr1 = "CreateRemoteThread"
        $thr2 = "NtCreateThreadEx"
        $thr3 = "QueueUserAPC"
        $thr4 = "RtlCreateUserThread"
    condition:
        uint16(0) == 0x5A4D and (uint16(uint32(0x3C) + 22) & 0x2000) == 0 and
        $open and $alloc and $write and any of ($thr*)
}

rule API_Download_Execute
{
    meta:
        purpose = "detection"
        fact = "download_execute"
        description = "Downloads a file to disk and runs it"
        category = "suspicious_api"
        attack = "T1105"
    strings:
        $d1 = "URLDownloadToFile"
        $d2 = "DownloadFile" nocase ascii wide
        $x1 = "WinExec"
        $x2 = "ShellExecute"
        $x3 = "CreateProcess"
    condition:
        uint16(0) == 0x5A4D and (uint16(uint32(0x3C) + 22) & 0x2000) == 0 and
        any of ($d*) and any of ($x*)
}

rule Persistence_Run_Key
{
    meta:
        purpose = "detection"
        fact = "persistence"
        description = "Writes a Run / RunOnce registry key (starts again at logon)"
        category = "persistence"
        attack = "T1547.001"
    strings:
        $run = "Software\\Microsoft\\Windows\\CurrentVersion\\Run" nocase ascii wide
        $set1 = "RegSetValueEx"
        $set3 = "reg add" nocase ascii wide
        $set4 = "New-ItemProperty" nocase ascii wide
    condition:
        $run and any of ($set*) and
        not (uint16(0) == 0x5A4D and (uint16(uint32(0x3C) + 22) & 0x2000) != 0)
}
