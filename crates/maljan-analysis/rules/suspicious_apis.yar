// Sets of Windows API names that together do one suspicious thing (names as strings, so they
// also catch API resolved at run time by name).

rule API_Process_Injection
{
    meta:
        description = "Remote process injection: allocate, write and run code in another process"
        category = "suspicious_api"
        attack = "T1055"
    strings:
        $open = "OpenProcess"
        $alloc = "VirtualAllocEx"
        $write = "WriteProcessMemory"
        $thr1 = "CreateRemoteThread"
        $thr2 = "NtCreateThreadEx"
        $thr3 = "QueueUserAPC"
        $thr4 = "SetThreadContext"
    condition:
        uint16(0) == 0x5A4D and $alloc and $write and ($open or any of ($thr*))
}

rule API_Keylogger
{
    meta:
        description = "Keyboard capture: a low-level hook or key-state polling"
        category = "suspicious_api"
        attack = "T1056.001"
    strings:
        $hook = "SetWindowsHookEx"
        $async = "GetAsyncKeyState"
        $state = "GetKeyboardState"
        $map = "MapVirtualKey"
        $fg = "GetForegroundWindow"
    condition:
        uint16(0) == 0x5A4D and ($hook or $async or $state) and ($map or $fg)
}

rule API_Anti_Debug
{
    meta:
        description = "Several debugger checks together"
        category = "suspicious_api"
        attack = "T1622"
    strings:
        $a = "IsDebuggerPresent"
        $b = "CheckRemoteDebuggerPresent"
        $c = "NtQueryInformationProcess"
        $d = "OutputDebugString"
        $e = "NtSetInformationThread"
    condition:
        uint16(0) == 0x5A4D and 3 of them
}

rule API_Download_Execute
{
    meta:
        description = "Downloads a file and runs it"
        category = "suspicious_api"
        attack = "T1105"
    strings:
        $d1 = "URLDownloadToFile"
        $d2 = "InternetOpenUrl"
        $d3 = "WinHttpOpenRequest"
        $d4 = "InternetReadFile"
        $x1 = "WinExec"
        $x2 = "ShellExecute"
        $x3 = "CreateProcess"
    condition:
        uint16(0) == 0x5A4D and any of ($d*) and any of ($x*)
}

rule Persistence_Run_Key
{
    meta:
        description = "Writes a Run / RunOnce registry key (starts again at logon)"
        category = "persistence"
        attack = "T1547.001"
    strings:
        $run = "Software\\Microsoft\\Windows\\CurrentVersion\\Run" nocase ascii wide
        $set1 = "RegSetValueEx"
        $set2 = "RegCreateKey"
        $set3 = "reg add" nocase ascii wide
        $set4 = "New-ItemProperty" nocase ascii wide
    condition:
        $run and any of ($set*)
}
